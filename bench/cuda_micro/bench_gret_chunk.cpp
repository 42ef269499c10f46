// gRet chunkwise prefill (issue 14; KERNELS.md §3), kernel "gret_chunk":
// - yoco-3b gRet layer (24 heads x 128) at batch 1 and N = 32K, 128K, 512K, 1M,
//   the v2 planner's (slices, segments) at each, marked "(v2 plan)";
// - segments P = 1, 2, 4, 8 at 128K (V-slices of 32 columns);
// - the KERNELS.md anchor shape (2, 16384, 16, 128) (Helion retention 0.466 ms,
//   fla chunk_simple_gla 0.72 ms on the lent H100), plan and P = 1;
// - v3 (full-width CTAs of 8 warps, cuda/NOTES-gret_chunk.md) and v3w16 (16 warps)
//   beside v2 at every shape: the v3 planners' segments "(v3 plan)" /
//   "(v3w16 plan)" and a few other P (plan_gret_chunk, the library's choice,
//   is the v3 plan at head dim 128);
// - v5 (chunks of 128 and 256 tokens, one CTA of 8 warps an SM): its planner's
//   segments "(v5 plan)" and, at 32K / 128K, P 11 (two waves);
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
#include <random>
#include <stdexcept>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "attention_oracle.hpp"
#include "counter_init.hpp"
#include "dtype.hpp"
#include "gret_chunk.hpp"
#include "bench_buffers.hpp"
#include "gret_oracle.hpp"
#include "kernel_bench.hpp"

