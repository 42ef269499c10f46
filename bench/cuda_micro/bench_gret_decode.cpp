// gRet decode kernels (issue 14; KERNELS.md §3 "Decode step"):
// - the sliced decode step at yoco-3b shape (24 heads × 128) for batch 1 and 8,
//   and 16 heads × 256 (the second shape) for batch 1 and 8; floor
//   bytes = B·H·2·D²·4 (the fp32 state read and written), L2 flushed first;
// - the step fused with norm + gate, against step + launch_gret_norm_gate;
// - 13 steps (one per gRet layer, 13 distinct states) launched eagerly and as
//   one CUDA-graph replay: the difference is the per-step launch overhead;
//   plain, fused, overlapped (programmatic dependent launches), and the
//   deferred step overlapped, plain and fused (gret_pending.hpp: the state
//   traffic leaves the dependent path; its 3.7 % of extra record bytes at
//   D 128 are not in the floor); the split step overlapped, plain and fused
//   (gret_recurrent.hpp: the output step on the dependent path, each layer's
//   state update forked onto a side stream and joined at the end, so the
//   time runs until every state is written; its second read of the state is
//   not in the floor): updates on 13 side streams (each beside the later
//   layers, as in a runner, where each has a layer's projections and FFN to
//   run beside) and on 1 (the updates in one queue); and two probes of why
//   the split step lost: its output steps alone (no update: the dependent
//   chain's own time), and the overlapped step with an empty fork after each
//   layer (a fork's own cost to a programmatic chain);
// - norm + gate and the log-decay at 32K tokens × 24 heads × 128; norm + gate
//   also with g inside q|k|v|g rows (the model's layout), per-warp and
//   half-warp kernels, and the half-warp kernel on the contiguous g.
// The old one-block-per-head kernel is gone (this replaces it), so the
// comparison is against the copy ceiling only.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "device/counter_init.hpp"
#include "dtype.hpp"
#include "gret/gret_gate.hpp"
#include "gret/gret_recurrent.hpp"
#include "gret/gret_update_branches.hpp"
#include "bench_buffers.hpp"
#include "kernel_bench.hpp"

