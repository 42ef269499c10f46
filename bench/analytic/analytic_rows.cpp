#include "analytic_rows.hpp"

#include <algorithm>
#include <map>
#include <set>
#include <stdexcept>

#include "param_layout.hpp"

namespace yoco::cli {

AnalyticPoint analytic_point(const ModelConfig& cfg, int64_t seq_len, const AnalyticSettings& s) {
  AnalyticPoint p;
  p.seq_len = seq_len;
  const int64_t in_flight = cost::prefill_tokens_in_flight(s.batch, seq_len, s.prefill_chunk);
  p.memory = cost::memory_cost(cfg, s.storage, s.batch, seq_len, in_flight);
  p.prefill = cost::prefill_work(cfg, s.storage, s.batch, seq_len, s.prefill_chunk);
  p.decode = cost::decode_work(cfg, s.storage, s.batch, seq_len);
  p.prefill_s = cost::roofline_time(p.prefill, s.device);
  p.decode_s = cost::roofline_time(p.decode, s.device);
  if (seq_len > s.gen) {
    p.has_throughput = true;
    p.throughput =
        cost::throughput_cost(cfg, s.storage, s.device, seq_len, s.gen, s.tp_batch, s.prefill_chunk, s.max_batch);
  }
  return p;
}

namespace {

std::string storage_note(const AnalyticSettings& s) {
  return std::string("weights ") + cost::storage_name(s.storage.weights) + ", KV " +
         cost::storage_name(s.storage.kv_cache) + ", activations " + cost::storage_name(s.storage.activations) +
         ", state " + cost::storage_name(s.storage.state);
}

struct RowMaker {
  const Provenance& prov;
  const std::string& model;
  std::vector<ResultRow>& out;
  void add(int64_t seq_len, int64_t batch, int64_t gen, const std::string& phase, const std::string& metric,
           double value, const std::string& unit, const std::string& notes) const {
    out.push_back(make_row(prov, model, seq_len, batch, gen, phase, metric, value, unit, "analytic", 0, notes));
  }
  void work(int64_t seq_len, int64_t batch, const std::string& phase, const std::string& latency_metric,
            const cost::PhaseWork& w, const cost::DeviceSpec& dev, const std::string& notes) const {
    const cost::Work t = w.total();
    add(seq_len, batch, 0, phase, latency_metric, cost::roofline_time(w, dev), "s", "roofline; " + notes);
    add(seq_len, batch, 0, phase, "flops", t.flops, "FLOP", notes);
    add(seq_len, batch, 0, phase, "bytes", t.bytes, "B", notes);
    for (int i = 0; i < cost::kParts; ++i) {
      const auto part = static_cast<cost::Part>(i);
      const cost::Work& pw = w[part];
      if (pw.flops == 0 && pw.bytes == 0) continue;
      const std::string ph = phase + "." + cost::part_name(part);
      add(seq_len, batch, 0, ph, "flops", pw.flops, "FLOP", notes);
      add(seq_len, batch, 0, ph, "bytes", pw.bytes, "B", notes);
      add(seq_len, batch, 0, ph, "roofline_time_s", cost::roofline_time(pw, dev), "s", notes);
    }
  }
};

}  // namespace

std::vector<ResultRow> analytic_rows(const std::string& model, const AnalyticPoint& p,
                                     const AnalyticSettings& s, const Provenance& prov,
                                     const std::set<std::string>& metrics) {
  std::vector<ResultRow> out;
  const RowMaker mk{prov, model, out};
  const std::string st =
      storage_note(s) + (s.sharded_ranks > 0 ? "; one device with the whole sequence (the measured rows: " +
                                                   std::to_string(s.sharded_ranks) + " MPI ranks)"
                                             : std::string());
  const int64_t N = p.seq_len, B = s.batch;
  if (metrics.count("memory")) {
    const std::string note = st + "; activations at prefill chunk " + std::to_string(s.prefill_chunk);
    mk.add(N, B, 0, "memory", "mem_weights_bytes", p.memory.weights, "B", note);
    mk.add(N, B, 0, "memory", "mem_kv_cache_bytes", p.memory.kv_cache, "B", note);
    mk.add(N, B, 0, "memory", "mem_state_bytes", p.memory.state, "B", note);
    mk.add(N, B, 0, "memory", "mem_activations_bytes", p.memory.activations, "B", note);
    mk.add(N, B, 0, "memory", "mem_total_bytes", p.memory.total(), "B", note);
  }
  if (metrics.count("prefill"))
    mk.work(N, B, "prefill", "prefill_latency_s", p.prefill, s.device,
            st + "; prefill chunk " + std::to_string(s.prefill_chunk));
  if (metrics.count("decode"))
    mk.work(N, B, "decode", "decode_step_latency_s", p.decode, s.device, st + "; one step at context " + std::to_string(N));
  if (metrics.count("throughput") && p.has_throughput) {
    const auto& t = p.throughput;
    const std::string how = s.tp_batch > 0 ? "batch given" : "largest batch in 95% of " + s.device.name;
    if (t.batch == 0) {
      mk.add(N, 0, s.gen, "throughput", "max_batch", 0, "count",
             "one sequence does not fit: needs " + std::to_string(t.memory.total() / 1e9) + " GB; " + how);
    } else {
      const std::string note = "roofline; prompt " + std::to_string(N - s.gen) + " + " + std::to_string(s.gen) +
                               " generated; " + how + "; prefill " + std::to_string(t.prefill_s) + " s, decode " +
                               std::to_string(t.decode_s) + " s; " + st;
      mk.add(N, t.batch, s.gen, "throughput", "throughput_tokens_per_s", t.tokens_per_s, "tokens/s", note);
      mk.add(N, t.batch, s.gen, "throughput", "max_batch", static_cast<double>(t.batch), "count", how);
    }
  }
  return out;
}

std::vector<ResultRow> kv_per_token_rows(const ModelConfig& cfg, const std::string& model, const AnalyticSettings& s,
                                         const Provenance& prov) {
  std::vector<ResultRow> out;
  const RowMaker mk{prov, model, out};
  mk.add(0, 1, 0, "kv_cache", "kv_cache_bytes_per_token", cost::kv_cache_bytes_per_token(cfg, s.storage), "B/token",
         std::string("KV ") + cost::storage_name(s.storage.kv_cache) + "; " + std::to_string(cfg.n_layers) +
             " layers, " + std::to_string(cfg.n_attn_kv_heads) + " KV heads of " +
             std::to_string(cfg.attn_head_dim()));
  mk.add(0, 1, 0, "model", "param_count", static_cast<double>(param_count(cfg)), "count", "parameters");
  return out;
}

namespace {

std::string size_suffix(const std::string& name) {
  for (const char* p : {"yoco-swa-", "yoco-", "transformer-"})
    if (name.rfind(p, 0) == 0) return name.substr(std::string(p).size());
  return "";
}

}  // namespace

std::vector<std::pair<std::string, std::string>> pair_models(const std::vector<std::string>& models,
                                                             const std::vector<ModelConfig>& configs) {
  std::vector<std::pair<std::string, std::string>> pairs;
  std::vector<std::string> yocos, transformers;
  for (size_t i = 0; i < models.size(); ++i) (configs[i].is_yoco() ? yocos : transformers).push_back(models[i]);
  for (const auto& y : yocos)
    for (const auto& t : transformers)
      if (!size_suffix(y).empty() && size_suffix(y) == size_suffix(t)) pairs.emplace_back(y, t);
  if (pairs.empty() && yocos.size() == 1 && transformers.size() == 1) pairs.emplace_back(yocos[0], transformers[0]);
  return pairs;
}

std::vector<ResultRow> ratio_rows(const std::vector<ResultRow>& rows,
                                  const std::vector<std::pair<std::string, std::string>>& pairs) {
  struct RatioDef {
    const char* phase;
    const char* metric;
    const char* ratio;
    bool yoco_over_transformer;  // throughput: higher is better
  };
  static const RatioDef defs[] = {
      {"memory", "mem_total_bytes", "memory_reduction", false},
      {"kv_cache", "kv_cache_bytes_per_token", "kv_cache_reduction", false},
      {"prefill", "prefill_latency_s", "prefill_speedup", false},
      {"decode", "decode_step_latency_s", "decode_speedup", false},
      {"throughput", "throughput_tokens_per_s", "throughput_gain", true},
  };
  // Throughput points compare each model at its own batch, so batch is not part of that match.
  auto key = [](const ResultRow& r, bool with_batch) {
    return r.prov.device_name + "|" + std::to_string(r.seq_len) + "|" + (with_batch ? std::to_string(r.batch) : "") +
           "|" + std::to_string(r.gen_tokens) + "|" + r.phase + "|" + r.metric;
  };
  std::vector<ResultRow> out;
  for (const auto& [y, t] : pairs) {
    for (const auto& def : defs) {
      const bool with_batch = std::string(def.phase) != "throughput";
      // Without the batch in the match, a model's throughput at two batches of one point would pair
      // twice (two ratio rows of one key): the callers give one a model and point (the sweep measures
      // one; yoco ratios refuses two), and this says so if one does not.
      auto one_throughput = [&](const std::string& model, std::set<std::string>& seen, const ResultRow& r) {
        if (!with_batch && !seen.insert(key(r, false)).second)
          throw std::logic_error("ratio_rows: " + model + " has two throughput rows at " + key(r, false));
      };
      std::map<std::string, const ResultRow*> trow;
      std::set<std::string> seen_t, seen_y;
      for (const auto& r : rows)
        if (r.model == t && r.phase == def.phase && r.metric == def.metric && r.value) {
          one_throughput(t, seen_t, r);
          trow[key(r, with_batch)] = &r;
        }
      for (const auto& r : rows) {
        if (r.model != y || r.phase != def.phase || r.metric != def.metric || !r.value) continue;
        one_throughput(y, seen_y, r);
        const auto it = trow.find(key(r, with_batch));
        if (it == trow.end()) continue;
        const ResultRow& tr = *it->second;
        const ResultRow& num = def.yoco_over_transformer ? r : tr;
        const ResultRow& den = def.yoco_over_transformer ? tr : r;
        if (*den.value == 0) continue;
        ResultRow q;
        q.prov = r.prov;
        q.model = y + " vs " + t;
        q.seq_len = r.seq_len;
        q.batch = with_batch || r.batch == tr.batch ? r.batch : 0;
        q.gen_tokens = r.gen_tokens;
        q.phase = def.phase;
        q.metric = def.ratio;
        q.value = *num.value / *den.value;
        q.unit = "x";
        q.method = method_rank(r.method) >= method_rank(tr.method) ? r.method : tr.method;
        q.repeats = std::min(r.repeats, tr.repeats);
        if (num.min && num.max && den.min && den.max && *den.min > 0 && *den.max > 0) {
          q.min = *num.min / *den.max;
          q.max = *num.max / *den.min;
        }
        // Of rows measured on MPI ranks, each model's value is its largest rank's (weights whole on every
        // rank, the caches sharded): not a one-device ratio, and the note says so.
        const bool per_rank = r.notes.find("the largest of the") != std::string::npos;
        q.notes = std::string(def.yoco_over_transformer ? y + " / " + t : t + " / " + y) + " " + def.metric +
                  (per_rank ? " of each model's largest rank (weights whole on every rank, caches sharded)" : "") +
                  (q.batch == 0 ? std::string("; each at its own batch (") + std::to_string(r.batch) + " vs " +
                                      std::to_string(tr.batch) + ")"
                                : "");
        out.push_back(std::move(q));
      }
    }
  }
  return out;
}

NamedConfigs presets_by_size() {
  std::vector<std::pair<int64_t, std::string>> by_size;
  for (const auto& n : preset_names()) by_size.emplace_back(param_count(preset_config(n)), n);
  std::stable_sort(by_size.begin(), by_size.end());
  NamedConfigs out;
  for (const auto& [count, n] : by_size) {
    out.names.push_back(n);
    out.configs.push_back(preset_config(n));
  }
  return out;
}

std::vector<ResultRow> analytic_sweep_rows(const NamedConfigs& models, const std::vector<int64_t>& lengths,
                                           const NamedConfigs& kv, const AnalyticSettings& s, const Provenance& prov) {
  const std::set<std::string> all = {"memory", "prefill", "decode", "throughput"};
  std::vector<ResultRow> rows;
  for (size_t i = 0; i < models.names.size(); ++i)
    for (int64_t len : lengths)
      for (auto& r : analytic_rows(models.names[i], analytic_point(models.configs[i], len, s), s, prov, all))
        rows.push_back(std::move(r));
  for (size_t i = 0; i < kv.names.size(); ++i)
    for (auto& r : kv_per_token_rows(kv.configs[i], kv.names[i], s, prov)) rows.push_back(std::move(r));
  auto pairs = pair_models(models.names, models.configs);
  for (const auto& p : pair_models(kv.names, kv.configs))
    if (std::find(pairs.begin(), pairs.end(), p) == pairs.end() && p.first.rfind("yoco-swa-", 0) != 0)
      pairs.push_back(p);
  const auto ratios = ratio_rows(rows, pairs);
  rows.insert(rows.end(), ratios.begin(), ratios.end());
  return rows;
}

}  // namespace yoco::cli
