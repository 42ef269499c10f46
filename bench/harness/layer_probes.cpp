// The layer probes of an extrapolated point (sweep_steps.hpp, extrapolation.hpp).
#include <memory>

#include "extrapolation.hpp"
#include "format.hpp"
#include "sweep_steps.hpp"
#include "token_batch.hpp"

namespace yoco::cli {

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
    out.why_not = "not extrapolated: the probes are predicted to take " + predicted_seconds(probes_time(warmup, repeats), s.budget_s) +
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
        const double t = time_prefill(dev, *r, prompt, last ? room : 0, s.prefill_chunk);
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

}  // namespace yoco::cli
