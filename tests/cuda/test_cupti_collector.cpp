// The CUPTI collector (bench/harness/cupti_collector.hpp) on a real device:
// the records the sweep's --cupti breakdown is made of. A kernel launched
// directly and the same kernel replayed from a CUDA graph captured before the
// collector started are both seen, with timestamps; memset and memcpy records
// come as such; start / stop repeat in one process (each stop detaches CUPTI,
// each start attaches it again), and nothing is recorded between collections;
// the host's API calls come as runtime records, and the program's own driver calls as driver records, named.
#include <cuda.h>  // the driver's types only: its functions come through the runtime's entry points
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "cupti_collector.hpp"
#include "device/device_weights.hpp"
#include "gpu_test_support.hpp"
#include "host_api_time.hpp"
#include "kernel_family.hpp"

namespace yoco::cli {
namespace {

void ok(cudaError_t e, const char* what) { ASSERT_EQ(e, cudaSuccess) << what << ": " << cudaGetErrorString(e); }

int64_t count(const std::vector<ActivityRecord>& rs, ActivityKind kind, const std::string& short_name = "") {
  return std::count_if(rs.begin(), rs.end(), [&](const ActivityRecord& r) {
    return r.kind == kind && (short_name.empty() || kernel_short_name(r.name) == short_name);
  });
}

class CuptiCollectorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    YOCO_REQUIRE_GPU();
    ok(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "stream");
    ok(cudaMalloc(&buf_, kElems * sizeof(__nv_bfloat16)), "cudaMalloc");
  }
  void TearDown() override {
    if (buf_) cudaFree(buf_);
    if (stream_) cudaStreamDestroy(stream_);
  }
  void launch() {
    ok(cuda::launch_counter_init_bf16(buf_, kElems, 7, InitRule{}, stream_), "counter init");
  }
  // cuCtxSynchronize through the runtime's driver entry point (the tests do not link libcuda).
  static CUresult ctx_synchronize() {
    using Fn = CUresult (*)();
    void* f = nullptr;
    cudaDriverEntryPointQueryResult q{};
    if (cudaGetDriverEntryPointByVersion("cuCtxSynchronize", &f, 12000, cudaEnableDefault, &q) != cudaSuccess ||
        q != cudaDriverEntryPointSuccess || f == nullptr)
      return CUDA_ERROR_NOT_FOUND;
    return reinterpret_cast<Fn>(f)();
  }
  static constexpr int64_t kElems = int64_t{1} << 24;
  cudaStream_t stream_ = nullptr;
  __nv_bfloat16* buf_ = nullptr;
};

TEST_F(CuptiCollectorTest, SeesDirectAndGraphLaunchedKernelsAcrossRepeatedCollections) {
  // A graph of 3 launches, captured before any collection (the sweep's decode graph is).
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  ok(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal), "begin capture");
  for (int i = 0; i < 3; ++i) launch();
  ok(cudaStreamEndCapture(stream_, &graph), "end capture");
  ok(cudaGraphInstantiate(&exec, graph, 0), "instantiate");

  for (int round = 0; round < 3; ++round) {
    SCOPED_TRACE("collection " + std::to_string(round + 1));
    CuptiCollector c;
    c.start();
    launch();
    launch();
    ok(cudaGraphLaunch(exec, stream_), "graph launch");
    ok(cudaMemsetAsync(buf_, 0, 4096, stream_), "memset");
    std::vector<__nv_bfloat16> host(16);
    ok(cudaMemcpyAsync(host.data(), buf_, sizeof(__nv_bfloat16) * 16, cudaMemcpyDeviceToHost, stream_), "memcpy");
    ok(cudaStreamSynchronize(stream_), "sync");
    // A driver call of the program's own (cuBLAS launches its kernels so): a top-level driver record.
    ASSERT_EQ(ctx_synchronize(), CUDA_SUCCESS) << "cuCtxSynchronize";
    const std::vector<ActivityRecord> rs = c.stop();
    EXPECT_EQ(c.dropped_records(), 0u);
    EXPECT_EQ(c.unreadable_records(), 0u);
    EXPECT_EQ(c.detach_error(), "");
    EXPECT_EQ(count(rs, ActivityKind::kernel, "counter_init_bf16_kernel"), 2 + 3) << "direct + graph-replayed";
    EXPECT_GE(count(rs, ActivityKind::memset), 1);
    EXPECT_GE(count(rs, ActivityKind::memcpy), 1);
    for (const ActivityRecord& r : rs) {
      EXPECT_TRUE(r.timed()) << r.name;
      if (is_api_call(r.kind)) EXPECT_GE(r.end_ns, r.start_ns) << r.name;  // a fast call may take under a tick
      else EXPECT_GT(r.end_ns, r.start_ns) << r.name;
    }
    // The host's calls, by name, each once: the graph launch, the memset, the stream's wait.
    EXPECT_EQ(c.host_api_error(), "");
    const HostApiBreakdown h = aggregate_host_api(rs, 1);
    auto calls = [&](const std::string& name) {
      for (const ApiTime& a : h.apis)
        if (a.name == name) return a.calls;
      return int64_t{0};
    };
    EXPECT_EQ(calls("cudaGraphLaunch"), 1);
    EXPECT_EQ(calls("cudaMemsetAsync"), 1);
    EXPECT_EQ(calls("cudaStreamSynchronize"), 1);
    EXPECT_GE(calls("cudaLaunchKernel"), 2) << "the direct launches";
    // CUDA 13's runtime enters the driver through internal entry points: CUPTI records no driver call
    // inside a runtime call (run-03 on the H200, driver 580: 0 nested), so only the program's own
    // driver calls are seen, once each.
    EXPECT_EQ(calls("cuCtxSynchronize"), 1) << "the program's own driver call";
    EXPECT_GT(h.wait_seconds_per_unit, 0.0);
    for (const ActivityRecord& r : rs)
      if (r.kind == ActivityKind::kernel) {
        EXPECT_EQ(kernel_family(r.name), "other") << r.name << ": weight init";
      }
    // Between collections nothing is recorded.
    launch();
    ok(cudaStreamSynchronize(stream_), "sync");
  }
  CuptiCollector last;
  last.start();
  EXPECT_TRUE(count(last.stop(), ActivityKind::kernel) == 0) << "the launches between collections are not records";
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
}

}  // namespace
}  // namespace yoco::cli
