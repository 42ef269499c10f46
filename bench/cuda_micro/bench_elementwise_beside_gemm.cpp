// A prefill GEMM and a memory-bound pass of another prefill step run side by side on two streams,
// against the two on one stream: does the GPU hide the pass under the GEMM?
//
// Why (issue 34's goal, 2.6 s at 512K): run-22's CUPTI puts yoco-3b's 512K prefill at 2.39 s of GEMMs at
// cuBLAS's pace and 0.55 s of passes at the copy rate (add + RMSNorm, SwiGLU, RoPE, norm + gate, the gRet
// chunk). Removing passes (fusions, bytes saved) has about 0.05 s left in it; the goal needs some 0.3 s
// more. Only running the passes while the tensor cores work can give that: inside one prefill step every
// kernel waits for the one before, but layer l of step c + 1 needs only layer l - 1 of step c + 1 and
// layer l's state after step c, so two steps a layer apart could run on two streams. That is a large
// change to both runners (two steps' buffers, events a layer); these rows say first whether it can pay.
//
// The rows, at yoco-3b's shapes and a 32,768-row step (the runners' default chunk), for three pairs (the
// W1|W3 GEMM beside an add + RMSNorm; the q|k|v|g GEMM beside SwiGLU; the q|k|v|g GEMM beside the gRet
// chunk, whose one-stream row is also the runner's order within a step):
// - the GEMM alone and the pass alone (each at its floor in its own family's rows);
// - the two on one stream (what the runners do: the sum);
// - the two on two streams, the GEMM enqueued first, the same priority;
// - the same with the pass's stream at the device's greatest priority (its blocks go first to each SM
//   a GEMM block frees).
// A two-stream row's notes give its time over the one-stream row's and the share of the pass alone it
// hid: (one stream - two streams) / pass alone. No ceiling: the rows carry neither bytes nor FLOPs.
// What decides the two-step prefill is in reports/results/nvidia-h100/logs/RUNS.md (the next calls).
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <stdexcept>
#include <string>

#include "bench_buffers.hpp"
#include "config.hpp"
#include "gret/gret_chunk.hpp"
#include "gret/gret_select.hpp"
#include "kernel_bench.hpp"
#include "ops/elementwise.hpp"
#include "ops/gemm.hpp"
#include "runner/generation_bytes.hpp"  // kCublasWorkspaceBytes: the runners' workspace
#include "suite_skips.hpp"