namespace yoco::cuda_bench {
namespace {

struct Shape {
  const char* model;
  int64_t batch, heads, D;
};

constexpr int kLayers = 13;  // gRet layers of yoco-3b

void bench_step(Report& report, const Shape& s, cudaStream_t stream) {
  const int64_t B = s.batch, H = s.heads, D = s.D, HD = H * D, stride = 4 * HD;  // row: q | k | v | g
  const double step_bytes = static_cast<double>(B * H) * 2.0 * D * D * 4.0;
  const double step_flops = 4.0 * static_cast<double>(B * H) * D * D;
  const std::string shape = "B" + std::to_string(B) + " H" + std::to_string(H) + " D" + std::to_string(D);
  DeviceBuffer<bf16> row(B * stride), o(B * HD), out(B * HD);
  DeviceBuffer<float> lg(B * H), states(static_cast<size_t>(kLayers) * B * H * D * D);
  fill_normal_bf16(row.p, row.n, 1 + D + B, 1.0f);
  fill_uniform_f32(lg.p, lg.n, 7, -0.001f, 0.0005f);  // γ ≈ 0.999
  fill_uniform_f32(states.p, states.n, 8, 0.0f, 0.1f);
  const bf16 *q = row.p, *k = row.p + HD, *v = row.p + 2 * HD, *g = row.p + 3 * HD;
  const size_t state_elems = static_cast<size_t>(B * H * D * D);
  auto step = [&](cudaStream_t st, int layer, bool overlap = false) {
    check(cuda::launch_gret_recurrent_step(q, k, v, stride, lg.p, states.p + layer * state_elems, o.p, B, H, D, st,
                                           overlap),
          "step");
  };
  const bool fused_ok = cuda::gret_fused_step_supported(D);
  auto fused = [&](cudaStream_t st, int layer) {
    check(cuda::launch_gret_recurrent_step_norm_gate(q, k, v, stride, lg.p, states.p + layer * state_elems, g, stride,
                                                     1e-5f, out.p, B, H, D, st),
          "fused step");
  };
  const size_t pend_bytes = static_cast<size_t>(cuda::gret_pending_bytes(B, H, D));
  DeviceBuffer<unsigned char> pending(std::max<size_t>(16, kLayers * pend_bytes));
  check(cudaMemset(pending.p, 0, pending.n), "zero the pending updates");
  auto deferred = [&](cudaStream_t st, int layer, bool with_gate, bool overlap) {
    float* state = states.p + layer * state_elems;
    void* p = pending.p + layer * pend_bytes;
    check(with_gate ? cuda::launch_gret_deferred_step_norm_gate(q, k, v, stride, lg.p, state, p, g, stride, 1e-5f,
                                                                out.p, B, H, D, st, overlap)
                    : cuda::launch_gret_deferred_step(q, k, v, stride, lg.p, state, p, o.p, B, H, D, st, overlap),
          "deferred step");
  };

  // One step, eager, cold L2.
  {
    KernelResult r{"gret_decode", shape + " eager", s.model, 0, B, step_bytes, step_flops, {}, ""};
    r.time = time_launches([&](cudaStream_t st) { step(st, 0); }, stream);
    r.notes = std::string("floor bytes = B*H*2*D*D*4; ") + (all_finite_bf16(o.p, o.n) ? "o finite" : "o NOT FINITE");
    report.add(r);
  }
  // Step then norm + gate (two launches) vs the fused kernel.
  {
    const double ng_bytes = 3.0 * static_cast<double>(B * HD) * 2.0;
    KernelResult r{"gret_decode", shape + " step+norm_gate eager", s.model, 0, B, step_bytes + ng_bytes,
                   step_flops, {}, "two launches"};
    r.time = time_launches(
        [&](cudaStream_t st) {
          step(st, 0);
          check(cuda::launch_gret_norm_gate(o.p, g, stride, B, H, D, 1e-5f, out.p, st), "norm_gate");
        },
        stream);
    report.add(r);
    if (fused_ok) {
      KernelResult d{"gret_decode", shape + " deferred eager", s.model, 0, B, step_bytes, step_flops, {}, ""};
      d.time = time_launches([&](cudaStream_t st) { deferred(st, 0, false, false); }, stream);
      d.notes = std::string("state one step behind; + pending records ") + std::to_string(pend_bytes) +
                " B each way; " + (all_finite_bf16(o.p, o.n) ? "o finite" : "o NOT FINITE");
      report.add(d);
      KernelResult f{"gret_decode", shape + " fused norm_gate eager", s.model, 0, B,
                     step_bytes + 2.0 * static_cast<double>(B * HD) * 2.0, step_flops, {}, ""};
      f.time = time_launches([&](cudaStream_t st) { fused(st, 0); }, stream);
      f.notes = std::string("cluster of D/slice CTAs per head; ") +
                (all_finite_bf16(out.p, out.n) ? "out finite" : "out NOT FINITE");
      report.add(f);
    }
  }
  // The split step: the output step (a programmatic dependent of the layer
  // before, but the first: it follows the previous repeat's join), its state
  // update forked onto `br`; every update joined at the end.
  cuda::GretUpdateBranches side13(kLayers), side1(1);
  check(side13.prepare(), "side streams");
  check(side1.prepare(), "side stream");
  auto split = [&](cudaStream_t st, int layer, bool with_gate, cuda::GretUpdateBranches& br) {
    float* state = states.p + layer * state_elems;
    check(with_gate ? cuda::launch_gret_output_step_norm_gate(q, k, v, stride, lg.p, state, g, stride, 1e-5f, out.p,
                                                              B, H, D, st, layer > 0)
                    : cuda::launch_gret_output_step(q, k, v, stride, lg.p, state, o.p, B, H, D, st, layer > 0),
          "output step");
    check(br.launch_update(st, k, v, stride, lg.p, state, B, H, D), "state update");
  };

  // Mode 9's forks: after each layer a 4-byte memset on a side stream of its
  // own, joined at the end (the split step's forks and joins without its
  // update kernels).
  struct ForkProbe {
    std::vector<cudaStream_t> side;
    std::vector<cudaEvent_t> done;
    cudaEvent_t fork = nullptr;
    DeviceBuffer<float> target{kLayers};
    ForkProbe() {
      check(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming), "fork event");
      for (int l = 0; l < kLayers; ++l) {
        side.emplace_back();
        done.emplace_back();
        check(cudaStreamCreateWithFlags(&side.back(), cudaStreamNonBlocking), "side stream");
        check(cudaEventCreateWithFlags(&done.back(), cudaEventDisableTiming), "join event");
      }
    }
    ~ForkProbe() {
      for (cudaEvent_t e : done) cudaEventDestroy(e);
      for (cudaStream_t x : side) cudaStreamDestroy(x);
      cudaEventDestroy(fork);
    }
    ForkProbe(const ForkProbe&) = delete;
    ForkProbe& operator=(const ForkProbe&) = delete;
    void after(cudaStream_t main, int l) {
      const size_t i = static_cast<size_t>(l);
      check(cudaEventRecord(fork, main), "fork");
      check(cudaStreamWaitEvent(side[i], fork, 0), "side waits");
      check(cudaMemsetAsync(target.p + l, 0, sizeof(float), side[i]), "probe memset");
      check(cudaEventRecord(done[i], side[i]), "side done");
    }
    void join(cudaStream_t main) {
      for (cudaEvent_t e : done) check(cudaStreamWaitEvent(main, e, 0), "join");
    }
  } probe;

