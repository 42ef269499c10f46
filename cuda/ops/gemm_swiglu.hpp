#pragma once
// The FFN's up half in one kernel on Hopper (compute capability 9.0):
//     out[M, F] = silu(x W1ᵀ) ⊙ (x W3ᵀ)
// for the fused weight [W1; W3] ([2F, K] bf16, W1's rows first), the pair of Gemm::linear(x, w13)
// into a [M, 2F] buffer followed by launch_swiglu (ops/gemm.hpp, ops/elementwise.hpp), which it
// must equal up to the GEMMs' summation order: the gate and up values are rounded to bf16 before
// SwiGLU, as the unfused path stores them (ops/swiglu_math.cuh). It saves that path's [M, 2F]
// round trip through memory (about 0.15 s of yoco-3b's 512K prefill by the cost model) if its
// GEMM keeps cuBLAS's pace. Tile maths and the shapes it serves: ops/gemm_swiglu_plan.hpp.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <string>

#include "ops/gemm.hpp"
#include "ops/gemm_swiglu_plan.hpp"

namespace yoco::cuda {

// cudaErrorInvalidValue for a shape gemm_swiglu::unsupported refuses or a pointer that is null or
// not 16-byte aligned; cudaErrorNotSupported off compute capability 9.0 or without the driver's
// cuTensorMapEncodeTiled. Nothing is launched then.
cudaError_t launch_gemm_swiglu(const __nv_bfloat16* x, const __nv_bfloat16* w13, const gemm_swiglu::Shape& s,
                               __nv_bfloat16* out, cudaStream_t stream);

// Whether launch_gemm_swiglu serves these operands on the current device: a shape
// gemm_swiglu::unsupported accepts, non-null 16-byte-aligned pointers, compute capability 9.0.
bool gemm_swiglu_serves(const __nv_bfloat16* x, const __nv_bfloat16* w13, const gemm_swiglu::Shape& s,
                        const __nv_bfloat16* out);

// Whether a step of `rows` rows in FFN blocks of `block` (0: whole) runs the fused kernel on every
// block on this device when `fused` is asked (gemm_swiglu::fused_on_every_block and compute
// capability 9.0): then the runner allocates no [rows, 2F] buffer and passes h13 = nullptr.
bool ffn_up_fused_on_every_block(bool fused, int64_t rows, int64_t block, int64_t dim, int64_t ffn_dim);

// The one selector of the FFN's up half, for both runners: the fused kernel where `fused` is set
// and the step has at least kMinRowsToFuse rows and gemm_swiglu_serves them, else the GEMM into
// `h13` ([rows, 2F]) and SwiGLU. Empty string on success, else what failed (a fused launch that
// fails is an error, not a fallback; so is the pair's turn without an h13).
std::string ffn_up_swiglu(Gemm& gemm, const __nv_bfloat16* x, int64_t rows, int64_t dim, const __nv_bfloat16* w13,
                          int64_t ffn_dim, __nv_bfloat16* h13, __nv_bfloat16* out, bool fused, cudaStream_t stream);

}  // namespace yoco::cuda
