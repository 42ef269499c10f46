// CUPTI activity records for --cupti (cupti_collector.hpp). Compiled in every
// preset: the CUPTI parts only with YOCO_HAVE_CUDA; without CUDA every method
// throws, saying so. libcupti is loaded when a collection first starts
// (dlopen), not linked: a machine whose CUDA keeps it off the loader's path
// (extras/CUPTI/lib64, a Python wheel) still runs every other command, and
// --cupti says where it looked.
#include "cupti_collector.hpp"

#include <stdexcept>

#if defined(YOCO_HAVE_CUDA)
#include <cuda_runtime.h>
#include <cupti.h>

#include <dlfcn.h>

#include <cstdlib>
#include <iterator>
#include <map>
#include <mutex>
#include <type_traits>
#include <utility>
#endif

namespace yoco::cli {

#if defined(YOCO_HAVE_CUDA)

namespace {

// Each buffer CUPTI asks for: 8 MiB, tens of thousands of kernel records
// (a CUpti_ActivityKernel10 is a few hundred bytes); CUPTI asks for another
// as it fills one.
constexpr size_t kBufferBytes = size_t{8} << 20;
static_assert(kBufferBytes % ACTIVITY_RECORD_ALIGNMENT == 0, "aligned_alloc needs a multiple of the alignment");

constexpr CUpti_ActivityKind kKinds[] = {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
                                         CUPTI_ACTIVITY_KIND_MEMSET};
// The host's API calls (host_api_time.hpp): enabled after the GPU kinds, and optional -- where CUPTI
// refuses them the kernel breakdown runs without, and says so.
constexpr CUpti_ActivityKind kApiKinds[] = {CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_ACTIVITY_KIND_DRIVER};

// What the buffer-completed callback shares with start() / stop(). Leaked on
// purpose: CUPTI may hand back a buffer while the process exits, after static
// destructors ran.
struct Shared {
  std::mutex mu;
  bool collecting = false;  // a collector is started: keep what arrives
  std::vector<ActivityRecord> records;
  uint64_t dropped = 0, unreadable = 0;
  std::string callback_error;  // the first error inside a callback (they cannot throw)
};
Shared& shared() {
  static Shared* s = new Shared;
  return *s;
}

// The CUPTI entry points the collector calls, from the libcupti found first:
// $YOCO_CUPTI_LIB, then libcupti.so.13 on the loader's path (and this
// binary's RUNPATH), then the CUDA toolkit's usual folders.
struct Api {
  decltype(&cuptiGetResultString) get_result_string = nullptr;
  decltype(&cuptiActivityGetNextRecord) get_next_record = nullptr;
  decltype(&cuptiActivityGetNumDroppedRecords) get_num_dropped = nullptr;
  decltype(&cuptiActivityRegisterCallbacks) register_callbacks = nullptr;
  decltype(&cuptiActivityEnable) enable = nullptr;
  decltype(&cuptiActivityDisable) disable = nullptr;
  decltype(&cuptiActivityFlushAll) flush_all = nullptr;
  decltype(&cuptiFinalize) finalize = nullptr;
  decltype(&cuptiGetCallbackName) get_callback_name = nullptr;
  std::string path, error;  // the library loaded, or why none was
};

const Api& api() {
  static const Api a = [] {
    Api x;
    std::vector<std::string> tried;
    if (const char* env = std::getenv("YOCO_CUPTI_LIB"); env && *env) tried.push_back(env);
    for (const char* p : {"libcupti.so.13", "/usr/local/cuda/extras/CUPTI/lib64/libcupti.so.13",
                          "/usr/local/cuda/lib64/libcupti.so.13", "/usr/local/cuda/targets/x86_64-linux/lib/libcupti.so.13",
                          "/usr/local/cuda/targets/sbsa-linux/lib/libcupti.so.13", "libcupti.so"})
      tried.push_back(p);
    void* h = nullptr;
    std::string errors;
    for (const std::string& p : tried) {
      h = dlopen(p.c_str(), RTLD_NOW | RTLD_LOCAL);
      if (h) {
        x.path = p;
        break;
      }
      const char* e = dlerror();
      errors += (errors.empty() ? "" : "; ") + (e ? std::string(e) : p);
    }
    if (!h) {
      x.error = "CUPTI: libcupti not found (tried " + errors +
                "); set YOCO_CUPTI_LIB to its path -- the --cupti kernel breakdown cannot run here";
      return x;
    }
    auto sym = [&](auto& fn, const char* name) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(h, name));
      if (!fn && x.error.empty()) x.error = "CUPTI: " + x.path + " lacks " + name;
    };
    sym(x.get_result_string, "cuptiGetResultString");
    sym(x.get_next_record, "cuptiActivityGetNextRecord");
    sym(x.get_num_dropped, "cuptiActivityGetNumDroppedRecords");
    sym(x.register_callbacks, "cuptiActivityRegisterCallbacks");
    sym(x.enable, "cuptiActivityEnable");
    sym(x.disable, "cuptiActivityDisable");
    sym(x.flush_all, "cuptiActivityFlushAll");
    sym(x.finalize, "cuptiFinalize");
    sym(x.get_callback_name, "cuptiGetCallbackName");
    return x;  // the handle stays open for the process's life
  }();
  if (!a.error.empty()) throw std::runtime_error(a.error);
  return a;
}

