#pragma once
// The runners' product y[m, n] = x[m, k] · w[n, k]ᵀ (ops/gemm.hpp) as cuBLASLt sees it: one
// definition of the descriptors and of the heuristic's candidates, shared by the tuned GEMM
// (ops/gemm_tuner.hpp) and bench family `gemm_shapes`.
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <compare>
#include <cstdint>
#include <string>
#include <vector>

namespace yoco::cuda {

// In cuBLAS's column-major terms: yᵀ (n x m) = op_T(w as k x n, ld k) · xᵀ (k x m, ld k), bf16
// operands, fp32 compute and scale, y of `out_type` (bf16 or fp32) with ld n. The view ops/gemm.cu
// gives cublasGemmEx. `status` is the first failure of the construction (CUBLAS_STATUS_SUCCESS if
// none).
struct GemmLtProblem {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasStatus_t status = CUBLAS_STATUS_SUCCESS;
  GemmLtProblem(int64_t m, int64_t k, int64_t n, cudaDataType_t out_type);
  ~GemmLtProblem();
  GemmLtProblem(const GemmLtProblem&) = delete;
  GemmLtProblem& operator=(const GemmLtProblem&) = delete;

  // y = x · wᵀ with `algo` (beta 0; C and D are y).
  cublasStatus_t run(cublasLtHandle_t lt, const void* x, const void* w, void* y, const cublasLtMatmulAlgo_t& algo,
                     void* workspace, size_t workspace_bytes, cudaStream_t stream) const;

 private:
  bool ok(cublasStatus_t s);
};

// The byte alignment of each operand's address, up to 256 (the heuristic assumes 256 unless told:
// a candidate chosen for aligned buffers may refuse less aligned ones).
struct GemmLtAlignment {
  uint32_t x = 256, w = 256, y = 256;
  auto operator<=>(const GemmLtAlignment&) const = default;
};
GemmLtAlignment gemm_lt_alignment(const void* x, const void* w, const void* y);

// The heuristic's first `most` candidates for `p` on operands of `align` that need at most
// `workspace_bytes`, best first, those it marks unusable dropped. Split-K candidates reduce their
// partial sums in the compute type (fp32) only: the contract is fp32 accumulation, and a
// reduction in the output type would sum the parts in bf16. Empty string on success, else why.
std::string gemm_lt_candidates(cublasLtHandle_t lt, const GemmLtProblem& p, const GemmLtAlignment& align,
                               size_t workspace_bytes, int most, std::vector<cublasLtMatmulHeuristicResult_t>& out);

}  // namespace yoco::cuda
