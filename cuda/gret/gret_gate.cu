#include <cstdint>

#include "gret/gret_gate.hpp"
#include "gret/gret_norm_gate.cuh"

namespace yoco::cuda {

namespace {

using bf16 = __nv_bfloat16;

constexpr int kThreads = 256;
constexpr int kWarpsPerBlock = kThreads / 32;
constexpr int64_t kMaxBlocks = 1 << 20;

template <int E>
struct VecOf;
template <>
struct VecOf<2> {
  using type = unsigned int;
};
template <>
struct VecOf<4> {
  using type = uint2;
};
template <>
struct VecOf<8> {
  using type = uint4;
};

template <int E>
__device__ __forceinline__ void load_bf16(const bf16* p, float (&f)[E]) {
  using V = typename VecOf<E>::type;
  V raw = *reinterpret_cast<const V*>(p);
  const __nv_bfloat162* h2 = reinterpret_cast<const __nv_bfloat162*>(&raw);
#pragma unroll
  for (int i = 0; i < E / 2; ++i) {
    const float2 x = __bfloat1622float2(h2[i]);
    f[2 * i] = x.x;
    f[2 * i + 1] = x.y;
  }
}

template <int E>
__device__ __forceinline__ void store_bf16(bf16* p, const float (&f)[E]) {
  using V = typename VecOf<E>::type;
  V raw;
  __nv_bfloat162* h2 = reinterpret_cast<__nv_bfloat162*>(&raw);
#pragma unroll
  for (int i = 0; i < E / 2; ++i) h2[i] = __floats2bfloat162_rn(f[2 * i], f[2 * i + 1]);
  *reinterpret_cast<V*>(p) = raw;
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
  return v;
}

using gret_ng::gated;
using gret_ng::inv_rms;

// One warp per (row, head), D = 32·E: lane l holds elements [l·E, l·E + E).
template <int E>
__global__ void __launch_bounds__(kThreads)
    norm_gate_vec_kernel(const bf16* o, const bf16* __restrict__ g, int64_t g_stride, int64_t rows, int64_t heads,
                         float eps, bf16* out) {
  constexpr int D = 32 * E;
  const int lane = threadIdx.x % 32;
  const int64_t items = rows * heads;
  const int64_t step = static_cast<int64_t>(gridDim.x) * kWarpsPerBlock;
  for (int64_t it = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32; it < items; it += step) {
    const int64_t r = it / heads, h = it % heads;
    const int64_t oi = it * D + lane * E;  // o and out are [rows, heads·D]: (r·heads + h)·D
    float x[E], gv[E];
    load_bf16<E>(o + oi, x);
    load_bf16<E>(g + r * g_stride + h * D + lane * E, gv);
    float ss = 0.0f;
#pragma unroll
    for (int i = 0; i < E; ++i) ss = fmaf(x[i], x[i], ss);
    ss = warp_sum(ss);
    const float inv = inv_rms(ss, D, eps);
    float y[E];
#pragma unroll
    for (int i = 0; i < E; ++i) y[i] = gated(gv[i], x[i], inv);
    store_bf16<E>(out + oi, y);
  }
}

// Any D: one warp per (row, head), two passes over the head (the second reads
// o again; out[c] is written by the lane that read o[c], so aliasing is safe).
__global__ void __launch_bounds__(kThreads)
    norm_gate_generic_kernel(const bf16* o, const bf16* g, int64_t g_stride, int64_t rows, int64_t heads, int64_t D,
                             float eps, bf16* out) {
  const int lane = threadIdx.x % 32;
  const int64_t items = rows * heads;
  const int64_t step = static_cast<int64_t>(gridDim.x) * kWarpsPerBlock;
  for (int64_t it = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32; it < items; it += step) {
    const int64_t r = it / heads, h = it % heads;
    const bf16* x = o + it * D;
    const bf16* gr = g + r * g_stride + h * D;
    float ss = 0.0f;
    for (int64_t c = lane; c < D; c += 32) {
      const float xv = __bfloat162float(x[c]);
      ss = fmaf(xv, xv, ss);
    }
    ss = warp_sum(ss);
    const float inv = inv_rms(ss, static_cast<int>(D), eps);
    for (int64_t c = lane; c < D; c += 32)
      out[it * D + c] = __float2bfloat16(gated(__bfloat162float(gr[c]), __bfloat162float(x[c]), inv));
  }
}

__device__ __forceinline__ float to_float(float x) { return x; }
__device__ __forceinline__ float to_float(bf16 x) { return __bfloat162float(x); }

template <class Z>
__global__ void __launch_bounds__(kThreads)
    log_decay_kernel(const Z* __restrict__ z, int64_t z_stride, int64_t rows, int64_t heads, float inv_norm,
                     float* __restrict__ out) {
  const int64_t n = rows * heads;
  const int64_t step = static_cast<int64_t>(gridDim.x) * kThreads;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x; i < n; i += step) {
    const int64_t r = i / heads, h = i % heads;
    const float x = to_float(z[r * z_stride + h]);
    // logsigmoid(x) = min(x, 0) - log1p(exp(-|x|)): both terms ≤ 0.
    out[i] = (fminf(x, 0.0f) - log1pf(expf(-fabsf(x)))) * inv_norm;
  }
}

unsigned blocks_for(int64_t work_items, int64_t per_block) {
  const int64_t b = (work_items + per_block - 1) / per_block;
  return static_cast<unsigned>(b < kMaxBlocks ? b : kMaxBlocks);
}

bool aligned(const void* p, unsigned bytes) { return (reinterpret_cast<uintptr_t>(p) % bytes) == 0; }

template <class Z>
cudaError_t launch_log_decay(const Z* z, int64_t z_stride, int64_t rows, int64_t heads, float normalizer,
                             float* log_gamma, cudaStream_t stream) {
  if (rows < 0 || heads < 1 || z_stride < heads || !(normalizer > 0.0f)) return cudaErrorInvalidValue;
  if (rows == 0) return cudaSuccess;
  log_decay_kernel<Z><<<blocks_for(rows * heads, kThreads), kThreads, 0, stream>>>(z, z_stride, rows, heads,
                                                                                   1.0f / normalizer, log_gamma);
  return cudaGetLastError();
}

}  // namespace

