#include "device/device_arena.hpp"

#include <cassert>
#include <cstdio>

namespace yoco::cuda {

const char* mem_category_name(MemCategory c) {
  static const char* names[kMemCategories] = {"weights", "kv_cache", "state", "activations"};
  return names[static_cast<int>(c)];
}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
  if (this != &o) {
    reset();
    arena_ = o.arena_;
    ptr_ = o.ptr_;
    bytes_ = o.bytes_;
    category_ = o.category_;
    error_ = std::move(o.error_);
    o.arena_ = nullptr;
    o.ptr_ = nullptr;
    o.bytes_ = 0;
  }
  return *this;
}

void DeviceBuffer::reset() {
  if (arena_ && ptr_) arena_->release(*this);
  arena_ = nullptr;
  ptr_ = nullptr;
  bytes_ = 0;
}

DeviceArena::~DeviceArena() {
  if (live_ != 0) std::fprintf(stderr, "yoco: DeviceArena destroyed with %d live buffers\n", live_);
  assert(live_ == 0);
}

DeviceBuffer DeviceArena::allocate(MemCategory c, int64_t bytes, const std::string& what) {
  DeviceBuffer b;
  b.category_ = c;
  if (bytes <= 0) {
    b.error_ = what + ": cannot allocate " + std::to_string(bytes) + " bytes";
    return b;
  }
  std::string err;
  void* p = backend_.allocate(bytes, err);
  if (!p) {
    int64_t free_b = 0, total_b = 0;
    std::string info_err;
    const bool known = backend_.mem_info(free_b, total_b, info_err);
    char buf[160];
    std::snprintf(buf, sizeof buf, "%s: %.3f GB of %s did not fit", what.c_str(), static_cast<double>(bytes) / 1e9,
                  mem_category_name(c));
    b.error_ = buf;
    if (known) {
      std::snprintf(buf, sizeof buf, " (%.3f GB free of %.3f GB; this arena holds %.3f GB)",
                    static_cast<double>(free_b) / 1e9, static_cast<double>(total_b) / 1e9,
                    static_cast<double>(total_current_) / 1e9);
      b.error_ += buf;
    }
    if (!err.empty()) b.error_ += ": " + err;
    return b;
  }
  b.arena_ = this;
  b.ptr_ = p;
  b.bytes_ = bytes;
  const int i = static_cast<int>(c);
  current_[i] += bytes;
  if (current_[i] > peak_[i]) peak_[i] = current_[i];
  total_current_ += bytes;
  if (total_current_ > total_peak_) total_peak_ = total_current_;
  ++allocations_[i];
  ++live_;
  return b;
}

DeviceBuffer DeviceArena::require(MemCategory c, int64_t bytes, const std::string& what) {
  DeviceBuffer b = allocate(c, bytes, what);
  if (!b) throw DeviceOutOfMemory(b.error());
  return b;
}

void DeviceArena::release(DeviceBuffer& b) {
  backend_.release(b.ptr_);
  current_[static_cast<int>(b.category_)] -= b.bytes_;
  total_current_ -= b.bytes_;
  --live_;
}

ArenaReport DeviceArena::report() {
  ArenaReport r;
  r.current = current_;
  r.peak = peak_;
  r.total_current = total_current_;
  r.total_peak = total_peak_;
  int64_t free_b = 0, total_b = 0;
  r.device_known = backend_.mem_info(free_b, total_b, r.device_error);
  if (r.device_known) {
    r.device_total = total_b;
    r.device_used = total_b - free_b;
    // The allocator rounds up, so the device may show slightly more than the
    // arena asked for; that rounding lands in `other` with the context.
    r.other = r.device_used > total_current_ ? r.device_used - total_current_ : 0;
  }
  return r;
}

void DeviceArena::reset_peaks() {
  peak_ = current_;
  total_peak_ = total_current_;
}

}  // namespace yoco::cuda
