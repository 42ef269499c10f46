#pragma once
// The sweep on the ranks of an MPI job (yoco bench under mpirun): the CPU
// reference with the sequence sharded over the ranks (dist_runner.hpp). The
// protocol (sweep.cpp) runs unchanged on every rank, so every decision it
// takes from a measurement must come out the same on every rank, or the ranks
// would part ways inside a collective: a time is the slowest rank's (every
// rank waits for it), the ceilings rank 0's, memory the largest rank's. Rows:
// device `cpu-x<R>`, the rank count in device_name, and after each latency
// point what the ranks moved (phases `comm` for the prefill and `comm_decode`
// for one decode step, by collective in `comm:<label>` / `comm_decode:<label>`).
#include <memory>

#include "communicator.hpp"
#include "cpu_backend.hpp"
#include "dist_runner.hpp"

namespace yoco::cli {

// The harness's own collectives (agreeing on times and readings) are not the
// model's communication: their labels start with this.
inline constexpr const char* kHarnessLabel = "harness:";

// What the ranks moved over the runner's last prefill (phase "comm") and, with
// `decode`, its last decode step ("comm_decode"), in all and by collective
// ("comm:<label>"): the busiest rank's bytes received and sent, every rank's
// in the notes. A collective: every rank calls it, in the same place.
std::vector<PhaseReading> comm_readings(DistRunner& runner, bool decode = true);

// The largest `v` over the ranks, on every rank (a collective): a sweep's
// decisions from a measurement must come out the same on every rank.
double max_over_ranks(dist::Communicator& comm, double v, const char* what);
// Each reading (value, min, max) the largest over the ranks, said in its notes.
std::vector<Reading> agreed_over_ranks(dist::Communicator& comm, std::vector<Reading> rows, const char* what);

class DistCpuBackend : public DeviceBackend {
 public:
  DistCpuBackend(const std::string& device_name, dist::Communicator& comm);

  Provenance provenance() const override { return prov_; }
  Ceilings measure_ceilings(Progress& progress) override;
  cost::Storage analytic_storage(Precision p) const override { return cpu_.analytic_storage(p); }
  // The host's memory is shared by the ranks: each may fill 1/R of the CPU's share.
  double usable_memory_bytes() const override;
  std::string usable_memory_name() const override;
  double generation_bytes(const ModelConfig& cfg, Precision p, double batch, double prompt, double gen,
                          double prefill_chunk) const override;
  std::unique_ptr<ModelRunner> create_runner(const ModelConfig& cfg, Precision p, uint64_t seed) override;
  double time(const std::function<void()>& region) override;
  void reset_peak_memory() override { cpu_.reset_peak_memory(); }
  std::vector<Reading> memory_breakdown(const ModelRunner& runner, int64_t n, Precision p) override;
  std::vector<Reading> memory_peaks() override;
  std::vector<PhaseReading> decode_extras(ModelRunner& runner, int64_t batch) override;
  std::vector<PhaseReading> prefill_extras(ModelRunner& runner) override;

 private:
  CpuBackend cpu_;
  dist::Communicator& comm_;
  Provenance prov_;
};

}  // namespace yoco::cli
