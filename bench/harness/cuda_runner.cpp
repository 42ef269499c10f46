// The ModelRunner over a CUDA model (cuda_runner.hpp). Compiled in every
// preset; empty without CUDA.
#if defined(YOCO_HAVE_CUDA)

#include "cuda_runner.hpp"

#include <stdexcept>

#include "device/device_query.hpp"
#include "errors.hpp"
#include "transformer_cuda_model.hpp"

namespace yoco {

CudaRunner::~CudaRunner() {
  if (on_destroy_) on_destroy_();
}

CudaRunner::CudaRunner(std::unique_ptr<cuda::CudaModel> model) : model_(std::move(model)) {
  if (!model_) throw std::logic_error("CudaRunner: no model");
  const cuda::DeviceSummary d = cuda::query_devices();
  device_name_ = d.count > 0 ? d.name : "a CUDA device";
}

std::string CudaRunner::architecture() const {
  return ModelRunner::architecture() + ", bf16 weights and caches on " + device_name_;
}

Mat<double> CudaRunner::logits_as_double(int64_t rows) const {
  const std::vector<float> host = model_->logits();  // synchronises
  const int64_t V = config().vocab_size;
  if (static_cast<int64_t>(host.size()) != rows * V)
    throw std::logic_error("CudaRunner: the model returned " + std::to_string(host.size()) + " logits, expected " +
                           std::to_string(rows) + " x " + std::to_string(V));
  return Eigen::Map<const Mat<float>>(host.data(), rows, V).cast<double>();
}

Mat<double> CudaRunner::forward(const TokenBatch& tokens, GretParadigm paradigm) const {
  if (has_gret()) {
    if (paradigm == GretParadigm::recurrent)
      throw InputError(std::string("gRet paradigm 'recurrent' has no GPU forward (the GPU runs the chunkwise form; ") +
                       "parallel and chunkwise both name it); use --device cpu for the recurrent paradigm");
  } else if (paradigm != GretParadigm::parallel) {
    throw InputError(std::string("gRet paradigm '") + paradigm_name(paradigm) + "' applies to YOCO gRet models only; " +
                     config().name + " is a " + ModelRunner::architecture());
  }
  prefilled_ = false;  // the model's forward drops the generation in progress
  enqueue_s_.clear();
  const std::vector<float> host = model_->forward(tokens.ids, tokens.batch, tokens.length);
  const int64_t rows = tokens.batch * tokens.length, V = config().vocab_size;
  if (static_cast<int64_t>(host.size()) != rows * V)
    throw std::logic_error("CudaRunner::forward: the model returned " + std::to_string(host.size()) +
                           " logits, expected " + std::to_string(rows) + " x " + std::to_string(V));
  return Eigen::Map<const Mat<float>>(host.data(), rows, V).cast<double>();
}

void CudaRunner::run_prefill(const TokenBatch& prompt, int64_t max_new_tokens, int64_t prefill_chunk) {
  prefilled_ = false;
  enqueue_s_.clear();
  model_->prefill(prompt.ids, prompt.batch, prompt.length, max_new_tokens, prefill_chunk);
  prefilled_ = true;
}

void CudaRunner::reserve_generation(int64_t batch, int64_t length, int64_t max_new_tokens, int64_t prefill_chunk) {
  prefilled_ = false;  // the generation in progress is dropped
  enqueue_s_.clear();
  model_->reserve_generation(batch, length, max_new_tokens, prefill_chunk);
  // Its zeroing of the caches done before a timer starts: queued ahead of the timer's start event,
  // it would give a launch-bound prefill's host a head start (the device idles at every other
  // timed start, after the sync on the stop event before it).
  model_->synchronize();
}

Mat<double> CudaRunner::prefill(const TokenBatch& prompt, int64_t max_new_tokens, int64_t prefill_chunk) {
  run_prefill(prompt, max_new_tokens, prefill_chunk);
  return logits_as_double(prompt.batch);
}

void CudaRunner::run_decode_step(const std::vector<int64_t>& tokens) {
  if (!prefilled_) throw std::logic_error("ModelRunner::decode_step before prefill");
  model_->decode_step(tokens);
  enqueue_s_.push_back(model_->last_step_enqueue_s());
}

Mat<double> CudaRunner::decode_step(const std::vector<int64_t>& tokens) {
  run_decode_step(tokens);
  return logits_as_double(model_->batch());
}

void CudaRunner::skip_positions(int64_t n) {
  if (!prefilled_) throw std::logic_error("ModelRunner::skip_positions before prefill");
  if (n < 0 || model_->position() + n > model_->capacity())
    throw std::logic_error("ModelRunner::skip_positions past the cache capacity");
  model_->skip_positions(n);
}

MemoryBreakdown CudaRunner::memory() const {
  const cuda::ArenaReport r = model_->arena().report();
  MemoryBreakdown m;
  m.weights = r.at(cuda::MemCategory::weights);
  m.kv_cache = r.at(cuda::MemCategory::kv_cache);
  m.state = r.at(cuda::MemCategory::state);
  m.activations = r.peak_at(cuda::MemCategory::activations);
  return m;
}

std::unique_ptr<ModelRunner> create_cuda_runner(const ModelConfig& cfg, const cuda::CudaWeightSource& source) {
  cfg.validate();
  const std::string why = cuda::cuda_model_unsupported(cfg);
  if (!why.empty())
    throw InputError(why + ": the CUDA runners cannot run " + cfg.name + " (the CPU reference can: --device cpu)");
  std::unique_ptr<cuda::CudaModel> model =
      cfg.is_yoco() ? cuda::create_yoco_cuda_model(cfg, source) : cuda::create_transformer_cuda_model(cfg, source);
  return std::make_unique<CudaRunner>(std::move(model));
}

}  // namespace yoco

#endif  // YOCO_HAVE_CUDA
