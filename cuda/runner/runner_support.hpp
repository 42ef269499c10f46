#pragma once
// What both CUDA runners (cuda/runner/yoco_cuda_model.hpp,
// baselines/transformer_cuda_runner.hpp) need besides kernels: errors as
// exceptions, NVTX ranges in the `yoco` domain, activation buffers kept in the
// arena between calls, the decode step's CUDA graph, token upload, and the
// RoPE frequency tables on the device.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "device/device_arena.hpp"
#include "ops/gemm.hpp"
#include "ops/gemm_swiglu.hpp"  // GemmSwigluCtas
#include "runner/launch_count.hpp"

namespace yoco::cuda {

// std::runtime_error "CUDA error in <what>: <cudaGetErrorString>" unless e is
// cudaSuccess; cudaErrorMemoryAllocation throws DeviceOutOfMemory instead.
// Labels are const char* so that a call on the hot path builds no string.
void check_cuda(cudaError_t e, const char* what);
inline void check_cuda(cudaError_t e, const std::string& what) { check_cuda(e, what.c_str()); }
// The same for the Gemm wrapper's error strings (empty = success).
void check_gemm(const std::string& error, const char* what);
inline void check_gemm(const std::string& error, const std::string& what) { check_gemm(error, what.c_str()); }

// How a YOCO prefill step of several sequences projects the global K/V:
// one GEMM for the batch's rows, RoPE, and the rows copied into each cache
// (batched: 4 launches a step, the default), or a GEMM per sequence straight
// into its cache rows (per_sequence: 2 launches a sequence a step, the default
// until run-17 measured both on the H100: yoco-small's throughput at 4K, a
// batch of 1024, 114K tokens/s per sequence and 451K batched, the outputs bit
// for bit the same). Batch 1 always goes straight into the cache.
enum class GlobalKvProjection { per_sequence, batched };
inline constexpr GlobalKvProjection kDefaultGlobalKv =
    kBatchedGlobalKvByDefault ? GlobalKvProjection::batched : GlobalKvProjection::per_sequence;
// YOCO_GLOBAL_KV=per-sequence|batched (unset: kDefaultGlobalKv), read when a
// model is made; InputError naming the variable for anything else.
GlobalKvProjection global_kv_projection_from_env();

// The most rows a YOCO prefill step's FFN takes at once (issue 34: its W1|W3
// output and SwiGLU buffers are half the step's activations; in row blocks of
// 8192 their GEMMs stay large, m = 8192 being where the ceiling GEMM runs):
// YOCO_FFN_ROWS=N (N >= 1), unset or 0 for the whole step, the measured
// default until blocks have run on a GPU. Read when a model is made;
// InputError naming the variable for anything else.
int64_t ffn_row_block_from_env();

// YOCO_FFN_FUSED=1: prefill steps run the FFN's up half as one kernel
// (ops/gemm_swiglu.hpp: the W1|W3 GEMM with SwiGLU in its epilogue) where it
// serves the shape; 0: cuBLAS's GEMM and the SwiGLU pass; unset:
// kFfnUpFusedByDefault (launch_count.hpp: off until the fused kernel has run
// on a GPU and kept cuBLAS's pace).
// YOCO_FFN_FUSED=pairs: the same, with the kernel in CTA pairs (GemmSwigluCtas::pair: clusters of two
// sharing the weight tile; not yet run on a GPU).
// Read when a model is made; InputError naming the variable for anything else.
bool ffn_fused_swiglu_from_env();
// Which fused kernel YOCO_FFN_FUSED names: the pair for 'pairs', the one-CTA kernel for 1 or 0, and for
// unset kFfnUpPairsByDefault's.
GemmSwigluCtas ffn_fused_ctas_from_env();

// YOCO_SUBLAYER_BUFFERS=shared: a prefill step's mixer, FFN and global K/V rows
// share one buffer (runner/sublayer_buffers.hpp); apart: a buffer each (the
// layout before 2026-11-27); unset: kSharedSublayerBuffers. Read when a model
// is made; InputError naming the variable for anything else.
bool shared_sublayer_buffers_from_env();

// YOCO_GEMM_ALGO=tuned: the runners' GEMMs take each shape's fastest cuBLASLt
// algorithm, timed at first use (ops/gemm_tuner.hpp); cublas: cublasGemmEx's own
// choice; unset: kGemmTunedByDefault. Read when a model is made; InputError
// naming the variable for anything else.
GemmAlgorithms gemm_algorithms_from_env();

// YOCO_RESIDUAL_IN_GEMM=1: the sublayer outputs (YOCO's self-decoder prefill; every layer of the
// Transformer, its decode step included) are added to the fp32 residual by their output projections' GEMMs (beta 1); 0: into a
// bf16 delta that the next add + RMSNorm adds; unset: kResidualInGemmByDefault. Read when a model is
// made; InputError naming the variable for anything else.
bool residual_in_gemm_from_env();

// YOCO_RESIDUAL_PER_LAYER=1: a layer's residual stored once, its two sublayer outputs added by the
// layer's last norm (launch_count.hpp, kResidualPerLayerByDefault, says where it applies); 0: an
// add + RMSNorm after each sublayer; unset: kResidualPerLayerByDefault. Read when a model is made;
// InputError naming the variable for anything else.
bool residual_per_layer_from_env();

// YOCO_GEMV=1: the runners' GEMMs of 4 rows or fewer (a decode step's at batch 1-4) take ops/gemv.hpp's
// kernel where it serves the shape; 0: cublasGemmEx; unset: kGemvByDefault. Read when a model is made;
// InputError naming the variable for anything else.
GemmSmallRows gemm_small_rows_from_env();

// An NVTX range in the `yoco` domain (DESIGN.md §5: prefill, self-decoder,
// cross-decoder, decode step, per layer), visible in Nsight Systems. The
// names are copied, so temporaries are fine.
class NvtxRange {
 public:
  explicit NvtxRange(const std::string& name);
  ~NvtxRange();
  NvtxRange(const NvtxRange&) = delete;
  NvtxRange& operator=(const NvtxRange&) = delete;
};

// Activation buffers by name in the arena's `activations` category: a request
// returns the existing buffer when it is large enough, else frees it and
// allocates the new size (DeviceOutOfMemory when that does not fit). version()
// changes whenever a pointer does, so a captured graph knows it is stale.
class Scratch {
 public:
  explicit Scratch(DeviceArena& arena) : arena_(arena) {}
  __nv_bfloat16* bf16(const std::string& name, int64_t elems) {
    return static_cast<__nv_bfloat16*>(get(name, elems * 2));
  }
  float* f32(const std::string& name, int64_t elems) { return static_cast<float*>(get(name, elems * 4)); }
  int64_t* i64(const std::string& name, int64_t elems) { return static_cast<int64_t*>(get(name, elems * 8)); }
  void* get(const std::string& name, int64_t bytes);
  void clear();  // frees everything
  uint64_t version() const { return version_; }

