#pragma once
// The gRet output's per-head RMSNorm (no weight) and gate, out = silu(g) ⊙
// (x / sqrt(Σ x² / D + eps)): the arithmetic shared by the norm + gate kernel
// (gret_gate.cu), the chunk kernel v6's fused epilogue (gret_chunk_v6.cu) and
// the fused decode steps (gret_recurrent.cu), so that a fused path gives its
// unfused pair's bits. Device code only: include from .cu files.
#include <cuda_bf16.h>

namespace yoco::cuda::gret_ng {

__device__ __forceinline__ float silu(float x) { return x / (1.0f + expf(-x)); }

// 1 / sqrt(mean + eps) from a head's sum of squares over D elements.
__device__ __forceinline__ float inv_rms(float sum_sq, int D, float eps) {
  return 1.0f / sqrtf(sum_sq / static_cast<float>(D) + eps);
}

__device__ __forceinline__ float gated(float g, float x, float inv) { return silu(g) * (x * inv); }

// Eight consecutive elements of one head: x and g as bf16 in 16 bytes each.
__device__ __forceinline__ void unpack8(uint4 raw, float (&f)[8]) {
  const __nv_bfloat162* h2 = reinterpret_cast<const __nv_bfloat162*>(&raw);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 v = __bfloat1622float2(h2[i]);
    f[2 * i] = v.x;
    f[2 * i + 1] = v.y;
  }
}

__device__ __forceinline__ uint4 pack8(const float (&f)[8]) {
  uint4 raw;
  __nv_bfloat162* h2 = reinterpret_cast<__nv_bfloat162*>(&raw);
#pragma unroll
  for (int i = 0; i < 4; ++i) h2[i] = __floats2bfloat162_rn(f[2 * i], f[2 * i + 1]);
  return raw;
}

// The sum of squares of a head of 128 held as 8 elements in each of 16
// consecutive lanes (lane p of the group: elements [8p, 8p + 8)), added in the
// order of the norm + gate kernel's warp at D 128 (E = 4: lane L sums
// elements [4L, 4L + 4) by fmaf from 0, then a butterfly over offsets 16, 8,
// 4, 2, 1): the group's lane p plays lanes 2p and 2p + 1 of that warp, so the
// butterfly's offsets 16, 8, 4, 2 are this group's 8, 4, 2, 1 and offset 1
// adds the two halves. Every lane of the warp must call it (two groups a
// warp: lanes 0-15 and 16-31 never mix).
__device__ __forceinline__ float head128_sum_sq(const float (&x)[8]) {
  float lo = 0.0f, hi = 0.0f;
#pragma unroll
  for (int i = 0; i < 4; ++i) lo = fmaf(x[i], x[i], lo);
#pragma unroll
  for (int i = 4; i < 8; ++i) hi = fmaf(x[i], x[i], hi);
#pragma unroll
  for (int off = 8; off > 0; off >>= 1) {
    lo += __shfl_xor_sync(0xffffffffu, lo, off);
    hi += __shfl_xor_sync(0xffffffffu, hi, off);
  }
  return lo + hi;
}

}  // namespace yoco::cuda::gret_ng
