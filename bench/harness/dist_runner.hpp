#pragma once
// A ModelRunner whose model runs with the sequence sharded over the ranks of
// an MPI job (dist/): YOCO chunk-parallel (ShardedYoco), the Transformer
// context-parallel (ContextParallelTransformer), on the CPU reference. Every
// rank holds the whole weights and calls the same methods in the same order;
// every rank gets the same logits. What the last prefill and decode step
// moved between the ranks is kept, by collective label, for the sweep's
// `comm` rows.
#include <map>
#include <memory>
#include <string>

#include "communicator.hpp"
#include "multi_device.hpp"
#include "model_runner.hpp"

namespace yoco {

class DistRunner : public ModelRunner {
 public:
  // The weights as ModelRunner::create loads them (every rank the same);
  // `comm` outlives the runner.
  static std::unique_ptr<DistRunner> create(const ModelConfig& cfg, Precision precision, const WeightSource& weights,
                                            dist::Communicator& comm);

  virtual dist::Communicator& communicator() const = 0;
  // This rank's bytes by label over the last prefill (or forward) and the last
  // decode step; empty before the first.
  virtual const std::map<std::string, dist::CommCount>& last_prefill_comm() const = 0;
  virtual const std::map<std::string, dist::CommCount>& last_decode_comm() const = 0;
  // How the sequence is split: "chunk-parallel YOCO, contiguous shards" /
  // "context-parallel Transformer, 2R chunks (ring attention)".
  virtual std::string sharding() const = 0;
  // The single-device runner this rank drives, when there is one (the CUDA
  // path: a CudaRunner over a model holding this rank's shard), so that a
  // device backend reads its device's memory and stream; null on the CPU.
  virtual ModelRunner* local_runner() const { return nullptr; }

  int64_t shortest_prompt() const override { return shortest_sharded_prompt(config(), communicator().size()); }
  // The prompt's parts a rank holds: YOCO one contiguous shard, the
  // Transformer two chunks of 2R (causal load balance), on the CPU and the GPU.
  static int parts_per_rank(const ModelConfig& cfg) { return cost::shards_per_device(cfg); }
  static int64_t shortest_sharded_prompt(const ModelConfig& cfg, int ranks) {
    return static_cast<int64_t>(ranks) * parts_per_rank(cfg);
  }
};

}  // namespace yoco
