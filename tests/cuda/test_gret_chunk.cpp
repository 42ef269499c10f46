// The gRet chunkwise prefill kernel (cuda/gret/gret_chunk.cu) against the fp64 CPU
// reference (gret_recurrent<double>, head by head) at short lengths, and
// against the GPU recurrent oracle (cuda/gret/gret_oracle.cu) at 128K tokens.
// Bound (DESIGN §6): 2x the error of the host emulation of the same
// algorithm with the same bf16 roundings (gret/gret_chunk_emulation.hpp),
// never below bf16_output_bound; NaN never passes (outputs are poisoned).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "device_test_data.hpp"
#include "gpu_test_support.hpp"
#include "parallel_for.hpp"
#include "gret.hpp"
#include "gret/gret_chunk.hpp"
#include "gret/gret_gate.hpp"
#include "gret/gret_oracle.hpp"
#include "device/device_fill.hpp"
#include "gret/gret_chunk_emulation.hpp"
#include "gret/gret_plan.hpp"
#include "gret/gret_select.hpp"
#include "gret/gret_recurrent.hpp"
#include "ops.hpp"

namespace yoco::cuda {
namespace {

using namespace yoco::cuda_test;

// Host tensors of one problem. q, k, v sit in one fused buffer
// [B, N, stride] at column offsets 0, H*D, 2*H*D (stride = 3*H*D + 8).
struct Problem {
  int64_t B, H, D, N, stride;
  std::vector<float> qkv;  // bf16 values
  std::vector<float> lg;   // [B, N, H]
  std::vector<float> s0;   // [B, H, D, D]
};

Problem make_problem(int64_t B, int64_t H, int64_t D, int64_t N, double tau, bool with_state, uint64_t seed) {
  Problem p{B, H, D, N, 3 * H * D + 8, {}, {}, {}};
  p.qkv.resize(static_cast<size_t>(B * N * p.stride));
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  const float ks = 1.0f / std::sqrt(static_cast<float>(D));
  for (int64_t r = 0; r < B * N; ++r)
    for (int64_t c = 0; c < p.stride; ++c) {
      const float scale = (c >= H * D && c < 2 * H * D) ? ks : 1.0f;
      p.qkv[static_cast<size_t>(r * p.stride + c)] = round_to_bf16(nd(rng) * scale);
    }
  p.lg.resize(static_cast<size_t>(B * N * H));
  for (auto& x : p.lg) x = tau <= 0 ? 0.0f : static_cast<float>(logsigmoid(static_cast<double>(nd(rng))) / tau);
  p.s0.assign(static_cast<size_t>(B * H * D * D), 0.0f);
  if (with_state)
    for (auto& x : p.s0) x = nd(rng);
  return p;
}

// Slices of one head: rows [t0, t0+n) as double matrices.
struct HeadInputs {
  Mat<double> q, k, v, s0;
  Vec<double> g;
};
HeadInputs head_inputs(const Problem& p, int64_t b, int64_t h, int64_t t0, int64_t n) {
  HeadInputs x{Mat<double>(n, p.D), Mat<double>(n, p.D), Mat<double>(n, p.D), Mat<double>(p.D, p.D), Vec<double>(n)};
  for (int64_t t = 0; t < n; ++t) {
    const size_t row = static_cast<size_t>((b * p.N + t0 + t) * p.stride);
    for (int64_t d = 0; d < p.D; ++d) {
      x.q(t, d) = p.qkv[row + h * p.D + d];
      x.k(t, d) = p.qkv[row + (p.H + h) * p.D + d];
      x.v(t, d) = p.qkv[row + (2 * p.H + h) * p.D + d];
    }
    x.g(t) = p.lg[static_cast<size_t>((b * p.N + t0 + t) * p.H + h)];
  }
  for (int64_t i = 0; i < p.D * p.D; ++i) x.s0.data()[i] = p.s0[static_cast<size_t>((b * p.H + h) * p.D * p.D + i)];
  return x;
}

struct DeviceRun {
  std::vector<float> o;      // [B, N, H*D]
  std::vector<float> state;  // [B, H, D, D]
};

// Runs the chunk kernel over the whole problem in launches of the given token
// counts, with the given slice width and segments (a workspace when P > 1).
// kernel 3 / 4: the full-width v3 path with 8 / 16 warps (slice_cols is ignored;
// head_dim 128 only); kernel 5: chunks of `chunk` (128 or 256) tokens; kernel 6:
// the wgmma kernel (head_dim 128, chunk 64).
// phase1_split: 0 keeps the plan's (lowered until the plan's slots fit), else forced.
// g_col >= 0: the per-head norm and gate too, with g at that column of each
// row (eps 1e-5): in the launch (GretNormGate), or with ng_after by
// launch_gret_norm_gate after each launch. g_col = kGOwnBuffer: g in a buffer
// of its own, row stride H*D + 8, holding the v columns.
constexpr int64_t kGOwnBuffer = -2;
DeviceRun run_chunk(const Problem& p, int slice_cols, const std::vector<int64_t>& launches, int segments = 1,
                    int kernel = 2, int chunk = 64, int phase1_split = 0, int64_t g_col = -1, bool ng_after = false) {
  DeviceArray<__nv_bfloat16> qkv(p.qkv.size()), o(static_cast<size_t>(p.B * p.N * p.H * p.D));
  DeviceArray<float> lg(p.lg.size()), st(p.s0.size());
  const int64_t own_stride = p.H * p.D + 8;
  DeviceArray<__nv_bfloat16> own_g(g_col == kGOwnBuffer ? static_cast<size_t>(p.B * p.N * own_stride) : 1);
  if (g_col == kGOwnBuffer) {
    std::vector<float> gh(own_g.n, 0.0f);
    for (int64_t r = 0; r < p.B * p.N; ++r)
      for (int64_t c = 0; c < p.H * p.D; ++c)
        gh[static_cast<size_t>(r * own_stride + c)] = p.qkv[static_cast<size_t>(r * p.stride + 2 * p.H * p.D + c)];
    upload_bf16(own_g, gh);
  }
  upload_bf16(qkv, p.qkv);
  upload(lg, p.lg);
  upload(st, p.s0);
  if (p.B > 1 && launches.size() > 1) ADD_FAILURE() << "split launches need batch 1 (tokens are [B, N])";
  int64_t t0 = 0;
  for (int64_t n : launches) {
    GretChunkShape s{p.B, p.H, p.D, n, p.stride};
    GretChunkPlan plan = plan_gret_chunk_v2(s, 132);
    if (kernel == 5) {
      plan = plan_gret_chunk_v5(s, 132, chunk);
      EXPECT_EQ(plan.kernel, 5);
      EXPECT_EQ(plan.chunk, chunk);
    } else if (kernel == 6) {
      plan = plan_gret_chunk_v6(s, 132);
      EXPECT_EQ(plan.kernel, 6);
      plan.fuse_norm_gate = true;  // the epilogue no planner picks (run-17), tested all the same
    } else if (kernel == 7) {
      plan = plan_gret_chunk_v7(s, 132);  // no fused norm and gate: the norm kernel runs after it
      EXPECT_EQ(plan.kernel, 7);
    } else if (kernel >= 3) {
      plan = plan_gret_chunk_v3(s, 132);
      EXPECT_EQ(plan.kernel, kernel);
    } else {
      plan.slice_cols = slice_cols;
      plan.slices = static_cast<int>(p.D / slice_cols);
    }
    plan.segments = segments;
    if (phase1_split > 0) plan.phase1_split = phase1_split;
    while (plan.phase1_split > 1 && gret_ws_slots(plan.segments, plan.phase1_split) > kGretMaxSegments)
      --plan.phase1_split;
    const size_t wsb = gret_chunk_workspace_bytes(s, plan);
    DeviceArray<float> ws(std::max<size_t>(wsb / sizeof(float), 1));
    const __nv_bfloat16* base = qkv.ptr + t0 * p.stride;
    const bool gated = g_col >= 0 || g_col == kGOwnBuffer;
    const GretNormGate ng = g_col == kGOwnBuffer ? GretNormGate{own_g.ptr + t0 * own_stride, own_stride, 1e-5f}
                            : gated              ? GretNormGate{base + g_col, p.stride, 1e-5f}
                                                 : GretNormGate{nullptr, 0, 0.0f};
    __nv_bfloat16* out = o.ptr + t0 * p.H * p.D;
    EXPECT_EQ(launch_gret_chunk(base, base + p.H * p.D, base + 2 * p.H * p.D, lg.ptr + t0 * p.H, st.ptr, out, s, plan,
                                ws.ptr, wsb, nullptr, gated && !ng_after ? &ng : nullptr),
              cudaSuccess);
    if (gated && ng_after) {
      EXPECT_EQ(launch_gret_norm_gate(out, ng.g, ng.g_stride, p.B * n, p.H, p.D, ng.eps, out, nullptr), cudaSuccess);
    }
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    t0 += n;
  }
  return {download_bf16(o), download(st)};
}

GretChunkPlan variant_plan(const GretChunkShape& s, const GretChunkVariantRow& v) {
  return select_gret_chunk(s, 132, v.variant, v.chunk);
}

// YOCO_GRET_SKIP_V6=1 leaves v6 out of every test, GretChunkV6.Smoke too:
// scripts/gpu-suite.sh runs that smoke test alone first and sets it when it
// fails or hangs (v6's two role loops share a named barrier; a mismatch there
// hangs), so one broken kernel does not stall every other version's tests, the
// sanitizers and the bench, nor hang again when the whole binary runs.
// YOCO_GRET_SKIP_V7=1 does the same for v7 (the same barrier, 512 threads) and GretChunkV7.Smoke;
// test_cuda_models' chunk-kernel test reads both.
bool skipped_by(const char* var, const char* kernel) {
  const char* e = std::getenv(var);
  const bool skip = e != nullptr && *e != '\0' && std::string(e) != "0";
  if (skip) {
    static std::set<std::string> said;
    if (said.insert(var).second)
      std::printf("NOTE: %s is set: chunk kernel %s is left out of these tests\n", var, kernel);
  }
  return skip;
}
bool v6_skipped() { return skipped_by("YOCO_GRET_SKIP_V6", "v6"); }
bool v7_skipped() { return skipped_by("YOCO_GRET_SKIP_V7", "v7"); }
// The variants every test iterates: the library's table (gret/gret_select.hpp),
// v6 and v7 left out when skipped; chunk64_only: those at chunk 64.
std::vector<GretChunkVariantRow> test_variants(bool chunk64_only = false) {
  std::vector<GretChunkVariantRow> out;
  for (const GretChunkVariantRow& v : kGretChunkVariants)
    if (!(v.variant == GretChunkVariant::v6 && v6_skipped()) && !(v.variant == GretChunkVariant::v7 && v7_skipped()) &&
        !(chunk64_only && v.chunk != 64))
      out.push_back(v);
  return out;
}

struct Expected {
  std::vector<double> o, state;    // fp64 reference
  std::vector<double> em_o, em_s;  // host emulation of the kernel
};
// chunk: the emulated kernel's chunk (64 for v2/v3, 128 or 256 for v5).
Expected expected(const Problem& p, int chunk = 64) {
  Expected e;
  e.o.assign(static_cast<size_t>(p.B * p.N * p.H * p.D), 0.0);
  e.em_o = e.o;
  e.state.assign(p.s0.size(), 0.0);
  e.em_s = e.state;
  for (int64_t b = 0; b < p.B; ++b)
    for (int64_t h = 0; h < p.H; ++h) {
      const HeadInputs x = head_inputs(p, b, h, 0, p.N);
      const GretResult<double> r = gret_recurrent<double>(x.q, x.k, x.v, x.g, &x.s0);
      const GretEmulation m = gret_chunk_emulate(x.q, x.k, x.v, x.g, &x.s0, chunk);
      for (int64_t t = 0; t < p.N; ++t)
        for (int64_t d = 0; d < p.D; ++d) {
          const size_t i = static_cast<size_t>(((b * p.N + t) * p.H + h) * p.D + d);
          e.o[i] = r.o(t, d);
          e.em_o[i] = m.o(t, d);
        }
      for (int64_t i = 0; i < p.D * p.D; ++i) {
        e.state[static_cast<size_t>((b * p.H + h) * p.D * p.D + i)] = r.state.data()[i];
        e.em_s[static_cast<size_t>((b * p.H + h) * p.D * p.D + i)] = m.state.data()[i];
      }
    }
  return e;
}

// The last tokens of a long test's inputs, on the host: what its final state is made of.
struct StateTail {
  int64_t H = 0, D = 0, n = 0;
  std::vector<float> q, k, v;  // [n, H * D], bf16 values
  std::vector<float> g;        // [n, H]
};
constexpr int64_t kStateTail = 4096;

// Rows [N - kStateTail, N) of q, k, v ([N, row_stride] bf16 on the device, head h at columns h D) and
// of g ([N, H] on the host).
StateTail state_tail(const __nv_bfloat16* q, const __nv_bfloat16* k, const __nv_bfloat16* v, int64_t row_stride,
                     const std::vector<float>& g, int64_t N, int64_t H, int64_t D) {
  StateTail t{H, D, kStateTail, {}, {}, {}, {}};
  const int64_t W = H * D, t0 = N - kStateTail;
  std::vector<uint16_t> bits(static_cast<size_t>(kStateTail * W));
  for (auto [src, dst] : {std::pair{q, &t.q}, std::pair{k, &t.k}, std::pair{v, &t.v}}) {
    // W columns of each row only: where q, k and v interleave in one [N, 3W] buffer, whole rows from
    // k's or v's first column would run W or 2W elements past its end.
    const size_t width = static_cast<size_t>(W) * 2, pitch = static_cast<size_t>(row_stride) * 2;
    const cudaError_t err = cudaMemcpy2D(bits.data(), width, src + t0 * row_stride, pitch, width,
                                         static_cast<size_t>(kStateTail), cudaMemcpyDeviceToHost);
    EXPECT_EQ(err, cudaSuccess) << "copying the last " << kStateTail << " rows of q, k or v";
    dst->resize(static_cast<size_t>(kStateTail * W));
    for (size_t i = 0; i < bits.size(); ++i) (*dst)[i] = bf16_bits_to_float(bits[i]);
  }
  t.g.assign(g.begin() + t0 * H, g.begin() + N * H);
  return t;
}

// DESIGN.md 6's bound on a long test's final state against the fp32 recurrent oracle (128K-4M tokens:
// no fp64 reference runs there), on the test's own inputs: the short tests' bound, 2x the host
// emulation's error (what the kernels round) against the fp64 recurrence, RMS over every head as the
// test measures, plus the 1e-5 an fp32 recurrence may be off by (GretOracle.MatchesTheReferenceAt2K).
// The final state is the one the last kStateTail tokens make from a zero state, to within
// exp(their summed log gammas) of the state entering them: both run over that tail alone, and the
// sum must forget (below e^-40, 4e-18 of the state) for the bound to stand.
double derived_state_bound(const StateTail& t, int chunk) {
  std::vector<double> emulated(static_cast<size_t>(t.H * t.D * t.D)), exact(emulated.size());
  std::vector<double> forgets(static_cast<size_t>(t.H));
  parallel_for(t.H, [&](int64_t h) {
    Mat<double> q(t.n, t.D), k(t.n, t.D), v(t.n, t.D);
    Vec<double> g(t.n);
    double sum = 0;
    for (int64_t r = 0; r < t.n; ++r) {
      for (int64_t d = 0; d < t.D; ++d) {
        const size_t i = static_cast<size_t>(r * t.H * t.D + h * t.D + d);
        q(r, d) = t.q[i];
        k(r, d) = t.k[i];
        v(r, d) = t.v[i];
      }
      g(r) = t.g[static_cast<size_t>(r * t.H + h)];
      sum += g(r);
    }
    forgets[static_cast<size_t>(h)] = sum;
    const GretResult<double> rec = gret_recurrent<double>(q, k, v, g, nullptr);
    const GretEmulation em = gret_chunk_emulate(q, k, v, g, nullptr, chunk);
    for (int64_t i = 0; i < t.D * t.D; ++i) {
      exact[static_cast<size_t>(h * t.D * t.D + i)] = rec.state.data()[i];
      emulated[static_cast<size_t>(h * t.D * t.D + i)] = em.state.data()[i];
    }
  });
  const double weakest = *std::max_element(forgets.begin(), forgets.end());
  if (weakest >= -40.0)  // said, not failed, as long as the bound is only reported (report_derived_bound)
    std::printf("[derived bound] not derived: the last %lld tokens of a head sum their log gammas to %.1f, "
                "which does not forget the state before them\n",
                static_cast<long long>(t.n), weakest);
  return 2.0 * rms_error(emulated, exact) + 1e-5;
}

std::vector<int> slice_options(int64_t D) {
  std::vector<int> s;
  for (int c : {16, 32, 64})
    if (gret_slice_supported(D, c)) s.push_back(c);
  return s;
}

TEST(GretChunk, ShortLengthsMatchTheReference) {
  YOCO_REQUIRE_GPU();
  int case_id = 0;
  for (int64_t D : {64, 128, 256})
    for (int64_t N : {1, 63, 64, 65, 1000, 4096})
      for (double tau : {0.1, 1.0, 16.0, 0.0}) {
        if (N == 4096 && tau != 16.0) continue;  // the long case once per head dim
        const bool with_state = (case_id % 2) == 1 || N == 4096;
        const auto opts = slice_options(D);
        const int slice = opts[static_cast<size_t>(case_id) % opts.size()];
        ++case_id;
        const int64_t B = (case_id % 2) ? 3 : 1;  // batch 1 and 3
        const int segs = std::vector<int>{1, 2, 3, 7}[static_cast<size_t>(case_id / 2) % 4];
        const Problem p = make_problem(B, 2, D, N, tau, with_state, 100 + case_id);
        const Expected e = expected(p);
        const double bound_o = std::max(2.0 * rms_error(e.em_o, e.o), bf16_output_bound(e.o));
        const double bound_s = 2.0 * rms_error(e.em_s, e.state) + 1e-5;
        for (const GretChunkVariantRow& variant : test_variants(true)) {
          const int kernel = variant.plan_kernel;
          if (kernel >= 3 && !gret_v3_supported(D)) continue;
          const DeviceRun got = run_chunk(p, slice, {N}, segs, kernel);
          const double err_o = rms_error(got.o, e.o), err_s = rms_error(got.state, e.state);
          EXPECT_LE(err_o, bound_o) << "v" << kernel << " D " << D << " N " << N << " tau " << tau << " state "
                                    << with_state << " slice " << slice << " B " << B << " P " << segs;
          EXPECT_LE(err_s, bound_s) << "v" << kernel << " D " << D << " N " << N << " tau " << tau << " state "
                                    << with_state << " slice " << slice << " B " << B << " P " << segs;
        }
      }
}

TEST(GretChunk, EverySliceWidthGivesTheSameBits) {
  YOCO_REQUIRE_GPU();
  for (int64_t D : {64, 128, 256}) {
    const Problem p = make_problem(2, 3, D, 777, 1.0, true, 7 + D);
    const auto opts = slice_options(D);
    const DeviceRun first = run_chunk(p, opts[0], {p.N});
    for (size_t i = 1; i < opts.size(); ++i) {
      const DeviceRun other = run_chunk(p, opts[i], {p.N});
      EXPECT_EQ(std::memcmp(first.o.data(), other.o.data(), first.o.size() * sizeof(float)), 0) << D << " " << opts[i];
      EXPECT_EQ(std::memcmp(first.state.data(), other.state.data(), first.state.size() * sizeof(float)), 0)
          << D << " " << opts[i];
    }
  }
}

// v3 (full-width CTAs) performs the same fp32/bf16 operations in the same
// order as v2 (the same mma.sync per 16x8 tile, k-blocks accumulated in the
// same order, the same factored decays): its output and state should equal
// v2's bit for bit. (If only this test fails while every bound holds, the
// compilers contracted something differently: a finding, not a wrong result.)
// v3 computes the same function as v2 by another algorithm (the
// state update scales K, not V; other tile splits), and v6 by wgmma (another
// summation order, unfactored decays), so they are compared within the
// DESIGN §6 bound, not bit for bit.
TEST(GretChunk, V3EqualsV2WithinTheBound) {
  YOCO_REQUIRE_GPU();
  for (int P : {1, 3}) {
    const Problem p = make_problem(2, 3, 128, 777, 1.0, true, 8 + P);
    const Expected e = expected(p);
    const double bound_o = std::max(2.0 * rms_error(e.em_o, e.o), bf16_output_bound(e.o));
    const double bound_s = 2.0 * rms_error(e.em_s, e.state) + 1e-5;
    const DeviceRun v2 = run_chunk(p, 32, {p.N}, P, 2);
    for (const GretChunkVariantRow& variant : test_variants(true)) {
      const int kernel = variant.plan_kernel;
      if (kernel == 2) continue;  // the baseline
      const DeviceRun v3 = run_chunk(p, 128, {p.N}, P, kernel);
      const auto tag = ::testing::Message() << "v" << kernel << " P " << P;
      EXPECT_LE(rms_error(v3.o, std::vector<double>(v2.o.begin(), v2.o.end())), bound_o) << tag;
      EXPECT_LE(rms_error(v3.state, std::vector<double>(v2.state.begin(), v2.state.end())), bound_s) << tag;
      EXPECT_LE(rms_error(v3.o, e.o), bound_o) << tag;
      EXPECT_LE(rms_error(v3.state, e.state), bound_s) << tag;
    }
  }
}

// Segments P in {2, 3, 7} equal P = 1 (and the fp64 reference) within the
// DESIGN §6 bound, at lengths that are not multiples of P*64, batch 1 and 3.
TEST(GretChunk, SegmentsEqualOneSegment) {
  YOCO_REQUIRE_GPU();
  int id = 0;
  for (int64_t B : {1, 3})
    for (int64_t N : {65, 1000, 4097}) {
      const int64_t D = (id % 3 == 2) ? 64 : 128;
      const Problem p = make_problem(B, 2, D, N, id % 2 ? 16.0 : 0.1, true, 300 + id);
      ++id;
      const Expected e = expected(p);
      const double bound_o = std::max(2.0 * rms_error(e.em_o, e.o), bf16_output_bound(e.o));
      const double bound_s = 2.0 * rms_error(e.em_s, e.state) + 1e-5;
      const DeviceRun one = run_chunk(p, 32, {N}, 1);
      for (const GretChunkVariantRow& variant : test_variants(true)) {
        const int kernel = variant.plan_kernel;
        if (kernel >= 3 && !gret_v3_supported(D)) continue;
        for (int P : {1, 2, 3, 7}) {
          if (kernel == 2 && P == 1) continue;  // `one`
          // v6 with the plan's split, v3 with a forced one (the split is launch logic, any kernel)
          const DeviceRun seg = run_chunk(p, 32, {N}, P, kernel, 64, kernel == 3 ? 2 : 0);
          const auto tag = ::testing::Message() << "v" << kernel << " B " << B << " N " << N << " D " << D << " P " << P;
          EXPECT_LE(rms_error(seg.o, e.o), bound_o) << tag;
          EXPECT_LE(rms_error(seg.o, one.o), bound_o) << tag;
          EXPECT_LE(rms_error(seg.state, e.state), bound_s) << tag;
          EXPECT_LE(rms_error(seg.state, one.state), bound_s) << tag;
        }
      }
    }
}

// v5 (chunks of 128 and 256 tokens, head_dim 128) against the fp64 reference
// with the bound of its own emulation (chunk C): lengths around the chunk
// edges, every gate strength, with and without an initial state, batch 1 and
// 3, segments 1/2/3/7; and against v3 (chunk 64: the same function).
TEST(GretChunk, LongChunksMatchTheReference) {
  YOCO_REQUIRE_GPU();
  int id = 0;
  for (int C : {128, 256})
    for (int64_t N : {int64_t{1}, int64_t{63}, int64_t{64}, int64_t{65}, int64_t{C - 1}, int64_t{C}, int64_t{C + 1},
                      int64_t{1000}, int64_t{4096}})
      for (double tau : {0.1, 1.0, 16.0, 0.0}) {
        if (N == 4096 && tau != 16.0) continue;  // the long case once per chunk
        ++id;
        const bool with_state = (id % 2) == 1 || N == 4096;
        const int64_t B = (id % 3) == 0 ? 3 : 1;
        const int segs = std::vector<int>{1, 2, 3, 7}[static_cast<size_t>(id) % 4];
        const Problem p = make_problem(B, 2, 128, N, tau, with_state, 1300 + id);
        const Expected e = expected(p, C);
        const double bound_o = std::max(2.0 * rms_error(e.em_o, e.o), bf16_output_bound(e.o));
        const double bound_s = 2.0 * rms_error(e.em_s, e.state) + 1e-5;
        const DeviceRun got = run_chunk(p, 128, {N}, segs, 5, C);
        const auto tag = ::testing::Message() << "C " << C << " N " << N << " tau " << tau << " state " << with_state
                                              << " B " << B << " P " << segs;
        EXPECT_LE(rms_error(got.o, e.o), bound_o) << tag;
        EXPECT_LE(rms_error(got.state, e.state), bound_s) << tag;
        if (N == 1000) {  // the same function as chunk 64 (v3), within the larger of the two bounds
          const Expected e64 = expected(p, 64);
          const double b64 = std::max(bound_o, 2.0 * rms_error(e64.em_o, e64.o));
          const DeviceRun v3 = run_chunk(p, 128, {N}, segs, 3);
          EXPECT_LE(rms_error(got.o, std::vector<double>(v3.o.begin(), v3.o.end())), b64) << tag;
        }
      }
}

// Paradigm equivalence on the GPU: the chunk kernel over a prefix, then decode
// steps (launch_gret_recurrent_step) equals the chunk kernel over the whole
// sequence and the fp64 CPU reference.
TEST(GretChunk, PrefillThenDecodeEqualsOnePass) {
  YOCO_REQUIRE_GPU();
  const int64_t B = 1, H = 3, D = 128, N0 = 1000, M = 48, N = N0 + M, HD = H * D;
  const Problem p = make_problem(B, H, D, N, 16.0, true, 77);
  for (const GretChunkVariantRow& variant : test_variants()) {
    const int kernel = variant.plan_kernel, chunk = variant.chunk;
    const Expected e = expected(p, chunk);
    const DeviceRun whole = run_chunk(p, kernel >= 3 ? 128 : 32, {N}, 3, kernel, chunk);
    DeviceArray<__nv_bfloat16> qkv(p.qkv.size()), o(static_cast<size_t>(N * HD));
    DeviceArray<float> lg(p.lg.size()), st(p.s0.size());
    upload_bf16(qkv, p.qkv);
    upload(lg, p.lg);
    upload(st, p.s0);
    GretChunkShape s{B, H, D, N0, p.stride};
    GretChunkPlan plan = variant_plan(s, variant);
    EXPECT_EQ(plan.kernel, kernel);
    plan.segments = 3;
    const size_t wsb = gret_chunk_workspace_bytes(s, plan);
    DeviceArray<float> ws(wsb / sizeof(float));
    ASSERT_EQ(launch_gret_chunk(qkv.ptr, qkv.ptr + HD, qkv.ptr + 2 * HD, lg.ptr, st.ptr, o.ptr, s, plan, ws.ptr, wsb,
                                nullptr),
              cudaSuccess);
    for (int64_t t = N0; t < N; ++t) {
      const __nv_bfloat16* row = qkv.ptr + t * p.stride;
      ASSERT_EQ(launch_gret_recurrent_step(row, row + HD, row + 2 * HD, p.stride, lg.ptr + t * H, st.ptr, o.ptr + t * HD,
                                           B, H, D, nullptr),
                cudaSuccess);
    }
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    const std::vector<float> got_o = download_bf16(o), got_s = download(st);
    const double bound_o = std::max(2.0 * rms_error(e.em_o, e.o), bf16_output_bound(e.o));
    const double bound_s = 2.0 * rms_error(e.em_s, e.state) + 1e-5;
    EXPECT_LE(rms_error(got_o, e.o), bound_o) << variant.name;
    EXPECT_LE(rms_error(got_s, e.state), bound_s) << variant.name;
    EXPECT_LE(rms_error(got_o, whole.o), bound_o) << variant.name;
    EXPECT_LE(rms_error(got_s, whole.state), bound_s) << variant.name;
    // the decoded rows alone
    std::vector<double> dec_want(e.o.begin() + N0 * HD, e.o.end());
    std::vector<float> dec_got(got_o.begin() + N0 * HD, got_o.end());
    EXPECT_LE(rms_error(dec_got, dec_want), std::max(bound_o, bf16_output_bound(dec_want)))
        << variant.name;
  }
}

TEST(GretChunk, SplitPrefillEqualsOneLaunch) {
  YOCO_REQUIRE_GPU();
  const Problem p = make_problem(1, 3, 128, 4097, 16.0, true, 41);
  const Expected e = expected(p);
  const DeviceRun one = run_chunk(p, 32, {4097});
  const DeviceRun split = run_chunk(p, 32, {1000, 3097});
  const DeviceRun odd = run_chunk(p, 32, {1, 63, 65, 3968}, 2);
  const DeviceRun one3 = run_chunk(p, 128, {4097}, 1, 3);
  const DeviceRun split3 = run_chunk(p, 128, {1000, 3097}, 1, 3);
  const DeviceRun odd3 = run_chunk(p, 128, {1, 63, 65, 3968}, 2, 3);
  const int k6 = v6_skipped() ? 3 : 6;  // v3 stands in when v6 is left out
  const DeviceRun one6 = run_chunk(p, 128, {4097}, 1, k6);
  const DeviceRun split6 = run_chunk(p, 128, {1000, 3097}, 4, k6);
  const DeviceRun odd6 = run_chunk(p, 128, {1, 63, 65, 3968}, 2, k6);
  const double bound_o = std::max(2.0 * rms_error(e.em_o, e.o), bf16_output_bound(e.o));
  const double bound_s = 2.0 * rms_error(e.em_s, e.state) + 1e-5;
  int idx = 0;
  for (const DeviceRun* r : {&one, &split, &odd, &one3, &split3, &odd3, &one6, &split6, &odd6}) {
    EXPECT_LE(rms_error(r->o, e.o), bound_o) << "run " << idx;
    EXPECT_LE(rms_error(r->state, e.state), bound_s) << "run " << idx;
    ++idx;
  }
  EXPECT_LE(rms_error(split.o, one.o), bound_o);
  EXPECT_LE(rms_error(split3.o, one3.o), bound_o);
  EXPECT_LE(rms_error(split6.o, one6.o), bound_o);
  // v5: launches that cut chunks of 128 / 256 anywhere (the bound of its own emulation)
  for (int C : {128, 256}) {
    const Expected e5 = expected(p, C);
    const double b5o = std::max(2.0 * rms_error(e5.em_o, e5.o), bf16_output_bound(e5.o));
    const double b5s = 2.0 * rms_error(e5.em_s, e5.state) + 1e-5;
    const DeviceRun one5 = run_chunk(p, 128, {4097}, 1, 5, C);
    const DeviceRun split5 = run_chunk(p, 128, {1000, 3097}, 2, 5, C);
    const DeviceRun odd5 = run_chunk(p, 128, {1, 63, 65, C - 1, 4097 - 128 - C}, 3, 5, C);
    for (const DeviceRun* r : {&one5, &split5, &odd5}) {
      EXPECT_LE(rms_error(r->o, e5.o), b5o) << "C " << C;
      EXPECT_LE(rms_error(r->state, e5.state), b5s) << "C " << C;
    }
    EXPECT_LE(rms_error(split5.o, one5.o), b5o) << "C " << C;
  }
}

// The wgmma kernels first, each under a short timeout in scripts/gpu-suite.sh
// (their two role loops share a named barrier: a mismatch hangs): one and
// three segments (phase 1 on 1, 2 and 3 finer segments each), a ragged last
// chunk, an incoming state, batch 1 and 2, against the fp64 reference with the
// DESIGN §6 bound.
static void smoke_against_the_reference(int kernel, uint64_t seed) {
  int id = 0;
  for (int64_t B : {1, 2})
    for (auto [P, Q] : {std::pair{1, 1}, std::pair{3, 1}, std::pair{3, 2}, std::pair{3, 3}}) {
      const Problem p = make_problem(B, 2, 128, 1000, id % 2 ? 1.0 : 16.0, true, seed + id);
      ++id;
      const Expected e = expected(p);
      const double bound_o = std::max(2.0 * rms_error(e.em_o, e.o), bf16_output_bound(e.o));
      const double bound_s = 2.0 * rms_error(e.em_s, e.state) + 1e-5;
      const DeviceRun got = run_chunk(p, 128, {p.N}, P, kernel, 64, Q);
      EXPECT_LE(rms_error(got.o, e.o), bound_o) << "v" << kernel << " B " << B << " P " << P << " Q " << Q;
      EXPECT_LE(rms_error(got.state, e.state), bound_s) << "v" << kernel << " B " << B << " P " << P << " Q " << Q;
    }
}

TEST(GretChunkV6, Smoke) {
  YOCO_REQUIRE_GPU();
  if (v6_skipped()) GTEST_SKIP() << "YOCO_GRET_SKIP_V6 is set";
  smoke_against_the_reference(6, 2100);
}

// v7 (v6 with two output warpgroups), the same way under a timeout of its own.
TEST(GretChunkV7, Smoke) {
  YOCO_REQUIRE_GPU();
  if (v7_skipped()) GTEST_SKIP() << "YOCO_GRET_SKIP_V7 is set";
  smoke_against_the_reference(7, 2200);
}

// The per-head norm and gate as part of the chunk launch (GretNormGate):
// kernel 6 in its epilogue, every other kernel (and kernel 6 with a g that is
// not 16-byte aligned) by the norm + gate kernel after the chunk; either way
// the launch then the norm + gate kernel's bits. Ragged last chunk, batch 1
// and 2, one and three segments, head dims 64 and 128, g inside the row (v's
// columns: 16-byte aligned; or 4 columns on: 8-byte aligned) and in a buffer
// of its own with another row stride; two launches carrying the state (the
// norm and gate of each launch's rows). A null g or a short g stride is
// refused; no tokens stay a no-op.
TEST(GretChunk, NormGateInTheLaunchEqualsTheKernelAfterIt) {
  YOCO_REQUIRE_GPU();
  int id = 0;
  for (const GretChunkVariantRow& variant : test_variants(true))
    for (int64_t D : {64, 128}) {
      const int kernel = variant.plan_kernel;
      if (kernel >= 3 && !gret_v3_supported(D)) continue;
      for (int64_t B : {1, 2})
        for (int P : {1, 3}) {
          const Problem p = make_problem(B, 2, D, 1000, id % 2 ? 1.0 : 16.0, true, 2300 + id);
          ++id;
          const DeviceRun plain = run_chunk(p, 32, {p.N}, P, kernel, 64);
          for (int64_t g_col : {2 * p.H * p.D, 2 * p.H * p.D + 4, kGOwnBuffer}) {
            const auto tag = ::testing::Message() << "v" << kernel << " D " << D << " B " << B << " P " << P
                                                  << " g at column " << g_col;
            const DeviceRun after = run_chunk(p, 32, {p.N}, P, kernel, 64, 0, g_col, true);
            const DeviceRun in = run_chunk(p, 32, {p.N}, P, kernel, 64, 0, g_col, false);
            EXPECT_EQ(std::memcmp(in.o.data(), after.o.data(), in.o.size() * sizeof(float)), 0) << tag;
            EXPECT_EQ(std::memcmp(in.state.data(), plain.state.data(), in.state.size() * sizeof(float)), 0) << tag;
            EXPECT_NE(std::memcmp(in.o.data(), plain.o.data(), in.o.size() * sizeof(float)), 0)
                << tag << ": the norm and gate were not applied";
            for (float x : in.o) ASSERT_TRUE(std::isfinite(x)) << tag;
          }
          if (B == 1 && P == 1) {  // split launches need batch 1
            const DeviceRun after = run_chunk(p, 32, {333, p.N - 333}, 1, kernel, 64, 0, 2 * p.H * p.D, true);
            const DeviceRun in = run_chunk(p, 32, {333, p.N - 333}, 1, kernel, 64, 0, 2 * p.H * p.D, false);
            EXPECT_EQ(std::memcmp(in.o.data(), after.o.data(), in.o.size() * sizeof(float)), 0)
                << "v" << kernel << " D " << D << ": two launches";
          }
        }
    }
  DeviceArray<__nv_bfloat16> x(4 * 2 * 128 * 16);
  DeviceArray<float> f(4096);
  const GretChunkShape s{1, 2, 128, 16, 4 * 2 * 128};
  const GretChunkPlan plan = select_gret_chunk(s, 132);
  const GretNormGate null_g{nullptr, s.row_stride, 1e-5f}, short_stride{x.ptr + 3 * 256, 255, 1e-5f};
  EXPECT_EQ(launch_gret_chunk(x.ptr, x.ptr + 256, x.ptr + 512, f.ptr, f.ptr + 64, x.ptr, s, plan, nullptr, 0, nullptr,
                              &null_g),
            cudaErrorInvalidValue);
  EXPECT_EQ(launch_gret_chunk(x.ptr, x.ptr + 256, x.ptr + 512, f.ptr, f.ptr + 64, x.ptr, s, plan, nullptr, 0, nullptr,
                              &short_stride),
            cudaErrorInvalidValue);
  GretChunkShape empty = s;
  empty.seq_len = 0;
  const GretNormGate ok{x.ptr + 3 * 256, s.row_stride, 1e-5f};
  EXPECT_EQ(launch_gret_chunk(x.ptr, x.ptr + 256, x.ptr + 512, f.ptr, f.ptr + 64, x.ptr, empty, plan, nullptr, 0,
                              nullptr, &ok),
            cudaSuccess);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
}

// Kernel 6 applies the norm and gate in its own kernel: a captured launch has
// one kernel node at one segment with an aligned g, two with a g it cannot
// take in 16-byte pieces (the norm kernel after it), and so does kernel 2.
// (The bit-equality test above cannot tell the two paths apart.)
TEST(GretChunk, V6FusesTheNormAndGateIntoItsKernel) {
  YOCO_REQUIRE_GPU();
  if (v6_skipped()) GTEST_SKIP() << "YOCO_GRET_SKIP_V6 is set";
  const int64_t H = 2, D = 128, N = 100, W = H * D, stride = 4 * W;  // q | k | v | g
  DeviceArray<__nv_bfloat16> x(static_cast<size_t>(N * stride) + 8), o(static_cast<size_t>(N * W));
  DeviceArray<float> lg(static_cast<size_t>(N * H)), st(static_cast<size_t>(H * D * D));
  const GretChunkShape s{1, H, D, N, stride};
  GretChunkPlan v6 = plan_gret_chunk_v6(s, 132), v2 = plan_gret_chunk_v2(s, 132);
  v6.segments = v2.segments = 1;
  v6.phase1_split = 1;
  const GretNormGate aligned{x.ptr + 3 * W, stride, 1e-5f}, shifted{x.ptr + 3 * W + 4, stride, 1e-5f};
  EXPECT_FALSE(gret_chunk_fuses_norm_gate(v6, aligned)) << "no planner fuses it: run-17 measured it slower";
  v6.fuse_norm_gate = true;
  EXPECT_TRUE(gret_chunk_fuses_norm_gate(v6, aligned));
  EXPECT_FALSE(gret_chunk_fuses_norm_gate(v6, shifted));
  EXPECT_FALSE(gret_chunk_fuses_norm_gate(v2, aligned));
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  auto kernels_of = [&](const GretChunkPlan& plan, const GretNormGate& ng) {
    cudaGraph_t graph = nullptr;
    EXPECT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), cudaSuccess);
    EXPECT_EQ(launch_gret_chunk(x.ptr, x.ptr + W, x.ptr + 2 * W, lg.ptr, st.ptr, o.ptr, s, plan, nullptr, 0, stream,
                                &ng),
              cudaSuccess);
    EXPECT_EQ(cudaStreamEndCapture(stream, &graph), cudaSuccess);
    size_t nodes = 0;
    EXPECT_EQ(cudaGraphGetNodes(graph, nullptr, &nodes), cudaSuccess);
    cudaGraphDestroy(graph);
    return nodes;
  };
  EXPECT_EQ(kernels_of(v6, aligned), 1u) << "kernel 6 with an aligned g: the norm and gate in its epilogue";
  EXPECT_EQ(kernels_of(v6, shifted), 2u) << "a g kernel 6 cannot take: the norm kernel after it";
  EXPECT_EQ(kernels_of(v2, aligned), 2u) << "kernel 2: the norm kernel after it";
  cudaStreamDestroy(stream);
}

