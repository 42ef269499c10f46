// The device memory arena's accounting (category counts, peaks, RAII release,
// an allocation that does not fit returned as an error value) against a fake
// backend: plain C++, so it runs in every preset, with or without CUDA. The
// GPU half (the real backend, cudaMemGetInfo) is tests/cuda/test_device_arena.cpp.
#include <gtest/gtest.h>

#include <map>

#include "device/device_arena.hpp"

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
  EXPECT_EQ(arena.allocations(MemCategory::kv_cache), 0);
  DeviceBuffer small = arena.allocate(MemCategory::kv_cache, 150, "smaller K/V");
  EXPECT_TRUE(small);
  EXPECT_FALSE(arena.allocate(MemCategory::state, 0, "empty"));
  // Allocations counted by category, failed ones not.
  EXPECT_EQ(arena.allocations(MemCategory::weights), 1);
  EXPECT_EQ(arena.allocations(MemCategory::kv_cache), 1);
  EXPECT_EQ(arena.allocations(MemCategory::state), 0);
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

}  // namespace
}  // namespace yoco::cuda
