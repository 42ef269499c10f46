// The sweep's backend under mpirun with --device cuda (dist_cuda_backend.hpp).
#if defined(YOCO_HAVE_DIST_CUDA)

#include "dist_cuda_backend.hpp"

#include "cuda_runner.hpp"
#include "cuda_status.hpp"
#include "device/device_ceilings.hpp"
#include "dist_backend.hpp"
#include "dist_cuda_runner.hpp"
#include "errors.hpp"
#include "format.hpp"

namespace yoco::cli {

DistCudaBackend::DistCudaBackend(const std::string& device_name, dist::Communicator& comm)
    : comm_(comm), ranks_per_gpu_(use_rank_device(comm)), cuda_(device_name) {
  cuda_.set_ring_attention(true);
  // The same on every rank (the sweep decides out-of-memory rows and batch
  // sizes from it): the least any rank has, shared by the ranks on its GPU.
  usable_ = -max_over_ranks(comm_, -cuda_.usable_memory_bytes(), "usable memory") / ranks_per_gpu_;
  const Provenance gpu = cuda_.provenance();
  const std::string sharing =
      ranks_per_gpu_ > 1 ? " (up to " + std::to_string(ranks_per_gpu_) + " ranks a GPU)" : " (one GPU a rank)";
  prov_ = Provenance::here("cuda-x" + std::to_string(comm.size()),
                           std::to_string(comm.size()) + " MPI ranks on " + gpu.device_name + sharing, gpu.driver);
}

Ceilings DistCudaBackend::measure_ceilings(Progress& progress) {
  // Rank 0 measures (ranks sharing its GPU would measure each other), then
  // tells the others: the sweep's predictor divides by these on every rank.
  cuda::DeviceCeilings m;
  if (comm_.rank() == 0) {
    progress.step("measuring the GPU's copy bandwidth and bf16 GEMM rate (rank 0)");
    m = cuda::measure_device_ceilings();
  }
  double v[9] = {m.copy_bw.median,  m.copy_bw.min,    m.copy_bw.max,    static_cast<double>(m.copy_bw.repeats),
                 m.gemm_flops.median, m.gemm_flops.min, m.gemm_flops.max, static_cast<double>(m.gemm_flops.repeats),
                 m.error.empty() ? 0.0 : 1.0};
  comm_.broadcast(v, sizeof(v), 0, std::string(kHarnessLabel) + "ceilings");
  if (comm_.rank() != 0) {
    m.copy_bw = {v[0], v[1], v[2], static_cast<int>(v[3])};
    m.gemm_flops = {v[4], v[5], v[6], static_cast<int>(v[7])};
    m.copy_desc = m.gemm_desc = "rank 0's measurement";
    m.error = v[8] != 0 ? "rank 0's measurement failed" : "";
  }
  return cuda_.ceilings_of(m);
}

double DistCudaBackend::usable_memory_bytes() const { return usable_; }

std::string DistCudaBackend::usable_memory_name() const {
  return cuda_.usable_memory_name() + " (the least of the ranks)" +
         (ranks_per_gpu_ > 1 ? " / " + std::to_string(ranks_per_gpu_) + " ranks a GPU" : "");
}

double DistCudaBackend::generation_bytes(const ModelConfig& cfg, Precision p, double batch, double prompt, double gen,
                                         double prefill_chunk) const {
  // A rank holds the weights, about 1/R of the global cache, and its shard's
  // activations: the whole shard is one prefill step.
  const double shard = prompt / comm_.size() + 1;
  // The Transformer also holds one layer's keys and values of every rank (bf16 K|V rows).
  const double gathered = cfg.is_yoco() ? 0.0 : batch * prompt * 2.0 * static_cast<double>(cfg.kv_width()) * 2;
  return cuda_.generation_bytes(cfg, p, batch, shard, gen, std::max(prefill_chunk, shard * batch)) + gathered;
}

std::unique_ptr<ModelRunner> DistCudaBackend::create_runner(const ModelConfig& cfg, Precision, uint64_t seed) {
  cuda::CudaWeightSource src;
  src.seed = seed;
  std::unique_ptr<DistRunner> r = create_dist_cuda_runner(cfg, src, comm_);
  cuda_.adopt(*r);
  return r;
}

double DistCudaBackend::time(const std::function<void()>& region) {
  return max_over_ranks(comm_, cuda_.time(region), "time");
}

std::vector<Reading> DistCudaBackend::memory_breakdown(const ModelRunner& runner, int64_t n, Precision p) {
  return agreed_over_ranks(comm_, cuda_.memory_breakdown(runner, n, p), "memory");
}

std::vector<Reading> DistCudaBackend::memory_peaks() {
  return agreed_over_ranks(comm_, cuda_.memory_peaks(), "memory peaks");
}

std::vector<PhaseReading> DistCudaBackend::decode_extras(ModelRunner& runner, int64_t batch) {
  (void)batch;
  auto* d = dynamic_cast<DistRunner*>(&runner);
  return d ? comm_readings(*d) : std::vector<PhaseReading>{};
}

std::vector<PhaseReading> DistCudaBackend::prefill_extras(ModelRunner& runner) {
  auto* d = dynamic_cast<DistRunner*>(&runner);
  return d ? comm_readings(*d, /*decode=*/false) : std::vector<PhaseReading>{};
}

}  // namespace yoco::cli

#endif  // YOCO_HAVE_DIST_CUDA
