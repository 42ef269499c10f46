#pragma once
// A ModelRunner over a CUDA model (cuda/runner/cuda_model.hpp): the YOCO runner
// (cuda/) or the Transformer runner (baselines/), so that the command line and
// the sweep drive the GPU through the same handle as the CPU reference.
//
// Numerics: bf16 weights, activations and caches, fp32 residual stream, gRet
// state and accumulation. precision() says f32 (the accumulation precision;
// the Precision enum names the CPU reference's types), architecture() says
// "..., bf16 weights and caches on <GPU name>".
//
// Only built with CUDA (YOCO_HAVE_CUDA: the cuda preset); without it this
// header declares nothing.
#if defined(YOCO_HAVE_CUDA)

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "runner/cuda_model.hpp"
#include "model_runner.hpp"

namespace yoco {

class CudaRunner final : public ModelRunner {
 public:
  explicit CudaRunner(std::unique_ptr<cuda::CudaModel> model);
  ~CudaRunner() override;
  // Called when this runner is destroyed (a backend that keeps a pointer to its
  // model forgets it then).
  void on_destroy(std::function<void()> f) { on_destroy_ = std::move(f); }

  const ModelConfig& config() const override { return model_->config(); }
  Precision precision() const override { return Precision::f32; }
  std::string architecture() const override;
  // The GPU's name ("NVIDIA H100 80GB HBM3").
  const std::string& device_name() const { return device_name_; }

  // Logits at every position. Only the GPU's chunk kernel exists for gRet: parallel
  // and chunkwise both name it (the same function); recurrent is an InputError
  // (use --device cpu). Models without gRet take parallel only. Drops any
  // generation in progress (the model's forward does).
  Mat<double> forward(const TokenBatch& tokens, GretParadigm paradigm = GretParadigm::parallel) const override;

  Mat<double> prefill(const TokenBatch& prompt, int64_t max_new_tokens, int64_t prefill_chunk) override;
  Mat<double> decode_step(const std::vector<int64_t>& tokens) override;
  // The same, the logits left on the device (asynchronous: a timer must
  // synchronise on the model's stream, cuda_backend.cpp does).
  void run_prefill(const TokenBatch& prompt, int64_t max_new_tokens, int64_t prefill_chunk) override;
  void run_decode_step(const std::vector<int64_t>& tokens) override;
  void reserve_generation(int64_t batch, int64_t length, int64_t max_new_tokens, int64_t prefill_chunk) override;
  void skip_positions(int64_t n) override;

  // weights, kv_cache and state: the arena's current bytes; activations: the
  // arena's activations peak since its last reset_peaks (the sweep resets it
  // per point; `yoco generate` never does, so it is the run's peak).
  MemoryBreakdown memory() const override;
  int64_t position() const override { return model_->position(); }
  int64_t capacity() const override { return model_->capacity(); }

  cuda::CudaModel& model() const { return *model_; }
  // Host seconds each decode step since the last prefill spent enqueueing its
  // work (CudaModel::last_step_enqueue_s), in order.
  const std::vector<double>& step_enqueue_s() const { return enqueue_s_; }

 private:
  Mat<double> logits_as_double(int64_t rows) const;
  std::unique_ptr<cuda::CudaModel> model_;
  std::function<void()> on_destroy_;
  std::string device_name_;
  // forward (const, as the interface has it) drops the generation in progress.
  mutable bool prefilled_ = false;
  mutable std::vector<double> enqueue_s_;
};

// The CUDA runner of `cfg` (YOCO or Transformer) with weights from `source`.
// InputError with cuda::cuda_model_unsupported's reason when the kernels do not
// serve the shape (or for a bad weights file); cuda::DeviceOutOfMemory (a
// std::bad_alloc) when the weights do not fit.
std::unique_ptr<ModelRunner> create_cuda_runner(const ModelConfig& cfg, const cuda::CudaWeightSource& source);

}  // namespace yoco

#endif  // YOCO_HAVE_CUDA
