#pragma once
// The one rotation of one RoPE pair, shared by launch_rope (elementwise.cu) and
// launch_rope_at (cache_ops.cu), so that the two are bitwise equal at the same
// position. Device code only: include from .cu files.
#include <cuda_bf16.h>

#include <cstdint>

namespace yoco::cuda {

// Pair i of the head at `head` (head_dim = 2 * half) rotates by position *
// inv_freq[i]: interleaved pairs (2i, 2i+1), half-split pairs (i, i + half).
// Angle, sine, cosine, rotation and `scale` in double (the products written with
// explicit roundings, so every caller computes the same bits), then the result
// goes to float and to bf16, as it always has.
__device__ __forceinline__ void rope_rotate_pair(__nv_bfloat16* head, int64_t i, int64_t half, int64_t position,
                                                 const double* inv_freq, bool interleaved, double scale) {
  const double angle = __dmul_rn(static_cast<double>(position), inv_freq[i]);
  double s, c;
  sincos(angle, &s, &c);
  const int64_t a = interleaved ? 2 * i : i, b = interleaved ? 2 * i + 1 : i + half;
  const double x0 = __bfloat162float(head[a]), x1 = __bfloat162float(head[b]);
  const double y0 = __fma_rn(x0, c, -__dmul_rn(x1, s));
  const double y1 = __fma_rn(x0, s, __dmul_rn(x1, c));
  head[a] = __float2bfloat16(static_cast<float>(__dmul_rn(y0, scale)));
  head[b] = __float2bfloat16(static_cast<float>(__dmul_rn(y1, scale)));
}

}  // namespace yoco::cuda
