#include "dist_runner.hpp"

#include <stdexcept>
#include <type_traits>

#include "errors.hpp"
#include "host_memory.hpp"
#include "shard_plan.hpp"
#include "transformer_context_parallel.hpp"
#include "transformer_model.hpp"
#include "weights.hpp"
#include "yoco_model.hpp"
#include "yoco_sharded.hpp"

namespace yoco {

namespace {

// Model = YocoModel<T> (driver ShardedYoco<T>, R contiguous shards) or
// TransformerModel<T> (ContextParallelTransformer<T>, 2R chunks).
template <class Model, class Driver, class T>
class Runner final : public DistRunner {
 public:
  Runner(ModelConfig cfg, Weights<T> w, Precision p, dist::Communicator& comm)
      : model_(std::move(cfg), std::move(w)), precision_(p), comm_(comm) {}

  const ModelConfig& config() const override { return model_.config(); }
  Precision precision() const override { return precision_; }
  std::string architecture() const override {
    return ModelRunner::architecture() + ", sequence sharded over " + std::to_string(comm_.size()) + " MPI ranks";
  }
  dist::Communicator& communicator() const override { return comm_; }
  const std::map<std::string, dist::CommCount>& last_prefill_comm() const override { return prefill_comm_; }
  const std::map<std::string, dist::CommCount>& last_decode_comm() const override { return decode_comm_; }
  std::string sharding() const override {
    return kYoco ? "chunk-parallel YOCO: contiguous shards of the prompt, one per rank"
                 : "context-parallel Transformer: 2R chunks, rank r holding r and 2R-1-r (ring attention)";
  }

  Mat<double> forward(const TokenBatch& tokens, GretParadigm paradigm) const override {
    // Parallel and chunkwise are the same function; each shard runs chunkwise.
    if (paradigm == GretParadigm::recurrent)
      throw InputError("gRet paradigm 'recurrent' under mpirun: the sharded forward runs gRet chunkwise within each "
                       "rank's shard");
    Driver d(model_, comm_, plan(tokens.length));
    return counted(prefill_comm_, [&] { return to_double(d.forward(tokens)); });
  }

  Mat<double> prefill(const TokenBatch& prompt, int64_t max_new_tokens, int64_t prefill_chunk) override {
    (void)prefill_chunk;  // each rank runs its shard whole: the shards are the chunks
    driver_ = std::make_unique<Driver>(model_, comm_, plan(prompt.length));
    return counted(prefill_comm_, [&] { return to_double(driver_->prefill(prompt, max_new_tokens)); });
  }

  Mat<double> decode_step(const std::vector<int64_t>& tokens) override {
    if (!driver_) throw std::logic_error("DistRunner::decode_step before prefill");
    return counted(decode_comm_, [&] { return to_double(driver_->decode_step(tokens)); });
  }

  void skip_positions(int64_t n) override {
    if (!driver_) throw std::logic_error("DistRunner::skip_positions before prefill");
    driver_->skip_positions(n);
  }

  MemoryBreakdown memory() const override {
    MemoryBreakdown m;
    if (driver_) m = driver_->memory();
    else m.weights = model_.weights().bytes();
    m.activations = meter_.peak();
    return m;
  }
  int64_t position() const override { return driver_ ? driver_->position() : 0; }
  int64_t capacity() const override { return driver_ ? driver_->capacity() : 0; }

 private:
  static constexpr bool kYoco = std::is_same_v<Model, YocoModel<T>>;

  // Every rank at least one token (two chunks each for the Transformer).
  dist::ShardPlan plan(int64_t n) const {
    return dist::ShardPlan::for_prompt(n, comm_.size(), parts_per_rank(model_.config()));
  }

  // The call metered (this rank's activations) and its bytes by label.
  template <class F>
  Mat<double> counted(std::map<std::string, dist::CommCount>& into, F&& f) const {
    MeterScope scope(&meter_);
    meter_.reset_peak();
    comm_.reset_counts();
    Mat<double> out = f();
    into = comm_.counts();
    return out;
  }

  Model model_;
  Precision precision_;
  dist::Communicator& comm_;
  std::unique_ptr<Driver> driver_;
  mutable ActivationMeter meter_;
  mutable std::map<std::string, dist::CommCount> prefill_comm_, decode_comm_;
};

template <class T>
std::unique_ptr<DistRunner> make(const ModelConfig& cfg, Precision p, const WeightSource& src,
                                 dist::Communicator& comm) {
  Weights<T> w = src.path.empty() ? Weights<T>::init(cfg, src.seed) : Weights<T>::load(cfg, src.path);
  if (cfg.is_yoco())
    return std::make_unique<Runner<YocoModel<T>, dist::ShardedYoco<T>, T>>(cfg, std::move(w), p, comm);
  return std::make_unique<Runner<TransformerModel<T>, dist::ContextParallelTransformer<T>, T>>(cfg, std::move(w), p,
                                                                                                comm);
}

}  // namespace

std::unique_ptr<DistRunner> DistRunner::create(const ModelConfig& cfg, Precision precision,
                                               const WeightSource& weights, dist::Communicator& comm) {
  cfg.validate();
  cli::require_host_memory(cli::weights_elements_estimate(cfg) * precision_bytes(precision) * comm.size(),
                           "the " + std::string(precision_name(precision)) + " weights of " + cfg.name + " on each of " +
                               std::to_string(comm.size()) + " ranks");
  if (precision == Precision::f64) return make<double>(cfg, precision, weights, comm);
  return make<float>(cfg, precision, weights, comm);
}

}  // namespace yoco
