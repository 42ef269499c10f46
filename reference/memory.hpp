#pragma once
// Memory by category (DESIGN.md §4). Weights, caches and states are counted from
// the buffers the model holds; activations are the peak of the temporaries that
// are alive at once, counted by RAII guards around each temporary buffer.
#include <cstdint>

namespace yoco {

struct MemoryBreakdown {
  int64_t weights = 0;
  int64_t kv_cache = 0;
  int64_t state = 0;
  int64_t activations = 0;  // peak during the last metered call
  int64_t total() const { return weights + kv_cache + state + activations; }
};

class ActivationMeter {
 public:
  void add(int64_t b) {
    current_ += b;
    if (current_ > peak_) peak_ = current_;
  }
  void sub(int64_t b) { current_ -= b; }
  void reset_peak() { peak_ = current_; }
  int64_t peak() const { return peak_; }
  int64_t current() const { return current_; }

 private:
  int64_t current_ = 0, peak_ = 0;
};

// The meter the ops on this thread report to (none by default).
ActivationMeter*& current_activation_meter();

// Counts `bytes` as live activations for the guard's lifetime.
class ActivationGuard {
 public:
  explicit ActivationGuard(int64_t bytes) : meter_(current_activation_meter()), bytes_(bytes) {
    if (meter_) meter_->add(bytes_);
  }
  ~ActivationGuard() {
    if (meter_) meter_->sub(bytes_);
  }
  ActivationGuard(const ActivationGuard&) = delete;
  ActivationGuard& operator=(const ActivationGuard&) = delete;

 private:
  ActivationMeter* meter_;
  int64_t bytes_;
};

// Installs a meter for the current thread for the scope's lifetime.
class MeterScope {
 public:
  explicit MeterScope(ActivationMeter* m) : prev_(current_activation_meter()) { current_activation_meter() = m; }
  ~MeterScope() { current_activation_meter() = prev_; }
  MeterScope(const MeterScope&) = delete;
  MeterScope& operator=(const MeterScope&) = delete;

 private:
  ActivationMeter* prev_;
};

}  // namespace yoco
