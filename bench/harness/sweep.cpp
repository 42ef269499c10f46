// The measured protocol (DESIGN.md §4-5), written once for every device: the
// device backend (device_backend.hpp) creates the runners, times, reads memory
// and measures the ceilings; nothing here knows which device it drives.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <new>
#include <set>

#include "analytic_rows.hpp"
#include "attention/cache_plan.hpp"
#include "cpu_backend.hpp"
#include "errors.hpp"
#include "format.hpp"
#include "lists.hpp"
#include "stats.hpp"
#include "sweep.hpp"
#include "sweep_steps.hpp"

namespace yoco::cli {

namespace {

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

// The metric (--metrics) a measured row's phase belongs to: decode_eager rows
// (the CUDA backend's eager steps) come with decode.
// The --cupti rows (prefill.gemm, decode:<kernel>, ...) come with their phase's metric.
std::string metric_of_phase(const std::string& phase) {
  // comm_decode rows (R MPI ranks) come from decode_extras, as decode_eager's do; comm rows (the
  // prefill's) too when decode runs, else from prefill_extras: check_resumed_point takes them with either.
  if (phase == "decode_eager" || phase.rfind("comm", 0) == 0) return "decode";
  if (phase == "kv_cache") return "memory";  // read off the memory breakdown
  const size_t cut = phase.find_first_of(".:");
  return cut == std::string::npos ? phase : phase.substr(0, cut);
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
constexpr const char* kResumeAgain =
    "; --resume continues the same sweep: give the options it was run with, or write to another file (--out, or "
    "--results-dir for the default job)";

std::map<size_t, std::vector<ResultRow>> previous_points(const SweepSettings& s, const SweepIo& io,
                                                         const Provenance& here, const std::vector<PointPlan>& plans) {
  std::map<size_t, std::vector<ResultRow>> kept;
  if (!io.previous) return kept;
  const std::string& file = io.previous_file;
  std::map<std::pair<std::string, int64_t>, size_t> index;
  for (size_t i = 0; i < plans.size(); ++i) index[{plans[i].model, plans[i].n}] = i;
  std::map<size_t, std::vector<ResultRow>> by_point;
  for (const ResultRow& r : *io.previous) {
    check_resumed_device(file, r, here.device, here.device_name);
    if (r.phase == "ceiling" || r.model.find(" vs ") != std::string::npos) continue;  // measured / computed anew
    auto it = index.find({r.model, r.seq_len});
    if (it == index.end()) throw InputError(resume_outside_the_sweep(file, r.model, r.seq_len));
    by_point[it->second].push_back(r);
  }
  for (auto& [i, rows] : by_point) {
    const PointPlan& p = plans[i];
    std::vector<const ResultRow*> in_file;
    for (const auto& r : rows) in_file.push_back(&r);
    const std::set<std::string> phases = check_resumed_point(resumed_point_words(file, p.model, p.n), s, p.B, p.Bt,
                                                             p.do_tp, in_file, p.analytic);
    bool complete = true;
    for (const auto& [phase, metrics] : phase_metrics())
      if (s.metrics.count(phase) && (phase != "throughput" || p.do_tp) && !phases.count(phase)) complete = false;
    if (!complete) continue;
    // The roofline times of the analytic rows follow from the ceilings, which
    // this run measured anew: the earlier run's would disagree with the file's
    // ceiling rows, and a ratio would divide times of two rooflines.
    std::vector<ResultRow> point = p.analytic;
    for (auto& r : rows)
      if (r.prov.device != "analytic") point.push_back(std::move(r));
    kept[i] = std::move(point);
  }
  return kept;
}

}  // namespace

std::string prefill_note(int64_t chunk, int sharded_ranks) {
  return sharded_ranks > 0 ? "each rank's shard prefilled in one step (" + std::to_string(sharded_ranks) + " ranks)"
                           : "prefill chunk " + std::to_string(chunk);
}

AnalyticSettings sweep_analytic_settings(const SweepSettings& s, const cost::Storage& storage,
                                         const cost::DeviceSpec& device) {
  AnalyticSettings an;
  an.storage = storage;
  an.device = device;
  an.prefill_chunk = s.prefill_chunk;
  an.gen = s.gen;
  an.sharded_ranks = s.sharded_ranks;
  return an;
}

AnalyticSettings point_analytic_settings(const AnalyticSettings& an, int64_t batch, int64_t tp_batch) {
  AnalyticSettings a = an;
  a.batch = batch;
  a.tp_batch = tp_batch;
  return a;
}

void check_resumed_device(const std::string& file, const ResultRow& r, const std::string& device,
                          const std::optional<std::string>& device_name) {
  if (r.prov.device == "analytic") return;
  if (r.prov.device != device || (device_name && r.prov.device_name != *device_name))
    throw InputError(file + ": written on device " + r.prov.device + " '" + r.prov.device_name + "', this run is " +
                     device + (device_name ? " '" + *device_name + "'" : std::string()) +
                     // cpu-x2 against cpu-x3: the number of mpirun's ranks, not an option, differs.
                     (device.find("-x") != std::string::npos || r.prov.device.find("-x") != std::string::npos
                          ? " (the number of mpirun ranks, --device, --device-name)"
                          : " (--device, --device-name)") +
                     kResumeAgain);
}

std::string resumed_point_words(const std::string& file, const std::string& model, int64_t seq_len) {
  return file + ": the rows of " + model + " at " + length_label(seq_len);
}

void check_resumed_analytic(const std::string& where, const std::vector<const ResultRow*>& in_file,
                            const std::vector<ResultRow>& in_run) {
  // The analytic rows say what the settings were: the same rows, the same counted values.
  bool same = in_file.size() == in_run.size();
  std::string diff = same ? "" : std::to_string(in_file.size()) + " analytic rows in the file, " +
                                     std::to_string(in_run.size()) + " in this run";
  for (size_t k = 0; same && k < in_file.size(); ++k) {
    const ResultRow &o = *in_file[k], &q = in_run[k];
    same = o.phase == q.phase && o.metric == q.metric && o.batch == q.batch && o.gen_tokens == q.gen_tokens &&
           o.unit == q.unit && (!deterministic_unit(q.unit) || format_value(o.value) == format_value(q.value));
    // A value is shown where it is compared (bytes, FLOPs, counts): a time follows the ceilings.
    const auto value = [](const ResultRow& r) {
      return deterministic_unit(r.unit) ? ", " + format_value(r.value) + " " + r.unit : ", in " + r.unit;
    };
    if (!same)
      diff = "analytic " + q.phase + " " + q.metric + ": batch " + std::to_string(o.batch) + ", gen " +
             std::to_string(o.gen_tokens) + value(o) + " in the file; batch " + std::to_string(q.batch) + ", gen " +
             std::to_string(q.gen_tokens) + value(q) + " in this run";
  }
  if (!same)
    throw InputError(where + " come from other settings (" + diff + "; --dtype, --batch, --gen, --metrics, " +
                     "--prefill-chunk, --max-batch, or a cost model changed since the file was written)" +
                     kResumeAgain);
}

std::set<std::string> check_resumed_point(const std::string& where, const SweepSettings& s, int64_t B, int64_t Bt,
                                          bool do_tp, const std::vector<const ResultRow*>& in_file,
                                          const std::vector<ResultRow>& analytic_in_run) {
  std::vector<const ResultRow*> an;
  for (const ResultRow* r : in_file)
    if (r->prov.device == "analytic") an.push_back(r);
  check_resumed_analytic(where, an, analytic_in_run);
  std::set<std::string> phases;
  for (const ResultRow* rp : in_file) {
    const ResultRow& r = *rp;
    if (r.prov.device == "analytic") continue;
    const bool failed = r.method == "failed";  // a phase that failed runs again
    const bool tp = r.phase == "throughput";
    const int64_t batch = tp ? Bt : B, gen = tp ? s.gen : 0;
    const bool prefill_comm = r.phase.rfind("comm", 0) == 0 && r.phase.rfind("comm_decode", 0) != 0;
    const bool measured = s.metrics.count(metric_of_phase(r.phase)) > 0 || (prefill_comm && s.metrics.count("prefill"));
    // --batch auto: the throughput ran at the batch the allocation search found, at most the planned one.
    const bool batch_ok = r.batch == batch || (tp && s.batch == 0 && r.batch >= 1 && r.batch <= Bt);
    if (!measured || (tp && !do_tp) || !batch_ok || r.gen_tokens != gen)
      throw InputError(where + " come from other settings (" + r.phase + " " + r.metric + " at batch " +
                       std::to_string(r.batch) + ", gen " + std::to_string(r.gen_tokens) +
                       (measured && (!tp || do_tp)
                            ? "; this run: batch " + std::to_string(batch) + ", gen " + std::to_string(gen)
                            : "; this run does not measure " + r.phase) +
                       ")" + kResumeAgain);
    // --batch auto: the file's batch is kept over this machine's plan (batch_ok), so another --max-batch
    // would go unseen and the file would mix the throughput batches of two caps, as no full run does.
    if (tp && s.batch == 0) {
      const size_t at = r.notes.find("--max-batch ");
      const int64_t cap = at == std::string::npos ? 0 : std::atoll(r.notes.c_str() + at + 12);
      if (r.batch > s.max_batch || (cap > 0 && cap != s.max_batch))
        throw InputError(where + " come from other settings (throughput at batch " + std::to_string(r.batch) +
                         (cap > 0 ? " under --max-batch " + std::to_string(cap) : std::string()) +
                         "; this run: --max-batch " + std::to_string(s.max_batch) + ")" + kResumeAgain);
    }
    if (!failed) phases.insert(r.phase);
  }
  return phases;
}

std::string resume_outside_the_sweep(const std::string& file, const std::string& model, int64_t seq_len) {
  return file + ": has rows of " + model + " at " + length_label(seq_len) +
         ", not a point of this sweep (--model, --lengths)" + kResumeAgain;
}

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
  const AnalyticSettings an = sweep_analytic_settings(s, dev.analytic_storage(s.precision), ceil.roofline);
  // The run's own start time, not the time the ceilings were done: every row of a run carries one
  // timestamp (reports/SCHEMA.md).
  Provenance an_prov = Provenance::here("analytic", an.device.name, "");
  an_prov.timestamp = here.timestamp;

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
      p.a = point_analytic_settings(an, p.B, p.do_tp ? p.Bt : 0);
      p.ap = analytic_point(cfg, n, p.a);
      p.analytic = analytic_rows(p.model, p.ap, p.a, an_prov, s.metrics);
      plans.push_back(std::move(p));
    }
  }
  // --resume: the points already in the file, checked against this run before
  // anything is said about it (a file of another sweep is one line: the error).
  const std::map<size_t, std::vector<ResultRow>> kept = previous_points(s, io, here, plans);
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
      const int64_t dec_warm = dev.decode_warmup_steps(), dec_room = decode_room(s, dev);
      // The latency batch's generation; the throughput's batch was planned to
      // fit and is confirmed by allocation (it failing costs its rows only).
      const double need = dev.generation_bytes(cfg, s.precision, B, n, dec_room, s.prefill_chunk);
      const double pre1 = predict.prefill(model, ap.prefill.total().flops / B, ap.prefill_s / B);
      const double step1 = predict.decode(model, ap.decode.total().bytes, ap.decode_s);
      int warmup = s.warmup, repeats = s.repeats;
      // The throughput's prefill: the whole batch, or one sequence timed and
      // multiplied when the batch's would take over a quarter of the budget.
      const double tp_prefill_full = Bt * pre1 * static_cast<double>(n - s.gen) / n;
      const bool tp_one = Bt > 1 && tp_prefill_full > s.budget_s / 4;
      // step1 is a step of the latency batch B: Bt's is taken as B's per sequence, times Bt (a step's
      // weights are read once for the batch, so this is an upper bound); step1 * Bt counted a fixed
      // --batch N's batch twice (N^2 sequences' steps).
      const double tp_time = (tp_one ? tp_prefill_full / Bt : tp_prefill_full) +
                             std::min(s.gen, s.decode_sample) * step1 / static_cast<double>(B) * Bt;
      auto point_time = [&](int w, int r, bool tp) {
        double t = latency ? (w + r) * pre1 * B + (s.metrics.count("decode") ? s.decode_sample * step1 : 0) : 0;
        return tp ? t + tp_time : t;
      };
      bool tp = do_tp;
      // The latency runs and the throughput together over the budget, the
      // throughput alone within it: the throughput gets a budget of its own
      // (a long Transformer point's throughput is otherwise never measured).
      const bool tp_apart = tp && latency && point_time(warmup, repeats, true) > s.budget_s && tp_time <= s.budget_s;
      const bool tp_in_sum = tp && !tp_apart;
      std::string budget_note;
      if (point_time(warmup, repeats, tp_in_sum) > s.budget_s) {
        warmup = 0;
        while (repeats > 1 && point_time(warmup, repeats, tp_in_sum) > s.budget_s) --repeats;
        budget_note = "repeats cut to " + std::to_string(repeats) + ", no warm-up, to fit --budget-s " +
                      strf("%g", s.budget_s) + " (predicted " +
                      predicted_seconds(point_time(s.warmup, s.repeats, tp_in_sum), s.budget_s) + " s with all)";
        if (tp_in_sum && point_time(warmup, repeats, true) > s.budget_s) tp = false;
      }
      std::string tp_apart_note;
      if (tp_apart)
        tp_apart_note = "timed under a --budget-s of its own: predicted " + predicted_seconds(tp_time, s.budget_s) +
                        " s, with the point's latency runs " + predicted_seconds(point_time(warmup, repeats, true), s.budget_s) +
                        " s";
      const double predicted = point_time(warmup, repeats, tp_in_sum);
      std::string skip_method, skip_note;
      if (need > usable) {
        skip_method = "out_of_memory";
        skip_note = "needs about " + human_bytes(need) + ", " + dev.usable_memory_name() + " is " + human_bytes(usable);
      } else if (predicted > s.budget_s) {
        skip_method = "over_budget";
        skip_note = "predicted " + predicted_seconds(predicted, s.budget_s) + " s > --budget-s " + strf("%g", s.budget_s);
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
            std::vector<double> times, host_times;
            dev.reset_peak_memory();
            const bool decode = s.metrics.count("decode") > 0;
            for (int i = 0; i < warmup + repeats; ++i) {
              progress.step(strf("prefill %d/%d", i + 1, warmup + repeats));
              const bool last = i + 1 == warmup + repeats;
              const int64_t room = last && decode ? dec_room : 0;
              const double t = time_prefill(dev, *runner, prompt, room, s.prefill_chunk);
              if (i >= warmup) {
                times.push_back(t);
                if (const auto h = dev.last_region_host_s()) host_times.push_back(*h);
              }
              if (i == warmup) {
                res.memory = dev.memory_breakdown(*runner, n, s.precision);  // cache of n tokens (+ room if last)
                res.kv_per_token = kv_per_token_reading(*res.memory, B, runner->capacity());
              }
            }
            res.prefill = summarize(times);
            if (host_times.size() == times.size()) res.prefill_host = summarize(host_times);
            if (decode) {
              progress.step("decode steps");
              warm_up_decode(dev, *runner, B);
              res.decode = summarize(time_decode_steps(dev, *runner, B, s.decode_sample));
              res.decode_extras = dev.decode_extras(*runner, B);
            } else {
              res.prefill_extras = dev.prefill_extras(*runner);
            }
            auto peaks = dev.memory_peaks();
            if (res.memory) res.memory->insert(res.memory->end(), peaks.begin(), peaks.end());
            // What the runner chose as it ran (the tuned GEMMs' record), for the log: always printed,
            // a run's choices are part of what it measured.
            if (const auto log = dev.runner_log(*runner); !log.empty()) {
              progress.done();
              for (const std::string& line : log)
                std::fprintf(stderr, "yoco bench: %s %s: %s\n", model.c_str(), length_label(n).c_str(), line.c_str());
            }
            if (s.cupti) profile_kernels(s, dev, progress, *runner, cfg, n, B, res);
          }
          if (tp) {
            try {
              measure_throughput(s, dev, progress, *runner, cfg, n, Bt, bt_note, tp_one, res);
              if (!tp_apart_note.empty()) res.throughput_note += "; " + tp_apart_note;
            } catch (const std::bad_alloc& e) {
              res.tp_skip_method = "out_of_memory";
              res.tp_skip_note = oom_note(e) + " (throughput at batch " + std::to_string(res.throughput_batch) + ")";
              res.throughput.reset();
              res.throughput_batch = 0;
            } catch (const InputError& e) {
              // A run the runner refuses (a sharded model cannot take the one-token
              // prompt of a sampled throughput): the throughput alone is lost.
              res.tp_skip_method = "failed";
              res.tp_skip_note = std::string(e.what()) + " (throughput at batch " +
                                 std::to_string(res.throughput_batch) + ")";
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
          // The working set is a prefill step's: the rows say whose (the calibrated check reads it).
          for (Reading r : *res.memory) {
            r.notes += (r.notes.empty() ? "" : "; ") + prefill_note(s.prefill_chunk, s.sharded_ranks);
            sink.reading(model, n, B, 0, "memory", r);
          }
          if (res.kv_per_token) sink.reading(model, n, B, 0, "kv_cache", *res.kv_per_token);
        }
        const std::string runner_note = dev.runner_note(cfg, B);
        if (res.prefill && s.metrics.count("prefill"))
          sink.timing(model, n, B, 0, "prefill", "prefill_latency_s", *res.prefill, "measured",
                      "median of " + std::to_string(res.prefill->count) + " after " + std::to_string(warmup) +
                          " warm-up; " + prefill_note(s.prefill_chunk, s.sharded_ranks) +
                          (runner_note.empty() ? "" : "; " + runner_note) + common);
        if (res.prefill && res.prefill_host && s.metrics.count("prefill")) {
          // The runners upload each step's tokens through one pinned buffer, and the upload waits for the
          // one before it, which the stream orders behind that step's kernels: a prefill of several steps
          // returns about one step before the device is done, whoever sets the pace.
          const int64_t per_step = cuda::cache_plan::prefill_tokens_per_sequence(s.prefill_chunk, B, n);
          const int64_t steps = (n + per_step - 1) / per_step;
          sink.timing(model, n, B, 0, "prefill", "prefill_host_enqueue_s", *res.prefill_host, "measured",
                      "host seconds until the prefill call returned (steady_clock), the same " +
                          std::to_string(res.prefill_host->count) + " runs: " +
                          (steps == 1 ? std::string("one step, whose call only enqueues, so where this is close to "
                                                    "prefill_latency_s the host, not the device, set the pace")
                                      : std::to_string(steps) +
                                            " steps, and each step's token upload waits for the step before it, so "
                                            "the call returns about one step before the device is done: this bounds "
                                            "the host's pace from above only"));
        }
        // The device's extra decode rows (CUDA: eager steps, enqueue times) go before
        // the decode row, so that a reader taking the last decode_step_latency_s of
        // a point (the sweep table) takes the decode phase's.
        for (const PhaseReading& x : res.prefill_extras) sink.reading(model, n, B, 0, x.phase, x.reading);
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
