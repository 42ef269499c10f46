// The host's CUDA API calls of a profiled region (bench/harness/host_api_time.hpp), from synthetic
// CUPTI records: names without version suffixes, waits apart from enqueues, a driver call inside a
// runtime call on the same thread counted once (and one on another thread, or outside, counted), per
// unit, GPU records left out (and API records left out of the kernel breakdown).
#include <gtest/gtest.h>

#include <stdexcept>
#include <vector>

#include "host_api_time.hpp"
#include "kernel_family.hpp"

namespace yoco::cli {
namespace {

ActivityRecord api(const char* name, ActivityKind kind, uint64_t start, uint64_t end, uint32_t thread = 1) {
  ActivityRecord r;
  r.name = name;
  r.kind = kind;
  r.start_ns = start;
  r.end_ns = end;
  r.thread_id = thread;
  return r;
}

const ApiTime* find(const HostApiBreakdown& b, const std::string& name) {
  for (const ApiTime& a : b.apis)
    if (a.name == name) return &a;
  return nullptr;
}

TEST(HostApiTime, NamesLoseTheirVersionSuffixOnly) {
  EXPECT_EQ(api_short_name("cudaLaunchKernel_v7000"), "cudaLaunchKernel");
  EXPECT_EQ(api_short_name("cuMemcpyDtoH_v2"), "cuMemcpyDtoH");
  EXPECT_EQ(api_short_name("cuLaunchKernelEx"), "cuLaunchKernelEx");
  EXPECT_EQ(api_short_name("cudaMemcpyAsync_ptsz_v7000"), "cudaMemcpyAsync_ptsz");
  EXPECT_EQ(api_short_name("cudaGraph_v"), "cudaGraph_v");  // no digits: not a version
  EXPECT_EQ(api_short_name(""), "");
}

TEST(HostApiTime, SynchronizeCallsAndBlockingCopiesWait) {
  EXPECT_TRUE(api_waits_for_device("cudaStreamSynchronize_v3020"));
  EXPECT_TRUE(api_waits_for_device("cudaEventSynchronize"));
  EXPECT_TRUE(api_waits_for_device("cuCtxSynchronize"));
  EXPECT_TRUE(api_waits_for_device("cudaMemcpy_v3020"));
  EXPECT_TRUE(api_waits_for_device("cuMemcpyDtoH_v2"));
  EXPECT_FALSE(api_waits_for_device("cudaMemcpyAsync_v3020"));
  EXPECT_FALSE(api_waits_for_device("cudaLaunchKernel_v7000"));
  EXPECT_FALSE(api_waits_for_device("cudaEventRecord"));
}

TEST(HostApiTime, ADriverCallInsideARuntimeCallCountsOnce) {
  const auto R = ActivityKind::runtime_api, D = ActivityKind::driver_api;
  const std::vector<ActivityRecord> records = {
      api("cudaLaunchKernel_v7000", R, 1000, 6000),     // 5 us
      api("cuLaunchKernel", D, 2000, 5000),             // inside it: nested
      api("cuLaunchKernelEx", D, 7000, 16000),          // cuBLAS's own launch: top level, 9 us
      api("cuLaunchKernel", D, 2500, 3500, 2),          // another thread: top level, 1 us
      api("cudaStreamSynchronize_v3020", R, 20000, 120000),  // a wait, 100 us
      api("cudaLaunchKernel_v7000", R, 130000, 135000),      // 5 us
  };
  const HostApiBreakdown b = aggregate_host_api(records, 1);
  EXPECT_EQ(b.records, 6);
  EXPECT_EQ(b.nested_driver_calls, 1);
  EXPECT_DOUBLE_EQ(b.calls_per_unit, 5.0);
  EXPECT_NEAR(b.enqueue_seconds_per_unit, 20e-6, 1e-12);
  EXPECT_NEAR(b.wait_seconds_per_unit, 100e-6, 1e-12);
  ASSERT_EQ(b.apis.size(), 4u);
  EXPECT_EQ(b.apis[0].name, "cudaStreamSynchronize");  // longest first
  EXPECT_TRUE(b.apis[0].waits);
  const ApiTime* launch = find(b, "cudaLaunchKernel");
  ASSERT_NE(launch, nullptr);
  EXPECT_EQ(launch->calls, 2);
  EXPECT_NEAR(launch->seconds_per_unit, 10e-6, 1e-12);
  EXPECT_EQ(launch->kind, ActivityKind::runtime_api);
  const ApiTime* drv = find(b, "cuLaunchKernel");
  ASSERT_NE(drv, nullptr);
  EXPECT_EQ(drv->calls, 1) << "the nested call was counted again";
  const ApiTime* ex = find(b, "cuLaunchKernelEx");
  ASSERT_NE(ex, nullptr);
  EXPECT_EQ(ex->kind, ActivityKind::driver_api);
}

TEST(HostApiTime, PerUnitAndGpuRecordsLeftOut) {
  ActivityRecord kernel;
  kernel.name = "rms_norm_kernel";
  kernel.start_ns = 0;
  kernel.end_ns = 1000000;
  std::vector<ActivityRecord> records = {kernel};
  for (int i = 0; i < 4; ++i)
    records.push_back(api("cudaLaunchKernel_v7000", ActivityKind::runtime_api, 10 + 100 * i, 60 + 100 * i));
  const HostApiBreakdown b = aggregate_host_api(records, 2);
  EXPECT_EQ(b.records, 4);
  EXPECT_DOUBLE_EQ(b.calls_per_unit, 2.0);
  EXPECT_NEAR(b.enqueue_seconds_per_unit, 100e-9, 1e-15);
  // And the kernel breakdown reads the kernel alone.
  const KernelBreakdown k = aggregate_kernel_times(records, 2);
  EXPECT_EQ(k.records, 1);
  EXPECT_NEAR(k.seconds_per_unit, 0.5e-3, 1e-12);
  EXPECT_THROW(aggregate_host_api(records, 0), std::invalid_argument);
}

TEST(HostApiTime, UntimedRecordsCountWithNoTime) {
  const HostApiBreakdown b = aggregate_host_api({api("cudaEventRecord", ActivityKind::runtime_api, 0, 0)}, 1);
  EXPECT_EQ(b.records, 1);
  EXPECT_EQ(b.untimed, 1);
  EXPECT_DOUBLE_EQ(b.enqueue_seconds_per_unit, 0.0);
  EXPECT_DOUBLE_EQ(b.calls_per_unit, 1.0);
}

}  // namespace
}  // namespace yoco::cli
