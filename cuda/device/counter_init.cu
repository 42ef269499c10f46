#include "device/counter_init.hpp"

#include <cuda_bf16.h>

#include "device/device_weights.hpp"  // declares launch_counter_init_bf16

namespace yoco::cuda {
namespace {

__global__ void counter_init_kernel(float* __restrict__ dst, int64_t n, uint64_t key, InitRule rule) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    dst[i] = counter_init_value(key, static_cast<uint64_t>(i), rule);
}

// The same values rounded to bf16 (round to nearest even), written straight
// into a device weight buffer.
__global__ void counter_init_bf16_kernel(__nv_bfloat16* __restrict__ dst, int64_t n, uint64_t key, InitRule rule) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    dst[i] = __float2bfloat16_rn(counter_init_value(key, static_cast<uint64_t>(i), rule));
}

constexpr int kInitThreads = 256;
constexpr int64_t kInitMaxBlocks = 65535 * 16;  // grid-stride beyond

unsigned init_grid(int64_t n) {
  const int64_t blocks = (n + kInitThreads - 1) / kInitThreads;
  return static_cast<unsigned>(blocks < kInitMaxBlocks ? blocks : kInitMaxBlocks);
}

}  // namespace

cudaError_t launch_counter_init(float* dst, int64_t n, uint64_t key, InitRule rule, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  counter_init_kernel<<<init_grid(n), kInitThreads, 0, stream>>>(dst, n, key, rule);
  return cudaGetLastError();
}

cudaError_t launch_counter_init_bf16(__nv_bfloat16* dst, int64_t n, uint64_t key, InitRule rule, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  counter_init_bf16_kernel<<<init_grid(n), kInitThreads, 0, stream>>>(dst, n, key, rule);
  return cudaGetLastError();
}

}  // namespace yoco::cuda
