#pragma once
// Kernel families and short names for the --cupti breakdown
// (device_backend.hpp kernel_breakdown, cupti_collector.hpp), and the pure
// aggregation of activity records into per-kernel and per-family times per
// unit (one prefill, one decode step). Plain C++: no CUDA, tested on the CPU
// (tests/test_kernel_family.cpp).
//
// Families (the parts of the cost model, bench/analytic/cost_model.hpp, with
// attention split by kernel type):
//   gemm               cuBLAS / cuBLASLt / CUTLASS: sm90_xmma_gemm_*,
//                      nvjet_*, cutlass*, ampere_* / sm80_* *gemm*, gemv,
//                      cuBLAS's split-K reduction (splitKreduce_kernel) and
//                      cuBLASLt's epilogue kernels (namespace cublasLt)
//   gret               gRet's chunkwise and recurrent kernels and the decay
//                      log-gammas (gret_chunk*, gret_segment_scan,
//                      gret_step_*, log_decay_kernel)
//   attention_prefill  the flash prefill kernels (flash_prefill*)
//   attention_decode   flash decoding: the split-KV kernel and its combine
//                      (flash_decode.cu split_kernel / combine_kernel)
//   norms              norms and elementwise ops: RMSNorm (+ residual add),
//                      gRet's per-head norm with its silu gate, RoPE,
//                      SwiGLU, the embedding gather (as the cost model's
//                      `norms` part)
//   other              everything else: cache writes and the SWA window
//                      gather (copies), position bookkeeping, weight and test
//                      initialisation, the GPU test oracles, memcpy and memset
//                      records, any kernel no rule names
// A family names what a kernel computes, not the phase it runs in: YOCO's
// prefill runs the cross-decoder for its last position through flash
// decoding, so a prefill breakdown has attention_decode time too.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace yoco::cli {

// The six families, in the order above.
const std::vector<std::string>& kernel_families();

// The family of a kernel, from its name as CUPTI reports it (mangled, or
// plain for extern "C" library kernels) or demangled.
std::string kernel_family(std::string_view kernel_name);

// A readable, stable short name: demangled when mangled, without the return
// type, namespaces, template arguments and parameter list
// (`void yoco::cuda::flash_prefill_kernel<128, 64>(...)` -> `flash_prefill_kernel`).
// Generic wrappers name their first template argument instead
// (`cutlass::Kernel2<cutlass_80_tensorop_...>` -> `cutlass_80_tensorop_...`).
// At most kShortNameMax characters (a longer name keeps its first 51 and
// `~` + 8 hex digits of a hash of the whole), never a comma, quote, line break
// or control character: it becomes a CSV phase field `<phase>:<short name>`.
inline constexpr size_t kShortNameMax = 60;
std::string kernel_short_name(std::string_view kernel_name);

// `name` demangled when it is a mangled C++ name (starts with _Z) that the
// demangler accepts; unchanged otherwise.
std::string demangle(std::string_view name);

// GPU work (kernel, memcpy, memset) and the host's CUDA API calls (runtime_api, driver_api: host
// timestamps, aggregated apart by host_api_time.hpp; aggregate_kernel_times leaves them out).
enum class ActivityKind { kernel, memcpy, memset, runtime_api, driver_api };
// "kernel", "memcpy", "memset", "runtime", "driver"
const char* activity_kind_name(ActivityKind k);
inline bool is_api_call(ActivityKind k) { return k == ActivityKind::runtime_api || k == ActivityKind::driver_api; }

// One activity record (cupti_collector.hpp). Kernels: the name CUPTI gives;
// memcpy: "memcpy <HtoD|DtoH|DtoD|...>"; memset: "memset"; an API call: the
// function's name without its version suffix ("cudaLaunchKernel", "cuLaunchKernelEx").
struct ActivityRecord {
  std::string name;
  uint64_t start_ns = 0, end_ns = 0;  // CUPTI timestamps; both 0 when CUPTI could not time it
  uint32_t stream_id = 0, correlation_id = 0;
  uint32_t thread_id = 0;  // API calls: the host thread that made the call
  ActivityKind kind = ActivityKind::kernel;
  uint64_t duration_ns() const { return end_ns > start_ns ? end_ns - start_ns : 0; }
  bool timed() const { return start_ns != 0 || end_ns != 0; }
};

// One short name's time (records with the same short name merged).
struct KernelTime {
  std::string short_name;
  std::string family;             // the family of most of its time
  double seconds_per_unit = 0;    // total seconds / units
  double launches_per_unit = 0;   // records / units
  int64_t launches = 0;           // records, all units
};

struct FamilyTime {
  std::string family;
  double seconds_per_unit = 0;
  double launches_per_unit = 0;
  int64_t kernels = 0;   // distinct short names in the family
  int64_t launches = 0;  // records, all units
};

struct KernelBreakdown {
  int64_t units = 1;
  std::vector<KernelTime> kernels;   // longest first (ties: by short name)
  std::vector<FamilyTime> families;  // all six, zeros included; longest first (ties: the order above)
  double seconds_per_unit = 0;       // all records
  double launches_per_unit = 0;
  int64_t records = 0;
  int64_t untimed = 0;  // records CUPTI could not time (start = end = 0): counted, 0 s
};

// Groups the GPU records of `records` (all of `units` units; API calls are
// left out) by short name and by family. std::invalid_argument when units < 1.
KernelBreakdown aggregate_kernel_times(const std::vector<ActivityRecord>& records, int64_t units);

// The kernels that make up `fraction` of the time, longest first (the kernel
// that crosses the fraction is kept), and the rest merged into one entry
// (short_name "(rest)", family "mixed" unless all of one family).
struct KernelCut {
  std::vector<KernelTime> kept;
  bool has_rest = false;
  KernelTime rest;
  int64_t rest_kernels = 0;  // short names merged into `rest`
};
KernelCut cut_kernels(const KernelBreakdown& b, double fraction = 0.999);

}  // namespace yoco::cli
