#include "runner/runner_support.hpp"

#include "runner/launch_count.hpp"

#include <nvtx3/nvToolsExt.h>

#include <cstdlib>
#include <cstring>
#include <stdexcept>

#include "errors.hpp"

namespace yoco::cuda {

void check_cuda(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return;
  cudaGetLastError();  // clear a non-sticky error so the model stays usable
  // Memory the runtime could not find (a graph instantiation, a library's own
  // allocation) is an out-of-memory result like the arena's, not a failure.
  if (e == cudaErrorMemoryAllocation)
    throw DeviceOutOfMemory(std::string(what) + ": " + cudaGetErrorString(e));
  throw std::runtime_error(std::string("CUDA error in ") + what + ": " + cudaGetErrorString(e));
}

void check_gemm(const std::string& error, const char* what) {
  if (!error.empty()) throw std::runtime_error(std::string("cuBLAS error in ") + what + ": " + error);
}

namespace {
// A two-way switch in the environment: `name` set to `yes` is true, to `no` false, unset or empty
// `unset`; anything else an InputError naming the variable and what it must be (`expected`).
bool env_switch(const char* name, const char* yes, const char* no, bool unset, const char* expected) {
  const char* e = std::getenv(name);
  const std::string v = e ? e : "";
  if (v.empty()) return unset;
  if (v == yes) return true;
  if (v == no) return false;
  throw InputError(std::string(name) + " is '" + v + "': it must be " + expected + " (or unset)");
}
}  // namespace

GlobalKvProjection global_kv_projection_from_env() {
  return env_switch("YOCO_GLOBAL_KV", "batched", "per-sequence", kDefaultGlobalKv == GlobalKvProjection::batched,
                    "'per-sequence' or 'batched'")
             ? GlobalKvProjection::batched
             : GlobalKvProjection::per_sequence;
}

int64_t ffn_row_block_from_env() {
  const char* e = std::getenv("YOCO_FFN_ROWS");
  const std::string v = e ? e : "";
  if (v.empty()) return 0;
  size_t used = 0;
  long long n = -1;
  try {
    n = std::stoll(v, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != v.size() || n < 0)
    throw InputError("YOCO_FFN_ROWS is '" + v + "': it must be a whole number of rows >= 1, or 0 (or unset) for "
                     "the whole prefill step");
  return static_cast<int64_t>(n);
}

namespace {
constexpr const char* kFfnFusedValues =
    "1 (the fused W1|W3 + SwiGLU kernel), 'pairs' (the same kernel in CTA pairs sharing the weight tile) or 0";
}  // namespace

bool ffn_fused_swiglu_from_env() {
  const char* e = std::getenv("YOCO_FFN_FUSED");
  if (e != nullptr && std::string(e) == "pairs") return true;
  return env_switch("YOCO_FFN_FUSED", "1", "0", kFfnUpFusedByDefault, kFfnFusedValues);
}

GemmSwigluCtas ffn_fused_ctas_from_env() {
  const char* e = std::getenv("YOCO_FFN_FUSED");
  const std::string v = e ? e : "";
  if (v == "pairs") return GemmSwigluCtas::pair;
  ffn_fused_swiglu_from_env();  // anything else but 1, 0 or unset is refused there
  return v.empty() && kFfnUpPairsByDefault ? GemmSwigluCtas::pair : GemmSwigluCtas::one;
}

bool shared_sublayer_buffers_from_env() {
  return env_switch("YOCO_SUBLAYER_BUFFERS", "shared", "apart", kSharedSublayerBuffers, "'shared' or 'apart'");
}

GemmAlgorithms gemm_algorithms_from_env() {
  return env_switch("YOCO_GEMM_ALGO", "tuned", "cublas", kGemmTunedByDefault,
                    "'tuned' (each shape's fastest cuBLASLt algorithm, timed at first use) or 'cublas'")
             ? GemmAlgorithms::tuned
             : GemmAlgorithms::cublas;
}

GemmSmallRows gemm_small_rows_from_env() {
  return env_switch("YOCO_GEMV", "1", "0", kGemvByDefault,
                    "1 (the GEMMs of 4 rows or fewer as ops/gemv.hpp's kernel) or 0 (cublasGemmEx)")
             ? GemmSmallRows::gemv
             : GemmSmallRows::cublas;
}

bool residual_in_gemm_from_env() {
  return env_switch("YOCO_RESIDUAL_IN_GEMM", "1", "0", kResidualInGemmByDefault,
                    "1 (the residual added by the output projections' GEMMs) or 0");
}

bool residual_per_layer_from_env() {
  return env_switch("YOCO_RESIDUAL_PER_LAYER", "1", "0", kResidualPerLayerByDefault,
                    "1 (a layer's residual stored once, after its FFN) or 0");
}

namespace {
nvtxDomainHandle_t yoco_domain() {
  static nvtxDomainHandle_t d = nvtxDomainCreateA("yoco");
  return d;
}
}  // namespace

NvtxRange::NvtxRange(const std::string& name) {
  nvtxEventAttributes_t a{};
  a.version = NVTX_VERSION;
  a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
  a.messageType = NVTX_MESSAGE_TYPE_ASCII;
  a.message.ascii = name.c_str();  // NVTX copies the string
  nvtxDomainRangePushEx(yoco_domain(), &a);
}

NvtxRange::~NvtxRange() { nvtxDomainRangePop(yoco_domain()); }

void* Scratch::get(const std::string& name, int64_t bytes) {
  if (bytes < 16) bytes = 16;
  auto it = buffers_.find(name);
  if (it != buffers_.end() && it->second.bytes() >= bytes) return it->second.get();
  if (it != buffers_.end()) {
    it->second.reset();  // free first: the new size may only fit without the old one
    buffers_.erase(it);
  }
  DeviceBuffer b = arena_.require(MemCategory::activations, bytes, "activations: " + name);
  void* p = b.get();
  buffers_.emplace(name, std::move(b));
  ++version_;
  return p;
}

void Scratch::clear() {
  if (!buffers_.empty()) ++version_;
  buffers_.clear();
}

StepGraph::~StepGraph() { invalidate(); }

void StepGraph::invalidate() {
  if (exec_) cudaGraphExecDestroy(exec_);
  exec_ = nullptr;
  valid_ = false;
}

void StepGraph::run(cudaStream_t stream, const StepGraphKey& key, bool use_graph, const std::function<void()>& enqueue) {
  if (!use_graph) {
    enqueue();
    return;
  }
  if (!valid_ || key != key_) {
    invalidate();
    // Thread-local capture: other threads' CUDA calls are not affected, and an
    // illegal call inside enqueue (a sync, an allocation) fails the capture.
    check_cuda(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), "begin decode-step capture");
    try {
      enqueue();
    } catch (...) {
      cudaGraph_t g = nullptr;
      cudaStreamEndCapture(stream, &g);
      if (g) cudaGraphDestroy(g);
      cudaGetLastError();
      throw;
    }
    cudaGraph_t graph = nullptr;
    check_cuda(cudaStreamEndCapture(stream, &graph), "end decode-step capture");
    const cudaError_t e = cudaGraphInstantiate(&exec_, graph, 0);
    cudaGraphDestroy(graph);
    if (e != cudaSuccess) exec_ = nullptr;
    check_cuda(e, "instantiate the decode-step graph");
    key_ = key;
    valid_ = true;
    ++captures_;
  }
  check_cuda(cudaGraphLaunch(exec_, stream), "launch the decode-step graph");
}

TokenUpload::~TokenUpload() {
  if (done_) {
    cudaEventSynchronize(done_);
    cudaEventDestroy(done_);
  }
  if (pinned_) cudaFreeHost(pinned_);
}

void TokenUpload::reserve(int64_t n) {
  if (n <= 0) return;
  if (!done_) check_cuda(cudaEventCreateWithFlags(&done_, cudaEventDisableTiming), "create the token-upload event");
  check_cuda(cudaEventSynchronize(done_), "wait for the previous token upload");
  if (n > capacity_) {
    if (pinned_) cudaFreeHost(pinned_);
    pinned_ = nullptr;
    capacity_ = 0;
    check_cuda(cudaMallocHost(&pinned_, static_cast<size_t>(n) * sizeof(int64_t)), "pinned token staging");
    capacity_ = n;
  }
}

void TokenUpload::upload(const int64_t* ids, int64_t n, int64_t* device_dst, cudaStream_t stream) {
  if (n <= 0) return;
  reserve(n);  // waits for the upload before, whose buffer this one reuses
  std::memcpy(pinned_, ids, static_cast<size_t>(n) * sizeof(int64_t));
  check_cuda(cudaMemcpyAsync(device_dst, pinned_, static_cast<size_t>(n) * sizeof(int64_t), cudaMemcpyHostToDevice,
                             stream),
             "token upload");
  check_cuda(cudaEventRecord(done_, stream), "record the token-upload event");
}

DeviceBuffer upload_table(DeviceArena& arena, const std::vector<double>& table, const std::string& what,
                          cudaStream_t stream) {
  const int64_t bytes = static_cast<int64_t>(table.size() * sizeof(double));
  DeviceBuffer b = arena.require(MemCategory::weights, bytes, "weights: " + what);
  check_cuda(cudaMemcpyAsync(b.get(), table.data(), static_cast<size_t>(bytes), cudaMemcpyHostToDevice, stream),
             "upload " + what);
  check_cuda(cudaStreamSynchronize(stream), "upload " + what);  // the host vector may go away
  return b;
}

std::vector<float> download_floats(const float* src, int64_t n, cudaStream_t stream) {
  std::vector<float> out(static_cast<size_t>(n));
  if (n == 0) return out;
  check_cuda(cudaMemcpyAsync(out.data(), src, static_cast<size_t>(n) * sizeof(float), cudaMemcpyDeviceToHost, stream),
             "download logits");
  check_cuda(cudaStreamSynchronize(stream), "download logits");
  return out;
}

int device_sm_count() {
  static int count = [] {
    int dev = 0, n = 0;
    if (cudaGetDevice(&dev) != cudaSuccess || cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess) {
      cudaGetLastError();
      return 132;
    }
    return n;
  }();
  return count;
}

}  // namespace yoco::cuda
