#include "elementwise.hpp"
#include "rope_pair.cuh"

namespace yoco::cuda {

namespace {

constexpr int kThreads = 256;

// Sum over the block; every thread gets the result.
__device__ float block_sum(float v) {
  __shared__ float warp_sums[32];
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  if (lane == 0) warp_sums[warp] = v;
  __syncthreads();
  const int warps = (blockDim.x + 31) / 32;
  v = threadIdx.x < warps ? warp_sums[threadIdx.x] : 0.0f;
  if (warp == 0)
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  __shared__ float total;
  if (threadIdx.x == 0) total = v;
  __syncthreads();
  return total;
}

__global__ void embedding_kernel(const int64_t* tokens, const bf16* table, int64_t dim, float scale, float* out) {
  const int64_t r = blockIdx.x;
  const bf16* src = table + tokens[r] * dim;
  float* dst = out + r * dim;
  for (int64_t c = threadIdx.x; c < dim; c += blockDim.x) dst[c] = scale * __bfloat162float(src[c]);
}

// One block per row; the row's fp32 values pass through registers twice.
__global__ void rms_norm_kernel(float* residual, const bf16* delta, const bf16* w, int64_t dim, float eps, bf16* out) {
  const int64_t r = blockIdx.x;
  float* x = residual + r * dim;
  float ss = 0.0f;
  for (int64_t c = threadIdx.x; c < dim; c += blockDim.x) {
    float v = x[c];
    if (delta) {
      v += __bfloat162float(delta[r * dim + c]);
      x[c] = v;
    }
    ss += v * v;
  }
  const float inv = rsqrtf(block_sum(ss) / static_cast<float>(dim) + eps);
  for (int64_t c = threadIdx.x; c < dim; c += blockDim.x) {
    const float g = w ? __bfloat162float(w[c]) : 1.0f;
    out[r * dim + c] = __float2bfloat16(x[c] * inv * g);
  }
}

__global__ void swiglu_kernel(const bf16* h13, int64_t rows, int64_t F, bf16* out) {
  const int64_t n = rows * F;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = i / F, c = i % F;
    const float a = __bfloat162float(h13[r * 2 * F + c]), b = __bfloat162float(h13[r * 2 * F + F + c]);
    out[i] = __float2bfloat16(a / (1.0f + __expf(-a)) * b);
  }
}

__global__ void rope_kernel(bf16* x, int64_t rows, int64_t row_stride, int64_t n_heads, int64_t head_dim, int64_t pos0,
                            int64_t rows_per_seq, const double* inv_freq, bool interleaved, double scale) {
  const int64_t half = head_dim / 2, pairs = rows * n_heads * half;
  for (int64_t p = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; p < pairs;
       p += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t i = p % half, h = (p / half) % n_heads, r = p / (half * n_heads);
    rope_rotate_pair(x + r * row_stride + h * head_dim, i, half, pos0 + r % rows_per_seq, inv_freq, interleaved, scale);
  }
}

unsigned grid_for(int64_t n) {
  const int64_t blocks = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(blocks < 65535 * 8 ? (blocks > 0 ? blocks : 1) : 65535 * 8);
}

bool rows_fit_grid(int64_t rows) { return rows > 0 && rows <= 0x7fffffff; }

}  // namespace

cudaError_t launch_embedding(const int64_t* tokens, int64_t rows, const bf16* table, int64_t dim, float scale,
                             float* residual, cudaStream_t stream) {
  if (!rows_fit_grid(rows)) return cudaErrorInvalidValue;
  embedding_kernel<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(tokens, table, dim, scale, residual);
  return cudaGetLastError();
}

cudaError_t launch_rms_norm(const float* x, const bf16* w, int64_t rows, int64_t dim, float eps, bf16* out,
                            cudaStream_t stream) {
  if (!rows_fit_grid(rows)) return cudaErrorInvalidValue;
  // With no delta the kernel only reads the residual.
  rms_norm_kernel<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(const_cast<float*>(x), nullptr, w, dim, eps,
                                                                         out);
  return cudaGetLastError();
}

cudaError_t launch_add_rms_norm(float* residual, const bf16* delta, const bf16* w, int64_t rows, int64_t dim,
                                float eps, bf16* out, cudaStream_t stream) {
  if (!rows_fit_grid(rows)) return cudaErrorInvalidValue;
  rms_norm_kernel<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(residual, delta, w, dim, eps, out);
  return cudaGetLastError();
}

cudaError_t launch_swiglu(const bf16* h13, int64_t rows, int64_t ffn_dim, bf16* out, cudaStream_t stream) {
  swiglu_kernel<<<grid_for(rows * ffn_dim), kThreads, 0, stream>>>(h13, rows, ffn_dim, out);
  return cudaGetLastError();
}

cudaError_t launch_rope(bf16* x, int64_t rows, int64_t row_stride, int64_t n_heads, int64_t head_dim, int64_t pos0,
                        int64_t rows_per_seq, const double* inv_freq, RopeLayout layout, cudaStream_t stream,
                        double scale) {
  if (head_dim % 2 != 0 || rows_per_seq < 1) return cudaErrorInvalidValue;
  rope_kernel<<<grid_for(rows * n_heads * (head_dim / 2)), kThreads, 0, stream>>>(
      x, rows, row_stride, n_heads, head_dim, pos0, rows_per_seq, inv_freq, layout == RopeLayout::interleaved, scale);
  return cudaGetLastError();
}

}  // namespace yoco::cuda
