// The CUDA runners with the sequence sharded over real MPI ranks
// (cuda/runner/shard_link.hpp, dist/cuda_shard_link.hpp): YOCO chunk-parallel
// (gRet and SWA), the Transformer context-parallel. On the GPU: ctest
// runs it under `mpirun -np R` (R = 1, 2, 3), every rank on the one device
// of the lent machine (the MPI backend stages through the host, so ranks may
// share a GPU). Each rank runs the single-GPU runner and the sharded one on
// the same weights and tokens: prefill, then 16 teacher-forced decode steps.
//
// Bounds (DESIGN.md §6, as tests/cuda/test_cuda_models.cpp derives them):
// against the fp64 CPU reference on the same bf16 weights, 2 x the error of
// the bf16 emulation (bf16_model_emulation.hpp) over the compared rows, at
// least 1e-3; sharded against single-GPU, twice that (each side is held to
// the bound; a different fp32 summation order -- the scan over ranks, the
// split count, the host combine -- moves bf16 results by their full size).
// A lost state, a wrong window or a missing rank is an error of order 1.
//
// Uneven shards: rank 0 holds fewer tokens than the SWA window (128) and
// than one gRet chunk (64), rank 1 fewer than one chunk too, the last the
// rest. The Transformer's 2R chunks are uneven too, some shorter than one
// key block of the prefill kernel (64), one of a single token. With one rank,
// the NCCL backend (the CUDA toolkit's) runs the same path on device buffers
// when it was built.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "bf16_model_emulation.hpp"
#include "cuda_shard_link.hpp"
#include "gpu_test_support.hpp"
#include "mpi_communicator.hpp"
#include "mpi_test_main.hpp"
#include "runner/cuda_model.hpp"
#include "small_configs.hpp"
#include "transformer_cuda_model.hpp"
#include "transformer_model.hpp"
#include "yoco_model.hpp"
#if defined(YOCO_TEST_NCCL)
#include "nccl_communicator.hpp"
#endif

