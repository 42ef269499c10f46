#include "gret_recurrent.hpp"

namespace yoco::cuda {

namespace {

// One block per (sequence, head); thread j owns column j of the state, so each
// row of S is read and written by consecutive threads (coalesced).
__global__ void gret_step_kernel(const __nv_bfloat16* q, const __nv_bfloat16* k, const __nv_bfloat16* v,
                                 int64_t row_stride, const float* log_gamma, float* state, __nv_bfloat16* o,
                                 int64_t heads, int64_t D) {
  extern __shared__ float qk[];  // q then k, D each
  const int64_t bh = blockIdx.x, b = bh / heads, h = bh % heads;
  const int64_t in = b * row_stride + h * D;
  for (int64_t i = threadIdx.x; i < D; i += blockDim.x) {
    qk[i] = __bfloat162float(q[in + i]);
    qk[D + i] = __bfloat162float(k[in + i]);
  }
  __syncthreads();
  const float gamma = __expf(log_gamma[bh]);
  float* S = state + bh * D * D;
  for (int64_t j = threadIdx.x; j < D; j += blockDim.x) {
    const float vj = __bfloat162float(v[in + j]);
    float acc = 0.0f;
    for (int64_t i = 0; i < D; ++i) {
      const float s = fmaf(gamma, S[i * D + j], qk[D + i] * vj);
      S[i * D + j] = s;
      acc = fmaf(qk[i], s, acc);
    }
    o[b * heads * D + h * D + j] = __float2bfloat16(acc);
  }
}

}  // namespace

cudaError_t launch_gret_recurrent_step(const __nv_bfloat16* q, const __nv_bfloat16* k, const __nv_bfloat16* v,
                                       int64_t row_stride, const float* log_gamma, float* state, __nv_bfloat16* o,
                                       int64_t batch, int64_t heads, int64_t head_dim, cudaStream_t stream) {
  if (batch < 1 || heads < 1 || head_dim < 1 || head_dim > 1024 || batch * heads > 0x7fffffff)
    return cudaErrorInvalidValue;
  const int threads = head_dim >= 128 ? 128 : static_cast<int>((head_dim + 31) / 32 * 32);
  const size_t smem = 2 * static_cast<size_t>(head_dim) * sizeof(float);
  gret_step_kernel<<<static_cast<unsigned>(batch * heads), threads, smem, stream>>>(q, k, v, row_stride, log_gamma,
                                                                                    state, o, heads, head_dim);
  return cudaGetLastError();
}

}  // namespace yoco::cuda
