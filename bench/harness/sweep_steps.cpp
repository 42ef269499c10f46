// The sweep's steps that every point uses (sweep_steps.hpp): prompts, timed
// and warm-up decode steps, out-of-memory notes, the --cupti breakdown.
#include <algorithm>
#include <cstdlib>
#include <functional>

#include "format.hpp"
#include "sweep_steps.hpp"
#include "tokens.hpp"

namespace yoco::cli {

std::vector<std::vector<int64_t>> prompts(uint64_t seed, int64_t batch, int64_t n, int64_t vocab) {
  std::vector<std::vector<int64_t>> seqs;
  for (int64_t b = 0; b < batch; ++b) seqs.push_back(synthetic_prompt(seed, b, n, vocab));
  return seqs;
}

double time_prefill(DeviceBackend& dev, ModelRunner& r, const TokenBatch& prompt, int64_t max_new_tokens,
                    int64_t prefill_chunk) {
  r.reserve_generation(prompt.batch, prompt.length, max_new_tokens, prefill_chunk);
  return dev.time([&] { r.run_prefill(prompt, max_new_tokens, prefill_chunk); });
}

std::vector<double> time_decode_steps(DeviceBackend& dev, ModelRunner& r, int64_t batch, int64_t steps) {
  std::vector<double> t;
  const std::vector<int64_t> tokens(static_cast<size_t>(batch), 1);
  for (int64_t i = 0; i < steps; ++i) t.push_back(dev.time([&] { r.run_decode_step(tokens); }));
  return t;
}

void warm_up_decode(DeviceBackend& dev, ModelRunner& r, int64_t batch) {
  const std::vector<int64_t> tokens(static_cast<size_t>(batch), 1);
  for (int64_t i = 0; i < dev.decode_warmup_steps(); ++i) r.run_decode_step(tokens);
}

std::string oom_note(const std::bad_alloc& e) {
  const std::string what = e.what();
  return what.empty() || what == "std::bad_alloc" ? "std::bad_alloc during the run" : what;
}

std::string predicted_seconds(double s, double budget_s) {
  if (s >= 100 && s - budget_s >= 1) return strf("%.0f", s);
  std::string t;
  for (int digits = 3; digits <= 9; ++digits) {
    t = strf("%.*g", digits, s);
    if ((std::strtod(t.c_str(), nullptr) > budget_s) == (s > budget_s)) break;
  }
  return t;
}

void profile_kernels(const SweepSettings& s, DeviceBackend& dev, Progress& progress, ModelRunner& runner,
                     const ModelConfig& cfg, int64_t n, int64_t B, PointResult& res) {
  const int64_t dec_warm = dev.decode_warmup_steps();
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
    // The last timed prefill's room: the same shape, so the runner keeps that
    // generation's caches (as the timed runs keep the warm-up's) and the
    // profiled run carries no allocation that the median it is compared with lacks.
    const int64_t room = profile_decode ? decode_room(s, dev) : 0;
    profile(
        "prefill", [&] { runner.reserve_generation(prompt.batch, prompt.length, room, s.prefill_chunk); },
        [&] { runner.run_prefill(prompt, room, s.prefill_chunk); }, 1, res.prefill->median);
  }
  if (profile_decode) {
    progress.step("CUPTI: decode steps");
    const std::vector<int64_t> tokens(static_cast<size_t>(B), 1);
    profile(
        "decode",
        [&] {
          // A prefill of its own when the prefill's profile did not leave one with room.
          if (runner.position() == 0 || runner.capacity() - runner.position() < steps + dec_warm)
            runner.run_prefill(TokenBatch::from_sequences(prompts(s.seed, B, n, cfg.vocab_size)),
                                steps + dec_warm, s.prefill_chunk);
          warm_up_decode(dev, runner, B);
        },
        [&] { for (int64_t i = 0; i < steps; ++i) runner.run_decode_step(tokens); }, steps,
        res.decode->median);
  }
}

}  // namespace yoco::cli