std::string result_text(CUptiResult r) {
  const char* s = nullptr;
  if (api().get_result_string(r, &s) != CUPTI_SUCCESS || !s) s = "unknown CUPTI result";
  return std::string(s) + " (" + std::to_string(static_cast<int>(r)) + ")";
}

std::string hint(CUptiResult r) {
  switch (r) {
    case CUPTI_ERROR_INSUFFICIENT_PRIVILEGES:
    case CUPTI_ERROR_VIRTUALIZED_DEVICE_INSUFFICIENT_PRIVILEGES:
      return "; this user may not trace the GPU (the driver restricts profiling to administrators: "
             "NVreg_RestrictProfilingToAdminUsers)";
    case CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED:
      return "; another profiler (Nsight Systems, Nsight Compute or another CUPTI client) is attached to this "
             "process: run --cupti without it";
    case CUPTI_ERROR_NOT_SUPPORTED:
    case CUPTI_ERROR_NOT_COMPATIBLE:
    case CUPTI_ERROR_VIRTUALIZED_DEVICE_NOT_SUPPORTED:
    case CUPTI_ERROR_CONFIDENTIAL_COMPUTING_NOT_SUPPORTED:
    case CUPTI_ERROR_CMP_DEVICE_NOT_SUPPORTED:
    case CUPTI_ERROR_MIG_DEVICE_NOT_SUPPORTED:
    case CUPTI_ERROR_SLI_DEVICE_NOT_SUPPORTED:
    case CUPTI_ERROR_WSL_DEVICE_NOT_SUPPORTED:
      return "; CUPTI cannot trace activity on this device or driver";
    case CUPTI_ERROR_NOT_INITIALIZED:
    case CUPTI_ERROR_UNKNOWN:
      return "; CUPTI could not initialise (a libcupti that does not match the driver?)";
    default:
      return "";
  }
}

std::string error_text(const char* what, CUptiResult r) {
  return std::string("CUPTI: ") + what + " failed: " + result_text(r) + hint(r) +
         " -- the --cupti kernel breakdown cannot run here";
}

[[noreturn]] void fail(const char* what, CUptiResult r) { throw std::runtime_error(error_text(what, r)); }

void check_cuda(cudaError_t e, const char* what) {
  if (e != cudaSuccess)
    throw std::runtime_error(std::string("CUDA error in ") + what + " (CUPTI collector): " + cudaGetErrorString(e));
}

const char* copy_kind(uint8_t k) {
  switch (k) {
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOD: return "HtoD";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOH: return "DtoH";
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOA: return "HtoA";
    case CUPTI_ACTIVITY_MEMCPY_KIND_ATOH: return "AtoH";
    case CUPTI_ACTIVITY_MEMCPY_KIND_ATOA: return "AtoA";
    case CUPTI_ACTIVITY_MEMCPY_KIND_ATOD: return "AtoD";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOA: return "DtoA";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOD: return "DtoD";
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOH: return "HtoH";
    case CUPTI_ACTIVITY_MEMCPY_KIND_PTOP: return "PtoP";
    default: return "unknown";
  }
}

