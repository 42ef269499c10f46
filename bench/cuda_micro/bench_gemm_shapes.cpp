// The runners' prefill GEMMs at their own shapes, against the same run's ceiling GEMM (m = n = k =
// 8192), and against every algorithm cuBLASLt's heuristic offers for the shape; and the same
// projections at a decode step's one row, against the copy ceiling (weights streamed, L2 flushed).
//
// Why (issue 34): CUPTI of yoco-3b's 512K prefill (run-22) has the four self-decoder GEMMs at 91.9% of
// the ceiling GEMM's rate as a whole. The W1|W3 GEMM runs at 100% on its own (`ffn_up`, run-21). If
// q|k|v|g does too, out_proj and W2 (n = d = 3072) run near 76%: 0.19 s of the 2.94 s prefill, more
// than all the element-wise kernels could still give back. These rows say:
// - which shapes lose, at both of the prefill chunks issue 34 weighs (32768 and 16384 rows);
// - whether a cuBLASLt algorithm other than the one cublasGemmEx picks gets it back. If one does, the
//   runners' GEMM can take a per-shape choice, with this row as its tuning record.
// Each row: FLOPs 2mnk against the GEMM ceiling; bytes x, W and y once.
// The runners' call (ops/gemm.hpp: cublasGemmEx, 32 MiB of workspace) is the reference. Each
// cuBLASLt algorithm's output (poisoned before it runs) is compared with the reference's on 64 rows
// spread over the output, and marked WRONG past 2^-5 relative. Candidates are the tuned GEMM's own
// (ops/gemm_lt.hpp: split-K sums in fp32 only), for the buffers' alignment.
// At a decode step's 1 and 4 rows, also ops/gemv.hpp's kernel (YOCO_GEMV=1 in the runners): its time
// over cublasGemmEx's in the same run, its largest difference from cuBLAS's output, and the fraction of
// the copy rate it streams the weight at.
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

#include "bench_buffers.hpp"
#include "config.hpp"
#include "kernel_bench.hpp"
#include "ops/elementwise.hpp"
#include "ops/gemm.hpp"
#include "ops/gemm_lt.hpp"
#include "ops/gemv.hpp"
#include "ops/gemv_plan.hpp"
#include "runner/generation_bytes.hpp"

