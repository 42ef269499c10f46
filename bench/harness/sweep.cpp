// The measured protocol (DESIGN.md §4-5), written once for every device: the
// device backend (device_backend.hpp) creates the runners, times, reads memory
// and measures the ceilings; nothing here knows which device it drives.
#include <cmath>
#include <map>
#include <new>
#include <set>

#include "analytic_rows.hpp"
#include "cpu_backend.hpp"
#include "errors.hpp"
#include "extrapolation.hpp"
#include "format.hpp"
#include "lists.hpp"
#include "stats.hpp"
#include "sweep.hpp"
#include "tokens.hpp"

namespace yoco::cli {

namespace {

// What a point measured; absent fields did not run.
struct PointResult {
  std::optional<Summary> prefill, decode;
  std::vector<PhaseReading> decode_extras;  // the device's (DeviceBackend::decode_extras)
  std::optional<std::vector<Reading>> memory;  // the breakdown, then the peaks
  int64_t throughput_batch = 0;
  std::optional<double> throughput, tp_prefill_s, tp_decode_s;
  bool throughput_sampled = false;
  std::string throughput_note;
  // The throughput run did not fit (its batch is larger than the latency
  // points'): only its rows say so; the point's other rows stand.
  std::string tp_skip_method, tp_skip_note;
  std::string tp_batch_note;  // how the batch that ran was found
  std::vector<PhaseReading> kernels;  // --cupti
  std::vector<std::pair<std::string, std::string>> kernel_errors;  // --cupti: (phase, why) of a profile that failed
  std::optional<Reading> kv_per_token;  // the cache's bytes per token, read off the memory breakdown
};

// KV bytes per token of one sequence (paper fig. 8) as the device holds them:
// the kv_cache reading over the cache's capacity (batch x tokens).
std::optional<Reading> kv_per_token_reading(const std::vector<Reading>& memory, int64_t batch, int64_t capacity) {
  for (const Reading& r : memory)
    if (r.metric == "mem_kv_cache_bytes" && capacity > 0 && batch > 0)
      return Reading{"kv_cache_bytes_per_token", r.value / static_cast<double>(batch * capacity), "B/token", r.method, 1,
                     strf("mem_kv_cache_bytes / (batch %lld x capacity %lld tokens)", static_cast<long long>(batch),
                          static_cast<long long>(capacity)),
                     {}, {}};
  return std::nullopt;
}

// A point whose full run did not happen, timed on the model cut to 1 and 2
// layer units (extrapolation.hpp); empty fields did not run, why_not says why.
struct ProbeResult {
  std::optional<Summary> prefill, decode;
  std::string prefill_note, decode_note, why_not;
};

// The time a point will take, from the last measured point of the same model
// scaled by the cost model's FLOP ratio (quadratic attention included), or
// from the roofline on this machine's ceilings when nothing was measured yet.
struct Predictor {
  struct Last {
    double prefill_s = 0, prefill_flops = 0, decode_s = 0, decode_work = 0;
  };
  std::map<std::string, Last> last;

  double prefill(const std::string& model, double flops, double roofline_s) const {
    auto it = last.find(model);
    if (it == last.end() || it->second.prefill_flops <= 0) return roofline_s;
    return it->second.prefill_s * flops / it->second.prefill_flops;
  }
  double decode(const std::string& model, double work, double roofline_s) const {
    auto it = last.find(model);
    if (it == last.end() || it->second.decode_work <= 0) return roofline_s;
    return it->second.decode_s * work / it->second.decode_work;
  }
  // A point's prefill (of its batch B) and decode step times, with its work.
  void learn(const std::string& model, std::optional<double> prefill_s, std::optional<double> decode_s,
             const AnalyticPoint& ap, int64_t B) {
    auto& l = last[model];
    if (prefill_s) {
      l.prefill_s = *prefill_s / static_cast<double>(B);
      l.prefill_flops = ap.prefill.total().flops / static_cast<double>(B);
    }
    if (decode_s) {
      l.decode_s = *decode_s;
      l.decode_work = ap.decode.total().bytes;
    }
  }
};

std::optional<double> median_of(const std::optional<Summary>& s) {
  return s ? std::optional<double>(s->median) : std::nullopt;
}

class RowSink {
 public:
  RowSink(std::vector<ResultRow>& rows, const Provenance& prov) : rows_(rows), prov_(prov) {}
  ResultRow& add(const std::string& model, int64_t n, int64_t batch, int64_t gen, const std::string& phase,
                 const std::string& metric, std::optional<double> value, const std::string& unit,
                 const std::string& method, int64_t repeats, const std::string& notes) {
    rows_.push_back(make_row(prov_, model, n, batch, gen, phase, metric, value, unit, method, repeats, notes));
    return rows_.back();
  }
  void reading(const std::string& model, int64_t n, int64_t batch, int64_t gen, const std::string& phase,
               const Reading& r) {
    ResultRow& row = add(model, n, batch, gen, phase, r.metric, r.value, r.unit, r.method, r.repeats, r.notes);
    row.min = r.min;
    row.max = r.max;
  }
  void timing(const std::string& model, int64_t n, int64_t batch, int64_t gen, const std::string& phase,
              const std::string& metric, const Summary& s, const std::string& method, const std::string& notes) {
    ResultRow& r = add(model, n, batch, gen, phase, metric, s.median, "s", method, s.count, notes);
    r.min = s.min;
    r.max = s.max;
  }

