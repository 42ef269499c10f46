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

// Pair i of one head, loaded (x0, x1) and stored (y0, y1): kPaired moves the
// two elements as one 4-byte bf16x2 (interleaved pairs at a 4-byte-aligned
// address: the launcher checks), else as two 2-byte accesses. Same values
// either way.
template <bool kPaired>
__device__ __forceinline__ void rope_load(const __nv_bfloat16* head, int64_t a, int64_t b, float& x0, float& x1) {
  if constexpr (kPaired) {
    const __nv_bfloat162 v = *reinterpret_cast<const __nv_bfloat162*>(head + a);
    x0 = __low2float(v);
    x1 = __high2float(v);
  } else {
    x0 = __bfloat162float(head[a]);
    x1 = __bfloat162float(head[b]);
  }
}

template <bool kPaired>
__device__ __forceinline__ void rope_store_rotated(__nv_bfloat16* head, int64_t a, int64_t b, float x0, float x1,
                                                   RopeSinCos sc, double scale) {
  if constexpr (kPaired) {
    __nv_bfloat16 y0, y1;
    rope_rotate_values(x0, x1, sc, scale, &y0, &y1);
    *reinterpret_cast<__nv_bfloat162*>(head + a) = __halves2bfloat162(y0, y1);
  } else {
    rope_rotate_values(x0, x1, sc, scale, &head[a], &head[b]);
  }
}

// Pair i of every head of one row: one angle for all of them, and the loads of
// four heads issued before their stores (one pointer for loads and stores, so
// the compiler would not hoist them itself). Heads below `unscaled_heads`
// rotate with scale 1, the others with `scale` (q and the scaled k of one
// fused projection in one pass; multiplying by 1.0 is exact, so q's bits are
// those of a pass with scale 1).
template <bool kPaired>
__device__ __forceinline__ void rope_rotate_row_pair(__nv_bfloat16* row, int64_t i, int64_t half, int64_t n_heads,
                                                     int64_t position, const double* inv_freq, bool interleaved,
                                                     double scale, int64_t unscaled_heads) {
  const RopeSinCos sc = rope_sincos(i, position, inv_freq);
  const int64_t head_dim = 2 * half, a = rope_first(i, interleaved), b = rope_second(i, half, interleaved);
  int64_t h = 0;
  for (; h + 4 <= n_heads; h += 4) {
    float x0[4], x1[4];
#pragma unroll
    for (int k = 0; k < 4; ++k) rope_load<kPaired>(row + (h + k) * head_dim, a, b, x0[k], x1[k]);
#pragma unroll
    for (int k = 0; k < 4; ++k)
      rope_store_rotated<kPaired>(row + (h + k) * head_dim, a, b, x0[k], x1[k], sc,
                                  h + k < unscaled_heads ? 1.0 : scale);
  }
  for (; h < n_heads; ++h) {
    float x0, x1;
    rope_load<kPaired>(row + h * head_dim, a, b, x0, x1);
    rope_store_rotated<kPaired>(row + h * head_dim, a, b, x0, x1, sc, h < unscaled_heads ? 1.0 : scale);
  }
}

}  // namespace yoco::cuda
