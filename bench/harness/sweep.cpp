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
};

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
std::string metric_of_phase(const std::string& phase) { return phase == "decode_eager" ? "decode" : phase; }

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
      const bool tp = r.phase == "throughput";
      const int64_t batch = tp ? p.Bt : p.B, gen = tp ? s.gen : 0;
      const bool measured = s.metrics.count(metric_of_phase(r.phase)) > 0;
      if (!measured || (tp && !p.do_tp) || r.batch != batch || r.gen_tokens != gen)
        throw InputError(where + " come from other settings (" + r.phase + " " + r.metric + " at batch " +
                         std::to_string(r.batch) + ", gen " + std::to_string(r.gen_tokens) +
                         (measured && (!tp || p.do_tp)
                              ? "; this run: batch " + std::to_string(batch) + ", gen " + std::to_string(gen)
                              : "; this run does not measure " + r.phase) +
                         ")" + again);
      phases.insert(r.phase);
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
               dev.generation_bytes(cfg, s.precision, p.Bt + 1, n - s.gen, s.gen, s.prefill_chunk) <= usable)
          ++p.Bt;
        p.bt_note = "largest batch <= --max-batch " + std::to_string(s.max_batch) + " that fits in " +
                    dev.usable_memory_name();
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
        auto& l = predict.last[model];
        for (const ResultRow& r : k->second) {
          if (r.prov.device == "analytic" || r.method != "measured" || !r.value) continue;
          if (r.phase == "prefill" && r.metric == "prefill_latency_s") {
            l.prefill_s = *r.value / B;
            l.prefill_flops = ap.prefill.total().flops / B;
          } else if (r.phase == "decode" && r.metric == "decode_step_latency_s") {
            l.decode_s = *r.value;
            l.decode_work = ap.decode.total().bytes;
          }
        }
        point_done(pi);
        continue;
      }
      progress.point(index, label, predicted_left);
      rows.insert(rows.end(), plan.analytic.begin(), plan.analytic.end());

      // Will it fit, and how long will it take?
      // Steps beyond the timed sample that the device adds (none on the CPU).
      const int64_t dec_warm = dev.decode_warmup_steps(), dec_extra = dev.decode_extra_steps();
      const double need = dev.generation_bytes(cfg, s.precision, std::max(B, do_tp ? Bt : 0), n,
                                               s.decode_sample + dec_warm + dec_extra, s.prefill_chunk);
      const double pre1 = predict.prefill(model, ap.prefill.total().flops / B, ap.prefill_s / B);
      const double step1 = predict.decode(model, ap.decode.total().bytes, ap.decode_s);
      int warmup = s.warmup, repeats = s.repeats;
      auto point_time = [&](int w, int r, bool tp) {
        double t = latency ? (w + r) * pre1 * B + (s.metrics.count("decode") ? s.decode_sample * step1 : 0) : 0;
        if (tp) t += Bt * pre1 * static_cast<double>(n - s.gen) / n + std::min(s.gen, s.decode_sample) * step1 * Bt;
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
              const int64_t room = last && decode ? s.decode_sample + dec_warm + dec_extra : 0;
              const double t = dev.time([&] { runner->run_prefill(prompt, room, s.prefill_chunk); });
              if (i >= warmup) times.push_back(t);
              if (i == warmup) res.memory = dev.memory_breakdown(*runner, n, s.precision);  // cache of exactly n tokens
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
          }
          if (tp) {
            try {
              progress.step("throughput: prefill " + std::to_string(Bt) + " x " + length_label(n - s.gen));
              res.throughput_batch = Bt;
              const TokenBatch prompt = TokenBatch::from_sequences(prompts(s.seed + 1, Bt, n - s.gen, cfg.vocab_size));
              res.tp_prefill_s = dev.time([&] { runner->run_prefill(prompt, s.gen + dec_warm, s.prefill_chunk); });
              progress.step("throughput: decode");
              warm_up_decode(dev, *runner, Bt);
              std::vector<double> steps;
              if (s.gen <= s.decode_sample) {
                steps = time_decode_steps(dev, *runner, Bt, s.gen);
              } else {
                // Sampled: half the sample at the start of the generation, half at its end
                // (the positions between are skipped, not computed); a step's cost is affine
                // in its context, so the mean of the two halves is the mean over all steps.
                const int64_t head = s.decode_sample / 2, tail = s.decode_sample - head;
                steps = time_decode_steps(dev, *runner, Bt, head);
                runner->skip_positions(s.gen - s.decode_sample);
                const auto t = time_decode_steps(dev, *runner, Bt, tail);
                steps.insert(steps.end(), t.begin(), t.end());
                res.throughput_sampled = true;
              }
              double sum = 0;
              for (double t : steps) sum += t;
              res.tp_decode_s = sum / static_cast<double>(steps.size()) * static_cast<double>(s.gen);
              res.throughput = static_cast<double>(Bt * s.gen) / (*res.tp_prefill_s + *res.tp_decode_s);
              res.throughput_note =
                  "prompt " + std::to_string(n - s.gen) + " + " + std::to_string(s.gen) + " generated, batch " +
                  std::to_string(Bt) + " (" + bt_note + "); prefill " + strf("%.3f", *res.tp_prefill_s) + " s, decode " +
                  strf("%.3f", *res.tp_decode_s) + " s" +
                  (res.throughput_sampled ? strf("; decode sampled: %lld steps at the start and %lld at the end of %lld, "
                                                 "mean step x %lld",
                                                 static_cast<long long>(s.decode_sample / 2),
                                                 static_cast<long long>(s.decode_sample - s.decode_sample / 2),
                                                 static_cast<long long>(s.gen), static_cast<long long>(s.gen))
                                            : std::string("; every decode step timed")) +
                  (dec_warm > 0 ? "; after " + std::to_string(dec_warm) + " untimed warm-up decode step" +
                                      (dec_warm == 1 ? "" : "s") + " (the device's)"
                                : std::string());
            } catch (const std::bad_alloc& e) {
              res.tp_skip_method = "out_of_memory";
              res.tp_skip_note = oom_note(e) + " (throughput at batch " + std::to_string(Bt) + ")";
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
      // Rows of the point.
      if (!skip_method.empty()) {
        for (const auto& [phase, metrics] : phase_metrics()) {
          if (!s.metrics.count(phase) || (phase == "throughput" && !do_tp)) continue;
          for (const auto& [metric, unit] : metrics)
            sink.add(model, n, phase == "throughput" ? Bt : B, phase == "throughput" ? s.gen : 0, phase, metric,
                     std::nullopt, unit, skip_method, 0, skip_note + "; the analytic row beside is the projection");
        }
      } else {
        const std::string common = budget_note.empty() ? "" : "; " + budget_note;
        if (res.memory && s.metrics.count("memory"))
          for (const Reading& r : *res.memory) sink.reading(model, n, B, 0, "memory", r);
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
          sink.add(model, n, Bt, s.gen, "throughput", "throughput_tokens_per_s", *res.throughput, "tokens/s",
                   res.throughput_sampled ? "sampled" : "measured", 1, res.throughput_note);
          sink.add(model, n, Bt, s.gen, "throughput", "max_batch", static_cast<double>(Bt), "count", "exact", 1,
                   bt_note);
        }
        // Learn for the next point's prediction.
        auto& l = predict.last[model];
        if (res.prefill) {
          l.prefill_s = res.prefill->median / B;
          l.prefill_flops = ap.prefill.total().flops / B;
        }
        if (res.decode) {
          l.decode_s = res.decode->median;
          l.decode_work = ap.decode.total().bytes;
        }
      }
      // A rough estimate of what is left: this point's prediction for each remaining point.
      predicted_left = predicted * (total - index);
      point_done(pi);
      if (!lost.empty())
        throw std::runtime_error("the sweep stopped after " + label + " failed: " + lost +
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
