#include "ops/gemm_lt.hpp"

#include <algorithm>

namespace yoco::cuda {

GemmLtProblem::GemmLtProblem(int64_t m, int64_t k, int64_t n, cudaDataType_t out_type) {
  const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
  if (ok(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F)) &&
      ok(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta)) &&
      ok(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb)) &&
      ok(cublasLtMatrixLayoutCreate(&a, CUDA_R_16BF, static_cast<uint64_t>(k), static_cast<uint64_t>(n), k)) &&
      ok(cublasLtMatrixLayoutCreate(&b, CUDA_R_16BF, static_cast<uint64_t>(k), static_cast<uint64_t>(m), k)))
    ok(cublasLtMatrixLayoutCreate(&c, out_type, static_cast<uint64_t>(n), static_cast<uint64_t>(m), n));
}

GemmLtProblem::~GemmLtProblem() {
  if (c) cublasLtMatrixLayoutDestroy(c);
  if (b) cublasLtMatrixLayoutDestroy(b);
  if (a) cublasLtMatrixLayoutDestroy(a);
  if (op) cublasLtMatmulDescDestroy(op);
}

bool GemmLtProblem::ok(cublasStatus_t s) {
  status = s;
  return s == CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t GemmLtProblem::run(cublasLtHandle_t lt, const void* x, const void* w, void* y,
                                  const cublasLtMatmulAlgo_t& algo, void* workspace, size_t workspace_bytes,
                                  cudaStream_t stream) const {
  const float alpha = 1.0f, beta = 0.0f;
  return cublasLtMatmul(lt, op, &alpha, w, a, x, b, &beta, y, c, y, c, &algo, workspace, workspace_bytes, stream);
}

GemmLtAlignment gemm_lt_alignment(const void* x, const void* w, const void* y) {
  const auto align = [](const void* p) {
    const auto a = reinterpret_cast<uintptr_t>(p);
    uint32_t v = 256;
    while (v > 1 && a % v != 0) v /= 2;
    return v;
  };
  return GemmLtAlignment{align(x), align(w), align(y)};
}

std::string gemm_lt_candidates(cublasLtHandle_t lt, const GemmLtProblem& p, const GemmLtAlignment& align,
                               size_t workspace_bytes, int most, std::vector<cublasLtMatmulHeuristicResult_t>& out) {
  out.clear();
  cublasLtMatmulPreference_t pref = nullptr;
  cublasStatus_t s = cublasLtMatmulPreferenceCreate(&pref);
  if (s != CUBLAS_STATUS_SUCCESS) return "cuBLASLt preference failed with status " + std::to_string(static_cast<int>(s));
  const auto set = [&](cublasLtMatmulPreferenceAttributes_t attr, const auto& value) {
    if (s == CUBLAS_STATUS_SUCCESS) s = cublasLtMatmulPreferenceSetAttribute(pref, attr, &value, sizeof value);
  };
  const uint32_t reductions = CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE;  // and none: always allowed
  set(CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, static_cast<uint64_t>(workspace_bytes));
  set(CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, reductions);
  set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, align.w);  // A is w (gemm_lt.hpp)
  set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, align.x);
  set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, align.y);
  set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, align.y);
  std::vector<cublasLtMatmulHeuristicResult_t> found(static_cast<size_t>(std::max(most, 1)));
  int count = 0;
  if (s == CUBLAS_STATUS_SUCCESS)
    s = cublasLtMatmulAlgoGetHeuristic(lt, p.op, p.a, p.b, p.c, p.c, pref, static_cast<int>(found.size()),
                                       found.data(), &count);
  cublasLtMatmulPreferenceDestroy(pref);
  if (s != CUBLAS_STATUS_SUCCESS) return "cuBLASLt heuristic failed with status " + std::to_string(static_cast<int>(s));
  for (int i = 0; i < count && i < static_cast<int>(found.size()); ++i)
    if (found[static_cast<size_t>(i)].state == CUBLAS_STATUS_SUCCESS) out.push_back(found[static_cast<size_t>(i)]);
  return "";
}

}  // namespace yoco::cuda