TEST(GretChunk, RejectsBadArguments) {
  YOCO_REQUIRE_GPU();
  DeviceArray<__nv_bfloat16> x(4096);
  DeviceArray<float> f(4096);
  GretChunkShape s{1, 1, 64, 8, 64};
  const GretChunkPlan ok = plan_gret_chunk_v2(s, 132);
  EXPECT_EQ(launch_gret_chunk(nullptr, x.ptr, x.ptr, f.ptr, f.ptr, x.ptr, s, ok, nullptr), cudaErrorInvalidValue);
  GretChunkShape bad = s;
  bad.head_dim = 96;
  EXPECT_EQ(launch_gret_chunk(x.ptr, x.ptr, x.ptr, f.ptr, f.ptr, x.ptr, bad, ok, nullptr), cudaErrorInvalidValue);
  bad = s;
  bad.row_stride = 60;
  EXPECT_EQ(launch_gret_chunk(x.ptr, x.ptr, x.ptr, f.ptr, f.ptr, x.ptr, bad, ok, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(launch_gret_chunk(x.ptr + 1, x.ptr, x.ptr, f.ptr, f.ptr, x.ptr, s, ok, nullptr), cudaErrorInvalidValue);
  GretChunkPlan badp = ok;
  badp.chunk = 128;
  EXPECT_EQ(launch_gret_chunk(x.ptr, x.ptr, x.ptr, f.ptr, f.ptr, x.ptr, s, badp, nullptr), cudaErrorInvalidValue);
  GretChunkPlan segp = ok;
  segp.segments = 2;  // segments need a workspace
  EXPECT_EQ(launch_gret_chunk(x.ptr, x.ptr, x.ptr, f.ptr, f.ptr, x.ptr, s, segp, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(launch_gret_chunk(x.ptr, x.ptr, x.ptr, f.ptr, f.ptr, x.ptr, s, segp, f.ptr, 16, nullptr),
            cudaErrorInvalidValue);  // too small
  segp.segments = kGretMaxSegments + 1;
  EXPECT_EQ(launch_gret_chunk(x.ptr, x.ptr, x.ptr, f.ptr, f.ptr, x.ptr, s, segp, f.ptr, 4 * 4096, nullptr),
            cudaErrorInvalidValue);
  GretChunkPlan v3p = plan_gret_chunk_v3(GretChunkShape{1, 1, 128, 8, 128}, 132);
  EXPECT_EQ(v3p.kernel, 3);
  EXPECT_EQ(launch_gret_chunk(x.ptr, x.ptr, x.ptr, f.ptr, f.ptr, x.ptr, s, v3p, nullptr),
            cudaErrorInvalidValue);  // v3 needs head_dim 128 (s has 64)
  v3p.slices = 4;
  v3p.slice_cols = 32;
  EXPECT_EQ(launch_gret_chunk(x.ptr, x.ptr, x.ptr, f.ptr, f.ptr, x.ptr, GretChunkShape{1, 1, 128, 8, 128}, v3p, nullptr),
            cudaErrorInvalidValue);  // v3 is full width
  GretChunkPlan v5p = plan_gret_chunk_v5(GretChunkShape{1, 1, 128, 8, 128}, 132, 128);
  EXPECT_EQ(v5p.kernel, 5);
  EXPECT_EQ(launch_gret_chunk(x.ptr, x.ptr, x.ptr, f.ptr, f.ptr, x.ptr, s, v5p, nullptr),
            cudaErrorInvalidValue);  // v5 needs head_dim 128 (s has 64)
  v5p.chunk = 512;
  EXPECT_EQ(launch_gret_chunk(x.ptr, x.ptr, x.ptr, f.ptr, f.ptr, x.ptr, GretChunkShape{1, 1, 128, 8, 128}, v5p, nullptr),
            cudaErrorInvalidValue);  // chunks of 128 and 256 only
  GretChunkPlan v6p = plan_gret_chunk_v6(GretChunkShape{1, 1, 128, 8, 128}, 132);
  EXPECT_EQ(v6p.kernel, 6);
  EXPECT_EQ(launch_gret_chunk(x.ptr, x.ptr, x.ptr, f.ptr, f.ptr, x.ptr, s, v6p, nullptr),
            cudaErrorInvalidValue);  // v6 needs head_dim 128 (s has 64)
  v6p.chunk = 128;
  EXPECT_EQ(launch_gret_chunk(x.ptr, x.ptr, x.ptr, f.ptr, f.ptr, x.ptr, GretChunkShape{1, 1, 128, 8, 128}, v6p, nullptr),
            cudaErrorInvalidValue);  // chunk 64 only
  v6p.chunk = 64;
  EXPECT_EQ(launch_gret_chunk(x.ptr, x.ptr, x.ptr, f.ptr, f.ptr, x.ptr + 2, GretChunkShape{1, 1, 128, 8, 128}, v6p,
                              nullptr),
            cudaErrorInvalidValue);  // o 4-byte but not 16-byte aligned: v6 stores 16-byte pieces
  s.seq_len = 0;  // nothing to do, state untouched
  EXPECT_EQ(launch_gret_chunk(x.ptr, x.ptr, x.ptr, f.ptr, f.ptr, x.ptr, s, ok, nullptr), cudaSuccess);
}

TEST(GretOracle, MatchesTheReferenceAt2K) {
  YOCO_REQUIRE_GPU();
  for (int64_t D : {64, 128, 256}) {
    const Problem p = make_problem(2, 2, D, 2048, 16.0, true, 900 + D);
    const Expected e = expected(p);
    DeviceArray<__nv_bfloat16> qkv(p.qkv.size());
    DeviceArray<float> lg(p.lg.size()), st(p.s0.size()), o(static_cast<size_t>(p.B * p.N * p.H * p.D));
    upload_bf16(qkv, p.qkv);
    upload(lg, p.lg);
    upload(st, p.s0);
    EXPECT_EQ(launch_gret_recurrent_oracle(qkv.ptr, qkv.ptr + p.H * D, qkv.ptr + 2 * p.H * D, lg.ptr, st.ptr, st.ptr,
                                           o.ptr, p.B, p.H, D, p.N, p.stride, nullptr),
              cudaSuccess);
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    EXPECT_LE(rms_error(download(o), e.o), 1e-5) << D;
    EXPECT_LE(rms_error(download(st), e.state), 1e-5) << D;
  }
}

// 128K tokens, yoco-3b layer shape, GPU against GPU. Inputs from a fast
// counter hash (uniform, not Gaussian) so the host builds 2.4 GB quickly.
TEST(GretChunk, MatchesTheOracleAt128K) {
  YOCO_REQUIRE_GPU();
  const int64_t B = 1, H = 24, D = 128, N = 131072, W = H * D, stride = 3 * W;
  std::vector<uint16_t> bits(static_cast<size_t>(B * N * stride));
  const float ks = 1.0f / std::sqrt(static_cast<float>(D));
  uint64_t x = 0x9e3779b97f4a7c15ULL;
  for (size_t i = 0; i < bits.size(); i += 4) {
    x += 0x9e3779b97f4a7c15ULL;
    uint64_t z = x;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    z ^= z >> 31;
    for (size_t j = 0; j < 4 && i + j < bits.size(); ++j) {
      const float u = (static_cast<float>((z >> (16 * j)) & 0xffff) / 32768.0f - 1.0f) * 1.7f;
      const int64_t col = static_cast<int64_t>((i + j) % static_cast<size_t>(stride));
      bits[i + j] = float_to_bf16_bits(col >= W && col < 2 * W ? u * ks : u);
    }
  }
  DeviceArray<__nv_bfloat16> qkv(bits.size());
  ASSERT_EQ(cudaMemcpy(qkv.ptr, bits.data(), bits.size() * 2, cudaMemcpyHostToDevice), cudaSuccess);
  bits.clear();
  bits.shrink_to_fit();
  std::mt19937_64 rng(3);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (double tau : {16.0, 0.1}) {  // weak (the model's) and strong decays
    std::vector<float> g(static_cast<size_t>(B * N * H));
    for (auto& v : g) v = static_cast<float>(logsigmoid(static_cast<double>(nd(rng))) / tau);
    std::vector<float> s0(static_cast<size_t>(B * H * D * D));
    for (auto& v : s0) v = nd(rng);
    DeviceArray<float> lg(g.size()), st_o(s0.size()), st_c(s0.size()), o_ref(static_cast<size_t>(B * N * W));
    DeviceArray<__nv_bfloat16> o(static_cast<size_t>(B * N * W));
    upload(lg, g);
    upload(st_o, s0);
    upload(st_c, s0);
    ASSERT_EQ(launch_gret_recurrent_oracle(qkv.ptr, qkv.ptr + W, qkv.ptr + 2 * W, lg.ptr, st_o.ptr, st_o.ptr, o_ref.ptr,
                                           B, H, D, N, stride, nullptr),
              cudaSuccess);
    GretChunkShape s{B, H, D, N, stride};
    const std::vector<float> want_f = download(o_ref);
    const std::vector<double> want(want_f.begin(), want_f.end());
    const std::vector<float> want_s = download(st_o);
    const StateTail tail = state_tail(qkv.ptr, qkv.ptr + W, qkv.ptr + 2 * W, stride, g, N, H, D);
    std::map<int, double> state_bound;  // by chunk
    // The emulation's output error is consistently ~1.4x the output rounding
    // (test_gret_plan); 2x that is 2.8x: use 3x the output rounding.
    const double bound_o = 1.5 * bf16_output_bound(want);
    for (const GretChunkVariantRow& variant : test_variants()) {  // the same inputs and oracle for every variant
      const GretChunkPlan plan = variant_plan(s, variant);
      EXPECT_EQ(plan.kernel, variant.plan_kernel);
      const int kernel = variant.plan_kernel;
      EXPECT_GT(plan.segments, 1);
      const size_t wsb = gret_chunk_workspace_bytes(s, plan);
      DeviceArray<float> ws(wsb / sizeof(float));
      if (kernel >= 3) {  // fresh incoming state, poisoned output
        upload(st_c, s0);
        ASSERT_EQ(cudaMemset(o.ptr, 0xff, o.n * sizeof(__nv_bfloat16)), cudaSuccess);
      }
      ASSERT_EQ(launch_gret_chunk(qkv.ptr, qkv.ptr + W, qkv.ptr + 2 * W, lg.ptr, st_c.ptr, o.ptr, s, plan, ws.ptr,
                                  wsb, nullptr),
                cudaSuccess);
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      const std::vector<float> got = download_bf16(o);
      EXPECT_LE(rms_error(got, want), bound_o) << variant.name << " tau " << tau;
      const double err_s = rms_error(download(st_c), want_s);
      const std::string what = std::string(variant.name) + ": state vs the oracle, tau " + std::to_string(tau);
      expect_within_interim_bound(err_s, 5e-3, what);
      if (!state_bound.count(plan.chunk)) state_bound[plan.chunk] = derived_state_bound(tail, plan.chunk);
      report_derived_bound(err_s, state_bound[plan.chunk], what);
    }
  }
}

// 1M tokens, one yoco-3b gRet layer (24 heads x 128, batch 1), inputs
// generated on the device (q, k, v in separate [N, H*D] buffers, 19 GB), the
// planner's segmented launch against the fp32 recurrent oracle: the final
// state of every head, and sampled output rows, including rows past token
// 699,050 where q/o element offsets pass 2^31 (KERNELS.md §5 row 1).
TEST(GretChunk, MatchesTheOracleAt1M) {
  YOCO_REQUIRE_GPU();
  const int64_t B = 1, H = 24, D = 128, N = 1048576, W = H * D;
  DeviceArray<__nv_bfloat16> q(static_cast<size_t>(N * W)), k(static_cast<size_t>(N * W)), v(static_cast<size_t>(N * W));
  ASSERT_EQ(launch_fill_normal_bf16(q.ptr, N * W, 11, 1.0f, nullptr), cudaSuccess);
  ASSERT_EQ(launch_fill_normal_bf16(k.ptr, N * W, 12, 1.0f / std::sqrt(static_cast<float>(D)), nullptr), cudaSuccess);
  ASSERT_EQ(launch_fill_normal_bf16(v.ptr, N * W, 13, 1.0f, nullptr), cudaSuccess);
  std::vector<float> g(static_cast<size_t>(N * H));
  {
    std::mt19937_64 rng(17);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    for (auto& x : g) x = static_cast<float>(logsigmoid(static_cast<double>(nd(rng))) / 16.0);
  }
  std::vector<float> s0(static_cast<size_t>(H * D * D));
  {
    std::mt19937_64 rng(18);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    for (auto& x : s0) x = nd(rng);
  }
  DeviceArray<float> lg(g.size()), st_o(s0.size()), st_c(s0.size()), o_ref(static_cast<size_t>(N * W));
  DeviceArray<__nv_bfloat16> o(static_cast<size_t>(N * W));
  upload(lg, g);
  upload(st_o, s0);
  upload(st_c, s0);
  ASSERT_EQ(launch_gret_recurrent_oracle(q.ptr, k.ptr, v.ptr, lg.ptr, st_o.ptr, st_o.ptr, o_ref.ptr, B, H, D, N, W,
                                         nullptr),
            cudaSuccess);
  GretChunkShape s{B, H, D, N, W};
  // sampled rows: chunk and segment edges, past the 2^31 element offset, the last, random ones
  std::vector<int64_t> rows = {0, 1, 63, 64, 65, 4095, 262143, 262144, 524287, 524288, 699049, 699050, 699051,
                               699052, 786431, 786432, 900000, N - 65, N - 64, N - 2, N - 1};
  {
    std::mt19937_64 rng(19);
    for (int i = 0; i < 40; ++i) rows.push_back(static_cast<int64_t>(rng() % static_cast<uint64_t>(N)));
  }
  std::vector<double> want;
  std::vector<float> rf(static_cast<size_t>(W));
  for (int64_t r : rows) {
    ASSERT_EQ(cudaMemcpy(rf.data(), o_ref.ptr + r * W, W * sizeof(float), cudaMemcpyDeviceToHost), cudaSuccess);
    for (int64_t i = 0; i < W; ++i) want.push_back(rf[static_cast<size_t>(i)]);
  }
  const std::vector<float> want_s = download(st_o);
  const StateTail tail = state_tail(q.ptr, k.ptr, v.ptr, W, g, N, H, D);
  std::map<int, double> state_bound;  // by chunk
  for (const GretChunkVariantRow& variant : test_variants()) {  // the same inputs and oracle for every variant
    const GretChunkPlan plan = variant_plan(s, variant);
    EXPECT_EQ(plan.kernel, variant.plan_kernel);
    const int kernel = variant.plan_kernel;
    EXPECT_GT(plan.segments, 1);
    const size_t wsb = gret_chunk_workspace_bytes(s, plan);
    DeviceArray<float> ws(wsb / sizeof(float));
    if (kernel >= 3) {  // fresh incoming state, poisoned output
      upload(st_c, s0);
      ASSERT_EQ(cudaMemset(o.ptr, 0xff, o.n * sizeof(__nv_bfloat16)), cudaSuccess);
    }
    ASSERT_EQ(launch_gret_chunk(q.ptr, k.ptr, v.ptr, lg.ptr, st_c.ptr, o.ptr, s, plan, ws.ptr, wsb, nullptr),
              cudaSuccess);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    std::vector<float> got;
    std::vector<uint16_t> rb(static_cast<size_t>(W));
    for (int64_t r : rows) {
      ASSERT_EQ(cudaMemcpy(rb.data(), o.ptr + r * W, W * 2, cudaMemcpyDeviceToHost), cudaSuccess);
      for (int64_t i = 0; i < W; ++i) got.push_back(bf16_bits_to_float(rb[static_cast<size_t>(i)]));
    }
    EXPECT_LE(rms_error(got, want), 1.5 * bf16_output_bound(want)) << variant.name;
    // rows past the wrap point alone
    const size_t wrap_from = 10 * static_cast<size_t>(W);  // rows[10] = 699,049 onwards (then the rest)
    std::vector<double> want_hi(want.begin() + static_cast<std::ptrdiff_t>(wrap_from), want.begin() + 21 * W);
    std::vector<float> got_hi(got.begin() + static_cast<std::ptrdiff_t>(wrap_from), got.begin() + 21 * W);
    EXPECT_LE(rms_error(got_hi, want_hi), 1.5 * bf16_output_bound(want_hi)) << variant.name;
    const double err_s = rms_error(download(st_c), want_s);
    const std::string what = std::string(variant.name) + ": state vs the oracle at 1M";
    expect_within_interim_bound(err_s, 5e-3, what);
    if (!state_bound.count(plan.chunk)) state_bound[plan.chunk] = derived_state_bound(tail, plan.chunk);
    report_derived_bound(err_s, state_bound[plan.chunk], what);
  }
}

// Issue 35: one yoco-3b gRet layer past the paper, 4M tokens (24 heads x 128,
// batch 1), as a prefill carries it: four launches of 1M tokens, the state
// handed from each to the next, against the fp32 recurrent oracle carried the
// same way; inputs generated a segment at a time (one segment's buffers, 39
// GB, so it runs on the H100 too; the whole sequence's would need 154 GB).
// Sampled rows of every segment (edges, past the 2^31 element offset of the
// segment's launch, random) and the state handed on after each. About four
// times the 1M test's 3.2 s (run-16): the oracle runs 1M tokens in about 1 s.
TEST(GretChunk, MatchesTheOracleAt4MInFourLaunchesOf1M) {
  YOCO_REQUIRE_GPU();
  const int64_t B = 1, H = 24, D = 128, L = 1048576, segments = 4, W = H * D;
  DeviceArray<__nv_bfloat16> q(static_cast<size_t>(L * W)), k(static_cast<size_t>(L * W)), v(static_cast<size_t>(L * W));
  DeviceArray<__nv_bfloat16> o(static_cast<size_t>(L * W));
  DeviceArray<float> lg(static_cast<size_t>(L * H)), st_o(static_cast<size_t>(H * D * D)),
      st_c(static_cast<size_t>(H * D * D)), o_ref(static_cast<size_t>(L * W));
  std::vector<float> s0(static_cast<size_t>(H * D * D));
  {
    std::mt19937_64 rng(28);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    for (auto& x : s0) x = nd(rng);
  }
  upload(st_o, s0);
  upload(st_c, s0);
  std::mt19937_64 g_rng(27);
  std::normal_distribution<float> g_nd(0.0f, 1.0f);
  const GretChunkShape s{B, H, D, L, W};
  const GretChunkPlan plan = plan_gret_chunk(s, 132);
  EXPECT_GT(plan.segments, 1);
  const size_t wsb = gret_chunk_workspace_bytes(s, plan);
  DeviceArray<float> ws(std::max<size_t>(wsb / sizeof(float), 1));
  std::vector<float> rf(static_cast<size_t>(W));
  std::vector<uint16_t> rb(static_cast<size_t>(W));
  for (int64_t seg = 0; seg < segments; ++seg) {
    const auto tag = ::testing::Message() << "segment " << seg << " (tokens " << seg * L << ".." << (seg + 1) * L - 1
                                          << ")";
    const uint64_t seed = 100 + 3 * static_cast<uint64_t>(seg);
    ASSERT_EQ(launch_fill_normal_bf16(q.ptr, L * W, seed, 1.0f, nullptr), cudaSuccess);
    ASSERT_EQ(launch_fill_normal_bf16(k.ptr, L * W, seed + 1, 1.0f / std::sqrt(static_cast<float>(D)), nullptr),
              cudaSuccess);
    ASSERT_EQ(launch_fill_normal_bf16(v.ptr, L * W, seed + 2, 1.0f, nullptr), cudaSuccess);
    std::vector<float> g(static_cast<size_t>(L * H));
    for (auto& x : g) x = static_cast<float>(logsigmoid(static_cast<double>(g_nd(g_rng))) / 16.0);
    upload(lg, g);
    ASSERT_EQ(launch_gret_recurrent_oracle(q.ptr, k.ptr, v.ptr, lg.ptr, st_o.ptr, st_o.ptr, o_ref.ptr, B, H, D, L, W,
                                           nullptr),
              cudaSuccess);
    ASSERT_EQ(cudaMemset(o.ptr, 0xff, o.n * sizeof(__nv_bfloat16)), cudaSuccess);  // poisoned output
    ASSERT_EQ(launch_gret_chunk(q.ptr, k.ptr, v.ptr, lg.ptr, st_c.ptr, o.ptr, s, plan, ws.ptr, wsb, nullptr),
              cudaSuccess);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess) << tag;
    std::vector<int64_t> rows = {0, 1, 63, 64, 65, 262143, 262144, 699049, 699050, 699051, L - 65, L - 64, L - 1};
    std::mt19937_64 rng(29 + static_cast<uint64_t>(seg));
    for (int i = 0; i < 24; ++i) rows.push_back(static_cast<int64_t>(rng() % static_cast<uint64_t>(L)));
    std::vector<double> want;
    std::vector<float> got;
    for (int64_t r : rows) {
      ASSERT_EQ(cudaMemcpy(rf.data(), o_ref.ptr + r * W, W * sizeof(float), cudaMemcpyDeviceToHost), cudaSuccess);
      ASSERT_EQ(cudaMemcpy(rb.data(), o.ptr + r * W, W * 2, cudaMemcpyDeviceToHost), cudaSuccess);
      for (int64_t i = 0; i < W; ++i) {
        want.push_back(rf[static_cast<size_t>(i)]);
        got.push_back(bf16_bits_to_float(rb[static_cast<size_t>(i)]));
      }
    }
    EXPECT_LE(rms_error(got, want), 1.5 * bf16_output_bound(want)) << tag;
    const double err_s = rms_error(download(st_c), download(st_o));
    expect_within_interim_bound(err_s, 5e-3, tag.GetString() + ": the state handed on");
    report_derived_bound(err_s, derived_state_bound(state_tail(q.ptr, k.ptr, v.ptr, W, g, L, H, D), plan.chunk),
                         tag.GetString() + ": the state handed on");
  }
}

}  // namespace
}  // namespace yoco::cuda
