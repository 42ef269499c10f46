#pragma once
// The host's side of a profiled region (--cupti): its CUDA API calls from CUPTI's runtime and driver
// API records, per unit (one prefill, one decode step). A prefill whose GPU sits idle between
// kernels (the small presets: 0.22-0.62 ms of kernels in 0.62-1.06 ms prefills, issue 31) is paced by
// these calls and by the runner's own code between them; this says which calls, how many, how long.
//
// - Each call counted once: a driver call made on the same thread inside a runtime call belongs to
//   that runtime call, and is counted as nested, not again. (On CUDA 13 with driver 580 CUPTI records
//   none: the runtime enters the driver through internal entry points, run-03 on the H200. The rule
//   stays for a stack that does.) A library that calls the driver directly (cuBLAS launching its
//   kernels with cuLaunchKernelEx) shows as top-level driver calls.
// - Calls that wait for the device (the synchronize calls) are kept apart from the ones that enqueue
//   work: a wait is the GPU's time seen from the host, not the host's work.
// - CUPTI's own cost per traced call is inside every duration (about a microsecond): the times are an
//   upper bound on the calls' own, and the region's cupti_overhead_fraction row says by how much the
//   whole slowed.
// Plain C++: no CUDA, tested on the CPU (tests/test_host_api_time.cpp).
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "kernel_family.hpp"

namespace yoco::cli {

// Whether a CUDA API function waits for the device (cudaDeviceSynchronize, cudaStreamSynchronize,
// cudaEventSynchronize, their driver twins cuCtxSynchronize / cuStreamSynchronize /
// cuEventSynchronize, and the synchronous copies cudaMemcpy / cuMemcpyDtoH ... without Async).
bool api_waits_for_device(std::string_view name);

// A CUDA API function's name as CUPTI gives it, without its version suffix
// ("cudaLaunchKernel_v7000" -> "cudaLaunchKernel"; "cuMemcpyDtoH_v2" -> "cuMemcpyDtoH").
std::string api_short_name(std::string_view name);

struct ApiTime {
  std::string name;                // api_short_name
  ActivityKind kind = ActivityKind::runtime_api;
  bool waits = false;              // api_waits_for_device
  double seconds_per_unit = 0;     // top-level calls only
  double calls_per_unit = 0;
  int64_t calls = 0;               // top-level calls, all units
};

struct HostApiBreakdown {
  int64_t units = 1;
  std::vector<ApiTime> apis;              // top-level calls by name, longest first (ties: by name)
  double enqueue_seconds_per_unit = 0;    // top-level calls that do not wait for the device
  double wait_seconds_per_unit = 0;       // top-level calls that do
  double calls_per_unit = 0;              // top-level calls
  int64_t nested_driver_calls = 0;        // driver calls inside a runtime call, all units (not counted again)
  int64_t records = 0;                    // API records read
  int64_t untimed = 0;                    // API records without timestamps: counted, 0 s
};

// The API records of `records` (all of `units` units; GPU records are left out).
// std::invalid_argument when units < 1.
HostApiBreakdown aggregate_host_api(const std::vector<ActivityRecord>& records, int64_t units);

}  // namespace yoco::cli
