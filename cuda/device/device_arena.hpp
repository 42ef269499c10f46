#pragma once
// Device memory by category (DESIGN.md §4): every buffer the CUDA runners hold
// is allocated here under one category, so that the harness reports weights,
// kv_cache, state and activations from the buffers themselves, with a peak per
// category, and `other` as what the device reports in use beyond them (CUDA
// context, library workspaces). An allocation that does not fit is a value the
// caller reports ("out of memory at N tokens, batch B"), never an abort.
//
// The accounting is plain C++ over a small backend interface, so it is tested
// on machines without a GPU with a fake backend; cuda_backend() is the real one.
#include <array>
#include <cstdint>
#include <memory>
#include <new>
#include <string>

namespace yoco::cuda {

enum class MemCategory { weights, kv_cache, state, activations };
inline constexpr int kMemCategories = 4;
const char* mem_category_name(MemCategory c);  // "weights", "kv_cache", "state", "activations"

// Where bytes come from. allocate returns nullptr and says why on failure.
class DeviceBackend {
 public:
  virtual ~DeviceBackend() = default;
  virtual void* allocate(int64_t bytes, std::string& error) = 0;
  virtual void release(void* p) = 0;
  // Free and total bytes of the device; false (with `error`) if it cannot say.
  virtual bool mem_info(int64_t& free_bytes, int64_t& total_bytes, std::string& error) = 0;
};

// cudaMalloc / cudaFree / cudaMemGetInfo on the current device.
std::unique_ptr<DeviceBackend> cuda_backend();

class DeviceArena;

// An allocation that did not fit, as an exception the harness turns into an
// out_of_memory row (it is a std::bad_alloc) whose what() says what did not
// fit and how much was free ("kv_cache: global K/V: 120.000 GB of kv_cache did
// not fit (79.1 GB free of 85.0 GB; ...)").
class DeviceOutOfMemory : public std::bad_alloc {
 public:
  explicit DeviceOutOfMemory(std::string message) : message_(std::move(message)) {}
  const char* what() const noexcept override { return message_.c_str(); }

 private:
  std::string message_;
};

// A buffer owned by the arena: freed (and un-counted) when destroyed. Empty
// when the allocation failed; error() then says why.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(DeviceBuffer&& o) noexcept { *this = std::move(o); }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() { reset(); }

  explicit operator bool() const { return ptr_ != nullptr; }
  void* get() const { return ptr_; }
  template <class T>
  T* as() const {
    return static_cast<T*>(ptr_);
  }
  int64_t bytes() const { return bytes_; }
  MemCategory category() const { return category_; }
  const std::string& error() const { return error_; }
  void reset();  // frees now

 private:
  friend class DeviceArena;
  DeviceArena* arena_ = nullptr;
  void* ptr_ = nullptr;
  int64_t bytes_ = 0;
  MemCategory category_ = MemCategory::activations;
  std::string error_;
};

// What the arena holds, with the device's own view beside it.
struct ArenaReport {
  std::array<int64_t, kMemCategories> current{}, peak{};
  int64_t total_current = 0, total_peak = 0;
  bool device_known = false;     // mem_info answered
  int64_t device_total = 0;      // capacity
  int64_t device_used = 0;       // total - free
  int64_t other = 0;             // device_used - total_current (context, libraries), >= 0
  std::string device_error;      // why device_known is false
  int64_t at(MemCategory c) const { return current[static_cast<int>(c)]; }
  int64_t peak_at(MemCategory c) const { return peak[static_cast<int>(c)]; }
};

class DeviceArena {
 public:
  explicit DeviceArena(DeviceBackend& backend) : backend_(backend) {}
  DeviceArena(const DeviceArena&) = delete;
  DeviceArena& operator=(const DeviceArena&) = delete;
  ~DeviceArena();  // buffers must not outlive their arena (checked: aborts in debug builds)

  // `what` names the buffer in the error ("kv_cache: global K of layer 0").
  DeviceBuffer allocate(MemCategory c, int64_t bytes, const std::string& what);
  // The same, throwing DeviceOutOfMemory (with the arena's message) instead of
  // returning an empty buffer: what the runners use.
  DeviceBuffer require(MemCategory c, int64_t bytes, const std::string& what);

  ArenaReport report();
  // Peaks restart from the current values (e.g. between prefill and decode).
  void reset_peaks();
  int live_buffers() const { return live_; }
  // Allocations made in a category since the arena began (a kept buffer is
  // not one): how a test sees that a runner reused its caches.
  int64_t allocations(MemCategory c) const { return allocations_[static_cast<int>(c)]; }

 private:
  friend class DeviceBuffer;
  void release(DeviceBuffer& b);
  DeviceBackend& backend_;
  std::array<int64_t, kMemCategories> current_{}, peak_{};
  int64_t total_current_ = 0, total_peak_ = 0;
  std::array<int64_t, kMemCategories> allocations_{};
  int live_ = 0;
};

}  // namespace yoco::cuda