 private:
  DeviceArena& arena_;
  std::map<std::string, DeviceBuffer> buffers_;
  uint64_t version_ = 0;
};

// What a captured decode step depends on: the generation's buffers (bumped when
// caches or states are allocated anew, or the decode splits change), the
// scratch's version (bumped when a buffer moves) and the batch. Compared field
// by field, so no value of one can pass for another's.
struct StepGraphKey {
  uint64_t generation = 0;
  uint64_t scratch_version = 0;
  int64_t batch = 0;
  bool operator==(const StepGraphKey&) const = default;
};

// The decode step as a CUDA graph: captured from `enqueue` the first time a
// key is seen (the key must change whenever a pointer or a launch shape the
// step uses changes), instantiated, then replayed.
// enqueue must only launch work on `stream` (no allocation, no host sync):
// prepare buffers before calling run. With use_graph false the work is
// launched directly (eager mode), the same kernels in the same order.
class StepGraph {
 public:
  StepGraph() = default;
  ~StepGraph();
  StepGraph(const StepGraph&) = delete;
  StepGraph& operator=(const StepGraph&) = delete;
  void run(cudaStream_t stream, const StepGraphKey& key, bool use_graph, const std::function<void()>& enqueue);
  void invalidate();
  // Whether a replay of `key` needs no capture (the graph holds it).
  bool holds(const StepGraphKey& key) const { return valid_ && key == key_; }
  int captures() const { return captures_; }

 private:
  cudaGraphExec_t exec_ = nullptr;
  StepGraphKey key_;
  bool valid_ = false;
  int captures_ = 0;
};

// Host ids -> a device int64 buffer, through a pinned staging area so the copy
// is asynchronous. The staging buffer is reused; `upload` waits for the
// previous copy to finish before overwriting it.
class TokenUpload {
 public:
  TokenUpload() = default;
  ~TokenUpload();
  TokenUpload(const TokenUpload&) = delete;
  TokenUpload& operator=(const TokenUpload&) = delete;
  void upload(const int64_t* ids, int64_t n, int64_t* device_dst, cudaStream_t stream);
  // Room for uploads of up to n ids now (a reservation ahead of a timed prefill: cudaMallocHost,
  // and cudaFreeHost of a smaller buffer, kept out of the prefill).
  void reserve(int64_t n);

 private:
  int64_t* pinned_ = nullptr;
  int64_t capacity_ = 0;
  cudaEvent_t done_ = nullptr;
};

// Uploads a host table of doubles (RoPE inverse frequencies) into the arena
// (category `weights`: it is a constant of the model).
DeviceBuffer upload_table(DeviceArena& arena, const std::vector<double>& table, const std::string& what,
                          cudaStream_t stream);

// Logits [rows, vocab] fp32 on the device -> host (synchronises the stream).
std::vector<float> download_floats(const float* src, int64_t n, cudaStream_t stream);

// Number of SMs of the current device (cached after the first call).
int device_sm_count();

}  // namespace yoco::cuda