// An API function's name from its callback id, looked up once per (domain, id); "<domain> call <id>"
// where CUPTI has no name. Called on CUPTI's buffer thread.
std::string callback_name(CUpti_CallbackDomain domain, uint32_t cbid) {
  // Leaked on purpose, as Shared: a buffer may come back while the process exits.
  static auto* mu = new std::mutex;
  static auto* names = new std::map<std::pair<int, uint32_t>, std::string>;
  std::lock_guard<std::mutex> lock(*mu);
  const auto key = std::make_pair(static_cast<int>(domain), cbid);
  if (auto it = names->find(key); it != names->end()) return it->second;
  const char* n = nullptr;
  std::string name = api().get_callback_name(domain, cbid, &n) == CUPTI_SUCCESS && n
                         ? std::string(n)
                         : std::string(domain == CUPTI_CB_DOMAIN_RUNTIME_API ? "runtime" : "driver") + " call " +
                               std::to_string(cbid);
  return names->emplace(key, std::move(name)).first->second;
}

// One record into `out` (kinds other than ours are skipped). The structs are
// the newest the CUDA 13 header declares for each kind (the older versions are
// gone); a newer libcupti only appends fields, so these offsets hold.
void convert(const CUpti_Activity* a, std::vector<ActivityRecord>& out) {
  switch (a->kind) {
    case CUPTI_ACTIVITY_KIND_KERNEL:
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
      const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(a);
      ActivityRecord r;
      r.name = k->name ? k->name : "(unnamed kernel)";
      r.start_ns = k->start;
      r.end_ns = k->end;
      r.stream_id = k->streamId;
      r.correlation_id = k->correlationId;
      r.kind = ActivityKind::kernel;
      out.push_back(std::move(r));
      break;
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY: {
      const auto* m = reinterpret_cast<const CUpti_ActivityMemcpy6*>(a);
      ActivityRecord r;
      r.name = std::string("memcpy ") + copy_kind(m->copyKind);
      r.start_ns = m->start;
      r.end_ns = m->end;
      r.stream_id = m->streamId;
      r.correlation_id = m->correlationId;
      r.kind = ActivityKind::memcpy;
      out.push_back(std::move(r));
      break;
    }
    case CUPTI_ACTIVITY_KIND_RUNTIME:
    case CUPTI_ACTIVITY_KIND_DRIVER: {
      const auto* c = reinterpret_cast<const CUpti_ActivityAPI*>(a);
      const bool runtime = a->kind == CUPTI_ACTIVITY_KIND_RUNTIME;
      ActivityRecord r;
      r.name = callback_name(runtime ? CUPTI_CB_DOMAIN_RUNTIME_API : CUPTI_CB_DOMAIN_DRIVER_API, c->cbid);
      r.start_ns = c->start;
      r.end_ns = c->end;
      r.correlation_id = c->correlationId;
      r.thread_id = c->threadId;
      r.kind = runtime ? ActivityKind::runtime_api : ActivityKind::driver_api;
      out.push_back(std::move(r));
      break;
    }
    case CUPTI_ACTIVITY_KIND_MEMSET: {
      const auto* m = reinterpret_cast<const CUpti_ActivityMemset4*>(a);
      ActivityRecord r;
      r.name = "memset";
      r.start_ns = m->start;
      r.end_ns = m->end;
      r.stream_id = m->streamId;
      r.correlation_id = m->correlationId;
      r.kind = ActivityKind::memset;
      out.push_back(std::move(r));
      break;
    }
    default:
      break;
  }
}

// CUPTI wants an empty buffer: 8-byte aligned (ACTIVITY_RECORD_ALIGNMENT), as
// many records as fit. A null buffer (allocation failed) makes CUPTI drop
// records, which stop() reports.
void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  void* p = std::aligned_alloc(ACTIVITY_RECORD_ALIGNMENT, kBufferBytes);
  *buffer = static_cast<uint8_t*>(p);
  *size = p ? kBufferBytes : 0;
  *max_records = 0;
}