namespace yoco::cuda_bench {
namespace {

constexpr int64_t kRows = 32768;

struct EventPair {
  cudaEvent_t fork = nullptr, gemm_done = nullptr, pass_done = nullptr;
  EventPair() {
    check(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming), "event");
    check(cudaEventCreateWithFlags(&gemm_done, cudaEventDisableTiming), "event");
    check(cudaEventCreateWithFlags(&pass_done, cudaEventDisableTiming), "event");
  }
  ~EventPair() {
    cudaEventDestroy(fork);
    cudaEventDestroy(gemm_done);
    cudaEventDestroy(pass_done);
  }
  EventPair(const EventPair&) = delete;
  EventPair& operator=(const EventPair&) = delete;
};

using Enqueue = std::function<void(cudaStream_t)>;

// `gemm` on `gemm_stream` and `pass` on `pass_stream`, both after what `timed` holds so far, and `timed`
// after both: the timing stream's events bracket the pair.
void side_by_side(cudaStream_t timed, cudaStream_t gemm_stream, cudaStream_t pass_stream, const EventPair& ev,
                  const Enqueue& gemm, const Enqueue& pass) {
  check(cudaEventRecord(ev.fork, timed), "fork");
  check(cudaStreamWaitEvent(gemm_stream, ev.fork, 0), "fork");
  check(cudaStreamWaitEvent(pass_stream, ev.fork, 0), "fork");
  gemm(gemm_stream);
  pass(pass_stream);
  check(cudaEventRecord(ev.gemm_done, gemm_stream), "join");
  check(cudaEventRecord(ev.pass_done, pass_stream), "join");
  check(cudaStreamWaitEvent(timed, ev.gemm_done, 0), "join");
  check(cudaStreamWaitEvent(timed, ev.pass_done, 0), "join");
}

std::string pair_notes(const Timing& two, const Timing& one, const Timing& pass_alone) {
  char buf[160];
  std::snprintf(buf, sizeof buf, "%.3fx the one-stream pair's median; hid %.0f%% of the pass alone",
                two.median_s / one.median_s, 100.0 * (one.median_s - two.median_s) / pass_alone.median_s);
  return buf;
}

// The five rows of one pair; `name` is "<GEMM> m 32768 + <pass>".
void pair_rows(Report& report, const std::string& name, const Enqueue& gemm, const Enqueue& pass,
               cudaStream_t stream) {
  int least = 0, greatest = 0;
  check(cudaDeviceGetStreamPriorityRange(&least, &greatest), "stream priorities");
  const ScopedStream gemm_stream(least), pass_same(least), pass_first(greatest);
  const EventPair ev;
  const auto row = [&](const std::string& how, const Enqueue& launch) {
    KernelResult r{"beside_gemm", name + ", " + how, "yoco-3b", kRows, 1, 0, 0, {}, ""};
    r.time = time_launches(launch, stream);
    return r;
  };
  KernelResult g = row("GEMM alone", gemm);
  KernelResult p = row("pass alone", pass);
  KernelResult one = row("one stream", [&](cudaStream_t s) {
    gemm(s);
    pass(s);
  });
  KernelResult two = row("two streams", [&](cudaStream_t s) { side_by_side(s, gemm_stream.s, pass_same.s, ev, gemm, pass); });
  KernelResult first = row("two streams, the pass at the greatest priority",
                           [&](cudaStream_t s) { side_by_side(s, gemm_stream.s, pass_first.s, ev, gemm, pass); });
  char sum[96];
  std::snprintf(sum, sizeof sum, "%.3fx the GEMM alone + the pass alone",
                one.time.median_s / (g.time.median_s + p.time.median_s));
  one.notes = sum;
  two.notes = pair_notes(two.time, one.time, p.time);
  first.notes = pair_notes(first.time, one.time, p.time) + "; priorities " + std::to_string(greatest) + " (pass) and " +
                std::to_string(least) + " (GEMM)";
  for (const KernelResult* r : {&g, &p, &one, &two, &first}) report.add(*r);
}

YOCO_KERNEL_BENCH(elementwise_beside_gemm) {
  ScopedStream scoped;
  const cudaStream_t stream = scoped.s;
  const ModelConfig y = preset_config("yoco-3b");
  const int64_t d = y.dim, F = y.hidden_dim;
  const size_t workspace_bytes = static_cast<size_t>(cuda::kCublasWorkspaceBytes);
  DeviceBuffer<unsigned char> workspace(workspace_bytes);
  cuda::Gemm gemm;
  if (!gemm.ok()) throw std::runtime_error("cuBLAS: " + gemm.error());
  if (const std::string e = gemm.set_workspace(workspace.p, workspace_bytes); !e.empty())
    throw std::runtime_error("cuBLAS: " + e);
  const auto linear = [&](const bf16* x, int64_t k, const bf16* w, int64_t n, bf16* out) {
    return [&gemm, x, k, w, n, out](cudaStream_t s) {
      if (const std::string e = gemm.linear(x, kRows, k, w, n, out, s); !e.empty())
        throw std::runtime_error("cuBLAS: " + e);
    };
  };

  DeviceBuffer<bf16> x(static_cast<size_t>(kRows * d));
  fill_normal_bf16(x.p, x.n, 81, 1.0f);
  {
    // One step's W1|W3 GEMM beside another step's add + RMSNorm (the norm after W2).
    DeviceBuffer<bf16> w13(static_cast<size_t>(2 * F * d)), h13(static_cast<size_t>(kRows * 2 * F));
    DeviceBuffer<float> residual(static_cast<size_t>(kRows * d));
    DeviceBuffer<bf16> delta(static_cast<size_t>(kRows * d)), nw(static_cast<size_t>(d)),
        normed(static_cast<size_t>(kRows * d));
    fill_normal_bf16(w13.p, w13.n, 82, 0.02f);
    fill_uniform_f32(residual.p, residual.n, 83, 0.0f, 2.0f);
    fill_normal_bf16(delta.p, delta.n, 84, 1.0f);
    fill_normal_bf16(nw.p, nw.n, 85, 0.25f);
    pair_rows(report, "W1|W3 m 32768 k 3072 n 16384 + add + RMSNorm rows 32768 d 3072",
              linear(x.p, d, w13.p, 2 * F, h13.p),
              [&](cudaStream_t s) {
                check(cuda::launch_add_rms_norm(residual.p, delta.p, nw.p, kRows, d, 1e-5f, normed.p, s),
                      "add_rms_norm");
              },
              stream);
  }
  {
    // One step's q|k|v|g GEMM beside another step's SwiGLU.
    DeviceBuffer<bf16> wqkvg(static_cast<size_t>(4 * d * d)), qkvg(static_cast<size_t>(kRows * 4 * d));
    DeviceBuffer<bf16> h13(static_cast<size_t>(kRows * 2 * F)), h(static_cast<size_t>(kRows * F));
    fill_normal_bf16(wqkvg.p, wqkvg.n, 86, 0.02f);
    fill_normal_bf16(h13.p, h13.n, 87, 2.0f);
    pair_rows(report, "q|k|v|g m 32768 k 3072 n 12288 + SwiGLU rows 32768 F 8192",
              linear(x.p, d, wqkvg.p, 4 * d, qkvg.p),
              [&](cudaStream_t s) { check(cuda::launch_swiglu(h13.p, kRows, F, h.p, s), "swiglu"); }, stream);
    if (!all_finite_bf16(h.p, h.n, size_t{1} << 20)) throw std::runtime_error("SwiGLU out NOT FINITE");
  }
  {
    // One step's q|k|v|g GEMM beside another step's gRet chunk: the library's plan on q|k|v|g rows as the
    // runner reads them, its fused pass (phase 3) alone after one full launch has filled the workspace, the
    // pass run-22's CUPTI timed at 514 us a 32K step in yoco-3b's prefill, 1.5x the kernel benchmark's 343 us
    // alone (cuda/gret/NOTES-gret_chunk.md, "In the runner"). The one-stream row is the runner's order
    // within a step (the GEMM, then the chunk): over "GEMM alone + pass alone" it says whether the GEMM
    // before it slows the pass.
    const int64_t H = y.n_self_heads, D = y.self_head_dim(), W = H * D, stride = 4 * W;
    int dev = 0, sms = 0;
    check(cudaGetDevice(&dev), "device");
    check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev), "sm count");
    const cuda::GretChunkShape shape{1, H, D, kRows, stride};
    cuda::GretChunkPlan plan = cuda::select_gret_chunk(shape, sms);
    // The library's plan is v6 here; where the suite left v6 (or v7) out after its smoke test, v3's, which
    // the same call's tests passed, and the row's name says which ran and why.
    const int planned = plan.kernel;
    if ((planned == 6 && skipped_by_suite("YOCO_GRET_SKIP_V6")) || (planned == 7 && skipped_by_suite("YOCO_GRET_SKIP_V7")))
      plan = cuda::plan_gret_chunk_v3(shape, sms);
    const std::string whose = plan.kernel == planned ? "of the library plan"
                                                     : "of v3's plan (the library's v" + std::to_string(planned) +
                                                           " left out by the suite)";
    const size_t ws_bytes = cuda::gret_chunk_workspace_bytes(shape, plan);
    DeviceBuffer<bf16> wqkvg(static_cast<size_t>(4 * d * d)), qkvg(static_cast<size_t>(kRows * 4 * d)),
        rows(static_cast<size_t>(kRows * stride)), o(static_cast<size_t>(kRows * W));
    DeviceBuffer<float> lg(static_cast<size_t>(kRows * H)), state(static_cast<size_t>(H * D * D));
    DeviceBuffer<unsigned char> ws(std::max<size_t>(ws_bytes, 16));
    fill_normal_bf16(wqkvg.p, wqkvg.n, 88, 0.02f);
    fill_normal_bf16(rows.p, rows.n, 89, 0.3f);
    fill_uniform_f32(lg.p, lg.n, 90, -0.03f, 0.02f);  // log-gammas in [-0.05, -0.01]
    fill_uniform_f32(state.p, state.n, 91, 0.0f, 0.1f);
    const auto chunk = [&](unsigned phases, cudaStream_t s) {
      check(cuda::launch_gret_chunk_phases(phases, rows.p, rows.p + W, rows.p + 2 * W, lg.p, state.p, o.p, shape, plan,
                                           ws.p, ws_bytes, s),
            "gret_chunk");
    };
    chunk(cuda::kGretAllPhases, stream);
    check(cudaStreamSynchronize(stream), "gret_chunk");
    const unsigned timed = plan.segments > 1 ? cuda::kGretPhaseFused : cuda::kGretAllPhases;
    pair_rows(report,
              "q|k|v|g m 32768 k 3072 n 12288 + gRet chunk " +
                  std::string(plan.segments > 1 ? "phase 3 (fused)" : "(one pass)") + " " + whose + " (v" +
                  std::to_string(plan.kernel) + " P" + std::to_string(plan.segments) + ") H" + std::to_string(H) +
                  " D" + std::to_string(D),
              linear(x.p, d, wqkvg.p, 4 * d, qkvg.p), [&](cudaStream_t s) { chunk(timed, s); }, stream);
    if (!all_finite_bf16(o.p, o.n, size_t{1} << 20)) throw std::runtime_error("gRet chunk out NOT FINITE");
  }
}

}  // namespace
}  // namespace yoco::cuda_bench
