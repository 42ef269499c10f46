#include "model_runner.hpp"

#include <type_traits>

#include "errors.hpp"
#include "host_memory.hpp"
#include "param_layout.hpp"
#include "transformer_model.hpp"
#include "weights.hpp"
#include "yoco_model.hpp"

namespace yoco {

const char* precision_name(Precision p) { return p == Precision::f64 ? "f64" : "f32"; }
int precision_bytes(Precision p) { return p == Precision::f64 ? 8 : 4; }

Precision parse_precision(const std::string& option, const std::string& text) {
  if (text == "f32") return Precision::f32;
  if (text == "f64") return Precision::f64;
  throw InputError(option + ": must be f32 or f64, got '" + text + "'");
}

std::string WeightSource::describe() const {
  return path.empty() ? "seed " + std::to_string(seed) : "file " + path;
}

bool ModelRunner::has_gret() const {
  return config().is_yoco() && config().self_decoder() == SelfDecoderKind::gret;
}

std::string ModelRunner::architecture() const {
  const auto& c = config();
  if (!c.is_yoco()) return "GQA Transformer";
  if (c.self_decoder() == SelfDecoderKind::gret) return "YOCO, gRet self-decoder";
  return "YOCO, SWA self-decoder (window " + std::to_string(c.window()) + ")";
}

int64_t ModelRunner::param_count() const { return yoco::param_count(config()); }

namespace {

// Model = YocoModel<T> or TransformerModel<T>; Cache its cache type.
template <class Model, class Cache, class T>
class Runner final : public ModelRunner {
 public:
  Runner(ModelConfig cfg, Weights<T> w, Precision p) : model_(std::move(cfg), std::move(w)), precision_(p) {}

  const ModelConfig& config() const override { return model_.config(); }
  Precision precision() const override { return precision_; }

  Mat<double> forward(const TokenBatch& tokens, GretParadigm paradigm) const override {
    if (paradigm != GretParadigm::parallel && !has_gret())
      throw InputError(std::string("gRet paradigm '") + paradigm_name(paradigm) + "' applies to YOCO gRet models only; " +
                       config().name + " is a " + architecture());
    if constexpr (std::is_same_v<Model, YocoModel<T>>) return to_double(model_.forward(tokens, paradigm));
    else return to_double(model_.forward(tokens));
  }

  Mat<double> prefill(const TokenBatch& prompt, int64_t max_new_tokens, int64_t prefill_chunk) override {
    cache_ = Cache{};
    prefilled_ = false;
    Mat<double> out = to_double(model_.prefill(prompt, max_new_tokens, cache_, prefill_chunk));
    prefilled_ = true;
    return out;
  }

  Mat<double> decode_step(const std::vector<int64_t>& tokens) override {
    if (!prefilled_) throw std::logic_error("ModelRunner::decode_step before prefill");
    return to_double(model_.decode_step(tokens, cache_));
  }

  void skip_positions(int64_t n) override {
    if (!prefilled_) throw std::logic_error("ModelRunner::skip_positions before prefill");
    if (n < 0 || cache_.position + n > cache_.capacity)
      throw std::logic_error("ModelRunner::skip_positions past the cache capacity");
    cache_.position += n;
  }

  MemoryBreakdown memory() const override { return model_.memory(cache_); }
  int64_t position() const override { return cache_.position; }
  int64_t capacity() const override { return cache_.capacity; }

 private:
  Model model_;
  Cache cache_;
  bool prefilled_ = false;
  Precision precision_;
};

template <class T>
std::unique_ptr<ModelRunner> make(const ModelConfig& cfg, Precision p, const WeightSource& src) {
  Weights<T> w = src.path.empty() ? Weights<T>::init(cfg, src.seed) : Weights<T>::load(cfg, src.path);
  if (cfg.is_yoco()) return std::make_unique<Runner<YocoModel<T>, YocoCache<T>, T>>(cfg, std::move(w), p);
  return std::make_unique<Runner<TransformerModel<T>, TransformerCache<T>, T>>(cfg, std::move(w), p);
}

}  // namespace

std::unique_ptr<ModelRunner> ModelRunner::create(const ModelConfig& cfg, Precision precision, const WeightSource& weights) {
  cfg.validate();
  cli::require_host_memory(cli::weights_elements_estimate(cfg) * precision_bytes(precision),
                           "the " + std::string(precision_name(precision)) + " weights of " + cfg.name);
  if (precision == Precision::f64) return make<double>(cfg, precision, weights);
  return make<float>(cfg, precision, weights);
}

}  // namespace yoco
