#pragma once
// What differs between the devices a sweep measures (harness/sweep.cpp holds
// the protocol, once: warm-up and repeats, the budget and its predictor, the
// sampled decode, out-of-memory rows, the analytic row beside each point).
// A backend creates the runners, times regions, reads memory, measures the
// run's ceilings and names the analytic projection's device:
//   cpu_backend.cpp   the CPU reference, steady_clock, the reference's memory
//                     accounting + peak RSS, Eigen GEMM + memcpy ceilings;
//   cuda_backend.cpp  the CUDA runners (cuda/, baselines/), CUDA events on the
//                     model's stream, the device arena + cudaMemGetInfo + the
//                     device peak, bf16 cuBLAS GEMM + device-to-device copy.
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "config.hpp"
#include "cost_model.hpp"
#include "model_runner.hpp"
#include "progress.hpp"
#include "result_row.hpp"

namespace yoco::cli {

// One reading the backend makes (a ceiling, a memory figure); the sweep turns
// it into a row of the point it belongs to.
struct Reading {
  std::string metric;
  double value = 0;
  std::string unit, method;
  int64_t repeats = 1;
  std::string notes;
  std::optional<double> min, max;
};

// A reading that belongs to a phase of its own (decode_extras' rows).
struct PhaseReading {
  std::string phase;
  Reading reading;
};

struct Ceilings {
  std::vector<Reading> rows;  // gemm_peak_tflops, copy_bw_gbs (phase "ceiling")
  cost::DeviceSpec roofline;  // the device of the analytic rows beside each point
};

// What a device's runners store, for the cost model, with no device at hand (the backends'
// analytic_storage, and yoco bench --dry-run's check of a file to resume): on cuda bf16 weights, KV
// cache and activations, fp32 state and logits, whatever --dtype; on the CPU the precision throughout.
inline cost::Storage runner_storage(const std::string& device, Precision p) {
  if (device == "cuda") return cost::Storage{};
  return cost::Storage::uniform(p == Precision::f64 ? cost::StorageType::fp64 : cost::StorageType::fp32);
}

class DeviceBackend {
 public:
  virtual ~DeviceBackend() = default;

  // device, device_name and driver of the measured rows.
  virtual Provenance provenance() const = 0;
  // The run's ceilings, measured once at the start of the sweep.
  virtual Ceilings measure_ceilings(Progress& progress) = 0;
  // Storage types the analytic projection assumes for runners of precision `p` (runner_storage).
  virtual cost::Storage analytic_storage(Precision p) const = 0;

  // Memory the sweep may fill: a point needing more becomes out_of_memory
  // rows, and the automatic throughput batch is the largest that fits.
  virtual double usable_memory_bytes() const = 0;
  virtual std::string usable_memory_name() const = 0;  // "80% of host memory"
  // Rough upper bound of a generation on this device: caches for prompt + gen
  // tokens of `batch` sequences, the prefill's temporaries.
  virtual double generation_bytes(const ModelConfig& cfg, Precision p, double batch, double prompt, double gen,
                                  double prefill_chunk) const = 0;

  // A runner with the counter-based weights of `seed`; std::bad_alloc when it does not fit.
  virtual std::unique_ptr<ModelRunner> create_runner(const ModelConfig& cfg, Precision p, uint64_t seed) = 0;
  // Seconds `region` takes on the device (the CPU: steady_clock; CUDA: events around it).
  virtual double time(const std::function<void()>& region) = 0;
  // Host seconds the last time()'s region took to return, where the device
  // runs asynchronously (CUDA: the region only enqueues, so this is its
  // enqueue time; beside time()'s answer it says whether the host or the
  // device set the pace); nullopt where the region's work is the host's own.
  virtual std::optional<double> last_region_host_s() const { return std::nullopt; }
  // How the device's runner does what a point's rows depend on beyond the
  // model and shape (CUDA: YOCO's global K/V projection at batch > 1), for
  // the notes of rows the calibrated model checks ("" when nothing to say).
  virtual std::string runner_note(const ModelConfig&, int64_t /*batch*/) const { return ""; }
  // What the device's runner chose at run time that the log should keep (CUDA with
  // YOCO_GEMM_ALGO=tuned: the GEMMs' tuning record, a line per shape); empty where nothing.
  virtual std::vector<std::string> runner_log(const ModelRunner&) const { return {}; }

  // Memory of a point: the peak marks are reset before its prefills; the
  // breakdown is read after its first timed prefill (a cache of exactly `n`
  // tokens); the peaks after its decode steps.
  virtual void reset_peak_memory() = 0;
  virtual std::vector<Reading> memory_breakdown(const ModelRunner& runner, int64_t n, Precision p) = 0;
  virtual std::vector<Reading> memory_peaks() = 0;

  // Decode steps a device adds to a point's timed ones; the sweep leaves room
  // for them in the cache. decode_warmup_steps: untimed steps before each run
  // of timed decode steps (the CUDA backend: the first step captures the
  // step's CUDA graph, a cost a generation pays once, not per step).
  // decode_extra_steps: the steps decode_extras runs. The CPU: none.
  virtual int64_t decode_warmup_steps() const { return 0; }
  virtual int64_t decode_extra_steps() const { return 0; }
  // Called after a latency point's timed decode steps, on the same runner
  // (with decode_extra_steps() positions left in its cache): rows the device
  // adds about decode, each with its phase (the CUDA backend: eager steps
  // beside the graph's, and the host's enqueue time of both). The CPU: none.
  // After a point failed: why the device cannot run anything more ("" when it
  // can). A GPU whose context is lost (an illegal address, a trap) fails every
  // later point for the same reason; the sweep stops instead, its rows kept.
  virtual std::string device_lost() { return ""; }
  virtual std::vector<PhaseReading> decode_extras(ModelRunner& runner, int64_t batch) {
    (void)runner;
    (void)batch;
    return {};
  }
  // Called after a latency point's timed prefills when no decode follows (a
  // sweep of --metrics prefill): the rows decode_extras would give of the
  // prefill (R ranks: the bytes they moved, phase comm). The others: none.
  virtual std::vector<PhaseReading> prefill_extras(ModelRunner& runner) {
    (void)runner;
    return {};
  }

  // --cupti: where the GPU time of `region` goes, kernel by kernel, from the
  // device's kernel profiler. The sweep calls it after a point's timed runs
  // (so no timed run carries the profiler), once for "prefill" (region = one
  // more prefill, units = 1) and once for "decode" (region = `units` decode
  // steps). `timed_s`: the median time of one unit without the profiler, for
  // the overhead row. Rows, times per unit (one prefill, one decode step):
  //   <phase>.<family>  gpu_time_s   the family's kernels (families: gemm,
  //                     gret, attention_prefill, attention_decode, norms,
  //                     other; kernel_family.hpp)
  //   <phase>:<kernel>  kernel_time_s  one kernel (its short name)
  //   <phase>.kernels   gpu_time_s   all kernels; cupti_overhead_fraction
  // The CPU: none (the sweep refuses --cupti there).
  virtual bool has_kernel_profiler() const { return false; }
  virtual std::vector<PhaseReading> kernel_breakdown(const std::string& phase, const std::function<void()>& region,
                                                     int64_t units, double timed_s) {
    (void)phase;
    (void)region;
    (void)units;
    (void)timed_s;
    return {};
  }
};

}  // namespace yoco::cli
