#pragma once
// SwiGLU's arithmetic, one definition for the element-wise kernel (ops/elementwise.cu, after the
// W1|W3 GEMM) and the GEMM that applies it in its epilogue (ops/gemm_swiglu_sm90.cu): the gate
// and the up projection as bf16 values (what the GEMM stores), silu(a) * b in fp32, rounded once.
#include <cuda_bf16.h>

namespace yoco::cuda::dev {

__device__ __forceinline__ __nv_bfloat16 swiglu_one(__nv_bfloat16 a_bits, __nv_bfloat16 b_bits) {
  const float a = __bfloat162float(a_bits), b = __bfloat162float(b_bits);
  return __float2bfloat16(a / (1.0f + __expf(-a)) * b);
}

// From fp32 accumulators: rounded to bf16 first, as the unfused path's GEMM output is.
__device__ __forceinline__ __nv_bfloat16 swiglu_of_accumulators(float gate, float up) {
  return swiglu_one(__float2bfloat16(gate), __float2bfloat16(up));
}

}  // namespace yoco::cuda::dev