  // 13 layers: eager launches vs one graph replay (each layer its own state);
  // mode 2 launches each step as a programmatic dependent of the one before
  // (its state loads overlap the previous layer's tail: the header's contract
  // holds, every layer has its own state).
  // Modes 3 and 4: the deferred step overlapped, plain and with norm + gate
  // (each layer its own state and pending records: the contract holds).
  // Modes 5-7: the split step overlapped, plain and fused with 13 side
  // streams, fused with one. Mode 8: the split step's output steps alone,
  // overlapped, no update and no fork (not a decode step: the state is only
  // read, and the row's bytes are that read): the dependent chain's own time,
  // to tell whether run-17's split rows lost to the updates' traffic or to the
  // forks between the output steps (their 3.08 us a layer at B1 24x128 equal
  // the plain graph step's 3.14, as if the programmatic overlap were gone).
  // Mode 9: the overlapped eager step with an empty fork after each layer
  // (ForkProbe): whether a fork alone costs a programmatic chain its overlap.
  auto thirteen = [&](cudaStream_t st, int mode) {
    for (int l = 0; l < kLayers; ++l) {
      if (mode == 9) {
        step(st, l, true);
        probe.after(st, l);
      } else if (mode == 8)
        check(cuda::launch_gret_output_step(q, k, v, stride, lg.p, states.p + l * state_elems, o.p, B, H, D, st,
                                            l > 0),
              "output step");
      else if (mode >= 5) split(st, l, mode != 5, mode == 7 ? side1 : side13);
      else if (mode >= 3) deferred(st, l, mode == 4, true);
      else if (mode == 1) fused(st, l);
      else step(st, l, mode == 2);
    }
    if (mode >= 5 && mode <= 7) check((mode == 7 ? side1 : side13).join(st), "join the state updates");
    if (mode == 9) probe.join(st);
  };
  for (int mode : {0, 1, 2, 3, 4, 5, 6, 7, 8, 9}) {
    const bool use_fused = mode == 1 || mode == 4 || mode == 6 || mode == 7;
    if ((use_fused || mode == 3 || mode == 5 || mode == 8) && !fused_ok) continue;
    const double layer_bytes = mode == 8 ? step_bytes / 2 : step_bytes;
    const std::string kind = mode == 1   ? "fused step+norm_gate"
                             : mode == 2 ? "step overlapped"
                             : mode == 3 ? "deferred step overlapped"
                             : mode == 4 ? "deferred fused step+norm_gate overlapped"
                             : mode == 5 ? "split step overlapped 13 side streams"
                             : mode == 6 ? "split fused step+norm_gate overlapped 13 side streams"
                             : mode == 7 ? "split fused step+norm_gate overlapped 1 side stream"
                             : mode == 8 ? "output step alone overlapped (state read only)"
                             : mode == 9 ? "step overlapped, an empty fork after each (13 side streams)"
                                         : "step";
    KernelResult e{"gret_decode_13_layers", shape + " " + kind + " eager x13", s.model, 0, B, kLayers * layer_bytes,
                   kLayers * step_flops, {}, ""};
    e.time = time_launches([&](cudaStream_t st) { thirteen(st, mode); }, stream);
    e.notes = "per step " + std::to_string(e.time.median_s / kLayers * 1e6) + " us";
    report.add(e);

    cudaGraph_t graph = nullptr;
    cudaGraphExec_t exec = nullptr;
    check(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), "begin capture");
    thirteen(stream, mode);
    check(cudaStreamEndCapture(stream, &graph), "end capture");
    check(cudaGraphInstantiate(&exec, graph, 0), "graph instantiate");
    KernelResult gr{"gret_decode_13_layers", shape + " " + kind + " graph x13", s.model, 0, B, kLayers * layer_bytes,
                    kLayers * step_flops, {}, ""};
    gr.time = time_launches([&](cudaStream_t st) { check(cudaGraphLaunch(exec, st), "graph launch"); }, stream);
    check(cudaStreamSynchronize(stream), "graph sync");
    const bool finite = all_finite_bf16(use_fused ? out.p : o.p, o.n);
    gr.notes = "per step " + std::to_string(gr.time.median_s / kLayers * 1e6) + " us (eager " +
               std::to_string(e.time.median_s / kLayers * 1e6) + " us); " +
               (finite ? "output finite after replays" : "output NOT FINITE after replays");
    report.add(gr);
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
  }
}

