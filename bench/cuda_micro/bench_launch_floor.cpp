// What one launch costs when the work is tiny: the runners' own small kernels (add + RMSNorm of one
// row, cuBLAS's GEMM of one row, and of a small preset's 4K prefill step) launched 200 times back to
// back, replayed as one CUDA graph (the GPU's floor per launch: a decode step's kernels in its graph)
// and launched eagerly (the host's pace per call: a prefill's, whose calls are not captured). The
// calibrated cost model (issue 31) prices fixed costs per layer, fitted on yoco-3b, where they do
// not carry to the small presets (README, "The calibrated cost model"), and prices a prefill's host
// calls at the eager decode steps' 7.5 us a call, where the small presets' prefills take 10-17 us a
// call; these rows say what a launch of each kind costs on the card. Per-launch times (the total
// over 200 / 200); no bytes or FLOPs: these rows are not against a ceiling.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>

#include "bench_buffers.hpp"
#include "kernel_bench.hpp"
#include "ops/elementwise.hpp"
#include "ops/gemm.hpp"

namespace yoco::cuda_bench {
namespace {

constexpr int kLaunches = 200;

void check_gemm_str(const std::string& error) {
  if (!error.empty()) throw std::runtime_error("cuBLAS: " + error);
}

Timing per_launch(Timing t) {
  t.median_s /= kLaunches;
  t.min_s /= kLaunches;
  t.max_s /= kLaunches;
  return t;
}

// `one` enqueues one launch on the stream it is given: timed as a graph of kLaunches and eagerly.
void floor_rows(Report& report, const std::string& what, const std::string& model,
                const std::function<void(cudaStream_t)>& one, cudaStream_t stream) {
  cudaGraph_t graph = nullptr;
  check(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), "begin capture");
  for (int i = 0; i < kLaunches; ++i) one(stream);
  check(cudaStreamEndCapture(stream, &graph), "end capture");
  cudaGraphExec_t exec = nullptr;
  const cudaError_t e = cudaGraphInstantiate(&exec, graph, 0);
  cudaGraphDestroy(graph);
  check(e, "instantiate");
  KernelResult g{"launch_floor", what + ", graph of " + std::to_string(kLaunches), model, 0, 1, 0, 0, {}, ""};
  g.time = per_launch(time_launches([&](cudaStream_t s) { check(cudaGraphLaunch(exec, s), "graph launch"); },
                                    stream, 3, 20, false));
  g.notes = "per launch: one replay / " + std::to_string(kLaunches) + " (the GPU's floor a node)";
  report.add(g);
  cudaGraphExecDestroy(exec);
  KernelResult r{"launch_floor", what + ", eager " + std::to_string(kLaunches), model, 0, 1, 0, 0, {}, ""};
  r.time = per_launch(time_launches(
      [&](cudaStream_t s) {
        for (int i = 0; i < kLaunches; ++i) one(s);
      },
      stream, 3, 20, false));
  r.notes = "per launch: " + std::to_string(kLaunches) + " eager launches / " + std::to_string(kLaunches) +
            " (the host's pace a call, or the kernel's where it is longer)";
  report.add(r);
}

YOCO_KERNEL_BENCH(launch_floor) {
  ScopedStream scoped;
  const cudaStream_t stream = scoped.s;
  // add + RMSNorm of one row: a decode step's norm, at yoco-small's and yoco-3b's widths.
  for (const auto& [d, model] : {std::pair<int64_t, const char*>{256, "yoco-small"}, {3072, "yoco-3b"}}) {
    DeviceBuffer<float> residual(d);
    DeviceBuffer<bf16> delta(d), w(d), out(d);
    fill_uniform_f32(residual.p, residual.n, 51, 0.0f, 2.0f);
    fill_normal_bf16(delta.p, delta.n, 52, 1.0f);
    fill_normal_bf16(w.p, w.n, 53, 0.25f);
    floor_rows(report, "add_rms_norm rows 1 d " + std::to_string(d), model,
               [&](cudaStream_t s) {
                 check(cuda::launch_add_rms_norm(residual.p, delta.p, w.p, 1, d, 1e-5f, out.p, s), "add_rms_norm");
               },
               stream);
  }
  // cuBLAS: yoco-small's W1|W3 (k 256, n 2F = 1536) for one row (a decode step) and for a 4K
  // prefill step, on the runners' own workspace as they run it.
  cuda::Gemm gemm;
  if (!gemm.ok()) throw std::runtime_error("cuBLAS: " + gemm.error());
  DeviceBuffer<unsigned char> workspace(32 << 20);
  check_gemm_str(gemm.set_workspace(workspace.p, workspace.n));
  constexpr int64_t kK = 256, kN = 1536;
  DeviceBuffer<bf16> wt(kN * kK);
  fill_normal_bf16(wt.p, wt.n, 54, 0.06f);
  for (const int64_t m : {int64_t{1}, int64_t{4096}}) {
    DeviceBuffer<bf16> x(m * kK), y(m * kN);
    fill_normal_bf16(x.p, x.n, 55, 1.0f);
    floor_rows(report, "cublas gemm m " + std::to_string(m) + " k 256 n 1536", "yoco-small",
               [&](cudaStream_t s) { check_gemm_str(gemm.linear(x.p, m, kK, wt.p, kN, y.p, s)); }, stream);
  }
}

}  // namespace
}  // namespace yoco::cuda_bench
