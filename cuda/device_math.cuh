#pragma once
// Small device helpers every kernel file shares (one definition each): the exp2 the online
// softmaxes use and the fp32 pair -> bf16x2 packing of mma/wgmma fragments.
#include <cuda_bf16.h>

#include <cstdint>

namespace yoco::cuda::dev {

__device__ __forceinline__ float fast_exp2(float x) {  // ex2(-inf) = +0
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

// Two floats as a bf16 pair, rounded to nearest even: lo in the low half (the lower-indexed
// element of a fragment, the lower address).
__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&v);
}

}  // namespace yoco::cuda::dev