namespace yoco::cuda_bench {
namespace {


struct Shape {
  const char* model;
  int64_t batch, heads, D, N;
};

// One shape; `variants` lists (slice_cols, segments) pairs, 0 meaning the plan's;
// `v3_runs` lists v3 (full-width CTA) runs as (warps 8 or 16, segments), 0
// segments meaning that v3 planner's; `v5_runs` v5 runs as (chunk 128 or 256,
// segments), 0 meaning the v5 planner's.
void bench_shape(Report& report, const Shape& sh, const std::vector<std::pair<int, int>>& variants,
                 cudaStream_t stream, int sm_count, const std::vector<std::pair<int, int>>& v3_runs = {},
                 const std::vector<std::pair<int, int>>& v5_runs = {}) {
  const int64_t B = sh.batch, H = sh.heads, D = sh.D, N = sh.N, W = H * D, stride = 3 * W;
  const double token_heads = static_cast<double>(B) * N * H;
  const double bytes = token_heads * (3.0 * D * 2 + 4 + D * 2);
  DeviceBuffer<bf16> qkv(static_cast<size_t>(B * N * stride)), o(static_cast<size_t>(B * N * W));
  DeviceBuffer<float> lg(static_cast<size_t>(B * N * H)), state(static_cast<size_t>(B * H * D * D));
  fill_normal_bf16(qkv.p, qkv.n, 3 + N, 0.3f);
  fill_uniform_f32(lg.p, lg.n, 5, -0.03f, 0.02f);  // log gamma in [-0.05, -0.01]
  fill_uniform_f32(state.p, state.n, 6, 0.0f, 0.1f);
  cuda::GretChunkShape s{B, H, D, N, stride};
  const cuda::GretChunkPlan plan = cuda::plan_gret_chunk_v2(s, sm_count);
  const cuda::GretChunkPlan plan3 = cuda::plan_gret_chunk_v3(s, sm_count, 8);
  const cuda::GretChunkPlan plan4 = cuda::plan_gret_chunk_v3(s, sm_count, 16);
  // (kernel, slice_cols or v5's chunk, segments) runs: the v2 variants, then v3, then v5
  std::vector<std::tuple<int, int, int>> runs;
  for (const auto& [cols_in, segs_in] : variants) runs.emplace_back(2, cols_in, segs_in);
  if (cuda::gret_v3_supported(D))
    for (const auto& [warps, segs_in] : v3_runs) runs.emplace_back(warps == 16 ? 4 : 3, 0, segs_in);
  for (const auto& [chunk, segs_in] : v5_runs)
    if (cuda::gret_v5_supported(D, chunk)) runs.emplace_back(5, chunk, segs_in);
  std::set<std::tuple<int, int, int>> done;  // a variant equal to the plan runs once (one row per key)
  for (const auto& [kernel, cols_in, segs_in] : runs) {
    const cuda::GretChunkPlan base = kernel == 5 ? cuda::plan_gret_chunk_v5(s, sm_count, cols_in)
                                     : kernel == 4 ? plan4
                                     : kernel == 3 ? plan3
                                                   : plan;
    cuda::GretChunkPlan p = base;
    if (cols_in > 0 && kernel == 2) {
      if (!cuda::gret_slice_supported(D, cols_in)) continue;
      p.slice_cols = cols_in;
      p.slices = static_cast<int>(D / cols_in);
    }
    if (segs_in > 0) p.segments = segs_in;
    if (!done.insert({kernel, kernel == 5 ? p.chunk : p.slice_cols, p.segments}).second) continue;
    const bool is_plan = p.slice_cols == base.slice_cols && p.segments == base.segments;
    const double flops = token_heads * (4.0 * p.chunk * D + 4.0 * D * D);
    const std::string variant =
        kernel == 5   ? "C" + std::to_string(p.chunk) + " v5 P" + std::to_string(p.segments) + (is_plan ? " (v5 plan)" : "")
        : kernel == 4 ? "C64 v3w16 P" + std::to_string(p.segments) + (is_plan ? " (v3w16 plan)" : "")
        : kernel == 3 ? "C64 v3 P" + std::to_string(p.segments) + (is_plan ? " (v3 plan)" : "")
                      : "C64 v" + std::to_string(p.slices) + " P" + std::to_string(p.segments) + (is_plan ? " (v2 plan)" : "");
    const size_t wsb = cuda::gret_chunk_workspace_bytes(s, p);
    DeviceBuffer<unsigned char> ws(std::max<size_t>(wsb, 16));
    KernelResult r{"gret_chunk", variant, sh.model, N, B, bytes, flops, {}, ""};
    r.time = time_launches(
        [&](cudaStream_t st) {
          check(cuda::launch_gret_chunk(qkv.p, qkv.p + W, qkv.p + 2 * W, lg.p, state.p, o.p, s, p, ws.p, wsb, st),
                "gret_chunk");
        },
        stream, 2, N >= 524288 ? 5 : 10);
    r.notes = "H" + std::to_string(H) + " D" + std::to_string(D) + "; " +
              std::to_string(B * H * p.slices * p.segments) +
              (kernel == 5   ? " CTAs of 8 warps, full width, 1 an SM (v5)"
               : kernel == 4 ? " CTAs of 16 warps, full width (v3w16)"
               : kernel == 3 ? " CTAs of 8 warps, full width (v3)"
                             : " CTAs of 4 warps (v2)") +
              " (3 kernels if P>1); " +
              "floor bytes = B*N*H*(3*D*2+4+D*2), flops = B*N*H*(4*" + std::to_string(p.chunk) +
              "*D+4*D*D) full blocks; " +
              (all_finite_bf16(o.p, o.n, size_t{1} << 24) ? "o finite" : "o NOT FINITE");
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
    bench_shape(report, Shape{"kernels-anchor", 2, 16, 128, 16384}, {{0, 0}, {0, 1}}, stream, sms, {{8, 0}, {8, 4}, {16, 0}},
                v5_plans);
    bench_shape(report, Shape{"yoco-3b", 1, 24, 128, 32768}, {{0, 0}, {0, 1}}, stream, sms,
                {{8, 0}, {8, 5}, {8, 8}, {8, 16}, {16, 0}, {16, 6}, {16, 11}}, v5_more);
    bench_shape(report, Shape{"yoco-3b", 1, 24, 128, 131072}, {{0, 0}, {32, 1}, {32, 2}, {32, 4}, {32, 8}, {64, 4}},
                stream, sms, {{8, 0}, {8, 6}, {8, 16}, {16, 0}, {16, 11}}, v5_more);
    bench_shape(report, Shape{"yoco-3b", 1, 24, 128, 524288}, plan_only, stream, sms, {{8, 0}, {8, 16}, {16, 0}},
                v5_plans);
    bench_shape(report, Shape{"yoco-3b", 1, 24, 128, 1048576}, plan_only, stream, sms, {{8, 0}, {16, 0}}, v5_plans);
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
