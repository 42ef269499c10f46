// gRet chunkwise prefill (issue 14; KERNELS.md §3), kernel "gret_chunk":
// - yoco-3b gRet layer (24 heads x 128) at batch 1 and N = 32K, 128K, 512K, 1M,
//   the v2 planner's (slices, segments) at each, marked "(v2 plan)";
// - segments P = 1, 2, 4, 8 at 128K (V-slices of 32 columns);
// - the KERNELS.md anchor shape (2, 16384, 16, 128) (Helion retention 0.466 ms,
//   fla chunk_simple_gla 0.72 ms on the lent H100), plan and P = 1;
// - v3 (full-width CTAs of 8 warps, cuda/gret/NOTES-gret_chunk.md; the
//   previous default, the ladder rung beside v6) beside v2 at every shape: the
//   v3 planner's segments "(v3 plan)" and a few other P;
// - v5 (chunks of 128 and 256 tokens, one CTA of 8 warps an SM): its planner's
//   segments "(v5 plan)" and, at 32K / 128K, P 11 (two waves);
// - v6 (wgmma, three warpgroups, one CTA an SM; plan_gret_chunk, the
//   library's choice at head dim 128): its planner's segments "(v6 plan)" and
//   a few other P;
// - the three phases of the v3 and v6 plans timed apart at 32K and 128K
//   ("phase 1" state-only pass, "phase 2" scan, "phase 3" fused pass), each
//   with the bytes that phase moves (stated in the row's notes);
// - the fp32 recurrent GPU oracle at 32K, for scale.
// Floors: bytes = B*N*H*(3*D*2 + 4 + D*2) (q, k, v, log-gamma in, o out; the
// state never leaves the chip; the segmented phase 1 re-reads k, v of P-1
// segments, not counted); flops = B*N*H*(4*C*D + 4*D*D), C the kernel's chunk
// (64, 128 or 256), full C x C blocks as FLA counts them. q, k, v sit in one fused row of 3*H*D, generated
// on the device.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <stdexcept>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "device/device_fill.hpp"
#include "device/counter_init.hpp"
#include "dtype.hpp"
#include "gret/gret_chunk.hpp"
#include "gret/gret_gate.hpp"
#include "bench_buffers.hpp"
#include "gret/gret_oracle.hpp"
#include "gret/gret_select.hpp"
#include "kernel_bench.hpp"
#include "suite_skips.hpp"

