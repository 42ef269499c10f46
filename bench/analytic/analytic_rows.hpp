#pragma once
// The cost model's numbers as result rows (method=analytic) and as the
// YOCO-vs-Transformer ratio rows that both `yoco model` and `yoco bench` add.
#include <cstdint>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "config.hpp"
#include "cost_model.hpp"
#include "result_row.hpp"

namespace yoco::cli {

struct AnalyticSettings {
  cost::Storage storage;
  cost::DeviceSpec device;
  int64_t prefill_chunk = kDefaultPrefillChunk;
  int64_t batch = 1;         // memory, prefill and decode points
  int64_t gen = 1024;        // throughput: generated tokens
  int64_t tp_batch = 0;      // throughput batch, 0 = largest that fits
  int64_t max_batch = 1 << 20;
  // Under mpirun, the ranks the measured rows come from: the analytic rows stay
  // one device's with the whole sequence, and their notes say so.
  int sharded_ranks = 0;
};

// Everything the cost model says about one model at one length.
struct AnalyticPoint {
  int64_t seq_len = 0;
  cost::MemoryCost memory;       // batch sequences, cache of seq_len tokens
  cost::PhaseWork prefill;       // prompt of seq_len tokens
  cost::PhaseWork decode;        // one step at context seq_len
  double prefill_s = 0, decode_s = 0;
  bool has_throughput = false;   // seq_len > gen
  cost::ThroughputCost throughput;
};
AnalyticPoint analytic_point(const ModelConfig& cfg, int64_t seq_len, const AnalyticSettings& s);

// `metrics` ⊆ {memory, prefill, decode, throughput}; kv_cache and model rows always.
std::vector<ResultRow> analytic_rows(const std::string& model, const AnalyticPoint& p,
                                     const AnalyticSettings& s, const Provenance& prov,
                                     const std::set<std::string>& metrics);
// kv_cache_bytes_per_token and param_count of one model (no length).
std::vector<ResultRow> kv_per_token_rows(const ModelConfig& cfg, const std::string& model, const AnalyticSettings& s,
                                         const Provenance& prov);

// Pairs (YOCO model, Transformer model) among `models` by size suffix
// (yoco-3b / yoco-swa-3b ↔ transformer-3b); if that finds none and there is
// exactly one of each kind, they are paired.
std::vector<std::pair<std::string, std::string>> pair_models(const std::vector<std::string>& models,
                                                             const std::vector<ModelConfig>& configs);

// Ratio rows (reports/SCHEMA.md) for each pair and each point where both
// models have a value of the same metric on the same device.
std::vector<ResultRow> ratio_rows(const std::vector<ResultRow>& rows,
                                  const std::vector<std::pair<std::string, std::string>>& pairs);

// Models to list KV bytes per token for: every preset, smallest first (figure 8's x axis).
struct NamedConfigs {
  std::vector<std::string> names;
  std::vector<ModelConfig> configs;
};
NamedConfigs presets_by_size();

// Everything `yoco model` writes: analytic rows for models × lengths, KV per
// token (and parameter count) for `kv`, and the ratio rows of the pairs
// among the models and among `kv` (gRet variants only: SWA has the same cache).
std::vector<ResultRow> analytic_sweep_rows(const NamedConfigs& models, const std::vector<int64_t>& lengths,
                                           const NamedConfigs& kv, const AnalyticSettings& s, const Provenance& prov);

}  // namespace yoco::cli
