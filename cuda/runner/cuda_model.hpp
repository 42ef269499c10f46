#pragma once
// A model on the GPU (DESIGN.md §3-4): YOCO (cuda/runner/yoco_cuda_model.hpp) or the
// GQA Transformer (baselines/transformer_cuda_model.hpp), behind one interface
// so that the harness and the tests drive either. bf16 weights, activations
// and caches; fp32 residual stream, gRet state and accumulation; every buffer
// in the model's DeviceArena under its category.
//
// Errors: InputError for a shape the kernels do not serve (see
// cuda_model_unsupported), bad tokens or a bad weights file;
// DeviceOutOfMemory (a std::bad_alloc) when a buffer does not fit -- the model
// stays usable, its caches dropped; std::runtime_error naming the launch for
// any other CUDA failure.
//
// Decode steps run as a CUDA graph captured on the first step after caches are
// allocated and replayed after, also over a later generation that keeps those
// caches (the step's position lives on the device, advanced inside the graph,
// and reset by each prefill), or eagerly (set_decode_graphs(false)): the same kernels in
// the same order, so both give bit-identical logits.
#include <cuda_runtime.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "config.hpp"
#include "device/device_arena.hpp"
#include "device/device_weights.hpp"

namespace yoco::cuda {

// Why the CUDA runners cannot serve `cfg`, or "" when they can: head dims
// (gRet / SWA self-decoder, cross attention, Transformer) must be 64, 128 or
// 256, H / Hkv at most 8, d, F and the head widths multiples of 8.
std::string cuda_model_unsupported(const ModelConfig& cfg);

class CudaModel {
 public:
  virtual ~CudaModel();
  CudaModel(const CudaModel&) = delete;
  CudaModel& operator=(const CudaModel&) = delete;

  virtual const ModelConfig& config() const = 0;

  // Starts a generation: caches for exactly length + max_new_tokens tokens per
  // sequence (the previous generation's, zeroed again, when batch and size
  // are the same; else the previous dropped and new ones allocated), runs the prompt
  // through in steps of at most `prefill_chunk` tokens of the whole batch
  // (cache_plan::prefill_tokens_per_sequence: chunk / batch of each sequence,
  // at least one), so the activations do not grow with the batch either.
  // tokens: batch * length ids,
  // sequence b's token i at b * length + i. The logits of the last position
  // stay on the device (logits()). Asynchronous: returns once enqueued.
  virtual void prefill(const std::vector<int64_t>& tokens, int64_t batch, int64_t length, int64_t max_new_tokens,
                       int64_t prefill_chunk) = 0;
  // The buffers a prefill of this shape would allocate for the generation (its caches and states,
  // the decode step's buffers), allocated now, so that the prefill keeps them (ModelRunner::
  // reserve_generation). The prefill step's working set depends on batch and chunk only: the first
  // prefill of a shape allocates it. A no-op sharded (take_shard drops the generation) and for a
  // shape the prefill refuses. DeviceOutOfMemory as the prefill's, the arena left empty of buffers.
  virtual void reserve_generation(int64_t batch, int64_t length, int64_t max_new_tokens, int64_t prefill_chunk) = 0;
  // One token per sequence at the next position. Needs a prefill and room in the caches.
  virtual void decode_step(const std::vector<int64_t>& tokens) = 0;
  // Timing only: moves the position forward by n without computing (logits
  // after it are meaningless; the caches must still have room).
  virtual void skip_positions(int64_t n) = 0;
  // Logits of the last prefill or decode step, [batch, vocab] fp32 (synchronises).
  virtual std::vector<float> logits() = 0;

  // Stateless forward over whole sequences: logits at every position,
  // [batch * length, vocab], row b * length + i. Drops any generation in progress.
  virtual std::vector<float> forward(const std::vector<int64_t>& tokens, int64_t batch, int64_t length) = 0;

  // Frees the caches and every activation buffer (the weights stay): the
  // next prefill starts from the weights alone, so memory readings and peaks
  // taken after it are its own, not an earlier, larger call's.
  virtual void release_buffers() = 0;

  // The GEMMs' tuning record (YOCO_GEMM_ALGO=tuned: a line per shape the model's GEMMs ran,
  // ops/gemm_tuner.hpp); empty on cublasGemmEx's path.
  virtual std::vector<std::string> gemm_tuning_record() const = 0;

  // How many times the decode step's graph was captured: once per batch shape and set of buffers (a
  // generation that keeps the previous one's replays its graph).
  virtual int decode_graph_captures() const = 0;

  // How many norms between a layer's sublayers were enqueued leaving the residual unstored
  // (YOCO_RESIDUAL_PER_LAYER, runner/launch_count.hpp): the proof that the switch took, whose outputs
  // are the same bits. Host calls, not runs: a decode graph counts once, at its capture.
  int64_t residual_sums_peeked() const { return sums_peeked_; }

  int64_t batch() const { return batch_; }
  int64_t position() const { return position_; }  // tokens per sequence in the caches
  int64_t capacity() const { return capacity_; }

  void set_decode_graphs(bool on) { graphs_ = on; }
  bool decode_graphs() const { return graphs_; }
  // Host seconds the last decode_step spent enqueueing its work (graph replay
  // or the eager launches), measured with steady_clock around the enqueue.
  double last_step_enqueue_s() const { return last_enqueue_s_; }

  DeviceArena& arena() { return arena_; }
  const DeviceWeights& weights() const { return weights_; }
  cudaStream_t stream() const { return stream_; }
  // Waits for the model's stream; std::runtime_error on an asynchronous error.
  void synchronize();

 protected:
  CudaModel();  // creates the stream; the arena on the CUDA allocator

  std::unique_ptr<DeviceBackend> backend_;  // declared before the arena, which uses it
  int64_t sums_peeked_ = 0;
  DeviceArena arena_;
  DeviceWeights weights_;
  cudaStream_t stream_ = nullptr;  // destroyed by ~CudaModel, after the derived class freed its buffers
  int64_t batch_ = 0, position_ = 0, capacity_ = 0;
  bool graphs_ = true;
  double last_enqueue_s_ = 0;
};

// Device bytes of a generation on the YOCO runner: the bf16 weights, caches
// for prompt + gen tokens of `batch` sequences, the activation buffers of a
// prefill chunk of min(prompt, chunk) tokens and of the decode step, the
// cuBLAS workspace -- the runner's own buffers by the runner's own formulas
// (cuda/runner/yoco_cuda_model.cpp), in double so that no size overflows. What the
// sweep compares with the free memory. The Transformer's is
// transformer_generation_device_bytes (baselines/transformer_cuda_model.hpp).
double yoco_generation_device_bytes(const ModelConfig& cfg, double batch, double prompt, double gen, double chunk);

class ShardLink;  // runner/shard_link.hpp

// A YOCO model (gRet or SWA self-decoder); the Transformer's is
// baselines/transformer_cuda_model.hpp create_transformer_cuda_model.
// With a `link`, this rank's shard of a sequence split across ranks
// (runner/shard_link.hpp): prefill takes the whole prompt and runs the
// rank's positions as one step; decode steps run eagerly (no graph); forward
// gathers the global K/V once; the logits are every rank's.
std::unique_ptr<CudaModel> create_yoco_cuda_model(const ModelConfig& cfg, const CudaWeightSource& source,
                                                  ShardLink* link = nullptr);

}  // namespace yoco::cuda
