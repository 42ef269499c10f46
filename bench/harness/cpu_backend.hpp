#pragma once
// The CPU backend of the sweep: the reference models timed with steady_clock,
// the reference's memory accounting and the process's peak RSS, the Eigen GEMM
// and memcpy ceilings of this machine (the analytic rows' roofline).
#include "cpu_ceilings.hpp"
#include "device_backend.hpp"

namespace yoco::cli {

class CpuBackend : public DeviceBackend {
 public:
  // `device_name`: the rows' device_name; empty = the CPU's name.
  explicit CpuBackend(const std::string& device_name);

  Provenance provenance() const override { return prov_; }
  Ceilings measure_ceilings(Progress& progress) override;
  // The rows and roofline of measured rates (what measure_ceilings returns).
  static Ceilings ceilings_of(const CpuCeilings& c, const std::string& cpu_name);
  const std::string& cpu_name() const { return cpu_; }
  cost::Storage analytic_storage(Precision p) const override;
  double usable_memory_bytes() const override;
  std::string usable_memory_name() const override { return "80% of host memory"; }
  double generation_bytes(const ModelConfig& cfg, Precision p, double batch, double prompt, double gen,
                          double prefill_chunk) const override;
  std::unique_ptr<ModelRunner> create_runner(const ModelConfig& cfg, Precision p, uint64_t seed) override;
  double time(const std::function<void()>& region) override;
  void reset_peak_memory() override;
  std::vector<Reading> memory_breakdown(const ModelRunner& runner, int64_t n, Precision p) override;
  std::vector<Reading> memory_peaks() override;

 private:
  std::string cpu_;
  Provenance prov_;
  bool rss_reset_ = false;
};

}  // namespace yoco::cli