YOCO_KERNEL_BENCH(gret_decode) {
  ScopedStream scoped;
  const cudaStream_t stream = scoped.s;
  {
    for (const Shape& s : {Shape{"yoco-3b", 1, 24, 128}, Shape{"yoco-3b", 8, 24, 128}, Shape{"H16 D256", 1, 16, 256},
                           Shape{"H16 D256", 8, 16, 256}})
      bench_step(report, s, stream);

    // Norm + gate and the log-decay over one 32K prefill chunk of yoco-3b.
    const int64_t rows = 32768, H = 24, D = 128, HD = H * D;
    {
      DeviceBuffer<bf16> o(rows * HD), g(rows * HD), out(rows * HD);
      fill_normal_bf16(o.p, o.n, 21, 2.0f);
      fill_normal_bf16(g.p, g.n, 22, 1.0f);
      KernelResult r{"gret_norm_gate", "rows 32768 H24 D128", "yoco-3b", rows, 1, 3.0 * rows * HD * 2.0, 0, {}, ""};
      r.time = time_launches(
          [&](cudaStream_t st) { check(cuda::launch_gret_norm_gate(o.p, g.p, HD, rows, H, D, 1e-5f, out.p, st), "norm_gate"); },
          stream);
      r.notes = all_finite_bf16(out.p, out.n) ? "out finite" : "out NOT FINITE";
      report.add(r);
      // The half-warp kernel (gret_gate.hpp NormGateKernel; 16 lanes a head, a persistent grid) on the same inputs.
      KernelResult hw{"gret_norm_gate", "rows 32768 H24 D128, half-warp kernel", "yoco-3b", rows, 1,
                      3.0 * rows * HD * 2.0, 0, {}, ""};
      hw.time = time_launches(
          [&](cudaStream_t st) {
            const auto k = cuda::NormGateKernel::half_warp;
            check(cuda::launch_gret_norm_gate(o.p, g.p, HD, rows, H, D, 1e-5f, out.p, st, k), "norm_gate half-warp");
          },
          stream);
      hw.notes = all_finite_bf16(out.p, out.n) ? "out finite" : "out NOT FINITE";
      report.add(hw);
    }
    {
      // The model's layout (yoco_self_decoder.cpp): g is the last quarter of each row of the fused
      // q|k|v|g projection, g_stride = 4·H·D. Both kernels named explicitly; these two rows decide
      // kNormGateHalfWarpByDefault (gret_gate.hpp). Bytes as above: o and g read, out written.
      const int64_t stride = 4 * HD;
      DeviceBuffer<bf16> qkvg(rows * stride), o(rows * HD);
      fill_normal_bf16(qkvg.p, qkvg.n, 24, 1.0f);
      fill_normal_bf16(o.p, o.n, 21, 2.0f);
      const bf16* g = qkvg.p + 3 * HD;
      for (const bool half_warp : {false, true}) {
        const auto kernel = half_warp ? cuda::NormGateKernel::half_warp : cuda::NormGateKernel::per_warp;
        KernelResult r{"gret_norm_gate",
                       std::string("rows 32768 H24 D128, g in q|k|v|g rows") + (half_warp ? ", half-warp kernel" : ""),
                       "yoco-3b", rows, 1, 3.0 * rows * HD * 2.0, 0, {}, ""};
        // In place, as the runners call it (out = o); o's values change from one repeat to the next
        // (each a norm and gate of the last), the bytes do not.
        r.time = time_launches(
            [&](cudaStream_t st) {
              check(cuda::launch_gret_norm_gate(o.p, g, stride, rows, H, D, 1e-5f, o.p, st, kernel), "norm_gate");
            },
            stream);
        r.notes = std::string(half_warp ? "half-warp" : "per-warp") + " kernel, in place; " +
                  (all_finite_bf16(o.p, o.n) ? "out finite" : "out NOT FINITE");
        report.add(r);
      }
    }
    {
      DeviceBuffer<float> z(rows * H), lg(rows * H);
      fill_uniform_f32(z.p, z.n, 23, 0.0f, 8.0f);
      KernelResult r{"gret_log_decay", "rows 32768 H24 fp32 z", "yoco-3b", rows, 1, rows * H * 8.0, 0, {}, ""};
      r.time = time_launches(
          [&](cudaStream_t st) { check(cuda::launch_gret_log_decay(z.p, H, rows, H, 16.0f, lg.p, st), "log_decay"); },
          stream);
      report.add(r);
    }
  }
}

}  // namespace
}  // namespace yoco::cuda_bench
