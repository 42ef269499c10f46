// The device memory arena: category accounting, peaks, RAII release, and an
// allocation that does not fit returned as an error value. The accounting runs
// against a fake backend (no GPU needed); the last tests use the real one.
#include <gtest/gtest.h>

#include <cstdlib>
#include <map>

#include "device_arena.hpp"
#include "gpu_test_support.hpp"

namespace yoco::cuda {
namespace {

// A device of `capacity` bytes with `context` bytes taken before the arena starts.
class FakeBackend final : public DeviceBackend {
 public:
  FakeBackend(int64_t capacity, int64_t context) : capacity_(capacity), used_(context) {}
  void* allocate(int64_t bytes, std::string& error) override {
    if (used_ + bytes > capacity_) {
      error = "out of memory";
      return nullptr;
    }
    used_ += bytes;
    void* p = reinterpret_cast<void*>(next_);
    next_ += 4096;
    sizes_[p] = bytes;
    return p;
  }
  void release(void* p) override {
    used_ -= sizes_.at(p);
    sizes_.erase(p);
  }
  bool mem_info(int64_t& free_bytes, int64_t& total_bytes, std::string&) override {
    free_bytes = capacity_ - used_;
    total_bytes = capacity_;
    return true;
  }
  int64_t used() const { return used_; }
  size_t live() const { return sizes_.size(); }

 private:
  int64_t capacity_, used_;
  uintptr_t next_ = 0x10000;
  std::map<void*, int64_t> sizes_;
};

TEST(DeviceArena, CountsEachCategoryAndItsPeak) {
  FakeBackend dev(1000, 100);
  DeviceArena arena(dev);
  DeviceBuffer w = arena.allocate(MemCategory::weights, 300, "weights");
  DeviceBuffer kv = arena.allocate(MemCategory::kv_cache, 200, "kv");
  ASSERT_TRUE(w && kv);
  {
    DeviceBuffer tmp = arena.allocate(MemCategory::activations, 150, "tmp");
    ASSERT_TRUE(tmp);
    EXPECT_EQ(arena.report().at(MemCategory::activations), 150);
  }  // released here
  const ArenaReport r = arena.report();
  EXPECT_EQ(r.at(MemCategory::weights), 300);
  EXPECT_EQ(r.at(MemCategory::kv_cache), 200);
  EXPECT_EQ(r.at(MemCategory::activations), 0);
  EXPECT_EQ(r.peak_at(MemCategory::activations), 150);
  EXPECT_EQ(r.total_current, 500);
  EXPECT_EQ(r.total_peak, 650);
  // The device's view: 100 context + 500 arena used; `other` is the context.
  ASSERT_TRUE(r.device_known);
  EXPECT_EQ(r.device_used, 600);
  EXPECT_EQ(r.other, 100);
  arena.reset_peaks();
  EXPECT_EQ(arena.report().peak_at(MemCategory::activations), 0);
  EXPECT_EQ(arena.report().total_peak, 500);
}

TEST(DeviceArena, AnAllocationThatDoesNotFitIsAnErrorValue) {
  FakeBackend dev(1000, 100);
  DeviceArena arena(dev);
  DeviceBuffer w = arena.allocate(MemCategory::weights, 700, "weights");
  ASSERT_TRUE(w);
  DeviceBuffer kv = arena.allocate(MemCategory::kv_cache, 400, "global K/V");
  EXPECT_FALSE(kv);
  EXPECT_EQ(kv.get(), nullptr);
  EXPECT_NE(kv.error().find("global K/V"), std::string::npos) << kv.error();
  EXPECT_NE(kv.error().find("kv_cache"), std::string::npos) << kv.error();
  EXPECT_NE(kv.error().find("out of memory"), std::string::npos) << kv.error();
  // Nothing was counted for the failed buffer, and the arena goes on working.
  EXPECT_EQ(arena.report().at(MemCategory::kv_cache), 0);
  EXPECT_EQ(arena.live_buffers(), 1);
  DeviceBuffer small = arena.allocate(MemCategory::kv_cache, 150, "smaller K/V");
  EXPECT_TRUE(small);
  EXPECT_FALSE(arena.allocate(MemCategory::state, 0, "empty"));
}

TEST(DeviceArena, BuffersMoveAndReleaseOnce) {
  FakeBackend dev(1000, 0);
  DeviceArena arena(dev);
  DeviceBuffer a = arena.allocate(MemCategory::state, 100, "a");
  DeviceBuffer b = std::move(a);
  EXPECT_FALSE(a);
  EXPECT_TRUE(b);
  DeviceBuffer c = arena.allocate(MemCategory::state, 50, "c");
  c = std::move(b);  // c's own 50 bytes are released, b's 100 move in
  EXPECT_EQ(arena.report().at(MemCategory::state), 100);
  EXPECT_EQ(dev.live(), 1u);
  c.reset();
  EXPECT_EQ(arena.report().at(MemCategory::state), 0);
  EXPECT_EQ(dev.used(), 0);
  EXPECT_EQ(arena.live_buffers(), 0);
}

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