namespace yoco::cuda_bench {
namespace {

constexpr int kLtAlgos = 8;  // the heuristic's first eight (it returns its best first)

void check_lt(cublasStatus_t s, const std::string& what) {
  if (s != CUBLAS_STATUS_SUCCESS) throw std::runtime_error("cuBLASLt " + what + ": status " + std::to_string(s));
}

struct GemmShape {
  const char* name;  // the projection, as the runner names it
  const char* model;
  int64_t k, n;
};

// The projections of a prefill step: yoco-3b's self-decoder layer (the 13 layers' GEMMs) and the
// global K/V, and the Transformer's attention projections where they differ from YOCO's.
std::vector<GemmShape> prefill_shapes() {
  const ModelConfig y = preset_config("yoco-3b"), t = preset_config("transformer-3b");
  return {
      {"q|k|v|g", "yoco-3b", y.dim, 4 * y.dim},
      {"out_proj", "yoco-3b", y.dim, y.dim},
      {"W1|W3", "yoco-3b", y.dim, 2 * y.hidden_dim},
      {"W2", "yoco-3b", y.hidden_dim, y.dim},
      {"global K|V", "yoco-3b", y.dim, 2 * y.kv_width()},
      // The gRet log-decays' projection (the runner's is fp32 out): 24 weight rows, 3 blocks of the GEMV
      // at a decode step, so the row says whether so few warps still beat cuBLAS there.
      {"log-decay gates", "yoco-3b", y.dim, y.n_self_heads},
      {"q|k|v", "transformer-3b", t.dim, t.q_width() + 2 * t.kv_width()},
      {"o_proj", "transformer-3b", t.q_width(), t.dim},
  };
}

// Largest |a - b| / max(|b|, 1e-3) over 64 whole rows spread evenly over [rows, n] outputs (all of
// them where there are fewer): a wrong tile anywhere in the output is seen, at 64 rows' download.
double sampled_rows_max_rel_diff(const bf16* a, const bf16* b, int64_t rows, int64_t n) {
  const int64_t take = std::min<int64_t>(rows, 64), step = rows / take;
  const size_t width = static_cast<size_t>(n) * sizeof(bf16), pitch = static_cast<size_t>(step) * width;
  DeviceBuffer<bf16> sa(static_cast<size_t>(take * n)), sb(static_cast<size_t>(take * n));
  check(cudaMemcpy2D(sa.p, width, a, pitch, width, static_cast<size_t>(take), cudaMemcpyDeviceToDevice), "gather");
  check(cudaMemcpy2D(sb.p, width, b, pitch, width, static_cast<size_t>(take), cudaMemcpyDeviceToDevice), "gather");
  return max_rel_diff(sa.p, sb.p, sa.n);
}

// The GEMV's row beside cublasGemmEx's (`cublas_s`, its median; `ref` its output) for one decode shape.
void gemv_row(Report& report, const std::string& shape, const char* model, int64_t rows, int64_t k, int64_t n,
              const bf16* x, const bf16* w, const bf16* ref, bf16* y, double bytes, double flops, double cublas_s,
              cudaStream_t stream) {
  KernelResult a{"gemm_shapes", shape + ", gemv (ours, YOCO_GEMV=1)", model, rows, 1, bytes, flops, {}, ""};
  if (const char* why = cuda::gemv::unsupported(rows, k, n, reinterpret_cast<uintptr_t>(x), reinterpret_cast<uintptr_t>(w))) {
    a.skipped = std::string("the GEMV does not serve it: ") + why;
    report.add(a);
    return;
  }
  check(cudaMemsetAsync(y, 0xff, static_cast<size_t>(rows * n) * sizeof(bf16), stream), "poison y");
  const auto run = [&](cudaStream_t s) {
    check(cuda::launch_gemv(x, rows, k, w, n, y, cuda::GemvOut::bf16, s), "gemv");
  };
  run(stream);
  check(cudaStreamSynchronize(stream), "gemv");
  const double diff = sampled_rows_max_rel_diff(y, ref, rows, n);
  a.time = time_launches(run, stream);
  const bool wrong = !(diff <= 1.0 / 32);
  char buf[200];
  std::snprintf(buf, sizeof buf, "%s%.3fx cublasGemmEx's median; largest difference from it %.2g (relative, every row)",
                wrong ? "WRONG OUTPUT; " : "", a.time.median_s / cublas_s, diff);
  a.notes = buf;
  report.add(a);
}

// A sublayer's end as the runners do it (the output projection into a bf16 delta, then add +
// RMSNorm: 2 + 12 bytes an element past the GEMM's operands) against the residual added in the GEMM's
// epilogue (cublasGemmEx accumulating into the fp32 residual, beta 1, then RMSNorm alone: 8 + 6
// bytes). The bytes are equal; what differs is whether the GEMM's epilogue hides its extra 6 under
// its main loop. Both rows' FLOPs are the GEMM's.
void sublayer_end_rows(Report& report, cuda::Gemm& gemm, const std::string& shape, const char* model, int64_t rows,
                       int64_t k, int64_t n, const bf16* x, const bf16* w, double flops, cudaStream_t stream) {
  DeviceBuffer<float> residual(static_cast<size_t>(rows * n));
  DeviceBuffer<bf16> delta(static_cast<size_t>(rows * n)), h(static_cast<size_t>(rows * n)),
      norm_w(static_cast<size_t>(n));
  fill_uniform_f32(residual.p, residual.n, 73, 0.0f, 1.0f);
  fill_normal_bf16(norm_w.p, norm_w.n, 74, 0.25f);
  const double elems = static_cast<double>(rows) * static_cast<double>(n);
  const double operands = 2.0 * static_cast<double>(rows * k + n * k);
  const auto fail = [](const std::string& e) {
    if (!e.empty()) throw std::runtime_error("cuBLAS: " + e);
  };
  KernelResult pair{"gemm_shapes", shape + ", into a bf16 delta, then add + RMSNorm (the runners')", model, rows, 1,
                    operands + 14.0 * elems, flops, {}, ""};
  pair.time = time_launches(
      [&](cudaStream_t s) {
        fail(gemm.linear(x, rows, k, w, n, delta.p, s));
        check(cuda::launch_add_rms_norm(residual.p, delta.p, norm_w.p, rows, n, 1e-5f, h.p, s), "add_rms_norm");
      },
      stream);
  pair.notes = all_finite_bf16(h.p, h.n, 1 << 20) ? "" : "out NOT FINITE";
  report.add(pair);
  KernelResult fused{"gemm_shapes", shape + ", accumulated into the fp32 residual (beta 1), then RMSNorm", model, rows,
                     1, operands + 14.0 * elems, flops, {}, ""};
  fused.time = time_launches(
      [&](cudaStream_t s) {
        fail(gemm.accumulate_f32(x, rows, k, w, n, residual.p, s));
        check(cuda::launch_rms_norm(residual.p, norm_w.p, rows, n, 1e-5f, h.p, s), "rms_norm");
      },
      stream);
  char buf[120];
  std::snprintf(buf, sizeof buf, "%.3fx the runners' pair's median", fused.time.median_s / pair.time.median_s);
  fused.notes = std::string(all_finite_bf16(h.p, h.n, 1 << 20) ? "" : "out NOT FINITE; ") + buf;
  report.add(fused);
}

YOCO_KERNEL_BENCH(gemm_shapes) {
  ScopedStream scoped;
  const cudaStream_t stream = scoped.s;
  const size_t workspace_bytes = static_cast<size_t>(cuda::kCublasWorkspaceBytes);  // the runners' own
  DeviceBuffer<unsigned char> workspace(workspace_bytes);
  cuda::Gemm gemm;
  if (!gemm.ok()) throw std::runtime_error("cuBLAS: " + gemm.error());
  if (const std::string e = gemm.set_workspace(workspace.p, workspace_bytes); !e.empty())
    throw std::runtime_error("cuBLAS: " + e);
  cublasLtHandle_t lt = nullptr;
  check_lt(cublasLtCreate(&lt), "create");
  struct LtHandle {
    cublasLtHandle_t h;
    ~LtHandle() { cublasLtDestroy(h); }
  } lt_guard{lt};

  // A prefill step's rows at both chunks issue 34 weighs, then a decode step's one row: its GEMMs stream
  // the weights (79% of copy in the sweep's CUPTI, LM head included), and the tuned GEMM chooses among
  // these same candidates where the step's shapes are met outside its graph.
  for (const int64_t rows : {int64_t{32768}, int64_t{16384}, int64_t{1}, int64_t{4}}) {
    for (const GemmShape& g : prefill_shapes()) {
      DeviceBuffer<bf16> x(static_cast<size_t>(rows * g.k)), w(static_cast<size_t>(g.n * g.k)),
          ref(static_cast<size_t>(rows * g.n)), y(static_cast<size_t>(rows * g.n));
      fill_normal_bf16(x.p, x.n, 71, 1.0f);
      fill_normal_bf16(w.p, w.n, 72, 0.02f);
      const double flops = 2.0 * static_cast<double>(rows) * static_cast<double>(g.n) * static_cast<double>(g.k);
      const double bytes = 2.0 * static_cast<double>(rows * g.k + g.n * g.k + rows * g.n);
      const std::string shape = std::string(g.name) + " m " + std::to_string(rows) + " k " + std::to_string(g.k) +
                                " n " + std::to_string(g.n);

      KernelResult r{"gemm_shapes", shape + ", cublasGemmEx (the runners' call)", g.model, rows, 1, bytes, flops,
                     {}, ""};
      r.time = time_launches(
          [&](cudaStream_t s) {
            if (const std::string e = gemm.linear(x.p, rows, g.k, w.p, g.n, ref.p, s); !e.empty())
              throw std::runtime_error("cuBLAS: " + e);
          },
          stream);
      r.notes = all_finite_bf16(ref.p, ref.n, 1 << 20) ? "the reference of the cuBLASLt rows" : "out NOT FINITE";
      report.add(r);
      if (rows <= cuda::gemv::kMaxRows)
        gemv_row(report, shape, g.model, rows, g.k, g.n, x.p, w.p, ref.p, y.p, bytes, flops, r.time.median_s, stream);
      if (rows == 4) continue;  // batch 4: cuBLAS and the GEMV only

      // The sublayers' ends: YOCO's out_proj and W2 (n = d).
      if (rows > 1 && std::string(g.model) == "yoco-3b" &&
          (std::string(g.name) == "out_proj" || std::string(g.name) == "W2"))
        sublayer_end_rows(report, gemm, shape, g.model, rows, g.k, g.n, x.p, w.p, flops, stream);

      const cuda::GemmLtProblem p(rows, g.k, g.n, CUDA_R_16BF);
      check_lt(p.status, "descriptors");
      std::vector<cublasLtMatmulHeuristicResult_t> algos;
      if (const std::string e = cuda::gemm_lt_candidates(lt, p, cuda::gemm_lt_alignment(x.p, w.p, y.p), workspace_bytes,
                                                         kLtAlgos, algos);
          !e.empty())
        throw std::runtime_error(e);
      for (size_t i = 0; i < algos.size(); ++i) {
        KernelResult a{"gemm_shapes",
                       shape + ", cublasLt heuristic #" + std::to_string(i) + " of " + std::to_string(algos.size()),
                       g.model, rows, 1, bytes, flops, {}, ""};
        a.params = {{"heuristic_rank", static_cast<double>(i)},
                    {"workspace_bytes", static_cast<double>(algos[i].workspaceSize)}};
        const auto run = [&](cudaStream_t s) {
          check_lt(p.run(lt, x.p, w.p, y.p, algos[i].algo, workspace.p, workspace_bytes, s), "matmul");
        };
        // Poisoned first (NaN in bf16), so that a candidate that writes nothing cannot pass on the
        // previous one's output.
        check(cudaMemsetAsync(y.p, 0xff, y.n * sizeof(bf16), stream), "poison y");
        if (const cublasStatus_t st = p.run(lt, x.p, w.p, y.p, algos[i].algo, workspace.p, workspace_bytes, stream);
            st != CUBLAS_STATUS_SUCCESS) {
          a.skipped = "cuBLASLt matmul failed with status " + std::to_string(static_cast<int>(st));
          cudaGetLastError();
          report.add(a);
          continue;
        }
        check(cudaStreamSynchronize(stream), "cublasLt matmul");
        const double diff = sampled_rows_max_rel_diff(y.p, ref.p, rows, g.n);
        a.time = time_launches(run, stream);
        // One bf16 rounding apart is about 2^-8 relative; a summation order of its own may add a
        // little. Past 2^-5 the output is wrong, not rounded differently.
        const bool wrong = !(diff <= 1.0 / 32);
        char buf[200];
        std::snprintf(buf, sizeof buf, "%s%.3fx the runners' call's median; largest difference from it %.2g "
                      "(relative, 64 rows spread over the output)", wrong ? "WRONG OUTPUT; " : "",
                      a.time.median_s / r.time.median_s, diff);
        a.notes = buf;
        report.add(a);
      }
    }
  }
}

}  // namespace
}  // namespace yoco::cuda_bench
