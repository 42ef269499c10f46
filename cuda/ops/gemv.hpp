#pragma once
// The decode step's projections as a GEMV (the plan and its reasons: ops/gemv_plan.hpp), paired with
// the reference linear() (y = x Wᵀ for a [out, in] weight) like the cuBLAS path of ops/gemm.hpp, which
// takes it for a few rows (Gemm::set_small_rows). bf16 operands, fp32 sums; every index 64-bit.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace yoco::cuda {

// What y is: bf16 (rounded once, as cuBLAS's bf16 output), fp32, or fp32 with the product added to it
// (beta 1: a sublayer's output into the fp32 residual).
enum class GemvOut { bf16, f32, f32_accumulate };

// y[m, n] (row-major, n columns) = x[m, k] · w[n, k]ᵀ. The shape must be served
// (gemv::unsupported(m, k, n, x, w) == nullptr): cudaErrorInvalidValue otherwise.
cudaError_t launch_gemv(const __nv_bfloat16* x, int64_t m, int64_t k, const __nv_bfloat16* w, int64_t n, void* y,
                        GemvOut out, cudaStream_t stream);

}  // namespace yoco::cuda
