#include "device/device_fill.hpp"

#include <algorithm>

#include "counter_rng.hpp"

namespace yoco::cuda {

namespace {

__global__ void fill_normal_kernel(__nv_bfloat16* __restrict__ dst, int64_t n, uint64_t seed, float stddev) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const uint64_t h = yoco::splitmix64(seed * 0x2545f4914f6cdd1dull + static_cast<uint64_t>(i));
    const float u1 = (static_cast<float>(h >> 40) + 1.0f) * (1.0f / 16777217.0f);  // (0, 1]
    const float u2 = static_cast<float>((h >> 16) & 0xffffffu) * (1.0f / 16777216.0f);
    const float z = sqrtf(-2.0f * logf(u1)) * cospif(2.0f * u2);
    dst[i] = __float2bfloat16(stddev * z);
  }
}

}  // namespace

cudaError_t launch_fill_normal_bf16(__nv_bfloat16* dst, int64_t n, uint64_t seed, float stddev, cudaStream_t stream) {
  if (n < 0 || (n > 0 && dst == nullptr)) return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;
  const unsigned grid = static_cast<unsigned>(std::clamp<int64_t>((n + 255) / 256, 1, 4096));
  fill_normal_kernel<<<grid, 256, 0, stream>>>(dst, n, seed, stddev);
  return cudaGetLastError();
}

}  // namespace yoco::cuda
