// The shared memory-bound kernels of both runners (cuda/ops/elementwise.cu) over one
// 32K-token prefill chunk of yoco-3b (d 3072, F 8192, 24 heads x 128): the
// fused add + RMSNorm, SwiGLU and RoPE of q (and of q and k in one pass, as
// the runners run it) inside the fused q|k|v|g rows. In
// the H100 sweep's CUPTI breakdown these three took 24% of yoco-3b's prefill;
// each row here is against the copy ceiling of the same run.
// Bytes (each tensor once): add + RMSNorm reads the fp32 residual and the bf16
// delta and writes both back (12 B per element); SwiGLU reads 2F and writes F
// bf16 (6 B per output); RoPE reads and writes q in place (4 B per element).
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "bench_buffers.hpp"
#include "ops/elementwise.hpp"
#include "kernel_bench.hpp"
#include "ops.hpp"

namespace yoco::cuda_bench {
namespace {

constexpr int64_t kRows = 32768, kD = 3072, kF = 8192, kHeads = 24, kHeadDim = 128;

YOCO_KERNEL_BENCH(elementwise) {
  ScopedStream scoped;
  const cudaStream_t stream = scoped.s;
  {
    DeviceBuffer<float> residual(kRows * kD);
    DeviceBuffer<bf16> delta(kRows * kD), w(kD), out(kRows * kD);
    fill_uniform_f32(residual.p, residual.n, 31, 0.0f, 2.0f);
    fill_normal_bf16(delta.p, delta.n, 32, 1.0f);
    fill_normal_bf16(w.p, w.n, 33, 0.25f);
    // The looped kernel keeps the row's old label (its series in earlier files), the cached one (the
    // runners' choice at d 3072 since 2026-11-27) is beside it; then one row, a decode step's norm, each
    // sample after the L2 flush: its weights cold, as in the step (and its row too, which in the step
    // the GEMM before it has just written into the L2).
    for (const auto& [kernel, label] : {std::pair{cuda::RmsNormKernel::looped, ""},
                                        std::pair{cuda::RmsNormKernel::cached, ", cached kernel"}}) {
      KernelResult r{"add_rms_norm", std::string("rows 32768 d 3072") + label, "yoco-3b", kRows, 1,
                     12.0 * kRows * kD, 0, {}, ""};
      r.time = time_launches(
          [&](cudaStream_t st) {
            check(cuda::launch_add_rms_norm(residual.p, delta.p, w.p, kRows, kD, 1e-5f, out.p, st, kernel),
                  "add_rms_norm");
          },
          stream);
      r.notes = all_finite_bf16(out.p, out.n) ? "out finite" : "out NOT FINITE";
      report.add(r);
    }
    // A layer's two norms as the runners run them: an add + RMSNorm after each sublayer (24 bytes an
    // element) against the residual stored once a layer (YOCO_RESIDUAL_PER_LAYER: the norm of residual +
    // the first delta, nothing stored, then both deltas added and stored: 8 + 14 bytes). Each row times
    // the pair of launches; the second's notes give its time over the first's. The runners' decision.
    {
      DeviceBuffer<bf16> second(kRows * kD), mid(kRows * kD);
      fill_normal_bf16(second.p, second.n, 36, 1.0f);
      KernelResult pair{"add_rms_norm", "rows 32768 d 3072, a layer's two norms, an add + RMSNorm each", "yoco-3b",
                        kRows, 1, 24.0 * kRows * kD, 0, {}, ""};
      pair.time = time_launches(
          [&](cudaStream_t st) {
            check(cuda::launch_add_rms_norm(residual.p, delta.p, w.p, kRows, kD, 1e-5f, mid.p, st), "add_rms_norm");
            check(cuda::launch_add_rms_norm(residual.p, second.p, w.p, kRows, kD, 1e-5f, out.p, st), "add_rms_norm");
          },
          stream);
      pair.notes = all_finite_bf16(out.p, out.n) ? "out finite" : "out NOT FINITE";
      report.add(pair);
      KernelResult once{"add_rms_norm", "rows 32768 d 3072, a layer's two norms, the residual stored once", "yoco-3b",
                        kRows, 1, 22.0 * kRows * kD, 0, {}, ""};
      once.time = time_launches(
          [&](cudaStream_t st) {
            check(cuda::launch_rms_norm_of_sum(residual.p, delta.p, w.p, kRows, kD, 1e-5f, mid.p, st),
                  "rms_norm_of_sum");
            check(cuda::launch_add2_rms_norm(residual.p, delta.p, second.p, w.p, kRows, kD, 1e-5f, out.p, st),
                  "add2_rms_norm");
          },
          stream);
      char ratio[96];
      std::snprintf(ratio, sizeof ratio, "; %.3fx the add + RMSNorm pair's median", once.time.median_s / pair.time.median_s);
      once.notes = std::string(all_finite_bf16(out.p, out.n) ? "out finite" : "out NOT FINITE") + ratio;
      report.add(once);
    }
    for (const auto& [kernel, label] : {std::pair{cuda::RmsNormKernel::cached, "cached kernel"},
                                        std::pair{cuda::RmsNormKernel::looped, "looped kernel"}}) {
      // No bytes: a latency row, not against the copy ceiling (as launch_floor's rows).
      KernelResult r{"add_rms_norm", std::string("rows 1 d 3072, after an L2 flush, ") + label, "yoco-3b", 1, 1, 0,
                     0, {}, ""};
      r.time = time_launches(
          [&](cudaStream_t st) {
            check(cuda::launch_add_rms_norm(residual.p, delta.p, w.p, 1, kD, 1e-5f, out.p, st, kernel),
                  "add_rms_norm");
          },
          stream, 3, 50);
      r.notes = "one row: latency, not bandwidth (CUPTI: 10.6 us a norm inside yoco-3b's decode step at run-10)";
      report.add(r);
    }
  }
  {
    DeviceBuffer<bf16> h13(kRows * 2 * kF), out(kRows * kF);
    fill_normal_bf16(h13.p, h13.n, 34, 2.0f);
    KernelResult r{"swiglu", "rows 32768 F 8192", "yoco-3b", kRows, 1, 6.0 * kRows * kF, 0, {}, ""};
    r.time = time_launches(
        [&](cudaStream_t st) { check(cuda::launch_swiglu(h13.p, kRows, kF, out.p, st), "swiglu"); }, stream);
    r.notes = all_finite_bf16(out.p, out.n) ? "out finite" : "out NOT FINITE";
    report.add(r);
  }
  {
    const int64_t HD = kHeads * kHeadDim, stride = 4 * HD;  // a row of the fused projection: q | k | v | g
    DeviceBuffer<bf16> qkvg(kRows * stride);
    fill_normal_bf16(qkvg.p, qkvg.n, 35, 1.0f);
    const std::vector<double> inv = rope_inv_freq_linspace(kHeadDim, 10000.0);
    DeviceBuffer<double> dinv(inv.size());
    check(cudaMemcpy(dinv.p, inv.data(), inv.size() * sizeof(double), cudaMemcpyHostToDevice), "inv_freq");
    KernelResult r{"rope", "q of q|k|v|g rows 32768 H24 D128 interleaved", "yoco-3b", kRows, 1, 4.0 * kRows * HD, 0,
                   {}, ""};
    r.time = time_launches(
        [&](cudaStream_t st) {
          check(cuda::launch_rope(qkvg.p, kRows, stride, kHeads, kHeadDim, 0, kRows, dinv.p,
                                  RopeLayout::interleaved, st),
                "rope");
        },
        stream);
    r.notes = all_finite_bf16(qkvg.p, qkvg.n) ? "q finite; 4-byte pair accesses" : "q NOT FINITE";
    report.add(r);
    // What the runners' prefill runs: q and k in one pass, k scaled by D^-1/2.
    KernelResult qk{"rope", "q|k of q|k|v|g rows 32768 H24 D128 interleaved, one pass", "yoco-3b", kRows, 1,
                    8.0 * kRows * HD, 0, {}, ""};
    qk.time = time_launches(
        [&](cudaStream_t st) {
          check(cuda::launch_rope(qkvg.p, kRows, stride, 2 * kHeads, kHeadDim, 0, kRows, dinv.p,
                                  RopeLayout::interleaved, st, 1.0 / std::sqrt(static_cast<double>(kHeadDim)), kHeads),
                "rope q|k");
        },
        stream);
    qk.notes = all_finite_bf16(qkvg.p, qkvg.n) ? "q, k finite; one angle per row and pair for both"
                                               : "q, k NOT FINITE";
    report.add(qk);
  }
}

}  // namespace
}  // namespace yoco::cuda_bench
