#pragma once
// The sweep's steps (harness/sweep.cpp holds the protocol that orders them
// and turns what they measure into rows): synthetic prompts and timed decode
// steps, the predictor of a point's time, the layer probes of an extrapolated
// point (layer_probes.cpp), the throughput run with its batch search
// (sweep_throughput.cpp) and the --cupti kernel breakdown (sweep_steps.cpp).
// Internal to the harness: the protocol's rules are tested through run_sweep
// (tests/test_sweep.cpp).
#include <algorithm>
#include <cstdint>
#include <map>
#include <new>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "analytic_rows.hpp"
#include "device_backend.hpp"
#include "progress.hpp"
#include "stats.hpp"
#include "sweep.hpp"

namespace yoco::cli {

// What a point measured; absent fields did not run.
struct PointResult {
  std::optional<Summary> prefill, decode;
  std::optional<Summary> prefill_host;  // the prefills' host seconds (DeviceBackend::last_region_host_s)
  std::vector<PhaseReading> decode_extras;  // the device's (DeviceBackend::decode_extras)
  std::vector<PhaseReading> prefill_extras;  // without decode (DeviceBackend::prefill_extras)
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

inline std::optional<double> median_of(const std::optional<Summary>& s) {
  return s ? std::optional<double>(s->median) : std::nullopt;
}

// Synthetic prompts of `batch` sequences of `n` tokens (tokens.hpp).
std::vector<std::vector<int64_t>> prompts(uint64_t seed, int64_t batch, int64_t n, int64_t vocab);
// One timed prefill (DeviceBackend::time). The runner first allocates, untimed, what the prefill's
// generation needs (ModelRunner::reserve_generation), so that no timed run holds an allocation: a
// point's last repeat leaves the decode steps room, and a throughput prefill follows the batch
// search's generations; either would otherwise free and allocate caches inside the timer.
double time_prefill(DeviceBackend& dev, ModelRunner& r, const TokenBatch& prompt, int64_t max_new_tokens,
                    int64_t prefill_chunk);
// `steps` decode steps, each timed; tokens are synthetic (a step costs the same whatever they are).
std::vector<double> time_decode_steps(DeviceBackend& dev, ModelRunner& r, int64_t batch, int64_t steps);
// The device's untimed warm-up steps before a run of timed ones (none on the CPU).
void warm_up_decode(DeviceBackend& dev, ModelRunner& r, int64_t batch);
// A device's allocation failure says what did not fit (cuda::DeviceOutOfMemory);
// a plain std::bad_alloc says nothing more.
std::string oom_note(const std::bad_alloc& e);

// A predicted time beside the --budget-s it is compared with, with the digits
// that tell them apart: whole seconds made "predicted 1 s > --budget-s 1" of 1.4 s.
std::string predicted_seconds(double s, double budget_s);

// The latency of a point whose full run did not happen (over the budget, or
// too large for the device), from the model cut to 1 and 2 layer units at
// the same length and batch (extrapolation.hpp). The probes have the budget
// of the point: warm-up and repeats are cut as for a full point; probes that
// still do not fit the budget, or the device, do not run (why_not says so).
ProbeResult run_layer_probes(const SweepSettings& s, DeviceBackend& dev, Progress& progress, const ModelConfig& cfg,
                             const std::string& model, int64_t n, int64_t B, const AnalyticSettings& a,
                             const Predictor& predict);

// The throughput of a point (DESIGN.md §4) into `res`: batch × gen / (prefill
// of the batch's prompts of n - gen tokens + gen decode steps). `Bt`: the
// planned batch; under --batch auto (s.batch == 0) it is first allocated, and
// when it does not fit a binary search by allocation finds the largest batch
// that does. `tp_one`: one sequence's prefill is timed and multiplied by the
// batch, and the decode runs on caches moved to the prompt's length by
// skipping positions. Throws std::bad_alloc when even the batch found does not fit.
void measure_throughput(const SweepSettings& s, DeviceBackend& dev, Progress& progress, ModelRunner& runner,
                        const ModelConfig& cfg, int64_t n, int64_t Bt, const std::string& bt_note, bool tp_one,
                        PointResult& res);

// The decode steps a latency point's last prefill reserves room for: the
// timed sample, the device's warm-up and extra steps, and --cupti's profiled
// steps (which continue the timed ones' cache).
inline int64_t decode_room(const SweepSettings& s, const DeviceBackend& dev) {
  const int64_t dec_warm = dev.decode_warmup_steps();
  const int64_t cupti_room = s.cupti ? std::min(s.cupti_decode_steps, s.decode_sample) + dec_warm : 0;
  return s.decode_sample + dec_warm + dev.decode_extra_steps() + cupti_room;
}

// --cupti, right after a latency point's timed runs on `runner` (its cache
// has room for the profiled decode steps): the device's kernel breakdown of
// one more prefill (when it takes at most a quarter of the budget) and of a
// few decode steps, into res.kernels; a phase whose profile fails or is too
// long is one entry of res.kernel_errors. Rethrows only when the device is lost.
void profile_kernels(const SweepSettings& s, DeviceBackend& dev, Progress& progress, ModelRunner& runner,
                     const ModelConfig& cfg, int64_t n, int64_t B, PointResult& res);

}  // namespace yoco::cli