namespace yoco::dist {
namespace {

MpiCommunicator* g_comm = nullptr;

constexpr uint64_t kSeed = 20240603;
constexpr int64_t kPrompt = 700, kSteps = 16, kBatch = 2;
constexpr double kBoundFloor = 1e-3;

std::vector<int64_t> shard_lengths(int R, int64_t N) {
  if (R == 1) return {N};
  if (R == 2) return {50, N - 50};
  std::vector<int64_t> len = {50, 61};
  for (int r = 2; r < R; ++r) len.push_back(r == R - 1 ? N - 111 - 40 * (R - 3) : 40);
  return len;
}

// The Transformer's 2R chunks of N positions: 1, 37, 64, 90, ... and the rest last.
std::vector<int64_t> chunk_lengths(int R, int64_t N) {
  std::vector<int64_t> len;
  int64_t used = 0;
  for (int c = 0; c + 1 < 2 * R; ++c) {
    const int64_t l = c == 0 ? 1 : c == 1 ? 37 : 64 + 26 * (c - 2);
    len.push_back(l);
    used += l;
  }
  len.push_back(N - used);
  return len;
}

// The plan a test gives the link: YOCO contiguous shards, the Transformer 2R chunks.
void plan(CudaShardLink& link, const ModelConfig& cfg, const std::vector<int64_t>& shards,
          const std::vector<int64_t>& chunks) {
  if (cfg.is_yoco()) link.plan(ShardPlan::of_lengths(shards));
  else link.plan_ring(ShardPlan::of_lengths(chunks));
}

int64_t calls(const std::map<std::string, CommCount>& c, const std::string& label) {
  return c.count(label) ? c.at(label).calls : 0;
}

std::vector<std::vector<int64_t>> sequences(int64_t vocab) {
  std::vector<std::vector<int64_t>> s(kBatch);
  for (int64_t b = 0; b < kBatch; ++b) {
    std::mt19937_64 rng(777 + b);
    std::uniform_int_distribution<int64_t> d(0, vocab - 1);
    for (int64_t t = 0; t < kPrompt + kSteps; ++t) s[b].push_back(d(rng));
  }
  return s;
}

std::unique_ptr<cuda::CudaModel> make_model(const ModelConfig& cfg, cuda::ShardLink* link = nullptr) {
  const cuda::CudaWeightSource source{"", kSeed};
  return cfg.is_yoco() ? cuda::create_yoco_cuda_model(cfg, source, link)
                       : cuda::create_transformer_cuda_model(cfg, source, link);
}

// Logits of the last prompt position and of each decode step, per sequence [steps + 1, vocab].
std::vector<Mat<double>> prefill_and_decode(cuda::CudaModel& m, const std::vector<std::vector<int64_t>>& seqs) {
  const int64_t V = m.config().vocab_size;
  std::vector<int64_t> prompt;
  for (const auto& s : seqs) prompt.insert(prompt.end(), s.begin(), s.begin() + kPrompt);
  std::vector<Mat<double>> out(kBatch, Mat<double>::Constant(kSteps + 1, V, NAN));
  auto take = [&](int64_t row) {
    const std::vector<float> l = m.logits();
    if (static_cast<int64_t>(l.size()) != kBatch * V) return;
    for (int64_t b = 0; b < kBatch; ++b)
      for (int64_t j = 0; j < V; ++j) out[b](row, j) = l[b * V + j];
  };
  m.prefill(prompt, kBatch, kPrompt, kSteps, 32768);
  take(0);
  for (int64_t t = 0; t < kSteps; ++t) {
    std::vector<int64_t> tok;
    for (const auto& s : seqs) tok.push_back(s[kPrompt + t]);
    m.decode_step(tok);
    take(t + 1);
  }
  EXPECT_EQ(m.position(), kPrompt + kSteps);
  return out;
}

// The fp64 reference and the bf16 emulation of a sequence's first n + steps
// tokens at positions n - 1 .. n + steps - 1; the bound of DESIGN.md §6.
struct Reference {
  Mat<double> logits;
  double bound = 0;
};

Reference reference(const ModelConfig& cfg, const std::vector<int64_t>& seq, int64_t n = kPrompt,
                    int64_t steps = kSteps) {
  const TokenBatch tb = TokenBatch::single({seq.begin(), seq.begin() + n + steps});
  std::vector<int64_t> rows;
  for (int64_t t = n - 1; t < n + steps; ++t) rows.push_back(t);
  Reference r;
  Mat<double> emu;
  if (cfg.is_yoco()) {
    const YocoModel<double> model(cfg, cuda_test::bf16_weights(cfg, kSeed));
    r.logits = model.forward(tb, GretParadigm::chunkwise).middleRows(n - 1, steps + 1);
    emu = cuda_test::emulate_logits(cfg, model.weights(), tb, rows);
  } else {
    const TransformerModel<double> model(cfg, cuda_test::bf16_weights(cfg, kSeed));
    r.logits = model.forward(tb).middleRows(n - 1, steps + 1);
    emu = cuda_test::emulate_logits(cfg, model.weights(), tb, rows);
  }
  r.bound = std::max(2.0 * rms_ratio(emu, r.logits), kBoundFloor);
  return r;
}

double rel(const Mat<double>& a, const Mat<double>& b) { return (a - b).norm() / std::max(b.norm(), 1e-300); }

void expect_sharded_equal(const std::string& what, const std::vector<Mat<double>>& got,
                          const std::vector<Mat<double>>& one, const Reference& ref) {
  const double e_ref = rel(got[0], ref.logits), e_one0 = rel(got[0], one[0]), e_one1 = rel(got[1], one[1]);
  std::printf("[ sharded  ] rank %d of %d, %s: against the fp64 reference %.3e (single GPU %.3e), bound %.3e; "
              "against the single GPU %.3e / %.3e, bound %.3e\n",
              g_comm->rank(), g_comm->size(), what.c_str(), e_ref, rel(one[0], ref.logits), ref.bound, e_one0, e_one1,
              2 * ref.bound);
  std::fflush(stdout);
  for (const auto& m : got) EXPECT_TRUE(m.allFinite()) << what;
  EXPECT_LE(e_ref, ref.bound) << what;
  EXPECT_LE(e_one0, 2 * ref.bound) << what;
  EXPECT_LE(e_one1, 2 * ref.bound) << what;
}

class ShardedCudaModel : public ::testing::TestWithParam<std::string> {};

TEST_P(ShardedCudaModel, PrefillAndSixteenDecodeStepsEqualTheSingleGpuRunner) {
  YOCO_REQUIRE_GPU();
  const ModelConfig cfg = cuda_test::small_config(GetParam());
  const int R = g_comm->size();
  const auto seqs = sequences(cfg.vocab_size);
  int devices = 0;
  ASSERT_EQ(cudaGetDeviceCount(&devices), cudaSuccess);
  ASSERT_EQ(cudaSetDevice(g_comm->rank() % devices), cudaSuccess);  // one GPU a rank where there are enough

  std::vector<Mat<double>> one;
  {
    auto m = make_model(cfg);
    one = prefill_and_decode(*m, seqs);
  }
  CudaShardLink link(*g_comm);
  const std::vector<int64_t> lengths = shard_lengths(R, kPrompt), chunks = chunk_lengths(R, kPrompt);
  plan(link, cfg, lengths, chunks);
  auto m = make_model(cfg, &link);
  g_comm->reset_counts();
  const auto got = prefill_and_decode(*m, seqs);
  const Reference ref = reference(cfg, seqs[0]);
  expect_sharded_equal(GetParam() + ", shards " + std::to_string(R), got, one, ref);

  // What moved. YOCO: one self-decoder collective a layer at prefill,
  // whatever the shard's length; a combine per cross layer at every step. The
  // Transformer: every other rank's keys and values in every layer at
  // prefill, around the ring (they grow with the prompt), a combine per layer
  // at every decode step.
  const auto& c = g_comm->counts();
  const int64_t B = kBatch, Da2 = cfg.attn_head_dim() + 2;
  if (!cfg.is_yoco()) {
    const int64_t L = cfg.n_layers, r = g_comm->rank();
    // Rank j's block: its chunks j and 2R-1-j.
    auto block_bytes = [&](int64_t j) { return B * (chunks[j] + chunks[2 * R - 1 - j]) * 2 * cfg.kv_width() * 2; };
    int64_t received = 0;
    for (int64_t s = 1; s < R; ++s) received += block_bytes(((r - s) % R + R) % R);
    EXPECT_EQ(calls(c, "ring_kv"), L * (R - 1));
    if (R > 1) {
      EXPECT_EQ(c.at("ring_kv").bytes_received, L * received);
    }
    EXPECT_EQ(c.at("last_hidden").calls, 1);  // the last position's logits, from the keeper (rank 0)
    ASSERT_TRUE(c.count("decode_partial"));
    EXPECT_EQ(c.at("decode_partial").calls, L * kSteps);
    EXPECT_EQ(c.at("decode_partial").bytes_received, L * kSteps * (R - 1) * B * cfg.n_attn_heads * Da2 * 8);
    EXPECT_EQ(calls(c, "cross_partial"), 0);
  } else {
    const int64_t Ls = cfg.n_self_layers(), Lc = cfg.n_cross_layers();
    if (cfg.self_decoder() == SelfDecoderKind::gret) {
      const int64_t D = cfg.self_head_dim();
      ASSERT_TRUE(c.count("gret_state"));
      EXPECT_EQ(c.at("gret_state").calls, Ls);
      EXPECT_EQ(c.at("gret_state").bytes_received, Ls * (R - 1) * B * cfg.n_self_heads * (2 + D * D) * 4);
    } else {
      ASSERT_TRUE(c.count("swa_window"));
      EXPECT_EQ(c.at("swa_window").calls, Ls);
      EXPECT_EQ(c.at("swa_window").bytes_received, Ls * (R - 1) * B * (cfg.window() - 1) * 2 * cfg.dim * 2);
    }
    ASSERT_TRUE(c.count("cross_partial"));
    EXPECT_EQ(c.at("cross_partial").calls, Lc * (kSteps + 1));
    // One merged partial per (sequence, head) a rank, whatever its split count.
    EXPECT_EQ(c.at("cross_partial").bytes_received, Lc * (kSteps + 1) * (R - 1) * B * cfg.n_attn_heads * Da2 * 8);
    EXPECT_EQ(c.at("last_hidden").calls, kSteps + 1);
  }

  // Logits at every position: the shards through the model, YOCO's global
  // K/V gathered once (the Transformer's every layer's), every rank's logits gathered.
  {
    std::vector<int64_t> flat;
    for (const auto& s : seqs) flat.insert(flat.end(), s.begin(), s.begin() + kPrompt);
    g_comm->reset_counts();
    const std::vector<float> f = m->forward(flat, kBatch, kPrompt);
    auto m1 = make_model(cfg);
    const std::vector<float> f1 = m1->forward(flat, kBatch, kPrompt);
    ASSERT_EQ(f.size(), f1.size());
    const Eigen::Map<const Eigen::VectorXf> a(f.data(), static_cast<Eigen::Index>(f.size())),
        b(f1.data(), static_cast<Eigen::Index>(f1.size()));
    const double e = static_cast<double>((a - b).norm()) / std::max(static_cast<double>(b.norm()), 1e-300);
    std::printf("[ sharded  ] rank %d, %s: forward at every position against the single GPU %.3e, bound %.3e\n",
                g_comm->rank(), GetParam().c_str(), e, 2 * ref.bound);
    EXPECT_TRUE(a.allFinite());
    EXPECT_LE(e, 2 * ref.bound);
    // YOCO: the global K/V once, for every cross layer; the Transformer: each layer's ring.
    if (cfg.is_yoco()) EXPECT_EQ(g_comm->counts().at("kv_gather").calls, 1);
    else EXPECT_EQ(calls(g_comm->counts(), "ring_kv"), cfg.n_layers * (R - 1));
    EXPECT_EQ(g_comm->counts().at("logits").calls, 1);
  }

  // A second, shorter prompt re-plans the shards (even this time) on the same
  // model: its last-position logits against the reference and the single GPU.
  const int64_t N2 = 300;
  if (cfg.is_yoco()) link.plan(ShardPlan::even(N2, R));
  else link.plan_ring(ShardPlan::even(N2, 2 * R));
  std::vector<int64_t> p2;
  for (const auto& s : seqs) p2.insert(p2.end(), s.begin(), s.begin() + N2);
  const int64_t V = cfg.vocab_size;
  auto last_logits = [&](cuda::CudaModel& model) {
    model.prefill(p2, kBatch, N2, 1, 32768);
    const std::vector<float> l = model.logits();
    std::vector<Mat<double>> out(kBatch, Mat<double>::Constant(1, V, NAN));
    for (int64_t b = 0; b < kBatch && static_cast<int64_t>(l.size()) == kBatch * V; ++b)
      for (int64_t j = 0; j < V; ++j) out[b](0, j) = l[b * V + j];
    return out;
  };
  const auto got2 = last_logits(*m);
  auto m1 = make_model(cfg);
  const auto one2 = last_logits(*m1);
  Reference ref2 = reference(cfg, seqs[0], N2, 0);
  ref2.bound = std::max(ref2.bound, ref.bound);  // one row cannot draw a luckily small emulation error
  expect_sharded_equal(GetParam() + ", a second prompt of 300 tokens, even shards", got2, one2, ref2);
}

TEST_P(ShardedCudaModel, APromptOfAnotherLengthThanThePlanIsRefused) {
  YOCO_REQUIRE_GPU();
  const ModelConfig cfg = cuda_test::small_config(GetParam());
  CudaShardLink link(*g_comm);
  if (cfg.is_yoco()) link.plan(ShardPlan::even(64, g_comm->size()));
  else link.plan_ring(ShardPlan::even(64, 2 * g_comm->size()));
  auto m = make_model(cfg, &link);
  const std::vector<int64_t> prompt(65, 1);
  EXPECT_THROW(m->prefill(prompt, 1, 65, 1, 32768), InputError);
  EXPECT_THROW(m->forward(prompt, 1, 65), InputError);
}

#if defined(YOCO_TEST_NCCL)
// NCCL refuses two ranks on one device, so it runs with one rank here: the
// same link and runner path, the collectives on device buffers.
TEST_P(ShardedCudaModel, NcclWithOneRankRunsTheSamePath) {
  YOCO_REQUIRE_GPU();
  ASSERT_EQ(g_comm->size(), 1) << "NCCL runs with one rank on the one GPU: mpirun -np 1 (or --gtest_filter=-*Nccl*)";
  const ModelConfig cfg = cuda_test::small_config(GetParam());
  const auto seqs = sequences(cfg.vocab_size);
  std::vector<Mat<double>> one;
  {
    auto m = make_model(cfg);
    one = prefill_and_decode(*m, seqs);
  }
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  {
    NcclCommunicator nccl(0, s, 120.0);
    CudaShardLink link(nccl);
    plan(link, cfg, {kPrompt}, {kPrompt / 2, kPrompt - kPrompt / 2});
    auto m = make_model(cfg, &link);
    const auto got = prefill_and_decode(*m, seqs);
    expect_sharded_equal(GetParam() + ", NCCL, one rank", got, one, reference(cfg, seqs[0]));
    // YOCO combines per cross layer at prefill and every step; the Transformer per layer at every step.
    if (cfg.is_yoco()) EXPECT_EQ(nccl.counts().at("cross_partial").calls, cfg.n_cross_layers() * (kSteps + 1));
    else EXPECT_EQ(nccl.counts().at("decode_partial").calls, cfg.n_layers * kSteps);
  }
  cudaStreamDestroy(s);
}
#endif

INSTANTIATE_TEST_SUITE_P(Presets, ShardedCudaModel,
                         ::testing::Values("yoco-small", "yoco-swa-small", "yoco-small-hd128", "transformer-small"),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (char& ch : n)
                             if (ch == '-') ch = '_';
                           return n;
                         });

}  // namespace
}  // namespace yoco::dist

int main(int argc, char** argv) { return yoco::dist::run_tests_on_ranks(argc, argv, 300.0, yoco::dist::g_comm); }