namespace yoco::cuda_bench {
namespace {


bool v6_skipped() { return skipped_by_suite("YOCO_GRET_SKIP_V6"); }
bool v7_skipped() { return skipped_by_suite("YOCO_GRET_SKIP_V7"); }

struct Shape {
  const char* model;
  int64_t batch, heads, D, N;
};

// One shape's device inputs: rows of `groups` blocks of H·D (q | k | v, and g
// with 4), log-gammas in [-0.05, -0.01], a random state; seeds seed, +2, +3.
struct ChunkInputs {
  int64_t W, stride;
  DeviceBuffer<bf16> qkv, o;
  DeviceBuffer<float> lg, state;
  cuda::GretChunkShape s;
  ChunkInputs(const Shape& sh, int64_t groups, uint64_t seed)
      : W(sh.heads * sh.D),
        stride(groups * sh.heads * sh.D),
        qkv(static_cast<size_t>(sh.batch * sh.N * stride)),
        o(static_cast<size_t>(sh.batch * sh.N * W)),
        lg(static_cast<size_t>(sh.batch * sh.N * sh.heads)),
        state(static_cast<size_t>(sh.batch * sh.heads * sh.D * sh.D)),
        s{sh.batch, sh.heads, sh.D, sh.N, stride} {
    fill_normal_bf16(qkv.p, qkv.n, seed, 0.3f);
    fill_uniform_f32(lg.p, lg.n, seed + 2, -0.03f, 0.02f);
    fill_uniform_f32(state.p, state.n, seed + 3, 0.0f, 0.1f);
  }
};

// One shape; `variants` lists (slice_cols, segments) pairs, 0 meaning the plan's;
// `v3_runs` lists v3 (full-width CTA) runs by segments, 0 meaning the v3
// planner's; `v5_runs` v5 runs as (chunk 128 or 256,
// segments), 0 meaning the v5 planner's; `v6_runs` v6 runs as (segments,
// phase1_split), 0 segments meaning the v6 planner's, 0 split the planner's at
// its own P and 1 at another.
void bench_shape(Report& report, const Shape& sh, const std::vector<std::pair<int, int>>& variants,
                 cudaStream_t stream, int sm_count, const std::vector<int>& v3_runs = {},
                 const std::vector<std::pair<int, int>>& v5_runs = {},
                 const std::vector<std::pair<int, int>>& v6_runs = {}) {
  const int64_t B = sh.batch, H = sh.heads, D = sh.D, N = sh.N;
  const double token_heads = static_cast<double>(B) * N * H;
  const double bytes = token_heads * (3.0 * D * 2 + 4 + D * 2);
  ChunkInputs in(sh, 3, 3 + N);
  auto& [W, stride, qkv, o, lg, state, s] = in;
  const cuda::GretChunkPlan plan = cuda::plan_gret_chunk_v2(s, sm_count);
  const cuda::GretChunkPlan plan3 = cuda::plan_gret_chunk_v3(s, sm_count);
  // (kernel, slice_cols or v5's chunk or v6's phase1_split, segments) runs: the v2
  // variants, then v3, v5, v6
  std::vector<std::tuple<int, int, int>> runs;
  // Every variant of the library's table at its own plan first (kGretChunkVariants: a new
  // variant is benchmarked by construction); the lists below add other splits.
  for (const cuda::GretChunkVariantRow& v : cuda::kGretChunkVariants) {
    const int k = v.plan_kernel;
    const bool serves = k == 2 || (k == 3 && cuda::gret_v3_supported(D)) ||
                        (k == 5 && cuda::gret_v5_supported(D, v.chunk)) ||
                        (k == 6 && cuda::gret_v6_supported(D) && !v6_skipped()) ||
                        (k == 7 && cuda::gret_v6_supported(D) && !v7_skipped());
    if (serves) runs.emplace_back(k, k == 5 ? v.chunk : 0, 0);
  }
  for (const auto& [cols_in, segs_in] : variants) runs.emplace_back(2, cols_in, segs_in);
  if (cuda::gret_v3_supported(D))
    for (const int segs_in : v3_runs) runs.emplace_back(3, 0, segs_in);
  for (const auto& [chunk, segs_in] : v5_runs)
    if (cuda::gret_v5_supported(D, chunk)) runs.emplace_back(5, chunk, segs_in);
  if (cuda::gret_v6_supported(D) && !v6_runs.empty() && v6_skipped()) {
    KernelResult r{"gret_chunk", "C64 v6 (v6 plan)", sh.model, N, B, bytes, 0.0, {}, ""};
    r.skipped = "YOCO_GRET_SKIP_V6 is set: v6 failed its smoke test in this call and was left out";
    report.add(r);
  } else if (cuda::gret_v6_supported(D)) {
    for (const auto& [segs_in, split_in] : v6_runs) runs.emplace_back(6, split_in, segs_in);
  }
  if (cuda::gret_v6_supported(D) && v7_skipped()) {
    KernelResult r{"gret_chunk", "C64 v7 (v7 plan)", sh.model, N, B, bytes, 0.0, {}, ""};
    r.skipped = "YOCO_GRET_SKIP_V7 is set: v7 failed its smoke test or test_gret_chunk in this call, or the "
                "caller left it out, and no v7 kernel was launched";
    report.add(r);
  }
  // v7 (two output warpgroups) at two waves too, where v6 has a row at P 11, and at a batch of 2 at v6's
  // other P (5 / 6): the P 11 rule (RUNS.md) asks both of whichever kernel the planner takes.
  if (cuda::gret_v6_supported(D) && !v7_skipped())
    for (const auto& [segs_in, split_in] : v6_runs)
      if (segs_in == 11 || (B == 2 && segs_in > 0)) runs.emplace_back(7, split_in, segs_in);
  std::set<std::tuple<int, int, int>> done;  // a variant equal to the plan runs once (one row per key)
  for (const auto& [kernel, cols_in, segs_in] : runs) {
    const cuda::GretChunkPlan base = kernel == 7   ? cuda::plan_gret_chunk_v7(s, sm_count)
                                     : kernel == 6 ? cuda::plan_gret_chunk_v6(s, sm_count)
                                     : kernel == 5 ? cuda::plan_gret_chunk_v5(s, sm_count, cols_in)
                                     : kernel == 3 ? plan3
                                                   : plan;
    cuda::GretChunkPlan p = base;
    if (cols_in > 0 && kernel == 2) {
      if (!cuda::gret_slice_supported(D, cols_in)) continue;
      p.slice_cols = cols_in;
      p.slices = static_cast<int>(D / cols_in);
    }
    if (segs_in > 0) p.segments = segs_in;
    const bool wgmma = kernel == 6 || kernel == 7;
    if (wgmma) p.phase1_split = cols_in > 0 ? cols_in : (p.segments == base.segments ? base.phase1_split : 1);
    const int key2 = kernel == 5 ? p.chunk : (wgmma ? p.phase1_split : p.slice_cols);
    if (!done.insert({kernel, key2, p.segments}).second) continue;
    const bool is_plan =
        p.slice_cols == base.slice_cols && p.segments == base.segments && p.phase1_split == base.phase1_split;
    const double flops = token_heads * (4.0 * p.chunk * D + 4.0 * D * D);
    const std::string variant =
        wgmma         ? "C64 v" + std::to_string(kernel) + " P" + std::to_string(p.segments) +
                          (p.phase1_split > 1 ? " x" + std::to_string(p.phase1_split) : "") +
                          (is_plan ? " (v" + std::to_string(kernel) + " plan)" : "")
        : kernel == 5 ? "C" + std::to_string(p.chunk) + " v5 P" + std::to_string(p.segments) + (is_plan ? " (v5 plan)" : "")
        : kernel == 3 ? "C64 v3 P" + std::to_string(p.segments) + (is_plan ? " (v3 plan)" : "")
                      : "C64 v2 S" + std::to_string(p.slices) + " P" + std::to_string(p.segments) + (is_plan ? " (v2 plan)" : "");
    const size_t wsb = cuda::gret_chunk_workspace_bytes(s, p);
    DeviceBuffer<unsigned char> ws(std::max<size_t>(wsb, 16));
    KernelResult r{"gret_chunk", variant, sh.model, N, B, bytes, flops, {}, ""};
    r.params = {{"version", kernel}, {"chunk", p.chunk}, {"slices", p.slices}, {"segments", p.segments},
                {"phase1_split", p.phase1_split}};
    r.time = time_launches(
        [&](cudaStream_t st) {
          check(cuda::launch_gret_chunk(qkv.p, qkv.p + W, qkv.p + 2 * W, lg.p, state.p, o.p, s, p, ws.p, wsb, st),
                "gret_chunk");
        },
        stream, 2, N >= 524288 ? 5 : 10);
    r.notes = std::string("H") + std::to_string(H) + " D" + std::to_string(D) + "; " +
              std::to_string(B * H * p.slices * p.segments) +
              (kernel == 7   ? " CTAs of 4 warpgroups (wgmma, two output warpgroups), 1 an SM (v7; phase 1 on v3, "
                               "segments split xN)"
               : kernel == 6 ? " CTAs of 3 warpgroups (wgmma), 1 an SM (v6; phase 1 on v3, segments split xN)"
               : kernel == 5 ? " CTAs of 8 warps, full width, 1 an SM (v5)"
               : kernel == 3 ? " CTAs of 8 warps, full width (v3)"
                             : " CTAs of 4 warps (v2)") +
              " (3 kernels if P>1); " +
              "floor bytes = B*N*H*(3*D*2+4+D*2), flops = B*N*H*(4*" + std::to_string(p.chunk) +
              "*D+4*D*D) full blocks; " +
              (all_finite_bf16(o.p, o.n, size_t{1} << 24) ? "o finite" : "o NOT FINITE");
    report.add(r);
  }
}

// The three phases of a segmented launch timed apart (launch_gret_chunk_phases),
// after one full launch has filled the workspace. Bytes are what each phase
// moves: phase 1 k, v, log-gamma of segments 0..P-2 (+ their fp32 local states
// and Gamma out); phase 2 the P fp32 state slots read and written (+ the
// carried state read); phase 3 the essential bytes (+ the P-1 incoming states
// read, the final state written). The full launch's row beside them shows the
// cost of the three launch boundaries.
void bench_phases(Report& report, const Shape& sh, const cuda::GretChunkPlan& p, const std::string& name,
                  cudaStream_t stream) {
  const int64_t B = sh.batch, H = sh.heads, D = sh.D, N = sh.N;
  if (p.segments < 2) return;
  ChunkInputs in(sh, 3, 3 + N);
  auto& [W, stride, qkv, o, lg, state, s] = in;
  const size_t wsb = cuda::gret_chunk_workspace_bytes(s, p);
  DeviceBuffer<unsigned char> ws(std::max<size_t>(wsb, 16));
  auto launch = [&](unsigned phases, cudaStream_t st) {
    check(cuda::launch_gret_chunk_phases(phases, qkv.p, qkv.p + W, qkv.p + 2 * W, lg.p, state.p, o.p, s, p, ws.p, wsb,
                                         st),
          "gret_chunk phases");
  };
  launch(cuda::kGretAllPhases, stream);
  check(cudaStreamSynchronize(stream), "gret_chunk phases");
  const int64_t nchunks = cuda::gret_num_chunks(N, p.chunk);
  const double tokens_p1 = static_cast<double>(std::min<int64_t>(
      N, cuda::gret_segment_begin(p.segments - 1, nchunks, p.segments) * p.chunk));  // segments 0..P-2
  const double state_bytes = static_cast<double>(B * H * D * D) * 4.0;
  const double bh = static_cast<double>(B * H);
  const double sub = static_cast<double>(p.phase1_split) * (p.segments - 1);  // phase-1 segments
  struct Phase {
    unsigned bits;
    const char* label;
    double bytes;
    const char* what;
  };
  const Phase phases[] = {
      {cuda::kGretPhaseStateOnly, "phase 1 (state-only)",
       bh * tokens_p1 * (2.0 * D * 2 + 4) + sub * (state_bytes + bh * 4),
       "bytes = k, v, log-gamma of segments 0..P-2 + their fp32 states out"},
      {cuda::kGretPhaseScan, "phase 2 (scan)", (2.0 * sub + 2.0) * state_bytes,
       "bytes = the phase-1 fp32 state slots read and written + the carried state in and out"},
      {cuda::kGretPhaseFused, "phase 3 (fused)",
       bh * static_cast<double>(N) * (3.0 * D * 2 + 4 + D * 2) + (p.segments + 1.0) * state_bytes,
       "bytes = q, k, v, log-gamma in, o out + P incoming states, the final state"},
  };
  for (const Phase& ph : phases) {
    KernelResult r{"gret_chunk", name + " " + ph.label, sh.model, N, B, ph.bytes, 0.0, {}, ""};
    r.time = time_launches([&](cudaStream_t st) { launch(ph.bits, st); }, stream, 2, N >= 524288 ? 5 : 10);
    std::string notes("H");
    notes.append(std::to_string(H)).append(" D").append(std::to_string(D));
    notes.append("; this phase alone, after a full launch; ").append(ph.what);
    notes.append(" (actual bytes of the phase, not the operator floor)");
    r.notes = notes;
    report.add(r);
  }
}

// The library's plan with the per-head norm and gate after it (the runner
// before 2026-11-27: launch_gret_norm_gate on o) and in the launch
// (GretNormGate: kernel 6's epilogue). Bytes: the chunk's floor + g read
// (the norm + gate's own o read and write are what the fusion removes).
void bench_norm_gate_fusion(Report& report, const Shape& sh, cudaStream_t stream, int sm_count) {
  const int64_t B = sh.batch, H = sh.heads, D = sh.D, N = sh.N;
  ChunkInputs in(sh, 4, 13 + N);  // q | k | v | g
  auto& [W, stride, qkvg, o, lg, state, s] = in;
  // The library's plan, asked to fuse (it does not by itself: gret_plan.hpp, fuse_norm_gate).
  cuda::GretChunkPlan p = cuda::select_gret_chunk(s, sm_count);
  p.fuse_norm_gate = true;
  const size_t wsb = cuda::gret_chunk_workspace_bytes(s, p);
  DeviceBuffer<unsigned char> ws(std::max<size_t>(wsb, 16));
  const cuda::GretNormGate ng{qkvg.p + 3 * W, stride, 1e-5f};
  const double bytes = static_cast<double>(B) * N * H * (4.0 * D * 2 + 4 + D * 2);
  // Appended piece by piece: GCC 12's -Wrestrict misfires on "literal" + std::string here.
  std::string plan("C");
  plan.append(std::to_string(p.chunk)).append(" v").append(std::to_string(p.kernel));
  plan.append(" P").append(std::to_string(p.segments)).append(" (library plan)");
  for (bool in_launch : {false, true}) {
    KernelResult r{"gret_chunk_norm_gate", plan + (in_launch ? " + norm_gate in the launch" : " then norm_gate kernel"),
                   sh.model, N, B, bytes, 0.0, {}, ""};
    r.time = time_launches(
        [&](cudaStream_t st) {
          if (in_launch) {
            check(cuda::launch_gret_chunk(qkvg.p, qkvg.p + W, qkvg.p + 2 * W, lg.p, state.p, o.p, s, p, ws.p, wsb, st,
                                          &ng),
                  "gret_chunk + norm_gate");
          } else {
            check(cuda::launch_gret_chunk(qkvg.p, qkvg.p + W, qkvg.p + 2 * W, lg.p, state.p, o.p, s, p, ws.p, wsb, st),
                  "gret_chunk");
            check(cuda::launch_gret_norm_gate(o.p, ng.g, ng.g_stride, B * N, H, D, ng.eps, o.p, st), "norm_gate");
          }
        },
        stream, 2, 10);
    r.notes = std::string(cuda::gret_chunk_fuses_norm_gate(p, ng) && in_launch ? "fused in kernel 6's epilogue; "
                                                                           : "") +
              "floor bytes = B*N*H*(4*D*2+4+D*2) (q, k, v, g, log-gamma in, out); " +
              (all_finite_bf16(o.p, o.n, size_t{1} << 24) ? "out finite" : "out NOT FINITE");
    report.add(r);
  }
}

YOCO_KERNEL_BENCH(gret_chunk) {
  ScopedStream scoped;
  const cudaStream_t stream = scoped.s;
  int dev = 0, sms = 132;
  check(cudaGetDevice(&dev), "device");
  check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev), "sm count");
  {
    const std::vector<std::pair<int, int>> plan_only = {{0, 0}};
    const std::vector<std::pair<int, int>> v5_plans = {{128, 0}, {256, 0}};
    const std::vector<std::pair<int, int>> v5_more = {{128, 0}, {128, 11}, {256, 0}, {256, 11}};
    // v6: its plan (P 5 at 24 heads: 120 CTAs, one wave), P 11 (two waves), P 4 / 6 / 8
    // and the plan's P with phase 1 unsplit (x1); variant "P5 x2": phase 1 on 2 x 4 finer segments
    const std::vector<std::pair<int, int>> v6_more = {{0, 0}, {0, 1}, {4, 0}, {6, 0}, {8, 0}, {11, 0}};
    bench_shape(report, Shape{"kernels-anchor", 2, 16, 128, 16384}, {{0, 0}, {0, 1}}, stream, sms, {0, 4},
                v5_plans, {{0, 0}, {8, 0}});
    bench_shape(report, Shape{"yoco-3b", 1, 24, 128, 32768}, {{0, 0}, {0, 1}}, stream, sms,
                {0, 5, 8, 16}, v5_more, v6_more);
    bench_shape(report, Shape{"yoco-3b", 1, 24, 128, 131072}, {{0, 0}, {32, 1}, {32, 2}, {32, 4}, {32, 8}, {64, 4}},
                stream, sms, {0, 6, 16}, v5_more, v6_more);
    bench_shape(report, Shape{"yoco-3b", 1, 24, 128, 524288}, plan_only, stream, sms, {0, 16},
                v5_plans, {{0, 0}, {0, 1}, {11, 0}});
    // P 11 at 1M too, and a batch of 2 (the runner's step at chunk 32768: 16384 tokens of each sequence)
    // at the plan's P and at the two-wave P 5 / 6: what the planner needs before it takes two waves
    // (cuda/gret/NOTES-gret_chunk.md, the Nsight Compute profile's change 2).
    bench_shape(report, Shape{"yoco-3b", 1, 24, 128, 1048576}, plan_only, stream, sms, {0}, v5_plans,
                {{0, 0}, {11, 0}});
    bench_shape(report, Shape{"yoco-3b", 2, 24, 128, 16384}, plan_only, stream, sms, {0}, {{128, 0}},
                {{0, 0}, {5, 0}, {6, 0}});
    // Where a plan's time goes: its three phases alone (v3: the library's plan; v6).
    for (int64_t N : {int64_t{32768}, int64_t{131072}}) {
      const Shape sh{"yoco-3b", 1, 24, 128, N};
      const cuda::GretChunkShape gs{1, 24, 128, N, 3 * 24 * 128};
      const cuda::GretChunkPlan p3 = cuda::plan_gret_chunk_v3(gs, sms), p6 = cuda::plan_gret_chunk_v6(gs, sms);
      bench_phases(report, sh, p3, "C64 v3 P" + std::to_string(p3.segments), stream);
      if (!v6_skipped()) {
        cuda::GretChunkPlan p6x1 = p6;
        p6x1.phase1_split = 1;
        bench_phases(report, sh, p6, "C64 v6 P" + std::to_string(p6.segments) + " x" + std::to_string(p6.phase1_split),
                     stream);
        bench_phases(report, sh, p6x1, "C64 v6 P" + std::to_string(p6.segments) + " x1", stream);
      }
    }
    // The norm and gate after the chunk vs in its launch, at a prefill chunk of the runner.
    if (!v6_skipped()) bench_norm_gate_fusion(report, Shape{"yoco-3b", 1, 24, 128, 32768}, stream, sms);
    // The fp32 recurrent oracle (correctness tool, not a kernel to tune), at 32K.
    {
      const int64_t B = 1, H = 24, D = 128, N = 32768, W = H * D, stride = 3 * W;
      DeviceBuffer<bf16> qkv(static_cast<size_t>(B * N * stride));
      DeviceBuffer<float> lg(static_cast<size_t>(B * N * H)), state(static_cast<size_t>(B * H * D * D)),
          o(static_cast<size_t>(B * N * W));
      fill_normal_bf16(qkv.p, qkv.n, 9, 0.3f);
      fill_uniform_f32(lg.p, lg.n, 10, -0.03f, 0.02f);
      fill_uniform_f32(state.p, state.n, 11, 0.0f, 0.1f);
      const double token_heads = static_cast<double>(B) * N * H;
      KernelResult r{"gret_recurrent_oracle", "fp32 one CTA per head", "yoco-3b", N, B,
                     token_heads * (3.0 * D * 2 + 4 + D * 4), token_heads * 4.0 * D * D, {}, ""};
      r.time = time_launches(
          [&](cudaStream_t st) {
            check(cuda::launch_gret_recurrent_oracle(qkv.p, qkv.p + W, qkv.p + 2 * W, lg.p, state.p, state.p, o.p, B, H,
                                                     D, N, stride, st),
                  "oracle");
          },
          stream, 1, 3);
      r.notes = "bytes count fp32 o; flops = 4*D*D per token-head";
      report.add(r);
    }
  }
}

}  // namespace
}  // namespace yoco::cuda_bench
