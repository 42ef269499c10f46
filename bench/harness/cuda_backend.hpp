#pragma once
// The CUDA backend of the sweep (device_backend.hpp): the CUDA runners
// (cuda_runner.hpp: YOCO from cuda/, the Transformer from baselines/), timed
// with CUDA events on the model's own stream, memory from the model's device
// arena (weights, kv_cache, state, the activations peak) with `other` from
// cudaMemGetInfo, the run's ceilings from a bf16 cuBLAS GEMM and a
// device-to-device copy (cuda/device/device_ceilings.hpp), the analytic projection in
// bf16 (fp32 gRet state) on those ceilings. Decode steps replay the step's
// CUDA graph (one untimed warm-up step captures it); after a latency point's
// timed steps a few eager steps are timed too (phase decode_eager), and the
// host's enqueue time of both is reported (decode_host_enqueue_s). With
// --cupti, kernel_breakdown runs a region once more under CUPTI's activity
// records (cupti_collector.hpp) and groups the kernels' GPU time by kernel
// and by family (kernel_family.hpp).
//
// Compiled in every preset: without CUDA (the cpu preset) every method throws
// and cuda_backend_missing() says why, so `yoco bench --device cuda` is an
// input error there (cmd_bench checks cuda_status() first).
#include <memory>
#include <string>
#include <vector>

#include "device_backend.hpp"

namespace yoco::cuda {
class CudaModel;
struct DeviceCeilings;
}

namespace yoco::cli {

class CuptiCollector;

// What keeps this build from running the CUDA sweep: empty with CUDA (the
// cuda preset), one entry saying the build has no CUDA otherwise.
std::vector<std::string> cuda_backend_missing();

// Why the CUDA runners cannot serve `cfg` (head dims, GQA group, widths), or ""
// when they can; "" too in a build without CUDA (which fails earlier, saying so).
std::string cuda_model_unsupported_reason(const ModelConfig& cfg);

// The runners' YOCO_* switches (read when a model is made: cuda/runner/runner_support.hpp,
// gret/gret_select.hpp), each checked as the runners check it, so that a bad value is an
// InputError naming the variable before anything runs; returns "NAME=value" for each one
// set. Empty in a build without CUDA (which fails earlier, saying so).
std::vector<std::string> cuda_runner_switches();

class CudaBackend : public DeviceBackend {
 public:
  // `device_name`: the rows' device_name; empty = the device's name. With
  // CUDA, reads the device's free memory (the usable memory is 90% of it).
  explicit CudaBackend(const std::string& device_name);
  ~CudaBackend() override;
  CudaBackend(const CudaBackend&) = delete;
  CudaBackend& operator=(const CudaBackend&) = delete;

  Provenance provenance() const override { return prov_; }
  Ceilings measure_ceilings(Progress& progress) override;
  // The rows and roofline of measured ceilings (DeviceError when they failed).
  Ceilings ceilings_of(const cuda::DeviceCeilings& m) const;
  cost::Storage analytic_storage(Precision p) const override;
  double usable_memory_bytes() const override;
  std::string usable_memory_name() const override { return "90% of free device memory"; }
  double generation_bytes(const ModelConfig& cfg, Precision p, double batch, double prompt, double gen,
                          double prefill_chunk) const override;
  std::unique_ptr<ModelRunner> create_runner(const ModelConfig& cfg, Precision p, uint64_t seed) override;
  // Times and reads the memory of `runner` (a CudaRunner, or a sharded
  // runner's local one) from now on: what create_runner does with its own.
  void adopt(ModelRunner& runner);
  double time(const std::function<void()>& region) override;
  std::optional<double> last_region_host_s() const override { return last_host_s_; }
  std::string runner_note(const ModelConfig& cfg, int64_t batch) const override;
  // The sequence sharded over ranks (DistCudaBackend): the Transformer's attention is then a ring whose
  // off-diagonal blocks run flash prefill v1, so the rows say both versions, in words the calibrated
  // model does not read as one ("attention prefill vN" would claim a single kernel).
  void set_ring_attention(bool ring) { ring_attention_ = ring; }
  std::vector<std::string> runner_log(const ModelRunner& runner) const override;
  void reset_peak_memory() override;
  std::vector<Reading> memory_breakdown(const ModelRunner& runner, int64_t n, Precision p) override;
  std::vector<Reading> memory_peaks() override;
  int64_t decode_warmup_steps() const override;
  int64_t decode_extra_steps() const override;
  std::vector<PhaseReading> decode_extras(ModelRunner& runner, int64_t batch) override;
  std::string device_lost() override;
  bool has_kernel_profiler() const override;
  std::vector<PhaseReading> kernel_breakdown(const std::string& phase, const std::function<void()>& region,
                                             int64_t units, double timed_s) override;

 private:
  bool ring_attention_ = false;
  struct Events;  // the timer's CUDA events (cuda_backend.cpp)
  Provenance prov_;
  // The CUDA members are unused where the build has no CUDA (cuda_backend.cpp's stub).
  [[maybe_unused]] double usable_ = 0;        // 90% of the free device memory at construction
  [[maybe_unused]] double device_total_ = 0;  // capacity, for the roofline's DeviceSpec
  // The model of the runner created last: time() records its events on that
  // model's (non-blocking) stream, reset_peak_memory / memory_peaks read its
  // arena. The sweep uses a runner only between its create_runner and the
  // next one; cleared before each creation.
  [[maybe_unused]] cuda::CudaModel* model_ = nullptr;
  std::unique_ptr<Events> events_;
  std::optional<double> last_host_s_;  // steady_clock around time()'s region
  std::unique_ptr<CuptiCollector> cupti_;  // created by the first kernel_breakdown
};

}  // namespace yoco::cli
