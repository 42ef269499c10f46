// Model level: the cached inference paths (chunked prefill with the early
// exit, decode steps) reproduce the full forward's logits, for YOCO with gRet,
// YOCO with SWA and the GQA Transformer; batches are independent per row.
#include <gtest/gtest.h>

#include <random>

#include "errors.hpp"
#include "transformer_model.hpp"
#include "yoco_model.hpp"

namespace yoco {
namespace {

std::vector<int64_t> random_tokens(int64_t n, int64_t vocab, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<int64_t> t(n);
  for (auto& x : t) x = static_cast<int64_t>(rng() % static_cast<uint64_t>(vocab));
  return t;
}

double worst_f64 = 0;
struct Report {
  ~Report() { std::printf("[models] largest RMS ratio, cached vs full forward (fp64): %.3e\n", worst_f64); }
} report;

// Runs prefill over tokens[0, prompt) and decode over the rest (teacher
// forced), returns the logits predicting positions prompt-1 ... n-1 as rows.
template <class Model, class Cache>
Mat<double> cached_logits(const Model& m, const std::vector<std::vector<int64_t>>& seqs, int64_t prompt,
                          int64_t chunk) {
  const int64_t B = seqs.size(), n = seqs[0].size();
  std::vector<std::vector<int64_t>> pre(B);
  for (int64_t b = 0; b < B; ++b) pre[b].assign(seqs[b].begin(), seqs[b].begin() + prompt);
  Cache cache;
  const Mat<double> first = m.prefill(TokenBatch::from_sequences(pre), n - prompt, cache, chunk);
  const int64_t V = first.cols();
  Mat<double> out((n - prompt + 1) * B, V);
  for (int64_t b = 0; b < B; ++b) out.row(b) = first.row(b);
  for (int64_t t = prompt; t < n; ++t) {
    std::vector<int64_t> step(B);
    for (int64_t b = 0; b < B; ++b) step[b] = seqs[b][t];
    const Mat<double> l = m.decode_step(step, cache);
    for (int64_t b = 0; b < B; ++b) out.row((t - prompt + 1) * B + b) = l.row(b);
  }
  EXPECT_EQ(cache.position, n);
  return out;
}

// The full forward's rows at the same positions, laid out like cached_logits.
Mat<double> forward_rows(const Mat<double>& full, int64_t B, int64_t n, int64_t prompt) {
  Mat<double> out((n - prompt + 1) * B, full.cols());
  for (int64_t t = prompt - 1; t < n; ++t)
    for (int64_t b = 0; b < B; ++b) out.row((t - prompt + 1) * B + b) = full.row(b * n + t);
  return out;
}

struct Case {
  const char* preset;
  int64_t n, prompt, chunk;
};

void PrintTo(const Case& c, std::ostream* os) {
  *os << c.preset << " n=" << c.n << " prompt=" << c.prompt << " chunk=" << c.chunk;
}

class CachedEqualsFull : public ::testing::TestWithParam<Case> {};

TEST_P(CachedEqualsFull, YocoOrTransformer) {
  const auto c = GetParam();
  const auto cfg = preset_config(c.preset);
  std::vector<std::vector<int64_t>> seqs = {random_tokens(c.n, cfg.vocab_size, 1)};
  Mat<double> cached, full;
  if (cfg.is_yoco()) {
    YocoModel<double> m(cfg, Weights<double>::init(cfg, 0));
    full = m.forward(TokenBatch::from_sequences(seqs), GretParadigm::parallel);
    cached = cached_logits<YocoModel<double>, YocoCache<double>>(m, seqs, c.prompt, c.chunk);
  } else {
    TransformerModel<double> m(cfg, Weights<double>::init(cfg, 0));
    full = m.forward(TokenBatch::from_sequences(seqs));
    cached = cached_logits<TransformerModel<double>, TransformerCache<double>>(m, seqs, c.prompt, c.chunk);
  }
  const auto want = forward_rows(full, 1, c.n, c.prompt);
  ASSERT_TRUE(cached.allFinite());
  // Each generated position on its own, so that one bad step cannot hide.
  for (int64_t r = 0; r < want.rows(); ++r) {
    const double e = rms_ratio(cached.row(r), want.row(r));
    EXPECT_LE(e, 1e-9) << "position " << c.prompt - 1 + r;
    worst_f64 = std::max(worst_f64, e);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Tiny, CachedEqualsFull,
    ::testing::Values(Case{"yoco-tiny", 120, 100, 32768},   // one prefill chunk
                      Case{"yoco-tiny", 120, 100, 17},      // several prefill chunks, not a gRet-chunk multiple
                      Case{"yoco-tiny", 300, 1, 32768},     // prompt of one token, long decode
                      Case{"yoco-swa-tiny", 200, 150, 40},  // SWA: prefill chunk < window (64)
                      Case{"yoco-swa-tiny", 200, 150, 100}, // prefill chunk > window
                      Case{"yoco-swa-tiny", 150, 3, 32768}, // decode wraps the ring buffer twice
                      Case{"transformer-tiny", 120, 100, 32768}, Case{"transformer-tiny", 120, 100, 33},
                      Case{"transformer-tiny", 80, 1, 7}));

// GQA group sizes 1, 3 and 8 through the whole cached path of both models.
TEST(Gqa, GroupSizesOneThreeEight) {
  for (const auto& [heads, kv] : std::vector<std::pair<int, int>>{{4, 4}, {6, 2}, {8, 1}}) {
    const std::string shape = R"("dim": 48, "n_layers": 2, "hidden_dim": 96, "vocab_size": 300)";
    const auto y = config_from_json_text("{" + shape + R"(, "n_self_heads": 4, "n_attn_heads": )" + std::to_string(heads) +
                                             R"(, "n_attn_kv_heads": )" + std::to_string(kv) + "}",
                                         "gqa-yoco");
    const auto t = config_from_json_text(R"({"model_type": "transformer", )" + shape + R"(, "n_heads": )" +
                                             std::to_string(heads) + R"(, "n_kv_heads": )" + std::to_string(kv) + "}",
                                         "gqa-transformer");
    const std::vector<std::vector<int64_t>> seqs = {random_tokens(60, 300, 8)};
    YocoModel<double> ym(y, Weights<double>::init(y, 2));
    TransformerModel<double> tm(t, Weights<double>::init(t, 2));
    const auto yc = cached_logits<YocoModel<double>, YocoCache<double>>(ym, seqs, 40, 16);
    const auto tc = cached_logits<TransformerModel<double>, TransformerCache<double>>(tm, seqs, 40, 16);
    EXPECT_LE(rms_ratio(yc, forward_rows(ym.forward(TokenBatch::from_sequences(seqs)), 1, 60, 40)), 1e-9) << heads << "/" << kv;
    EXPECT_LE(rms_ratio(tc, forward_rows(tm.forward(TokenBatch::from_sequences(seqs)), 1, 60, 40)), 1e-9) << heads << "/" << kv;
  }
}

TEST(Yoco, ParadigmsGiveTheSameLogits) {
  const auto cfg = preset_config("yoco-tiny");
  YocoModel<double> m(cfg, Weights<double>::init(cfg, 3));
  const auto tb = TokenBatch::single(random_tokens(200, cfg.vocab_size, 5));
  const auto par = m.forward(tb, GretParadigm::parallel);
  EXPECT_LE(rms_ratio(m.forward(tb, GretParadigm::recurrent), par), 1e-10);
  EXPECT_LE(rms_ratio(m.forward(tb, GretParadigm::chunkwise), par), 1e-10);
}

TEST(Yoco, EarlyExitEqualsFullForwardLastPosition) {
  for (const char* preset : {"yoco-tiny", "yoco-swa-tiny"}) {
    const auto cfg = preset_config(preset);
    YocoModel<double> m(cfg, Weights<double>::init(cfg, 0));
    const auto tokens = random_tokens(97, cfg.vocab_size, 9);
    const auto full = m.forward(TokenBatch::single(tokens));
    YocoCache<double> cache;
    const auto last = m.prefill(TokenBatch::single(tokens), 0, cache, 32);
    EXPECT_LE(rms_ratio(last.row(0), full.row(96)), 1e-10) << preset;
  }
}

template <class Model, class Cache>
void batch_rows_independent(const ModelConfig& cfg) {
  Model m(cfg, Weights<double>::init(cfg, 1));
  std::vector<std::vector<int64_t>> seqs = {random_tokens(70, cfg.vocab_size, 1), random_tokens(70, cfg.vocab_size, 2),
                                            random_tokens(70, cfg.vocab_size, 3)};
  const auto batched = cached_logits<Model, Cache>(m, seqs, 50, 16);
  for (int64_t b = 0; b < 3; ++b) {
    const auto single = cached_logits<Model, Cache>(m, {seqs[b]}, 50, 16);
    for (int64_t r = 0; r < single.rows(); ++r)
      EXPECT_LE(rms_ratio(batched.row(r * 3 + b), single.row(r)), 1e-12) << cfg.name << " row " << b;
  }
  // The full forward batches too.
  const auto full3 = m.forward(TokenBatch::from_sequences(seqs));
  const auto full1 = m.forward(TokenBatch::single(seqs[2]));
  EXPECT_LE(rms_ratio(full3.bottomRows(70), full1), 1e-12);
}

TEST(Batch, OneEqualsEachRowOfThree) {
  batch_rows_independent<YocoModel<double>, YocoCache<double>>(preset_config("yoco-tiny"));
  batch_rows_independent<YocoModel<double>, YocoCache<double>>(preset_config("yoco-swa-tiny"));
  batch_rows_independent<TransformerModel<double>, TransformerCache<double>>(preset_config("transformer-tiny"));
}

TEST(Float, CachedPathsTrackDouble) {
  const auto cfg = preset_config("yoco-tiny");
  YocoModel<float> mf(cfg, Weights<float>::init(cfg, 0));
  YocoModel<double> md(cfg, Weights<double>::init(cfg, 0));
  const auto tokens = random_tokens(300, cfg.vocab_size, 4);
  YocoCache<float> cf;
  const Mat<float> lf = mf.prefill(TokenBatch::single(tokens), 0, cf, 64);
  const auto full = md.forward(TokenBatch::single(tokens));
  EXPECT_LE(rms_ratio(lf.row(0), full.row(299)), 1e-5);
}

TEST(Memory, CategoriesMatchTheShapes) {
  const auto y = preset_config("yoco-tiny");
  const auto t = preset_config("transformer-tiny");
  const int64_t B = 2, N = 50, G = 10;
  YocoModel<float> ym(y, Weights<float>::init(y, 0));
  TransformerModel<float> tm(t, Weights<float>::init(t, 0));
  std::vector<std::vector<int64_t>> seqs = {random_tokens(N, 512, 1), random_tokens(N, 512, 2)};
  YocoCache<float> yc;
  TransformerCache<float> tc;
  ym.prefill(TokenBatch::from_sequences(seqs), G, yc, 16);
  tm.prefill(TokenBatch::from_sequences(seqs), G, tc, 16);
  const auto ymem = ym.memory(yc), tmem = tm.memory(tc);
  // One global cache of N + G tokens: B * (N+G) * 2 * Hkv * Da floats.
  EXPECT_EQ(ymem.kv_cache, B * (N + G) * 2 * 2 * 16 * 4);
  // gRet states: L/2 layers * B * Hs * D * D floats.
  EXPECT_EQ(ymem.state, 2 * B * 4 * 16 * 16 * 4);
  EXPECT_EQ(ymem.weights, param_count(y) * 4);
  // The Transformer caches every layer: L times YOCO's single cache.
  EXPECT_EQ(tmem.kv_cache, 4 * ymem.kv_cache);
  EXPECT_EQ(tmem.state, 0);
  EXPECT_GT(ymem.activations, 0);
  EXPECT_GT(tmem.activations, 0);
  EXPECT_EQ(ymem.total(), ymem.weights + ymem.kv_cache + ymem.state + ymem.activations);

  const auto s = preset_config("yoco-swa-tiny");
  YocoModel<float> sm(s, Weights<float>::init(s, 0));
  YocoCache<float> sc;
  sm.prefill(TokenBatch::from_sequences(seqs), G, sc, 16);
  // SWA windows: L/2 layers * B * (K and V) * W * d floats.
  EXPECT_EQ(sm.memory(sc).state, 2 * B * 2 * 64 * 64 * 4);
}

TEST(Memory, ChunkedPrefillBoundsActivations) {
  // With a fixed prefill chunk, YOCO's activation peak barely moves with the
  // prompt length (only the last position's cross-attention row grows).
  const auto cfg = preset_config("yoco-tiny");
  YocoModel<float> m(cfg, Weights<float>::init(cfg, 0));
  YocoCache<float> c;
  m.prefill(TokenBatch::single(random_tokens(256, 512, 1)), 0, c, 64);
  const int64_t short_peak = m.memory(c).activations;
  m.prefill(TokenBatch::single(random_tokens(2048, 512, 1)), 0, c, 64);
  const int64_t long_peak = m.memory(c).activations;
  EXPECT_LE(long_peak - short_peak, (2048 - 256) * 4 + 1024);
  // One big chunk costs more.
  m.prefill(TokenBatch::single(random_tokens(2048, 512, 1)), 0, c, 2048);
  EXPECT_GT(m.memory(c).activations, 4 * long_peak);
}

TEST(Errors, BadInputsAreInputErrors) {
  const auto cfg = preset_config("yoco-tiny");
  YocoModel<double> m(cfg, Weights<double>::init(cfg, 0));
  YocoCache<double> c;
  EXPECT_THROW(m.prefill(TokenBatch::single({1, 2, 512}), 1, c), InputError);  // id == vocab
  EXPECT_THROW(m.prefill(TokenBatch::single({1, 2, -1}), 1, c), InputError);
  EXPECT_THROW(m.prefill(TokenBatch::single({1, 2}), 1, c, 0), InputError);  // chunk 0
  m.prefill(TokenBatch::single({1, 2}), 1, c);
  m.decode_step({3}, c);
  EXPECT_THROW(m.decode_step({4}, c), InputError);  // cache full
  EXPECT_THROW(TokenBatch::from_sequences({{1, 2}, {3}}), InputError);
  EXPECT_THROW(TransformerModel<double>(cfg, Weights<double>::init(cfg, 0)), InputError);
}

}  // namespace
}  // namespace yoco