// CUPTI hands a buffer back (on its own thread, or inside cuptiActivityFlushAll):
// `valid` bytes of records. Copied out, then the buffer freed. Never throws.
void CUPTIAPI buffer_completed(CUcontext context, uint32_t stream_id, uint8_t* buffer, size_t size, size_t valid) {
  (void)size;
  std::vector<ActivityRecord> got;
  uint64_t unreadable = 0;
  std::string error;
  try {
    if (buffer && valid > 0) {
      CUpti_Activity* a = nullptr;
      for (;;) {
        const CUptiResult r = api().get_next_record(buffer, valid, &a);
        if (r == CUPTI_SUCCESS) {
          convert(a, got);
          continue;
        }
        if (r == CUPTI_ERROR_MAX_LIMIT_REACHED) break;  // the end of the valid bytes
        if (r == CUPTI_ERROR_INVALID_KIND) {            // an incomplete or invalid record: the rest is unreadable
          ++unreadable;
          break;
        }
        error = "cuptiActivityGetNextRecord failed: " + result_text(r);
        break;
      }
    }
  } catch (const std::exception& e) {
    error = std::string("reading a CUPTI buffer: ") + e.what();
  } catch (...) {
    error = "reading a CUPTI buffer: unknown exception";
  }
  size_t dropped = 0;
  const CUptiResult dr = api().get_num_dropped(context, stream_id, &dropped);
  std::free(buffer);

  Shared& s = shared();
  std::lock_guard<std::mutex> lock(s.mu);
  if (!s.collecting) return;  // a stray buffer between collections
  try {
    s.records.insert(s.records.end(), std::make_move_iterator(got.begin()), std::make_move_iterator(got.end()));
  } catch (...) {
    if (error.empty()) error = "out of host memory keeping CUPTI's records";
  }
  if (dr == CUPTI_SUCCESS) s.dropped += dropped;
  s.unreadable += unreadable;
  if (!error.empty() && s.callback_error.empty()) s.callback_error = error;
}

// CUPTI attached to the process: the buffer callbacks registered. stop()
// detaches it again (cuptiFinalize), so that nothing of the profiler stays on
// the timed runs after a profiled region (its instrumentation slows kernels
// launched later otherwise; teardown with CUDA graphs works from CUDA 12.6);
// the next start() attaches anew. A failure to register is kept and thrown
// again by every later start().
struct Attachment {
  std::mutex mu;
  bool attached = false;
  std::string failure;
};
Attachment& attachment() {
  static Attachment a;
  return a;
}

void attach() {
  Attachment& a = attachment();
  std::lock_guard<std::mutex> lock(a.mu);
  if (!a.failure.empty()) throw std::runtime_error(a.failure);
  if (a.attached) return;
  const CUptiResult r = api().register_callbacks(buffer_requested, buffer_completed);
  if (r != CUPTI_SUCCESS) {
    a.failure = error_text("cuptiActivityRegisterCallbacks (initialising CUPTI)", r);
    throw std::runtime_error(a.failure);
  }
  a.attached = true;
}

// After the flush and the disables: every buffer is back, no kind is enabled.
// "" or why CUPTI could not detach (it then stays attached, and says so).
std::string detach() {
  Attachment& a = attachment();
  std::lock_guard<std::mutex> lock(a.mu);
  if (!a.attached) return "";
  const CUptiResult r = api().finalize();
  if (r != CUPTI_SUCCESS) return error_text("cuptiFinalize (detaching CUPTI after the region)", r);
  a.attached = false;
  return "";
}

void disable_kinds(size_t n) {
  for (size_t i = 0; i < n; ++i) api().disable(kKinds[i]);
}

}  // namespace

CuptiCollector::~CuptiCollector() {
  if (!started_) return;
  try {
    stop();
  } catch (...) {
  }
}