 private:
  std::vector<ResultRow>& rows_;
  Provenance prov_;
};

// The metrics' names per phase, for rows that say a point did not run.
const std::vector<std::pair<std::string, std::vector<std::pair<std::string, std::string>>>>& phase_metrics() {
  static const std::vector<std::pair<std::string, std::vector<std::pair<std::string, std::string>>>> m = {
      {"memory", {{"mem_total_bytes", "B"}}},
      {"prefill", {{"prefill_latency_s", "s"}}},
      {"decode", {{"decode_step_latency_s", "s"}}},
      {"throughput", {{"throughput_tokens_per_s", "tokens/s"}}},
  };
  return m;
}

std::vector<std::vector<int64_t>> prompts(uint64_t seed, int64_t batch, int64_t n, int64_t vocab) {
  std::vector<std::vector<int64_t>> seqs;
  for (int64_t b = 0; b < batch; ++b) seqs.push_back(synthetic_prompt(seed, b, n, vocab));
  return seqs;
}

// `steps` decode steps, each timed; tokens are synthetic (a step costs the same whatever they are).
std::vector<double> time_decode_steps(DeviceBackend& dev, ModelRunner& r, int64_t batch, int64_t steps) {
  std::vector<double> t;
  const std::vector<int64_t> tokens(static_cast<size_t>(batch), 1);
  for (int64_t i = 0; i < steps; ++i) t.push_back(dev.time([&] { r.run_decode_step(tokens); }));
  return t;
}

// The device's untimed warm-up steps before a run of timed ones (none on the CPU).
void warm_up_decode(DeviceBackend& dev, ModelRunner& r, int64_t batch) {
  const std::vector<int64_t> tokens(static_cast<size_t>(batch), 1);
  for (int64_t i = 0; i < dev.decode_warmup_steps(); ++i) r.run_decode_step(tokens);
}

// A device's allocation failure says what did not fit (cuda::DeviceOutOfMemory);
// a plain std::bad_alloc says nothing more.
std::string oom_note(const std::bad_alloc& e) {
  const std::string what = e.what();
  return what.empty() || what == "std::bad_alloc" ? "std::bad_alloc during the run" : what;
}

// The metric (--metrics) a measured row's phase belongs to: decode_eager rows
// (the CUDA backend's eager steps) come with decode.
// The --cupti rows (prefill.gemm, decode:<kernel>, ...) come with their phase's metric.
std::string metric_of_phase(const std::string& phase) {
  if (phase == "decode_eager") return "decode";
  if (phase == "kv_cache") return "memory";  // read off the memory breakdown
  const size_t cut = phase.find_first_of(".:");
  return cut == std::string::npos ? phase : phase.substr(0, cut);
}

// A generation of `batch` sequences with caches for `capacity` tokens and a
// prompt of `prompt` tokens each (1: what a decode on skipped positions starts
// from).
void start_generation(ModelRunner& r, int64_t batch, int64_t prompt, int64_t capacity, int64_t chunk) {
  std::vector<std::vector<int64_t>> seqs(static_cast<size_t>(batch), std::vector<int64_t>(static_cast<size_t>(prompt), 1));
  r.run_prefill(TokenBatch::from_sequences(seqs), capacity - prompt, chunk);
}

// The throughput's batch search: whether `batch` sequences' caches fit beside
// one prefill step's activations -- a prompt of chunk / batch tokens each (at
// least one, at most the prompt), what a device runner holds at once whatever
// the prompt's length. Cheap: about one chunk computed.
bool generation_fits(ModelRunner& r, int64_t batch, int64_t prompt_len, int64_t capacity, int64_t chunk) {
  const int64_t step = std::min(prompt_len, std::max<int64_t>(1, chunk / batch));
  try {
    start_generation(r, batch, step, capacity, chunk);
    return true;
  } catch (const std::bad_alloc&) {
    return false;
  }
}

// The latency of a point whose full run did not happen (over the budget, or
// too large for the device), from the model cut to 1 and 2 layer units at
// the same length and batch (extrapolation.hpp). `full_why`: why the full
// model did not run. The probes have the budget of the point: warm-up and
// repeats are cut as for a full point; probes that still do not fit the
// budget, or the device, do not run (why_not says so).
ProbeResult run_layer_probes(const SweepSettings& s, DeviceBackend& dev, Progress& progress, const ModelConfig& cfg,
                             const std::string& model, int64_t n, int64_t B, const AnalyticSettings& a,
                             const Predictor& predict) {
  ProbeResult out;
  const int64_t units = layer_units(cfg);
  if (units < 3) {
    out.why_not = "not extrapolated: the model has " + std::to_string(units) + " layer units (the probes need 3 or more)";
    return out;
  }
  const bool prefill = s.metrics.count("prefill") > 0, decode = s.metrics.count("decode") > 0;
  const int64_t dec_warm = dev.decode_warmup_steps();
  const int64_t room = decode ? s.decode_sample + dec_warm : 0;
  const double usable = dev.usable_memory_bytes();
  ModelConfig probe[2] = {with_layer_units(cfg, 1), with_layer_units(cfg, 2)};
  const double need = dev.generation_bytes(probe[1], s.precision, B, n, room, s.prefill_chunk);
  if (need > usable) {
    out.why_not = "not extrapolated: the 2-unit probe needs about " + human_bytes(need) + ", " +
                  dev.usable_memory_name() + " is " + human_bytes(usable);
    return out;
  }
  // Their time: the model's last measured rate per FLOP (or the roofline) at the probes' work.
  double probe_s = 0;
  for (const ModelConfig& c : probe) {
    AnalyticSettings pa = a;
    pa.batch = B;
    pa.tp_batch = 0;
    const AnalyticPoint ap = analytic_point(c, n, pa);
    probe_s += predict.prefill(model, ap.prefill.total().flops / B, ap.prefill_s / B) * B +
               (decode ? s.decode_sample * predict.decode(model, ap.decode.total().bytes, ap.decode_s) : 0);
  }
  int warmup = s.warmup, repeats = s.repeats;
  auto probes_time = [&](int w, int r) { return (w + r) * probe_s; };  // decode per repeat: an upper bound
  if (probes_time(warmup, repeats) > s.budget_s) {
    warmup = 0;
    while (repeats > 1 && probes_time(warmup, repeats) > s.budget_s) --repeats;
  }
  if (probes_time(warmup, repeats) > s.budget_s) {
    out.why_not = "not extrapolated: the probes are predicted to take " + strf("%.0f", probes_time(warmup, repeats)) +
                  " s > --budget-s " + strf("%g", s.budget_s);
    return out;
  }
  const std::string cut = warmup == s.warmup && repeats == s.repeats
                              ? std::string()
                              : "; probes' repeats cut to " + std::to_string(repeats) + ", warm-up " +
                                    std::to_string(warmup) + ", to fit --budget-s " + strf("%g", s.budget_s);
  Summary pre[2], dec[2];
  try {
    for (int k = 0; k < 2; ++k) {
      const std::string tag = "extrapolation: " + std::to_string(k + 1) + " layer unit" + (k ? "s" : "");
      progress.step(tag + ", initialising weights");
      std::unique_ptr<ModelRunner> r = dev.create_runner(probe[k], s.precision, s.seed);
      const TokenBatch prompt = TokenBatch::from_sequences(prompts(s.seed, B, n, cfg.vocab_size));
      std::vector<double> times;
      for (int i = 0; i < warmup + repeats; ++i) {
        progress.step(tag + strf(", prefill %d/%d", i + 1, warmup + repeats));
        const bool last = i + 1 == warmup + repeats;
        const double t = dev.time([&] { r->run_prefill(prompt, last ? room : 0, s.prefill_chunk); });
        if (i >= warmup) times.push_back(t);
      }
      pre[k] = summarize(times);
      if (decode) {
        progress.step(tag + ", decode steps");
        warm_up_decode(dev, *r, B);
        dec[k] = summarize(time_decode_steps(dev, *r, B, s.decode_sample));
      }
    }
  } catch (const std::bad_alloc& e) {
    out.why_not = "not extrapolated: a probe did not fit: " + oom_note(e);
    return out;
  }
  auto finish = [&](const Summary* t, std::optional<Summary>& value, std::string& note, const std::string& what) {
    value = extrapolate_units(t[0], t[1], units);
    note = value ? extrapolation_note(cfg, t[0], t[1], units, what) + cut
                 : "not extrapolated: the probes do not separate beyond their noise (" + what + " " + strf("%.6g", t[0].median) +
                       " s with 1 unit, " + strf("%.6g", t[1].median) + " s with 2): one unit is below the noise";
  };
  if (prefill) finish(pre, out.prefill, out.prefill_note, "prefill");
  if (decode) finish(dec, out.decode, out.decode_note, "decode step");
  return out;
}

// The throughput of a point (DESIGN.md §4): batch × gen / (prefill of the
// batch's prompts of n - gen tokens + gen decode steps). `Bt`: the planned
// batch; under --batch auto (s.batch == 0) it is first allocated, and when it
// does not fit a binary search by allocation finds the largest batch that
// does. `tp_one`: one sequence's prefill is timed and multiplied by the batch
// (sequences prefill one after another: the batch's prefill is that many
// single ones), and the decode runs on caches moved to the prompt's length by
// skipping positions. Throws std::bad_alloc when even the batch found does not fit.
struct NothingFits : std::bad_alloc {
  const char* what() const noexcept override {
    return "not even one sequence's generation fits when allocated (the batch search found none)";
  }
};

void measure_throughput(const SweepSettings& s, DeviceBackend& dev, Progress& progress, ModelRunner& runner,
                        const ModelConfig& cfg, int64_t n, int64_t Bt, const std::string& bt_note, bool tp_one,
                        PointResult& res) {
  const int64_t dec_warm = dev.decode_warmup_steps();
  const int64_t prompt_len = n - s.gen, capacity = n + dec_warm;
  int64_t batch = Bt;
  res.tp_batch_note = bt_note;
  res.throughput_batch = batch;
  if (s.batch == 0) {
    progress.step("throughput: allocating batch " + std::to_string(batch));
    if (!generation_fits(runner, batch, prompt_len, capacity, s.prefill_chunk)) {
      int64_t lo = 0, hi = batch;  // lo fits (0: none known), hi does not
      while (hi - lo > 1) {
        const int64_t mid = lo + (hi - lo) / 2;
        progress.step("throughput: batch search, allocating " + std::to_string(mid));
        (generation_fits(runner, mid, prompt_len, capacity, s.prefill_chunk) ? lo : hi) = mid;
      }
      if (lo == 0) throw NothingFits();  // the caller's out_of_memory row
      res.tp_batch_note = bt_note + "; batch " + std::to_string(batch) +
                          " did not fit when allocated, a binary search by allocation found " + std::to_string(lo);
      batch = lo;
      res.throughput_batch = batch;
    } else {
      res.tp_batch_note = bt_note + ", confirmed by allocating it";
    }
  }
  std::string prefill_how;
  if (s.warmup > 0 && !(s.metrics.count("memory") || s.metrics.count("prefill") || s.metrics.count("decode"))) {
    // No latency prefill ran before on this runner: one untimed prefill of a
    // sequence warms it (the device's kernels loaded, the GEMM plans chosen).
    progress.step("throughput: warm-up prefill 1 x " + length_label(prompt_len));
    runner.run_prefill(TokenBatch::from_sequences(prompts(s.seed + 1, 1, prompt_len, cfg.vocab_size)), 0,
                       s.prefill_chunk);
    prefill_how = "; after an untimed warm-up prefill of one sequence";
  }
  if (tp_one && batch > 1) {
    progress.step("throughput: prefill 1 x " + length_label(prompt_len) + " (x " + std::to_string(batch) + ")");
    const TokenBatch one = TokenBatch::from_sequences(prompts(s.seed + 1, 1, prompt_len, cfg.vocab_size));
    const double t = dev.time([&] { runner.run_prefill(one, 0, s.prefill_chunk); });
    res.tp_prefill_s = t * static_cast<double>(batch);
    // The batch's caches, moved to the prompt's length without computing it.
    start_generation(runner, batch, 1, capacity, s.prefill_chunk);
    runner.skip_positions(prompt_len - 1);
    prefill_how += "; prefill sampled: one sequence of " + std::to_string(prompt_len) + " tokens timed (" +
                  strf("%.4g", t) + " s) x " + std::to_string(batch) +
                  " (the batch's would take over a quarter of --budget-s); decode on the batch's caches moved to "
                  "the prompt's length by skipping positions (a step costs the same whatever the cached values)";
    res.throughput_sampled = true;
  } else {
    progress.step("throughput: prefill " + std::to_string(batch) + " x " + length_label(prompt_len));
    const TokenBatch prompt = TokenBatch::from_sequences(prompts(s.seed + 1, batch, prompt_len, cfg.vocab_size));
    res.tp_prefill_s = dev.time([&] { runner.run_prefill(prompt, s.gen + dec_warm, s.prefill_chunk); });
  }
  progress.step("throughput: decode");
  warm_up_decode(dev, runner, batch);
  std::vector<double> steps;
  bool decode_sampled = false;
  if (s.gen <= s.decode_sample) {
    steps = time_decode_steps(dev, runner, batch, s.gen);
  } else {
    // Sampled: half the sample at the start of the generation, half at its end
    // (the positions between are skipped, not computed); a step's cost is affine
    // in its context, so the mean of the two halves is the mean over all steps.
    const int64_t head = s.decode_sample / 2, tail = s.decode_sample - head;
    steps = time_decode_steps(dev, runner, batch, head);
    runner.skip_positions(s.gen - s.decode_sample);
    const auto t = time_decode_steps(dev, runner, batch, tail);
    steps.insert(steps.end(), t.begin(), t.end());
    decode_sampled = true;
  }
  res.throughput_sampled = res.throughput_sampled || decode_sampled;
  double sum = 0;
  for (double t : steps) sum += t;
  res.tp_decode_s = sum / static_cast<double>(steps.size()) * static_cast<double>(s.gen);
  res.throughput = static_cast<double>(batch * s.gen) / (*res.tp_prefill_s + *res.tp_decode_s);
  res.throughput_note =
      "prompt " + std::to_string(prompt_len) + " + " + std::to_string(s.gen) + " generated, batch " +
      std::to_string(batch) + " (" + res.tp_batch_note + "); prefill " + strf("%.3f", *res.tp_prefill_s) +
      " s, decode " + strf("%.3f", *res.tp_decode_s) + " s" + prefill_how +
      (decode_sampled ? strf("; decode sampled: %lld steps at the start and %lld at the end of %lld, mean step x %lld",
                             static_cast<long long>(s.decode_sample / 2),
                             static_cast<long long>(s.decode_sample - s.decode_sample / 2),
                             static_cast<long long>(s.gen), static_cast<long long>(s.gen))
                      : std::string("; every decode step timed")) +
      (dec_warm > 0 ? "; after " + std::to_string(dec_warm) + " untimed warm-up decode step" +
                          (dec_warm == 1 ? "" : "s") + " (the device's)"
                    : std::string());
}

// What a point will run, decided before any point runs (so that a --resume
// file can be checked against every point at once): the batches and the
// analytic rows.
struct PointPlan {
  std::string model;
  int64_t n = 0, B = 1, Bt = 0;
  bool do_tp = false;
  std::string bt_note;
  AnalyticSettings a;
  AnalyticPoint ap;
  std::vector<ResultRow> analytic;
};

bool deterministic_unit(const std::string& unit) { return unit == "B" || unit == "FLOP" || unit == "count"; }

// --resume: the earlier rows of each point, checked against this run. Returns
// the rows of each point index that is complete (kept as they are); a point
// with no rows, or without a row for each of its phases, runs again.
std::map<size_t, std::vector<ResultRow>> previous_points(const SweepSettings& s, const SweepIo& io,
                                                         const Provenance& here, const std::vector<PointPlan>& plans) {
  std::map<size_t, std::vector<ResultRow>> kept;
  if (!io.previous) return kept;
  const std::string& file = io.previous_file;
  const std::string again = "; --resume continues the same sweep: give the options it was run with, or write to another file (--out, or --results-dir for the default job)";
  std::map<std::pair<std::string, int64_t>, size_t> index;
  for (size_t i = 0; i < plans.size(); ++i) index[{plans[i].model, plans[i].n}] = i;
  std::map<size_t, std::vector<ResultRow>> by_point;
  for (const ResultRow& r : *io.previous) {
    if (r.prov.device != "analytic" && (r.prov.device != here.device || r.prov.device_name != here.device_name))
      throw InputError(file + ": written on device " + r.prov.device + " '" + r.prov.device_name + "', this run is " +
                       here.device + " '" + here.device_name + "' (--device, --device-name)" + again);
    if (r.phase == "ceiling" || r.model.find(" vs ") != std::string::npos) continue;  // measured / computed anew
    auto it = index.find({r.model, r.seq_len});
    if (it == index.end())
      throw InputError(file + ": has rows of " + r.model + " at " + length_label(r.seq_len) +
                       ", not a point of this sweep (--model, --lengths)" + again);
    by_point[it->second].push_back(r);
  }
  for (auto& [i, rows] : by_point) {
    const PointPlan& p = plans[i];
    const std::string where = file + ": the rows of " + p.model + " at " + length_label(p.n);
    // The analytic rows say what the settings were: the same rows, the same counted values.
    std::vector<const ResultRow*> an;
    for (const auto& r : rows)
      if (r.prov.device == "analytic") an.push_back(&r);
    bool same = an.size() == p.analytic.size();
    std::string diff = same ? "" : std::to_string(an.size()) + " analytic rows in the file, " +
                                       std::to_string(p.analytic.size()) + " in this run";
    for (size_t k = 0; same && k < an.size(); ++k) {
      const ResultRow &o = *an[k], &q = p.analytic[k];
      same = o.phase == q.phase && o.metric == q.metric && o.batch == q.batch && o.gen_tokens == q.gen_tokens &&
             o.unit == q.unit && (!deterministic_unit(q.unit) || format_value(o.value) == format_value(q.value));
      if (!same)
        diff = "analytic " + q.phase + " " + q.metric + ": batch " + std::to_string(o.batch) + ", gen " +
               std::to_string(o.gen_tokens) + ", " + format_value(o.value) + " " + o.unit + " in the file; batch " +
               std::to_string(q.batch) + ", gen " + std::to_string(q.gen_tokens) + ", " + format_value(q.value) +
               " " + q.unit + " in this run";
    }
    if (!same)
      throw InputError(where + " come from other settings (" + diff + "; --dtype, --batch, --gen, --metrics, " +
                       "--prefill-chunk, --max-batch)" + again);
    std::set<std::string> phases;
    for (const auto& r : rows) {
      if (r.prov.device == "analytic") continue;
      const bool failed = r.method == "failed";  // a phase that failed runs again
      const bool tp = r.phase == "throughput";
      const int64_t batch = tp ? p.Bt : p.B, gen = tp ? s.gen : 0;
      const bool measured = s.metrics.count(metric_of_phase(r.phase)) > 0;
      // --batch auto: the throughput ran at the batch the allocation search found, at most the planned one.
      const bool batch_ok = r.batch == batch || (tp && s.batch == 0 && r.batch >= 1 && r.batch <= p.Bt);
      if (!measured || (tp && !p.do_tp) || !batch_ok || r.gen_tokens != gen)
        throw InputError(where + " come from other settings (" + r.phase + " " + r.metric + " at batch " +
                         std::to_string(r.batch) + ", gen " + std::to_string(r.gen_tokens) +
                         (measured && (!tp || p.do_tp)
                              ? "; this run: batch " + std::to_string(batch) + ", gen " + std::to_string(gen)
                              : "; this run does not measure " + r.phase) +
                         ")" + again);
      if (!failed) phases.insert(r.phase);
    }
    bool complete = true;
    for (const auto& [phase, metrics] : phase_metrics())
      if (s.metrics.count(phase) && (phase != "throughput" || p.do_tp) && !phases.count(phase)) complete = false;
    if (complete) kept[i] = std::move(rows);
  }
  return kept;
}

}  // namespace

std::vector<ResultRow> run_cpu_sweep(const SweepSettings& s, Progress& progress, const SweepIo& io) {
  CpuBackend cpu(s.device_name);
  return run_sweep(s, cpu, progress, io);
}

std::vector<ResultRow> run_sweep(const SweepSettings& s, DeviceBackend& dev, Progress& progress, const SweepIo& io) {
  std::vector<ResultRow> rows;
  const Provenance here = dev.provenance();
  if (s.cupti && !dev.has_kernel_profiler())
    throw InputError("--cupti: device " + here.device + " has no kernel profiler (it profiles CUDA kernels: --device cuda)");
  RowSink sink(rows, here);

  const Ceilings ceil = dev.measure_ceilings(progress);
  for (const Reading& r : ceil.rows) sink.reading("-", 0, 1, 0, "ceiling", r);
  AnalyticSettings an;
  an.storage = dev.analytic_storage(s.precision);
  an.device = ceil.roofline;
  an.prefill_chunk = s.prefill_chunk;
  an.gen = s.gen;
  const Provenance an_prov = Provenance::here("analytic", an.device.name, "");

  const double usable = dev.usable_memory_bytes();
  std::vector<ModelConfig> configs;
  for (const auto& m : s.models) configs.push_back(resolve_model(m));
  const int total = static_cast<int>(s.models.size() * s.lengths.size());
  Predictor predict;
  double predicted_left = -1;
  int index = 0;
  const bool latency = s.metrics.count("memory") || s.metrics.count("prefill") || s.metrics.count("decode");

  // Every point's batches and analytic rows, before any point runs.
  std::vector<PointPlan> plans;
  for (size_t mi = 0; mi < s.models.size(); ++mi) {
    const ModelConfig& cfg = configs[mi];
    for (int64_t n : s.lengths) {
      PointPlan p;
      p.model = s.models[mi];
      p.n = n;
      p.B = s.batch > 0 ? s.batch : 1;
      p.do_tp = s.metrics.count("throughput") && n > s.gen;
      // The throughput batch: given, or the largest (up to --max-batch) whose caches fit.
      p.Bt = s.batch;
      p.bt_note = "batch given (--batch)";
      if (p.do_tp && p.Bt == 0) {
        p.Bt = 1;
        while (p.Bt < s.max_batch &&
               dev.generation_bytes(cfg, s.precision, p.Bt + 1, n - s.gen, s.gen + dev.decode_warmup_steps(),
                                    s.prefill_chunk) <= usable)
          ++p.Bt;
        p.bt_note = "largest batch <= --max-batch " + std::to_string(s.max_batch) + " that fits in " +
                    dev.usable_memory_name();
      }
      // --resume: the throughput batch the resumed run planned. The free
      // memory it was planned from moves a little from machine to machine; the
      // file's batch keeps the point's rows those of one plan.
      if (p.do_tp && s.batch == 0 && io.previous)
        for (const ResultRow& r : *io.previous)
          if (r.prov.device == "analytic" && r.model == p.model && r.seq_len == n && r.phase == "throughput" &&
              r.batch >= 1 && r.batch != p.Bt) {
            p.bt_note = "batch " + std::to_string(r.batch) + " planned by the run resumed from " + io.previous_file +
                        " (this machine's memory model says " + std::to_string(p.Bt) + ")";
            p.Bt = r.batch;
            break;
          }
      // Analytic rows for this point (batch B; throughput at batch Bt).
      p.a = an;
      p.a.batch = p.B;
      p.a.tp_batch = p.do_tp ? p.Bt : 0;
      p.ap = analytic_point(cfg, n, p.a);
      p.analytic = analytic_rows(p.model, p.ap, p.a, an_prov, s.metrics);
      plans.push_back(std::move(p));
    }
  }
  // What the whole sweep should take: each point's protocol at the roofline of
  // this device's measured ceilings (real kernels are slower: a lower bound),
  // each point capped by the budget (over it, the point is cut or extrapolated).
  if (io.note) {
    double roofline_s = 0;
    for (const PointPlan& p : plans) {
      double t = (s.warmup + s.repeats) * p.ap.prefill_s + s.decode_sample * p.ap.decode_s;
      if (p.do_tp) t += p.ap.prefill_s * static_cast<double>(p.n - s.gen) / p.n + s.decode_sample * p.ap.decode_s;
      roofline_s += std::min(t, s.budget_s);
    }
    io.note(strf("%zu points; their timed runs take about %s at the roofline of the measured ceilings (a lower "
                 "bound) and at most %s by the budget (--budget-s %g per point); weight initialisation, layer probes "
                 "and profiling come on top",
                 plans.size(), clock_string(roofline_s).c_str(),
                 clock_string(static_cast<double>(plans.size()) * s.budget_s).c_str(), s.budget_s));
  }
  // --resume: the points already in the file (checked against this run first).
  const std::map<size_t, std::vector<ResultRow>> kept = previous_points(s, io, here, plans);
  if (io.previous && io.note)
    io.note("resuming: " + std::to_string(kept.size()) + " of " + std::to_string(plans.size()) + " points done in " +
            io.previous_file);
  // After each point: the rows so far, then those of the kept points still ahead
  // (so that the file on disk never loses a point it had).
  auto point_done = [&](size_t i) {
    if (!io.on_point) return;
    std::vector<ResultRow> out = rows;
    for (auto it = kept.upper_bound(i); it != kept.end(); ++it) out.insert(out.end(), it->second.begin(), it->second.end());
    io.on_point(out, static_cast<int>(i + 1));
  };

  for (size_t mi = 0; mi < s.models.size(); ++mi) {
    const std::string& model = s.models[mi];
    const ModelConfig& cfg = configs[mi];
    std::unique_ptr<ModelRunner> runner;
    for (int64_t n : s.lengths) {
      ++index;
      const size_t pi = static_cast<size_t>(index - 1);
      const PointPlan& plan = plans[pi];
      const std::string label = model + " " + length_label(n);
      const int64_t B = plan.B, Bt = plan.Bt;
      const bool do_tp = plan.do_tp;
      const std::string& bt_note = plan.bt_note;
      const AnalyticPoint& ap = plan.ap;
      if (auto k = kept.find(pi); k != kept.end()) {
        // Done in the earlier run: its rows, in place; its timings teach the predictor.
        rows.insert(rows.end(), k->second.begin(), k->second.end());
        for (const ResultRow& r : k->second) {
          if (r.prov.device == "analytic" || (r.method != "measured" && r.method != "extrapolated") || !r.value)
            continue;
          if (r.phase == "prefill" && r.metric == "prefill_latency_s") predict.learn(model, r.value, std::nullopt, ap, B);
          if (r.phase == "decode" && r.metric == "decode_step_latency_s") predict.learn(model, std::nullopt, r.value, ap, B);
        }
        point_done(pi);
        continue;
      }
      progress.point(index, label, predicted_left);
      rows.insert(rows.end(), plan.analytic.begin(), plan.analytic.end());

      // Will it fit, and how long will it take?
      // Steps beyond the timed sample that the device adds (none on the CPU).
      const int64_t dec_warm = dev.decode_warmup_steps(), dec_extra = dev.decode_extra_steps();
      // --cupti: the profiled decode steps continue the timed ones' cache.
      const int64_t cupti_room = s.cupti ? std::min(s.cupti_decode_steps, s.decode_sample) + dec_warm : 0;
      // The latency batch's generation; the throughput's batch was planned to
      // fit and is confirmed by allocation (it failing costs its rows only).
      const double need =
          dev.generation_bytes(cfg, s.precision, B, n, s.decode_sample + dec_warm + dec_extra + cupti_room,
                               s.prefill_chunk);
      const double pre1 = predict.prefill(model, ap.prefill.total().flops / B, ap.prefill_s / B);
      const double step1 = predict.decode(model, ap.decode.total().bytes, ap.decode_s);
      int warmup = s.warmup, repeats = s.repeats;
      // The throughput's prefill: the whole batch, or one sequence timed and
      // multiplied when the batch's would take over a quarter of the budget.
      const double tp_prefill_full = Bt * pre1 * static_cast<double>(n - s.gen) / n;
      const bool tp_one = Bt > 1 && tp_prefill_full > s.budget_s / 4;
      auto point_time = [&](int w, int r, bool tp) {
        double t = latency ? (w + r) * pre1 * B + (s.metrics.count("decode") ? s.decode_sample * step1 : 0) : 0;
        if (tp) t += (tp_one ? tp_prefill_full / Bt : tp_prefill_full) + std::min(s.gen, s.decode_sample) * step1 * Bt;
        return t;
      };
      bool tp = do_tp;
      std::string budget_note;
      if (point_time(warmup, repeats, tp) > s.budget_s) {
        warmup = 0;
        while (repeats > 1 && point_time(warmup, repeats, tp) > s.budget_s) --repeats;
        budget_note = "repeats cut to " + std::to_string(repeats) + ", no warm-up, to fit --budget-s " +
                      strf("%g", s.budget_s) + " (predicted " + strf("%.0f", point_time(s.warmup, s.repeats, tp)) +
                      " s with all)";
        if (tp && point_time(warmup, repeats, tp) > s.budget_s) tp = false;
      }
      const double predicted = point_time(warmup, repeats, tp);
      std::string skip_method, skip_note;
      if (need > usable) {
        skip_method = "out_of_memory";
        skip_note = "needs about " + human_bytes(need) + ", " + dev.usable_memory_name() + " is " + human_bytes(usable);
      } else if (predicted > s.budget_s) {
        skip_method = "over_budget";
        skip_note = "predicted " + strf("%.0f", predicted) + " s > --budget-s " + strf("%g", s.budget_s);
      }
      PointResult res;
      std::string lost;  // set when the device cannot run anything more
      if (skip_method.empty()) {
        try {
          if (!runner) {
            progress.step("initialising weights");
            runner = dev.create_runner(cfg, s.precision, s.seed);
          }
          if (latency) {
            const TokenBatch prompt = TokenBatch::from_sequences(prompts(s.seed, B, n, cfg.vocab_size));
            std::vector<double> times;
            dev.reset_peak_memory();
            const bool decode = s.metrics.count("decode") > 0;
            for (int i = 0; i < warmup + repeats; ++i) {
              progress.step(strf("prefill %d/%d", i + 1, warmup + repeats));
              const bool last = i + 1 == warmup + repeats;
              const int64_t room = last && decode ? s.decode_sample + dec_warm + dec_extra + cupti_room : 0;
              const double t = dev.time([&] { runner->run_prefill(prompt, room, s.prefill_chunk); });
              if (i >= warmup) times.push_back(t);
              if (i == warmup) {
                res.memory = dev.memory_breakdown(*runner, n, s.precision);  // cache of n tokens (+ room if last)
                res.kv_per_token = kv_per_token_reading(*res.memory, B, runner->capacity());
              }
            }
            res.prefill = summarize(times);
            if (decode) {
              progress.step("decode steps");
              warm_up_decode(dev, *runner, B);
              res.decode = summarize(time_decode_steps(dev, *runner, B, s.decode_sample));
              res.decode_extras = dev.decode_extras(*runner, B);
            }
            auto peaks = dev.memory_peaks();
            if (res.memory) res.memory->insert(res.memory->end(), peaks.begin(), peaks.end());
            if (s.cupti) {
              // After the latency point's timed runs (the profiler detaches after each
              // region, so the throughput's runs after it carry nothing of it).
              // A phase whose profile fails (no memory, the profiler refusing)
              // gets one failed row; nothing else of the point is lost.
              const int64_t steps = std::min(s.cupti_decode_steps, s.decode_sample);
              const bool profile_decode = res.decode.has_value() && s.metrics.count("decode") > 0;
              // `setup` runs untimed and unprofiled before the region.
              auto profile = [&](const std::string& phase, const std::function<void()>& setup,
                                 const std::function<void()>& region, int64_t units, double timed_s) {
                try {
                  setup();
                  auto k = dev.kernel_breakdown(phase, region, units, timed_s);
                  res.kernels.insert(res.kernels.end(), k.begin(), k.end());
                } catch (const std::exception& e) {
                  const auto* oom = dynamic_cast<const std::bad_alloc*>(&e);
                  res.kernel_errors.emplace_back(phase + ".kernels", std::string("the kernel profiler's ") + phase +
                                                                         " failed: " + (oom ? oom_note(*oom) : e.what()));
                  if (!dev.device_lost().empty()) throw;
                }
              };
              // One more prefill is affordable up to a quarter of the budget; a
              // longer one (the Transformer's longest points) is not profiled,
              // and its row says so: the shorter points show where its time goes.
              const bool prefill_affordable = res.prefill && res.prefill->median <= s.budget_s / 4;
              if (res.prefill && s.metrics.count("prefill") && !prefill_affordable)
                res.kernel_errors.emplace_back(
                    "prefill.kernels", strf("not profiled: one more prefill takes %.0f s, over a quarter of --budget-s %g",
                                            res.prefill->median, s.budget_s));
              if (prefill_affordable && s.metrics.count("prefill")) {
                progress.step("CUPTI: prefill");
                const TokenBatch prompt = TokenBatch::from_sequences(prompts(s.seed, B, n, cfg.vocab_size));
                profile(
                    "prefill", [] {},
                    [&] { runner->run_prefill(prompt, profile_decode ? steps + dec_warm : 0, s.prefill_chunk); }, 1,
                    res.prefill->median);
              }
              if (profile_decode) {
                progress.step("CUPTI: decode steps");
                const std::vector<int64_t> tokens(static_cast<size_t>(B), 1);
                profile(
                    "decode",
                    [&] {
                      // A prefill of its own when the prefill's profile did not leave one with room.
                      if (runner->position() == 0 || runner->capacity() - runner->position() < steps + dec_warm)
                        runner->run_prefill(TokenBatch::from_sequences(prompts(s.seed, B, n, cfg.vocab_size)),
                                            steps + dec_warm, s.prefill_chunk);
                      warm_up_decode(dev, *runner, B);
                    },
                    [&] { for (int64_t i = 0; i < steps; ++i) runner->run_decode_step(tokens); }, steps,
                    res.decode->median);
              }
            }
          }
          if (tp) {
            try {
              measure_throughput(s, dev, progress, *runner, cfg, n, Bt, bt_note, tp_one, res);
            } catch (const std::bad_alloc& e) {
              res.tp_skip_method = "out_of_memory";
              res.tp_skip_note = oom_note(e) + " (throughput at batch " + std::to_string(res.throughput_batch) + ")";
              res.throughput.reset();
              res.throughput_batch = 0;
            }
          }
        } catch (const std::bad_alloc& e) {
          // A device's allocation failure says what did not fit (cuda::DeviceOutOfMemory).
          skip_method = "out_of_memory";
          skip_note = oom_note(e);
          res = PointResult{};
        } catch (const std::exception& e) {
          skip_method = "failed";
          skip_note = e.what();
          res = PointResult{};
          lost = dev.device_lost();
        }
      }
      // A full run that did not happen: prefill and decode from the layer probes.
      ProbeResult probes;
      const bool probe = s.extrapolate && lost.empty() && (skip_method == "over_budget" || skip_method == "out_of_memory") &&
                         (s.metrics.count("prefill") || s.metrics.count("decode"));
      if (probe) {
        runner.reset();  // the full model's weights leave room for the probes'
        try {
          probes = run_layer_probes(s, dev, progress, cfg, model, n, B, an, predict);
        } catch (const std::exception& e) {
          probes = ProbeResult{};
          probes.why_not = std::string("not extrapolated: a probe failed: ") + e.what();
          lost = dev.device_lost();
        }
      }
      // Rows of the point.
      if (!skip_method.empty()) {
        const std::string full = "the full model: " + skip_method + ", " + skip_note;
        for (const auto& [phase, metrics] : phase_metrics()) {
          if (!s.metrics.count(phase) || (phase == "throughput" && !do_tp)) continue;
          const std::optional<Summary>& ex = phase == "prefill" ? probes.prefill : probes.decode;
          const std::string& ex_note = phase == "prefill" ? probes.prefill_note : probes.decode_note;
          const bool latency_phase = phase == "prefill" || phase == "decode";
          if (latency_phase && ex) {
            sink.timing(model, n, B, 0, phase, metrics.front().first, *ex, "extrapolated", ex_note + "; " + full);
            continue;
          }
          std::string why = skip_note;
          if (probe && latency_phase) why += "; " + (probes.why_not.empty() ? ex_note : probes.why_not);
          for (const auto& [metric, unit] : metrics)
            sink.add(model, n, phase == "throughput" ? Bt : B, phase == "throughput" ? s.gen : 0, phase, metric,
                     std::nullopt, unit, skip_method, 0, why + "; the analytic row beside is the projection");
        }
        // Extrapolated times teach the predictor as measured ones do.
        predict.learn(model, median_of(probes.prefill), median_of(probes.decode), ap, B);
      } else {
        const std::string common = budget_note.empty() ? "" : "; " + budget_note;
        if (res.memory && s.metrics.count("memory")) {
          for (const Reading& r : *res.memory) sink.reading(model, n, B, 0, "memory", r);
          if (res.kv_per_token) sink.reading(model, n, B, 0, "kv_cache", *res.kv_per_token);
        }
        if (res.prefill && s.metrics.count("prefill"))
          sink.timing(model, n, B, 0, "prefill", "prefill_latency_s", *res.prefill, "measured",
                      "median of " + std::to_string(res.prefill->count) + " after " + std::to_string(warmup) +
                          " warm-up; prefill chunk " + std::to_string(s.prefill_chunk) + common);
        // The device's extra decode rows (CUDA: eager steps, enqueue times) go before
        // the decode row, so that a reader taking the last decode_step_latency_s of
        // a point (the sweep table) takes the decode phase's.
        for (const PhaseReading& x : res.decode_extras) sink.reading(model, n, B, 0, x.phase, x.reading);
        if (res.decode)
          sink.timing(model, n, B, 0, "decode", "decode_step_latency_s", *res.decode, "measured",
                      "median of " + std::to_string(res.decode->count) + " steps at context " +
                          std::to_string(n + dec_warm) + ".." + std::to_string(n + dec_warm + s.decode_sample - 1) +
                          (dec_warm > 0 ? " after " + std::to_string(dec_warm) + " untimed warm-up step" +
                                              (dec_warm == 1 ? "" : "s") + " (the device's)"
                                        : std::string()));
        if (do_tp && !res.throughput && !res.tp_skip_method.empty())
          sink.add(model, n, Bt, s.gen, "throughput", "throughput_tokens_per_s", std::nullopt, "tokens/s",
                   res.tp_skip_method, 0, res.tp_skip_note + "; the analytic row beside is the projection");
        else if (do_tp && !res.throughput)
          sink.add(model, n, Bt, s.gen, "throughput", "throughput_tokens_per_s", std::nullopt, "tokens/s",
                   "over_budget", 0, budget_note + "; throughput dropped to keep the point within budget");
        if (res.throughput) {
          const int64_t bt = res.throughput_batch;
          sink.add(model, n, bt, s.gen, "throughput", "throughput_tokens_per_s", *res.throughput, "tokens/s",
                   res.throughput_sampled ? "sampled" : "measured", 1, res.throughput_note);
          sink.add(model, n, bt, s.gen, "throughput", "max_batch", static_cast<double>(bt), "count", "exact", 1,
                   res.tp_batch_note);
        }
        for (const PhaseReading& k : res.kernels) sink.reading(model, n, B, 0, k.phase, k.reading);
        for (const auto& [phase, why] : res.kernel_errors)
          sink.add(model, n, B, 0, phase, "gpu_time_s", std::nullopt, "s",
                   why.rfind("not profiled", 0) == 0 ? "over_budget" : "failed", 0, why);
        // Learn for the next point's prediction.
        predict.learn(model, median_of(res.prefill), median_of(res.decode), ap, B);
      }
      // A rough estimate of what is left: this point's prediction for each remaining point.
      predicted_left = predicted * (total - index);
      point_done(pi);
      if (!lost.empty())
        throw DeviceError("the sweep stopped after " + label + " failed: " + lost +
                                 " (every point so far is kept in --out)");
    }
  }
  progress.done();
  const auto pairs = pair_models(s.models, configs);
  const auto ratios = ratio_rows(rows, pairs);
  rows.insert(rows.end(), ratios.begin(), ratios.end());
  return rows;
}

}  // namespace yoco::cli
