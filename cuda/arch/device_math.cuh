#pragma once
// Small device helpers the kernel files share (one definition each): the exp2 the online
// softmaxes use, the fp32 pair -> bf16x2 packing of mma/wgmma fragments, and the m16n8k16 bf16
// mma.sync of every mma.sync kernel (not volatile: it has no side effect, so the compiler may
// schedule it freely; prefill v1, at its 255-register cap, needs that).
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

// c += A·B, mma.sync m16n8k16: A row-major bf16 (a0..a3), B column-major bf16 (b0, b1), fp32 c.
__device__ __forceinline__ void mma_bf16(float (&c)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3,
                                         uint32_t b0, uint32_t b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

}  // namespace yoco::cuda::dev
