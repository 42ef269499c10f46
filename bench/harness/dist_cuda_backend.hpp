#pragma once
// The sweep on the ranks of an MPI job with --device cuda (yoco bench under
// mpirun): the CUDA YOCO runner sharded over the ranks (dist_cuda_runner.hpp).
// As DistCpuBackend on the CPU, every decision the protocol takes from a
// measurement must come out the same on every rank: a time is the slowest
// rank's (CUDA events on its model's stream, then the maximum), memory the
// largest rank's, the ceilings rank 0's (ranks may share a GPU: they would
// measure each other). Rows: device `cuda-x<R>`, the rank count and the GPU in
// device_name, and after each latency point what the ranks moved (phases
// `comm`, `comm_decode`). Decode steps run eagerly (a sharded step meets the
// other ranks inside each cross layer: no graph), so there is no
// graph-vs-eager pair; no CUPTI breakdown under mpirun.
//
// Built with the cuda preset and MPI (YOCO_HAVE_DIST_CUDA).
#if defined(YOCO_HAVE_DIST_CUDA)

#include "communicator.hpp"
#include "cuda_backend.hpp"

namespace yoco::cli {

class DistCudaBackend : public DeviceBackend {
 public:
  DistCudaBackend(const std::string& device_name, dist::Communicator& comm);

  Provenance provenance() const override { return prov_; }
  Ceilings measure_ceilings(Progress& progress) override;
  cost::Storage analytic_storage(Precision p) const override { return cuda_.analytic_storage(p); }
  // Ranks that share a GPU share its free memory.
  double usable_memory_bytes() const override;
  std::string usable_memory_name() const override;
  double generation_bytes(const ModelConfig& cfg, Precision p, double batch, double prompt, double gen,
                          double prefill_chunk) const override;
  std::unique_ptr<ModelRunner> create_runner(const ModelConfig& cfg, Precision p, uint64_t seed) override;
  double time(const std::function<void()>& region) override;
  void reset_peak_memory() override { cuda_.reset_peak_memory(); }
  std::vector<Reading> memory_breakdown(const ModelRunner& runner, int64_t n, Precision p) override;
  std::vector<Reading> memory_peaks() override;
  std::vector<PhaseReading> decode_extras(ModelRunner& runner, int64_t batch) override;
  std::vector<PhaseReading> prefill_extras(ModelRunner& runner) override;
  std::string device_lost() override { return cuda_.device_lost(); }
  std::string runner_note(const ModelConfig& cfg, int64_t batch) const override {
    return cuda_.runner_note(cfg, batch);
  }

 private:
  dist::Communicator& comm_;
  int ranks_per_gpu_ = 1;
  CudaBackend cuda_;  // after ranks_per_gpu_: this rank's device is chosen before it is made
  double usable_ = 0;
  Provenance prov_;
};

}  // namespace yoco::cli

#endif  // YOCO_HAVE_DIST_CUDA
