// The sharded YOCO prefill and decode (dist/yoco_sharded) against the
// single-process reference, on real MPI ranks (ctest runs this under
// `mpirun --oversubscribe -np R`, R = 1..4). Every rank runs every test; the
// reference runs on every rank too, so each rank checks its own logits.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>

#include "mpi_communicator.hpp"
#include "mpi_test_main.hpp"
#include "transformer_context_parallel.hpp"
#include "yoco_sharded.hpp"

namespace yoco::dist {
namespace {

MpiCommunicator* g_comm = nullptr;

double max_rel(const Mat<double>& a, const Mat<double>& b) {
  return (a - b).cwiseAbs().maxCoeff() / std::max(b.cwiseAbs().maxCoeff(), 1e-300);
}

// Shard lengths for R ranks over a prompt of N tokens that do not divide
// evenly: rank 0 holds fewer tokens than one gRet chunk (16 here) and fewer
// than the SWA window (64), the next one crosses several chunks.
std::vector<int64_t> uneven_lengths(int R, int64_t N) {
  if (R == 1) return {N};
  std::vector<int64_t> len(R);
  len[0] = 5;
  int64_t left = N - 5;
  for (int r = 1; r < R; ++r) {
    const int64_t skew = r % 2 ? 3 : -3;  // uneven, but every rank keeps at least one token
    len[r] = r == R - 1 ? left : std::clamp<int64_t>(left / (R - r) + skew, 1, left - (R - 1 - r));
    left -= len[r];
  }
  return len;
}

TokenBatch prompt_of(const ModelConfig& cfg, int64_t B, int64_t N) {
  std::vector<std::vector<int64_t>> seqs(B);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < N; ++t) seqs[b].push_back((37 * t + 11 * b + 5) % cfg.vocab_size);
  return TokenBatch::from_sequences(seqs);
}

struct Case {
  const char* preset;
  int64_t batch, length;
};

class ShardedYocoTest : public ::testing::TestWithParam<Case> {};

TEST_P(ShardedYocoTest, PrefillAndSixteenDecodeStepsEqualTheSingleProcessReference) {
  const Case c = GetParam();
  ModelConfig cfg = preset_config(c.preset);
  cfg.gret_chunk_size = 16;  // several chunks a shard, and a shard shorter than one
  const YocoModel<double> model(cfg, Weights<double>::init(cfg, 7));
  const TokenBatch prompt = prompt_of(cfg, c.batch, c.length);
  const int64_t gen = 16;

  YocoCache<double> cache;
  Mat<double> want = model.prefill(prompt, gen, cache);
  ShardedYoco<double> sharded(model, *g_comm, ShardPlan::of_lengths(uneven_lengths(g_comm->size(), c.length)));
  Mat<double> got = sharded.prefill(prompt, gen);
  EXPECT_LE(max_rel(got, want), 1e-12) << "prefill, rank " << g_comm->rank() << " of " << g_comm->size();
  for (int64_t s = 0; s < gen; ++s) {
    std::vector<int64_t> tok(c.batch);
    for (int64_t b = 0; b < c.batch; ++b) tok[b] = (13 * s + 7 * b + 1) % cfg.vocab_size;
    want = model.decode_step(tok, cache);
    got = sharded.decode_step(tok);
    EXPECT_LE(max_rel(got, want), 1e-12) << "decode step " << s << ", rank " << g_comm->rank();
  }
}

INSTANTIATE_TEST_SUITE_P(Models, ShardedYocoTest,
                         ::testing::Values(Case{"yoco-tiny", 1, 150}, Case{"yoco-tiny", 2, 97},
                                           Case{"yoco-swa-tiny", 1, 150}, Case{"yoco-swa-tiny", 2, 97}),
                         [](const auto& info) {
                           std::string n = std::string(info.param.preset) + "_b" + std::to_string(info.param.batch);
                           std::replace(n.begin(), n.end(), '-', '_');
                           return n;
                         });

// Bad input is refused on every rank before the first collective (a rank
// that threw alone would leave the others waiting in it), and the next call
// still pairs its collectives: the prefill that follows gives the right logits.
TEST(ShardedYocoErrors, ABadTokenIsRefusedOnEveryRankBeforeAnyCollective) {
  ModelConfig cfg = preset_config("yoco-tiny");
  const YocoModel<double> model(cfg, Weights<double>::init(cfg, 3));
  const int64_t N = 40;
  TokenBatch bad = prompt_of(cfg, 1, N);
  bad.ids[0] = cfg.vocab_size;  // on rank 0's shard only
  ShardedYoco<double> sharded(model, *g_comm, ShardPlan::even(N, g_comm->size()));
  EXPECT_THROW(sharded.prefill(bad, 2), InputError);
  const TokenBatch good = prompt_of(cfg, 1, N);
  YocoCache<double> cache;
  const Mat<double> want = model.prefill(good, 2, cache);
  EXPECT_LE(max_rel(sharded.prefill(good, 2), want), 1e-12);
  EXPECT_THROW(sharded.decode_step({-1}), InputError);  // only the last rank embeds it
  EXPECT_LE(max_rel(sharded.decode_step({3}), model.decode_step({3}, cache)), 1e-12);
}

// The counted bytes are the formula's, and the self-decoder's do not grow
// with the prompt: gRet B x Hs x (D^2 + 1) doubles a layer, SWA B x (W - 1) x 2d.
TEST(ShardedYocoComm, TheCountedBytesAreTheFormulasAndTheSelfDecodersDoNotGrowWithThePrompt) {
  const int R = g_comm->size();
  for (const char* preset : {"yoco-tiny", "yoco-swa-tiny"}) {
    ModelConfig cfg = preset_config(preset);
    cfg.gret_chunk_size = 16;
    const YocoModel<double> model(cfg, Weights<double>::init(cfg, 1));
    std::vector<int64_t> self_bytes;
    for (int64_t N : {int64_t{64}, int64_t{256}}) {
      g_comm->reset_counts();
      ShardedYoco<double> sharded(model, *g_comm, ShardPlan::even(N, R));
      sharded.prefill(prompt_of(cfg, 1, N), 1);
      const auto& c = g_comm->counts();
      const bool gret = cfg.self_decoder() == SelfDecoderKind::gret;
      const std::string self = gret ? "gret_state" : "swa_window";
      const int64_t per_layer =
          gret ? cfg.n_self_heads * (cfg.self_head_dim() * cfg.self_head_dim() + 1) * 8 : (cfg.window() - 1) * 2 * cfg.dim * 8;
      const int64_t cross = cfg.n_attn_heads * (cfg.attn_head_dim() + 2) * 8;
      if (R == 1) {
        EXPECT_EQ(c.count(self) ? c.at(self).bytes_sent : 0, 0);
      } else {
        ASSERT_TRUE(c.count(self)) << preset;
        EXPECT_EQ(c.at(self).calls, cfg.n_self_layers());
        EXPECT_EQ(c.at(self).bytes_sent, cfg.n_self_layers() * (R - 1) * per_layer) << preset;
        EXPECT_EQ(c.at("cross_partial").calls, cfg.n_cross_layers());
        EXPECT_EQ(c.at("cross_partial").bytes_sent, cfg.n_cross_layers() * (R - 1) * cross) << preset;
        const bool root = g_comm->rank() == R - 1;
        EXPECT_EQ(c.at("last_hidden").bytes_sent, root ? (R - 1) * cfg.dim * 8 : 0);
        EXPECT_EQ(c.at("last_hidden").bytes_received, root ? 0 : cfg.dim * 8);
        self_bytes.push_back(c.at(self).bytes_sent);
      }
    }
    if (R > 1) {
      EXPECT_EQ(self_bytes[0], self_bytes[1]) << preset << ": 64 vs 256 tokens";
    }
  }
}

// The Transformer's context-parallel baseline: 2R uneven chunks (rank r
// holds chunks r and 2R-1-r), ring attention in every layer.
std::vector<int64_t> uneven_chunks(int R, int64_t N) {
  std::vector<int64_t> len = uneven_lengths(2 * R, N);
  return len;
}

TEST(ContextParallelTransformer, PrefillAndSixteenDecodeStepsEqualTheSingleProcessReference) {
  for (const int64_t B : {int64_t{1}, int64_t{2}}) {
    const ModelConfig cfg = preset_config("transformer-tiny");
    const TransformerModel<double> model(cfg, Weights<double>::init(cfg, 9));
    const int64_t N = B == 1 ? 150 : 97, gen = 16;
    const TokenBatch prompt = prompt_of(cfg, B, N);
    TransformerCache<double> cache;
    Mat<double> want = model.prefill(prompt, gen, cache);
    ContextParallelTransformer<double> cp(model, *g_comm, ShardPlan::of_lengths(uneven_chunks(g_comm->size(), N)));
    Mat<double> got = cp.prefill(prompt, gen);
    EXPECT_LE(max_rel(got, want), 1e-12) << "prefill, batch " << B << ", rank " << g_comm->rank();
    for (int64_t s = 0; s < gen; ++s) {
      std::vector<int64_t> tok(B);
      for (int64_t b = 0; b < B; ++b) tok[b] = (13 * s + 7 * b + 1) % cfg.vocab_size;
      want = model.decode_step(tok, cache);
      got = cp.decode_step(tok);
      EXPECT_LE(max_rel(got, want), 1e-12) << "decode step " << s << ", batch " << B << ", rank " << g_comm->rank();
    }
  }
}

// Ring bytes: each rank receives every other rank's keys and values in every
// layer, so they grow with the prompt (unlike YOCO's self-decoder).
TEST(ContextParallelTransformerComm, TheRingBytesAreTheFormulasAndGrowWithThePrompt) {
  const int R = g_comm->size();
  const ModelConfig cfg = preset_config("transformer-tiny");
  const TransformerModel<double> model(cfg, Weights<double>::init(cfg, 1));
  std::vector<int64_t> received;
  for (int64_t N : {int64_t{64}, int64_t{256}}) {
    g_comm->reset_counts();
    const ShardPlan chunks = ShardPlan::even(N, 2 * R);
    ContextParallelTransformer<double> cp(model, *g_comm, chunks);
    cp.prefill(prompt_of(cfg, 1, N), 1);
    const auto& c = g_comm->counts();
    if (R == 1) {
      EXPECT_EQ(c.count("ring_kv"), 0u);
      continue;
    }
    // Over R - 1 steps a rank receives the blocks of ranks r-1, ..., r-(R-1): all but its own.
    const int r = g_comm->rank();
    const int64_t own = chunks.length(r) + chunks.length(2 * R - 1 - r);
    const int64_t want = cfg.n_layers * (N - own) * 2 * cfg.kv_width() * 8;
    EXPECT_EQ(c.at("ring_kv").calls, cfg.n_layers * (R - 1));
    EXPECT_EQ(c.at("ring_kv").bytes_received, want) << "N " << N;
    received.push_back(c.at("ring_kv").bytes_received);
  }
  if (R > 1) {
    EXPECT_GT(received[1], received[0]);
  }
}

// The all-position forward: the self-decoder sharded (uneven shards, one
// shorter than a gRet chunk and the SWA window), the global K-hat / V-hat
// gathered once, every position's logits on every rank; the Transformer's from
// its ring attention. Equal to the single-process forward; the decoding cache
// is left as it was.
TEST(ShardedForward, EveryPositionsLogitsEqualTheSingleProcessForward) {
  const int R = g_comm->size();
  for (const char* preset : {"yoco-tiny", "yoco-swa-tiny", "transformer-tiny"}) {
    ModelConfig cfg = preset_config(preset);
    cfg.gret_chunk_size = 16;
    for (const int64_t B : {int64_t{1}, int64_t{2}}) {
      const int64_t N = B == 1 ? 150 : 97;
      const TokenBatch tokens = prompt_of(cfg, B, N);
      Mat<double> got, want;
      if (cfg.is_yoco()) {
        const YocoModel<double> model(cfg, Weights<double>::init(cfg, 5));
        want = model.forward(tokens);
        ShardedYoco<double> sharded(model, *g_comm, ShardPlan::of_lengths(uneven_lengths(R, N)));
        got = sharded.forward(tokens);
        EXPECT_EQ(g_comm->counts().at("kv_gather").calls, 1) << "the global cache is gathered once, whatever the layers";
      } else {
        const TransformerModel<double> model(cfg, Weights<double>::init(cfg, 5));
        want = model.forward(tokens);
        ContextParallelTransformer<double> cp(model, *g_comm, ShardPlan::of_lengths(uneven_chunks(R, N)));
        got = cp.forward(tokens);
      }
      g_comm->reset_counts();
      ASSERT_EQ(got.rows(), B * N) << preset;
      EXPECT_LE(max_rel(got, want), 1e-12) << preset << " batch " << B << ", rank " << g_comm->rank() << " of " << R;
    }
  }
}

// Skipping positions (the sweep's sampled decode) moves the cache on: the
// step after a skip of k runs at position N + k, and what memory() counts
// includes the rows the keeper appended.
TEST(ShardedSkip, ADecodeStepAfterASkipRunsAtTheSkippedPosition) {
  for (const char* preset : {"yoco-tiny", "transformer-tiny"}) {
    const ModelConfig cfg = preset_config(preset);
    const int64_t N = 40, gen = 8;
    const TokenBatch prompt = prompt_of(cfg, 1, N);
    if (cfg.is_yoco()) {
      const YocoModel<double> model(cfg, Weights<double>::init(cfg, 5));
      ShardedYoco<double> s(model, *g_comm, ShardPlan::even(N, g_comm->size()));
      s.prefill(prompt, gen);
      s.skip_positions(5);
      EXPECT_EQ(s.position(), N + 5);
      s.decode_step({1});
      EXPECT_EQ(s.position(), N + 6);
      EXPECT_THROW(s.skip_positions(gen), std::logic_error);  // past the capacity
      EXPECT_GT(s.memory().kv_cache, 0);
    } else {
      const TransformerModel<double> model(cfg, Weights<double>::init(cfg, 5));
      ContextParallelTransformer<double> cp(model, *g_comm, ShardPlan::even(N, 2 * g_comm->size()));
      cp.prefill(prompt, gen);
      const int64_t before = cp.memory().kv_cache;
      cp.skip_positions(5);
      cp.decode_step({1});
      EXPECT_EQ(cp.position(), N + 6);
      // The keeper (rank 0) holds 6 generated rows a layer now.
      const int64_t row = 2 * cfg.kv_width() * static_cast<int64_t>(sizeof(double)) * cfg.n_layers;
      EXPECT_EQ(cp.memory().kv_cache - before, g_comm->rank() == 0 ? 6 * row : 0);
    }
  }
}

}  // namespace
}  // namespace yoco::dist

int main(int argc, char** argv) { return yoco::dist::run_tests_on_ranks(argc, argv, 60.0, yoco::dist::g_comm); }
