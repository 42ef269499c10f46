#pragma once
// The FFN's up half in one kernel on Hopper (compute capability 9.0):
//     out[M, F] = silu(x W1ᵀ) ⊙ (x W3ᵀ)
// for the fused weight [W1; W3] ([2F, K] bf16, W1's rows first), the pair of Gemm::linear(x, w13)
// into a [M, 2F] buffer followed by launch_swiglu (ops/gemm.hpp, ops/elementwise.hpp), which it
// must equal up to the GEMMs' summation order: the gate and up values are rounded to bf16 before
// SwiGLU, as the unfused path stores them (ops/swiglu_math.cuh). It saves that path's [M, 2F]
// round trip through memory (0.12 s of yoco-3b's 512K prefill by the calibrated model, 2.73 ->
// 2.61 s with the element-wise kernels at 95% of copy) if its GEMM keeps cuBLAS's pace. Tile
// maths and the shapes it serves: ops/gemm_swiglu_plan.hpp; the runners' selector: ops/ffn_up.hpp.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "ops/gemm_swiglu_plan.hpp"

namespace yoco::cuda {

// How the kernel's CTAs share the weight: each alone (the kernel measured in run-20..22, at 85% of
// cuBLAS's pace), or in clusters of two on row tiles 2p, 2p + 1 of one column tile, the weight tile
// loaded once for both (multicast; gemm_swiglu_plan.hpp says why). The same arithmetic in the same
// order: the two give the same bits. The pair is not yet run on a GPU; the runners take `one`.
enum class GemmSwigluCtas { one, pair };

// cudaErrorInvalidValue for a shape gemm_swiglu::unsupported refuses or a pointer that is null or
// not 16-byte aligned; cudaErrorNotSupported off compute capability 9.0 or without the driver's
// cuTensorMapEncodeTiled. Nothing is launched then. Pairs where no cluster of two fits the device run
// as the one-CTA kernel (gemm_swiglu_launches tells which ran).
cudaError_t launch_gemm_swiglu(const __nv_bfloat16* x, const __nv_bfloat16* w13, const gemm_swiglu::Shape& s,
                               __nv_bfloat16* out, cudaStream_t stream, GemmSwigluCtas ctas = GemmSwigluCtas::one);

// Launches this process has made of each kind, counted when the launch is enqueued without error (so a
// model-level test can tell which kernel a runner took: their bits are the same).
int64_t gemm_swiglu_launches(GemmSwigluCtas ctas);

// Whether launch_gemm_swiglu serves these operands on the current device: a shape
// gemm_swiglu::unsupported accepts, non-null 16-byte-aligned pointers, compute capability 9.0.
bool gemm_swiglu_serves(const __nv_bfloat16* x, const __nv_bfloat16* w13, const gemm_swiglu::Shape& s,
                        const __nv_bfloat16* out);

}  // namespace yoco::cuda
