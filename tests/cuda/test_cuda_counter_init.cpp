// The device weight generator reproduces the reference's init bit for bit.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "config.hpp"
#include "device/counter_init.hpp"
#include "gpu_test_support.hpp"
#include "param_layout.hpp"
#include "weights.hpp"

namespace yoco {
namespace {

TEST(CudaCounterInit, BitIdenticalToReference) {
  YOCO_REQUIRE_GPU();
  const auto cfg = preset_config("yoco-tiny");
  const uint64_t seed = 1234;
  for (const auto& p : param_layout(cfg)) {
    std::vector<float> host(p.numel()), dev(p.numel(), NAN);
    fill_counter_init(p, seed, host.data());
    float* d = nullptr;
    ASSERT_EQ(cudaMalloc(&d, p.numel() * sizeof(float)), cudaSuccess);
    ASSERT_EQ(cudaMemset(d, 0xff, p.numel() * sizeof(float)), cudaSuccess);  // poison: NaN
    ASSERT_EQ(cuda::launch_counter_init(d, p.numel(), tensor_stream_key(seed, p.name), p.init, nullptr), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(dev.data(), d, p.numel() * sizeof(float), cudaMemcpyDeviceToHost), cudaSuccess);
    cudaFree(d);
    EXPECT_EQ(std::memcmp(host.data(), dev.data(), host.size() * sizeof(float)), 0) << p.name;
  }
}

// Past 2^31 elements the index must not wrap: sample the tail of a 2^31 + 5
// element generation without storing it all on the host.
TEST(CudaCounterInit, SixtyFourBitIndexing) {
  YOCO_REQUIRE_GPU();
  const int64_t n = (int64_t{1} << 31) + 5;
  float* d = nullptr;
  if (cudaMalloc(&d, n * sizeof(float)) != cudaSuccess) {
    cudaGetLastError();
    GTEST_SKIP() << "device cannot hold 8.6 GB for this test";
  }
  const InitRule rule{0.0f, 0.5f};
  const uint64_t key = tensor_stream_key(9, "big");
  ASSERT_EQ(cuda::launch_counter_init(d, n, key, rule, nullptr), cudaSuccess);
  std::vector<float> tail(16);
  ASSERT_EQ(cudaMemcpy(tail.data(), d + n - 16, 16 * sizeof(float), cudaMemcpyDeviceToHost), cudaSuccess);
  cudaFree(d);
  for (int64_t i = 0; i < 16; ++i) EXPECT_EQ(tail[i], counter_init_value(key, n - 16 + i, rule)) << i;
}

}  // namespace
}  // namespace yoco
