#pragma once
// The CUDA backend of the sweep: a skeleton. What it lacks is listed by
// cuda_backend_missing(); until that list is empty `yoco bench --device cuda`
// is an input error (exit 2) that names it. Filling it in (the runners issue):
//   create_runner     the CUDA YOCO runner (cuda/) and Transformer runner (baselines/);
//                     a failed allocation must surface as std::bad_alloc (an out_of_memory row)
//   time              CUDA events around the region, synchronised on the stop event
//   memory_breakdown  the device arena's categories + `other` from cudaMemGetInfo
//   memory_peaks      mem_device_peak_bytes (the arena's high-water mark)
//   measure_ceilings  bf16 cuBLAS GEMM + device-to-device copy (cuda/device_ceilings.hpp)
//   analytic_storage  bf16 weights and caches, fp32 gRet state
#include <string>
#include <vector>

#include "device_backend.hpp"

namespace yoco::cli {

// The parts of the CUDA backend that do not exist yet; empty once it is complete.
std::vector<std::string> cuda_backend_missing();

class CudaBackend : public DeviceBackend {
 public:
  // `device_name`: the rows' device_name; empty = the device's name.
  explicit CudaBackend(const std::string& device_name);

  Provenance provenance() const override { return prov_; }
  Ceilings measure_ceilings(Progress& progress) override;
  cost::Storage analytic_storage(Precision p) const override;
  double usable_memory_bytes() const override;
  std::string usable_memory_name() const override { return "90% of free device memory"; }
  double generation_bytes(const ModelConfig& cfg, Precision p, double batch, double prompt, double gen,
                          double prefill_chunk) const override;
  std::unique_ptr<ModelRunner> create_runner(const ModelConfig& cfg, Precision p, uint64_t seed) override;
  double time(const std::function<void()>& region) override;
  void reset_peak_memory() override;
  std::vector<Reading> memory_breakdown(const ModelRunner& runner, int64_t n, Precision p) override;
  std::vector<Reading> memory_peaks() override;

 private:
  Provenance prov_;
};

}  // namespace yoco::cli
