#pragma once
// Per-kernel GPU time from CUPTI's Activity API (--cupti; DESIGN.md §5):
// kernel records of kind CONCURRENT_KERNEL (kernels of every stream, cuBLAS's
// included, without serialising them), plus MEMCPY and MEMSET records; and the
// host's CUDA API calls, RUNTIME and DRIVER records (host_api_time.hpp), where
// CUPTI traces them (host_api_error() says why not otherwise).
//
//   CuptiCollector c;
//   c.start();                       // enables the kinds
//   ... the region ...
//   std::vector<ActivityRecord> r = c.stop();  // sync, forced flush, disable
//
// CUPTI is initialised (its buffer callbacks registered) once per process, on
// the first start(). Its buffers (8 MiB, 8-byte aligned) are filled by CUPTI
// and handed back on CUPTI's own thread; the records are copied out under a
// mutex and the buffer freed. Only one collector may be started at a time
// (std::logic_error otherwise).
//
// Errors: std::runtime_error naming the CUPTI call and cuptiGetResultString's
// text when CUPTI cannot be used (insufficient privileges, a device or driver
// it does not support, another profiler such as Nsight Systems / Compute
// attached to the process) or a CUDA call fails. Built without CUDA
// (YOCO_HAVE_CUDA undefined) every method throws std::logic_error ("built
// without CUDA"). Plain C++ header: no CUDA or CUPTI types.
#include <cstdint>
#include <string>
#include <vector>

#include "kernel_family.hpp"

namespace yoco::cli {

class CuptiCollector {
 public:
  CuptiCollector() = default;
  ~CuptiCollector();  // stops a started collection, ignoring its errors
  CuptiCollector(const CuptiCollector&) = delete;
  CuptiCollector& operator=(const CuptiCollector&) = delete;

  // Attaches CUPTI (registers the buffer callbacks), waits for the device to
  // be idle (cudaDeviceSynchronize) and enables the activity kinds.
  void start();
  // cudaDeviceSynchronize, cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED),
  // disables the kinds, detaches CUPTI (cuptiFinalize: nothing of the profiler
  // stays on later runs); the records delivered since start(), in delivery order.
  std::vector<ActivityRecord> stop();

  bool started() const { return started_; }
  // Of the last stop(): records CUPTI dropped (no buffer space), and records
  // a buffer held that could not be read (incomplete). Both 0 normally.
  uint64_t dropped_records() const { return dropped_; }
  uint64_t unreadable_records() const { return unreadable_; }
  // Of the last stop(): "" once CUPTI detached, else why it stayed attached
  // (its instrumentation may then slow the runs after it).
  const std::string& detach_error() const { return detach_error_; }
  // Of the last start(): "" when the host's API calls are traced too, else why not (the kernel
  // records are collected either way).
  const std::string& host_api_error() const { return host_api_error_; }

 private:
  bool started_ = false;
  size_t api_kinds_ = 0;  // API kinds enabled by start() (kApiKinds' first api_kinds_)
  std::string host_api_error_;
  std::string detach_error_;
  uint64_t dropped_ = 0, unreadable_ = 0;
};

}  // namespace yoco::cli
