#pragma once
// The one rotation of one RoPE pair, shared by launch_rope (elementwise.cu) and
// launch_rope_at (cache_ops.cu), so that the two are bitwise equal at the same
// position. Device code only: include from .cu files.
#include <cuda_bf16.h>

#include <cstdint>

namespace yoco::cuda {

struct RopeSinCos {
  double s, c;
};

// The angle of pair i at `position`, in double (fp32 angles lose ~0.06 rad at 1M tokens).
__device__ __forceinline__ RopeSinCos rope_sincos(int64_t i, int64_t position, const double* inv_freq) {
  const double angle = __dmul_rn(static_cast<double>(position), inv_freq[i]);
  RopeSinCos sc;
  sincos(angle, &sc.s, &sc.c);
  return sc;
}

// Rotation and `scale` in double (the products written with explicit
// roundings, so every caller computes the same bits), then to float and bf16.
__device__ __forceinline__ void rope_rotate_values(float x0f, float x1f, RopeSinCos sc, double scale,
                                                   __nv_bfloat16* y0, __nv_bfloat16* y1) {
  const double x0 = x0f, x1 = x1f;
  const double r0 = __fma_rn(x0, sc.c, -__dmul_rn(x1, sc.s));
  const double r1 = __fma_rn(x0, sc.s, __dmul_rn(x1, sc.c));
  *y0 = __float2bfloat16(static_cast<float>(__dmul_rn(r0, scale)));
  *y1 = __float2bfloat16(static_cast<float>(__dmul_rn(r1, scale)));
}

// The element indices of pair i: interleaved (2i, 2i+1), half-split (i, i + half).
__device__ __forceinline__ int64_t rope_first(int64_t i, bool interleaved) { return interleaved ? 2 * i : i; }
__device__ __forceinline__ int64_t rope_second(int64_t i, int64_t half, bool interleaved) {
  return interleaved ? 2 * i + 1 : i + half;
}

// Pair i of the head at `head` (head_dim = 2 * half) rotates by position * inv_freq[i].
__device__ __forceinline__ void rope_rotate_pair(__nv_bfloat16* head, int64_t i, int64_t half, int64_t position,
                                                 const double* inv_freq, bool interleaved, double scale) {
  const int64_t a = rope_first(i, interleaved), b = rope_second(i, half, interleaved);
  rope_rotate_values(__bfloat162float(head[a]), __bfloat162float(head[b]), rope_sincos(i, position, inv_freq), scale,
                     &head[a], &head[b]);
}

// Pair i of every head of one row: one angle for all of them, and the loads of
// four heads issued before their stores (one pointer for loads and stores, so
// the compiler would not hoist them itself).
__device__ __forceinline__ void rope_rotate_row_pair(__nv_bfloat16* row, int64_t i, int64_t half, int64_t n_heads,
                                                     int64_t position, const double* inv_freq, bool interleaved,
                                                     double scale) {
  const RopeSinCos sc = rope_sincos(i, position, inv_freq);
  const int64_t head_dim = 2 * half, a = rope_first(i, interleaved), b = rope_second(i, half, interleaved);
  int64_t h = 0;
  for (; h + 4 <= n_heads; h += 4) {
    float x0[4], x1[4];
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      x0[k] = __bfloat162float(row[(h + k) * head_dim + a]);
      x1[k] = __bfloat162float(row[(h + k) * head_dim + b]);
    }
#pragma unroll
    for (int k = 0; k < 4; ++k)
      rope_rotate_values(x0[k], x1[k], sc, scale, &row[(h + k) * head_dim + a], &row[(h + k) * head_dim + b]);
  }
  for (; h < n_heads; ++h)
    rope_rotate_values(__bfloat162float(row[h * head_dim + a]), __bfloat162float(row[h * head_dim + b]), sc, scale,
                       &row[h * head_dim + a], &row[h * head_dim + b]);
}

}  // namespace yoco::cuda
