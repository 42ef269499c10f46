// The CPU backend: what the CPU sweep did before the protocol moved to sweep.cpp.
#include "cpu_backend.hpp"

#include <chrono>

#include "cpu_ceilings.hpp"
#include "host_info.hpp"
#include "host_memory.hpp"

namespace yoco::cli {

CpuBackend::CpuBackend(const std::string& device_name)
    : cpu_(device_name.empty() ? cpu_device_name() : device_name),
      prov_(Provenance::here("cpu", cpu_, kernel_release())) {}

Ceilings CpuBackend::measure_ceilings(Progress& progress) {
  progress.step("measuring this machine's GEMM rate and copy bandwidth");
  return ceilings_of(measure_cpu_ceilings(), cpu_);
}

Ceilings CpuBackend::ceilings_of(const CpuCeilings& ceil, const std::string& cpu_name) {
  Ceilings c;
  c.rows.push_back({"gemm_peak_tflops", ceil.gemm_flops / 1e12, "TFLOP/s", "measured", ceil.repeats,
                    "Eigen fp32 GEMM 768x768x768, median", ceil.gemm_min / 1e12, ceil.gemm_max / 1e12});
  c.rows.push_back({"copy_bw_gbs", ceil.copy_bw / 1e9, "GB/s", "measured", ceil.repeats,
                    "memcpy of 256 MiB, read + write counted, median", ceil.copy_min / 1e9, ceil.copy_max / 1e9});
  c.roofline = cpu_roofline_spec(ceil, cpu_name);
  return c;
}

cost::Storage CpuBackend::analytic_storage(Precision p) const { return runner_storage("cpu", p); }

double CpuBackend::usable_memory_bytes() const {
  return 0.8 * host_memory_bytes();  // leave room for the OS and the rest of the process
}

double CpuBackend::generation_bytes(const ModelConfig& cfg, Precision p, double batch, double prompt, double gen,
                                    double prefill_chunk) const {
  return generation_bytes_estimate(cfg, precision_bytes(p), batch, prompt, gen, prefill_chunk, false);
}

std::unique_ptr<ModelRunner> CpuBackend::create_runner(const ModelConfig& cfg, Precision p, uint64_t seed) {
  return ModelRunner::create(cfg, p, WeightSource::from_seed(seed));
}

double CpuBackend::time(const std::function<void()>& region) {
  using Clock = std::chrono::steady_clock;
  const auto t0 = Clock::now();
  region();
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

void CpuBackend::reset_peak_memory() { rss_reset_ = reset_peak_rss(); }

std::vector<Reading> CpuBackend::memory_breakdown(const ModelRunner& runner, int64_t n, Precision p) {
  const MemoryBreakdown m = runner.memory();
  // The memory is read after the first timed prefill; when the budget left a
  // single prefill, that one also made room for the decode steps after it.
  const int64_t cap = runner.capacity();
  const std::string note = "the reference's accounting after prefilling " + std::to_string(n) + " tokens (" +
                           (cap == n ? std::string("cache of exactly that")
                                     : "cache sized for " + std::to_string(cap) + ": the decode steps that follow") +
                           "), " + precision_name(p);
  return {
      {"mem_weights_bytes", static_cast<double>(m.weights), "B", "exact", 1, note, {}, {}},
      {"mem_kv_cache_bytes", static_cast<double>(m.kv_cache), "B", "exact", 1, note, {}, {}},
      {"mem_state_bytes", static_cast<double>(m.state), "B", "exact", 1, note, {}, {}},
      {"mem_activations_bytes", static_cast<double>(m.activations), "B", "exact", 1,
       note + "; activations: peak of the metered temporaries", {}, {}},
      {"mem_total_bytes", static_cast<double>(m.total()), "B", "exact", 1, note, {}, {}},
  };
}

std::vector<Reading> CpuBackend::memory_peaks() {
  return {{"mem_host_peak_rss_bytes", static_cast<double>(peak_rss_bytes()), "B", "measured", 1,
           rss_reset_ ? "process peak RSS over this point's prefills and decode steps"
                      : "process peak RSS since start (the kernel refused to reset the mark)",
           {}, {}}};
}

}  // namespace yoco::cli
