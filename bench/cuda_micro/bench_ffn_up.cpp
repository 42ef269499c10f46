// The FFN's up half of yoco-3b (d 3072, F 8192) at a prefill step's rows: the fused W1|W3 GEMM
// with SwiGLU in its epilogue (cuda/ops/gemm_swiglu.hpp) against what it replaces, cuBLAS's GEMM
// into the [rows, 2F] buffer and the SwiGLU pass, timed in the same run (and cuBLAS's GEMM alone,
// the pace the fused kernel must keep). Every row's FLOPs are the GEMM's (2 rows K 2F) against
// the run's GEMM ceiling; bytes are the task's essential ones (x, [W1; W3] and the output once).
// Issue 34 counts on the fused row being no slower than the pair: the calibrated model's 0.12 s
// at 512K (2.73 -> 2.61 s). The fused row's time includes its launcher's host work (two tensor
// maps encoded, device queries: microseconds, against milliseconds of GEMM). The kernel in CTA pairs
// (GemmSwigluCtas::pair, not yet run on a GPU) beside it.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <vector>

#include "bench_buffers.hpp"
#include "kernel_bench.hpp"
#include "ops/elementwise.hpp"
#include "ops/gemm.hpp"
#include "ops/gemm_swiglu.hpp"
#include "suite_skips.hpp"

