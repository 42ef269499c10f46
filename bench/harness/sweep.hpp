#pragma once
// The measured harness (DESIGN.md §4–5): models × lengths, each point within a
// time budget, every point ending as rows — measured, sampled, or rows saying
// why it did not run — next to the cost model's projection for the same
// point. The protocol is written once (sweep.cpp); a device backend
// (device_backend.hpp) supplies what differs: the CPU reference
// (cpu_backend.hpp) today, the CUDA runners (cuda_backend.hpp) later.
#include <cstdint>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "analytic_rows.hpp"
#include "device_backend.hpp"
#include "model_runner.hpp"
#include "progress.hpp"
#include "result_row.hpp"

namespace yoco::cli {

struct SweepSettings {
  std::vector<std::string> models;
  std::vector<int64_t> lengths;
  int64_t gen = 1024;         // throughput: generated tokens (prompt = length - gen)
  int64_t batch = 0;          // 0 = auto: 1 for latency points, the largest that fits for throughput
  int64_t max_batch = 8;      // cap of the automatic throughput batch
  std::set<std::string> metrics = {"memory", "prefill", "decode", "throughput"};
  int repeats = 3, warmup = 1;
  int64_t decode_sample = 64;  // decode steps timed per point
  int64_t prefill_chunk = kDefaultPrefillChunk;
  // Under mpirun on the CPU (the runners sharded over this many ranks; else 0) each rank prefills its shard in
  // one step: prefill_chunk is not used, and the rows must not say it was (prefill_note). The GPU's sharded
  // runners prefill a rank's shard in chunks, as one process does.
  int sharded_ranks = 0;
  double budget_s = 120;       // per point
  Precision precision = Precision::f32;
  uint64_t seed = 0;           // weights and synthetic prompts
  // A point whose full run does not fit the budget or the device: its prefill
  // and decode are timed on the model cut to 1 and 2 layer units and
  // extrapolated (extrapolation.hpp, method `extrapolated`); false: only
  // over_budget / out_of_memory rows.
  bool extrapolate = true;
  // Per-kernel GPU time (DeviceBackend::kernel_breakdown) after each latency
  // point's timed runs: one more prefill and `cupti_decode_steps` decode steps.
  bool cupti = false;
  int64_t cupti_decode_steps = 16;
  // device_name of the rows; empty = the CPU's name. A fixed label lets a CI
  // baseline join with runs on other machines of the same pool.
  std::string device_name;
};

// How a prefill ran, in the words the rows and the generate header use: "prefill chunk N" (the calibrated
// check reads it back), or under mpirun "each rank's shard prefilled in one step (R ranks)".
std::string prefill_note(int64_t chunk, int sharded_ranks);

// Incremental output and resuming (issue 12).
struct SweepIo {
  // --resume: the rows of an earlier run of the same sweep (`previous_file`,
  // for messages). A point whose rows are there -- its analytic rows and, for
  // each phase of the metrics, the measured (or over_budget / out_of_memory /
  // failed) row -- is not measured again: its rows are kept, in place. The
  // earlier ceiling and ratio rows are dropped (measured and computed anew),
  // and so are its analytic rows, made anew from this run's ceilings.
  // InputError, before any point runs, when the file comes from another
  // configuration: another device or device_name, a point outside --model x
  // --lengths, or rows that differ in what the settings decide (batch,
  // gen_tokens, the analytic FLOPs / bytes / memory: --dtype, --metrics,
  // --prefill-chunk, --gen, --batch; the --max-batch of an automatic batch).
  const std::vector<ResultRow>* previous = nullptr;
  std::string previous_file;
  // After each point (kept or measured): every row so far, ratio rows aside,
  // and the number of points done; the caller writes them out.
  std::function<void(const std::vector<ResultRow>& rows, int points_done)> on_point;
  // One line for the user ("resuming: 7 of 12 points done in FILE").
  std::function<void(const std::string&)> note;
};

// Runs the sweep on `device`. Rows: the device's ceilings, measured / sampled /
// exact rows per point, over_budget / out_of_memory / failed rows where a point
// did not run, analytic rows for every point (roofline on the measured
// ceilings), and YOCO-vs-Transformer ratio rows. The protocol:
//  - latency points at batch B (--batch, else 1): warm-up prefills, then timed
//    repeats (median, min, max); the memory readings after the first timed
//    prefill; decode_sample decode steps timed after the last;
//  - throughput at batch Bt (--batch, else the largest up to max_batch whose
//    generation fits in the usable memory by the device's memory model, then
//    confirmed by allocating it; when it does not fit, a binary search by
//    allocation finds the largest that does): prompt n - gen, gen steps, timed
//    on a sample when gen > decode_sample (half at the start, half at the end).
//    When the batch's prefill alone would take over a quarter of the budget,
//    one sequence's prefill is timed and multiplied by Bt (method sampled),
//    and the decode runs on caches moved to the prompt's length by skipping;
//  - a point's time is predicted (the last measured point of the model scaled
//    by the cost model, else the roofline): a throughput that fits the budget
//    alone but not beside the latency runs gets a budget of its own; otherwise,
//    over the budget, the warm-up goes and repeats are cut, then throughput is
//    dropped, then the point is an over_budget row; a point that needs more than the usable memory, or whose
//    run throws std::bad_alloc, is out_of_memory rows;
//  - such a point's prefill and decode are extrapolated from the model cut to
//    1 and 2 layer units when those fit (settings.extrapolate), its memory and
//    throughput rows saying why the full model did not run;
//  - --cupti: after a latency point's timed runs, the device's kernel
//    breakdown of one more prefill and of a few decode steps.
std::vector<ResultRow> run_sweep(const SweepSettings& s, DeviceBackend& device, Progress& progress,
                                 const SweepIo& io = {});

// run_sweep on the CPU reference (CpuBackend, device_name from the settings).
std::vector<ResultRow> run_cpu_sweep(const SweepSettings& s, Progress& progress, const SweepIo& io = {});

// --resume's refusal of a file that holds rows of a point this sweep does not run (run_sweep's, and
// `yoco bench --dry-run`'s before anything runs): the message, naming the file and the point.
std::string resume_outside_the_sweep(const std::string& file, const std::string& model, int64_t seq_len);

// The analytic rows' settings of a sweep on a device that stores as `storage`, its roofline `device`; and
// of one of its points at `batch` (memory, prefill, decode) and `tp_batch` (throughput; 0: none).
AnalyticSettings sweep_analytic_settings(const SweepSettings& s, const cost::Storage& storage,
                                         const cost::DeviceSpec& device);
AnalyticSettings point_analytic_settings(const AnalyticSettings& an, int64_t batch, int64_t tp_batch);
// --resume's check of one point: its analytic rows in the file against those this run makes, the same
// rows with the same counted values (B, FLOP, count); else the InputError that the file comes from
// other settings (or another cost model). `where`: resumed_point_words. The real run's check, and
// yoco bench --dry-run's, which runs it on the file with no device.
std::string resumed_point_words(const std::string& file, const std::string& model, int64_t seq_len);
// --resume's first check of each row of the file that is not analytic: written on this run's `device`
// (cpu, cuda) and `device_name` (the detected one or --device-name); else the InputError naming both.
// The real run's check and yoco bench --dry-run's; the dry run passes no name where it cannot know it
// without touching the device (a GPU's, without --device-name).
void check_resumed_device(const std::string& file, const ResultRow& r, const std::string& device,
                          const std::optional<std::string>& device_name);
void check_resumed_analytic(const std::string& where, const std::vector<const ResultRow*>& in_file,
                            const std::vector<ResultRow>& in_run);
// All of --resume's checks of one point's rows in the file (`in_file`: analytic and measured): the
// analytic ones above, then each measured row's phase, batch (B; throughput Bt, or up to it where the
// batch is automatic, under the same --max-batch), gen and metric against this run's. Returns the
// phases there (a failed phase runs again).
std::set<std::string> check_resumed_point(const std::string& where, const SweepSettings& s, int64_t B, int64_t Bt,
                                          bool do_tp, const std::vector<const ResultRow*>& in_file,
                                          const std::vector<ResultRow>& analytic_in_run);

}  // namespace yoco::cli
