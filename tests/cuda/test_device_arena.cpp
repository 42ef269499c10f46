// The device memory arena on a real GPU: its view reconciles with
// cudaMemGetInfo, and an impossible allocation is an error value, not an
// abort. The accounting itself is tested on a fake backend in every preset
// (tests/test_device_arena_accounting.cpp).
#include <gtest/gtest.h>

#include <cstdlib>

#include "device/device_arena.hpp"
#include "gpu_test_support.hpp"

namespace yoco::cuda {
namespace {

TEST(DeviceArenaGpu, ReconcilesWithCudaMemGetInfo) {
  YOCO_REQUIRE_GPU();
  auto backend = cuda_backend();
  DeviceArena arena(*backend);
  const ArenaReport before = arena.report();
  ASSERT_TRUE(before.device_known) << before.device_error;
  DeviceBuffer w = arena.allocate(MemCategory::weights, int64_t{256} << 20, "weights");
  ASSERT_TRUE(w) << w.error();
  const ArenaReport after = arena.report();
  EXPECT_EQ(after.at(MemCategory::weights), int64_t{256} << 20);
  // The device saw at least the 256 MiB (its allocator may round up).
  EXPECT_GE(after.device_used - before.device_used, int64_t{256} << 20);
  // `other` is what the device holds beyond the arena: exactly used - 256 MiB
  // here (the CUDA context already holds memory, so no clamping applies), and
  // the same context before and after, up to the allocator's rounding and
  // bookkeeping (16 MiB; a category counted twice or not at all is 256 MiB off).
  EXPECT_GT(before.other, 0) << "a CUDA context holds device memory";
  EXPECT_EQ(after.other, after.device_used - (int64_t{256} << 20));
  EXPECT_LE(std::llabs(after.other - before.other), int64_t{16} << 20);
}

TEST(DeviceArenaGpu, AnImpossibleAllocationIsReportedNotFatal) {
  YOCO_REQUIRE_GPU();
  auto backend = cuda_backend();
  DeviceArena arena(*backend);
  DeviceBuffer huge = arena.allocate(MemCategory::kv_cache, int64_t{1} << 50, "1 PB cache");
  EXPECT_FALSE(huge);
  EXPECT_NE(huge.error().find("did not fit"), std::string::npos) << huge.error();
  // The context is still usable afterwards.
  DeviceBuffer ok = arena.allocate(MemCategory::activations, 1 << 20, "1 MiB");
  EXPECT_TRUE(ok) << ok.error();
}

}  // namespace
}  // namespace yoco::cuda
