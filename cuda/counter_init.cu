#include "counter_init.hpp"

namespace yoco::cuda {
namespace {

__global__ void counter_init_kernel(float* __restrict__ dst, int64_t n, uint64_t key, InitRule rule) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    dst[i] = counter_init_value(key, static_cast<uint64_t>(i), rule);
}

}  // namespace

cudaError_t launch_counter_init(float* dst, int64_t n, uint64_t key, InitRule rule, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  constexpr int kThreads = 256;
  const int64_t blocks = (n + kThreads - 1) / kThreads;
  const unsigned grid = static_cast<unsigned>(blocks < 65535 * 16 ? blocks : 65535 * 16);  // grid-stride beyond
  counter_init_kernel<<<grid, kThreads, 0, stream>>>(dst, n, key, rule);
  return cudaGetLastError();
}

}  // namespace yoco::cuda