void CuptiCollector::start() {
  if (started_) throw std::logic_error("CuptiCollector::start: already started");
  attach();
  Shared& s = shared();
  {
    std::lock_guard<std::mutex> lock(s.mu);
    if (s.collecting) throw std::logic_error("CuptiCollector::start: another collector is started");
    s.collecting = true;
    s.records.clear();
    s.dropped = s.unreadable = 0;
    s.callback_error.clear();
  }
  auto release = [&s] {
    std::lock_guard<std::mutex> lock(s.mu);
    s.collecting = false;
  };
  // Nothing launched before start() is recorded (records are made at launch);
  // idle first all the same, so the region starts on an idle device.
  const cudaError_t e = cudaDeviceSynchronize();
  if (e != cudaSuccess) {
    release();
    check_cuda(e, "cudaDeviceSynchronize before enabling CUPTI");
  }
  // Drops whatever the count held before this collection.
  size_t stale = 0;
  api().get_num_dropped(nullptr, 0, &stale);
  for (size_t i = 0; i < std::size(kKinds); ++i) {
    const CUptiResult r = api().enable(kKinds[i]);
    if (r != CUPTI_SUCCESS) {
      disable_kinds(i);
      release();
      fail(i == 0 ? "cuptiActivityEnable(CONCURRENT_KERNEL)"
                  : i == 1 ? "cuptiActivityEnable(MEMCPY)" : "cuptiActivityEnable(MEMSET)",
           r);
    }
  }
  host_api_error_.clear();
  api_kinds_ = 0;
  for (const CUpti_ActivityKind k : kApiKinds) {
    const CUptiResult r = api().enable(k);
    if (r != CUPTI_SUCCESS) {
      for (size_t i = 0; i < api_kinds_; ++i) api().disable(kApiKinds[i]);
      api_kinds_ = 0;
      host_api_error_ = "CUPTI would not trace the host's API calls (" +
                        std::string(k == CUPTI_ACTIVITY_KIND_RUNTIME ? "RUNTIME" : "DRIVER") + ": " +
                        result_text(r) + ")";
      break;
    }
    ++api_kinds_;
  }
  started_ = true;
}

std::vector<ActivityRecord> CuptiCollector::stop() {
  if (!started_) throw std::logic_error("CuptiCollector::stop: not started");
  started_ = false;
  // Every record complete (the region's work done), then every buffer handed
  // back: a forced flush also returns buffers that are not full. The flush
  // blocks until the completed callback has run for each.
  const cudaError_t sync = cudaDeviceSynchronize();
  const CUptiResult flush = api().flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  CUptiResult disable = CUPTI_SUCCESS;
  for (const CUpti_ActivityKind k : kKinds) {
    const CUptiResult r = api().disable(k);
    if (r != CUPTI_SUCCESS && disable == CUPTI_SUCCESS) disable = r;
  }
  for (size_t i = 0; i < api_kinds_; ++i) {
    const CUptiResult r = api().disable(kApiKinds[i]);
    if (r != CUPTI_SUCCESS && disable == CUPTI_SUCCESS) disable = r;
  }
  api_kinds_ = 0;
  size_t dropped_now = 0;
  const CUptiResult dr = api().get_num_dropped(nullptr, 0, &dropped_now);

  Shared& s = shared();
  std::vector<ActivityRecord> records;
  std::string callback_error;
  {
    std::lock_guard<std::mutex> lock(s.mu);
    s.collecting = false;
    records.swap(s.records);
    dropped_ = s.dropped + (dr == CUPTI_SUCCESS ? dropped_now : 0);
    unreadable_ = s.unreadable;
    callback_error.swap(s.callback_error);
  }
  // Detached only once every buffer is back (the flush) and nothing is enabled.
  detach_error_ = flush == CUPTI_SUCCESS && disable == CUPTI_SUCCESS ? detach() : "not detached: the flush or a disable failed";
  check_cuda(sync, "cudaDeviceSynchronize after the profiled region");
  if (flush != CUPTI_SUCCESS) fail("cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED)", flush);
  if (disable != CUPTI_SUCCESS) fail("cuptiActivityDisable", disable);
  if (!callback_error.empty()) throw std::runtime_error("CUPTI: " + callback_error);
  return records;
}

#else  // no CUDA in this build

namespace {

[[noreturn]] void lacks() {
  throw std::logic_error("the CUPTI collector cannot run: this yoco was built without CUDA (cpu preset); "
                         "build the cuda preset");
}

}  // namespace

CuptiCollector::~CuptiCollector() = default;
void CuptiCollector::start() { lacks(); }
std::vector<ActivityRecord> CuptiCollector::stop() { lacks(); }

#endif

}  // namespace yoco::cli
