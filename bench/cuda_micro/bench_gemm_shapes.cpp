// The runners' prefill GEMMs at their own shapes, against the same run's ceiling GEMM (m = n = k =
// 8192), and against every algorithm cuBLASLt's heuristic offers for the shape.
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
// cuBLASLt algorithm's output is compared with the reference's, first 4M values.
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
#include "ops/gemm.hpp"
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
      {"q|k|v", "transformer-3b", t.dim, t.q_width() + 2 * t.kv_width()},
      {"o_proj", "transformer-3b", t.q_width(), t.dim},
  };
}

// cuBLASLt's view of the runners' call: y[m, n] = x[m, k] · w[n, k]ᵀ in cuBLAS's column-major terms,
// yᵀ (n x m) = op_T(w as k x n) · xᵀ (k x m), as ops/gemm.cu computes it.
struct LtProblem {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  LtProblem(int64_t m, int64_t k, int64_t n) {
    check_lt(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F), "matmul desc");
    const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
    check_lt(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta), "transa");
    check_lt(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb), "transb");
    check_lt(cublasLtMatrixLayoutCreate(&a, CUDA_R_16BF, static_cast<uint64_t>(k), static_cast<uint64_t>(n), k),
             "layout w");
    check_lt(cublasLtMatrixLayoutCreate(&b, CUDA_R_16BF, static_cast<uint64_t>(k), static_cast<uint64_t>(m), k),
             "layout x");
    check_lt(cublasLtMatrixLayoutCreate(&c, CUDA_R_16BF, static_cast<uint64_t>(n), static_cast<uint64_t>(m), n),
             "layout y");
  }
  ~LtProblem() {
    if (c) cublasLtMatrixLayoutDestroy(c);
    if (b) cublasLtMatrixLayoutDestroy(b);
    if (a) cublasLtMatrixLayoutDestroy(a);
    if (op) cublasLtMatmulDescDestroy(op);
  }
  LtProblem(const LtProblem&) = delete;
  LtProblem& operator=(const LtProblem&) = delete;
};

std::vector<cublasLtMatmulHeuristicResult_t> lt_algorithms(cublasLtHandle_t lt, const LtProblem& p,
                                                           size_t workspace) {
  cublasLtMatmulPreference_t pref = nullptr;
  check_lt(cublasLtMatmulPreferenceCreate(&pref), "preference");
  std::vector<cublasLtMatmulHeuristicResult_t> found(kLtAlgos);
  int count = 0;
  cublasStatus_t s = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                          &workspace, sizeof workspace);
  if (s == CUBLAS_STATUS_SUCCESS)
    s = cublasLtMatmulAlgoGetHeuristic(lt, p.op, p.a, p.b, p.c, p.c, pref, kLtAlgos, found.data(), &count);
  cublasLtMatmulPreferenceDestroy(pref);
  check_lt(s, "heuristic");
  found.resize(static_cast<size_t>(std::max(count, 0)));
  found.erase(std::remove_if(found.begin(), found.end(),
                             [](const cublasLtMatmulHeuristicResult_t& r) { return r.state != CUBLAS_STATUS_SUCCESS; }),
              found.end());
  return found;
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

  for (const int64_t rows : {int64_t{32768}, int64_t{16384}}) {
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

      const LtProblem p(rows, g.k, g.n);
      const std::vector<cublasLtMatmulHeuristicResult_t> algos = lt_algorithms(lt, p, workspace_bytes);
      const float alpha = 1.0f, beta = 0.0f;
      for (size_t i = 0; i < algos.size(); ++i) {
        KernelResult a{"gemm_shapes",
                       shape + ", cublasLt heuristic #" + std::to_string(i) + " of " + std::to_string(algos.size()),
                       g.model, rows, 1, bytes, flops, {}, ""};
        a.params = {{"heuristic_rank", static_cast<double>(i)},
                    {"workspace_bytes", static_cast<double>(algos[i].workspaceSize)}};
        const auto run = [&](cudaStream_t s) {
          check_lt(cublasLtMatmul(lt, p.op, &alpha, w.p, p.a, x.p, p.b, &beta, y.p, p.c, y.p, p.c, &algos[i].algo,
                                  workspace.p, workspace_bytes, s),
                   "matmul");
        };
        run(stream);
        check(cudaStreamSynchronize(stream), "cublasLt matmul");
        a.time = time_launches(run, stream);
        const double diff = max_rel_diff(y.p, ref.p, std::min<size_t>(y.n, size_t{1} << 22));
        char buf[160];
        std::snprintf(buf, sizeof buf, "%.3fx the runners' call's median; largest difference from it %.2g "
                      "(relative, first 4M values)", a.time.median_s / r.time.median_s, diff);
        a.notes = buf;
        report.add(a);
      }
    }
  }
}

}  // namespace
}  // namespace yoco::cuda_bench