namespace yoco::cuda_bench {
namespace {

constexpr int64_t kD = 3072, kF = 8192;

void check_gemm_str(const std::string& error) {
  if (!error.empty()) throw std::runtime_error("cuBLAS: " + error);
}

bool fused_skipped_by_suite() { return skipped_by_suite("YOCO_FFN_SKIP_FUSED"); }

YOCO_KERNEL_BENCH(ffn_up) {
  ScopedStream scoped;
  const cudaStream_t stream = scoped.s;
  cuda::Gemm gemm;
  if (!gemm.ok()) throw std::runtime_error("cuBLAS: " + gemm.error());
  DeviceBuffer<unsigned char> workspace(32 << 20);
  if (const std::string e = gemm.set_workspace(workspace.p, workspace.n); !e.empty()) throw std::runtime_error(e);
  DeviceBuffer<bf16> w13(2 * kF * kD);
  fill_normal_bf16(w13.p, w13.n, 41, 0.018f);  // about 1 / sqrt(d)
  // A 32K-token step (the runners' default chunk) and 8,192 rows (issue 34's FFN row blocks).
  for (const int64_t rows : {int64_t{32768}, int64_t{8192}}) {
    DeviceBuffer<bf16> x(rows * kD), h13(rows * 2 * kF), fused(rows * kF), pair(rows * kF);
    fill_normal_bf16(x.p, x.n, 42, 1.0f);
    const double flops = 2.0 * rows * kD * 2 * kF;
    const double bytes = 2.0 * (rows * kD + 2 * kF * kD + rows * kF);
    const std::string shape = "rows " + std::to_string(rows) + " d 3072 F 8192";

    KernelResult g{"ffn_up", "cublas W1|W3 alone, " + shape, "yoco-3b", rows, 1, bytes, flops, {}, ""};
    g.time = time_launches(
        [&](cudaStream_t st) { check_gemm_str(gemm.linear(x.p, rows, kD, w13.p, 2 * kF, h13.p, st)); }, stream);
    g.notes = "the GEMM the fused kernel replaces, without SwiGLU";
    report.add(g);

    KernelResult u{"ffn_up", "cublas W1|W3 + swiglu, " + shape, "yoco-3b", rows, 1, bytes, flops, {}, ""};
    u.time = time_launches(
        [&](cudaStream_t st) {
          check_gemm_str(gemm.linear(x.p, rows, kD, w13.p, 2 * kF, h13.p, st));
          check(cuda::launch_swiglu(h13.p, rows, kF, pair.p, st), "swiglu");
        },
        stream);
    u.notes = all_finite_bf16(pair.p, pair.n, 1 << 20) ? "the runners' default" : "out NOT FINITE";
    report.add(u);

    KernelResult f{"ffn_up", "fused gemm_swiglu, " + shape, "yoco-3b", rows, 1, bytes, flops, {}, ""};
    const cuda::gemm_swiglu::Shape s{rows, kD, kF, kD, kF};
    const cudaError_t probe = fused_skipped_by_suite() ? cudaErrorNotSupported
                                                       : cuda::launch_gemm_swiglu(x.p, w13.p, s, fused.p, stream);
    if (fused_skipped_by_suite()) {
      f.skipped = "YOCO_FFN_SKIP_FUSED=1: the GPU suite's smoke test of the fused kernel failed";
    } else if (probe == cudaErrorNotSupported) {
      f.skipped = "the fused kernel needs compute capability 9.0";
    } else {
      check(probe, "gemm_swiglu");
      check(cudaStreamSynchronize(stream), "gemm_swiglu");
      f.time = time_launches(
          [&](cudaStream_t st) { check(cuda::launch_gemm_swiglu(x.p, w13.p, s, fused.p, st), "gemm_swiglu"); },
          stream);
      const double diff = max_rel_diff(fused.p, pair.p, std::min<size_t>(fused.n, size_t{1} << 22));
      char buf[200];
      std::snprintf(buf, sizeof buf, "%.3fx the pair's median; largest difference from the pair %.2g (relative, "
                    "first 4M values)", f.time.median_s / u.time.median_s, diff);
      f.notes = std::string(all_finite_bf16(fused.p, fused.n, 1 << 20) ? "" : "out NOT FINITE; ") + buf;
    }
    report.add(f);

    // The same kernel in CTA pairs (clusters of two sharing the weight tile by multicast: a third less
    // L2 traffic a k block). Its bits must be the one-CTA kernel's; its time is what decides it.
    KernelResult pr{"ffn_up", "fused gemm_swiglu, CTA pairs, " + shape, "yoco-3b", rows, 1, bytes, flops, {}, ""};
    if (!f.skipped.empty() || skipped_by_suite("YOCO_FFN_SKIP_PAIRS")) {
      pr.skipped = f.skipped.empty() ? "YOCO_FFN_SKIP_PAIRS=1: the GPU suite's smoke test of the CTA pairs failed"
                                     : f.skipped;
    } else {
      DeviceBuffer<bf16> paired(rows * kF);
      const int64_t pairs_before = cuda::gemm_swiglu_launches(cuda::GemmSwigluCtas::pair);
      const cudaError_t e = cuda::launch_gemm_swiglu(x.p, w13.p, s, paired.p, stream, cuda::GemmSwigluCtas::pair);
      check(e, "gemm_swiglu pairs");
      if (cuda::gemm_swiglu_launches(cuda::GemmSwigluCtas::pair) == pairs_before) {
        pr.skipped = "no cluster of two CTAs fits this device as the kernel is configured (the one-CTA kernel ran)";
      } else {
        check(cudaStreamSynchronize(stream), "gemm_swiglu pairs");
        pr.time = time_launches(
            [&](cudaStream_t st) {
              check(cuda::launch_gemm_swiglu(x.p, w13.p, s, paired.p, st, cuda::GemmSwigluCtas::pair),
                    "gemm_swiglu pairs");
            },
            stream);
        const double same = max_rel_diff(paired.p, fused.p, std::min<size_t>(paired.n, size_t{1} << 22));
        char buf[200];
        std::snprintf(buf, sizeof buf, "%.3fx the pair's median, %.3fx the one-CTA kernel's; largest difference from "
                      "the one-CTA kernel %.2g (first 4M values; its bits are expected)",
                      pr.time.median_s / u.time.median_s, pr.time.median_s / f.time.median_s, same);
        pr.notes = buf;
      }
    }
    report.add(pr);
  }
}

}  // namespace
}  // namespace yoco::cuda_bench