cudaError_t launch_gret_norm_gate(const __nv_bfloat16* o, const __nv_bfloat16* g, int64_t g_stride, int64_t rows,
                                  int64_t heads, int64_t head_dim, float eps, __nv_bfloat16* out,
                                  cudaStream_t stream) {
  if (rows < 0 || heads < 1 || head_dim < 1 || g_stride < heads * head_dim) return cudaErrorInvalidValue;
  if (rows == 0) return cudaSuccess;
  const unsigned blocks = blocks_for(rows * heads, kWarpsPerBlock);
  const int64_t D = head_dim;
  const int E = D % 32 == 0 ? static_cast<int>(D / 32) : 0;
  const unsigned vec_bytes = static_cast<unsigned>(2 * E);
  const bool vec_ok = (E == 2 || E == 4 || E == 8) && aligned(o, vec_bytes) && aligned(out, vec_bytes) &&
                      aligned(g, vec_bytes) && (g_stride % E) == 0;
  if (vec_ok) {
    if (E == 2)
      norm_gate_vec_kernel<2><<<blocks, kThreads, 0, stream>>>(o, g, g_stride, rows, heads, eps, out);
    else if (E == 4)
      norm_gate_vec_kernel<4><<<blocks, kThreads, 0, stream>>>(o, g, g_stride, rows, heads, eps, out);
    else
      norm_gate_vec_kernel<8><<<blocks, kThreads, 0, stream>>>(o, g, g_stride, rows, heads, eps, out);
  } else {
    norm_gate_generic_kernel<<<blocks, kThreads, 0, stream>>>(o, g, g_stride, rows, heads, D, eps, out);
  }
  return cudaGetLastError();
}

cudaError_t launch_gret_log_decay(const float* z, int64_t z_stride, int64_t rows, int64_t heads, float normalizer,
                                  float* log_gamma, cudaStream_t stream) {
  return launch_log_decay(z, z_stride, rows, heads, normalizer, log_gamma, stream);
}

cudaError_t launch_gret_log_decay(const __nv_bfloat16* z, int64_t z_stride, int64_t rows, int64_t heads,
                                  float normalizer, float* log_gamma, cudaStream_t stream) {
  return launch_log_decay(z, z_stride, rows, heads, normalizer, log_gamma, stream);
}

}  // namespace yoco::cuda
