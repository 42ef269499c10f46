#include "dist_backend.hpp"

#include <algorithm>
#include <cstring>

#include "cpu_ceilings.hpp"
#include "format.hpp"

namespace yoco::cli {


DistCpuBackend::DistCpuBackend(const std::string& device_name, dist::Communicator& comm)
    : cpu_(device_name), comm_(comm) {
  const Provenance cpu = cpu_.provenance();
  prov_ = Provenance::here("cpu-x" + std::to_string(comm.size()),
                           std::to_string(comm.size()) + " MPI ranks on " + cpu.device_name, cpu.driver);
}

double max_over_ranks(dist::Communicator& comm, double v, const char* what) {
  std::vector<double> all(static_cast<size_t>(comm.size()));
  comm.allgather(&v, sizeof(double), all.data(), std::string(kHarnessLabel) + what);
  return *std::max_element(all.begin(), all.end());
}

std::vector<Reading> agreed_over_ranks(dist::Communicator& comm, std::vector<Reading> rows, const char* what) {
  for (auto& r : rows) {
    r.value = max_over_ranks(comm, r.value, what);
    if (r.min) r.min = max_over_ranks(comm, *r.min, what);
    if (r.max) r.max = max_over_ranks(comm, *r.max, what);
    r.notes += "; the largest of the " + std::to_string(comm.size()) + " ranks";
  }
  return rows;
}

Ceilings DistCpuBackend::measure_ceilings(Progress& progress) {
  // Rank 0 measures (the others would share its cores), then tells the others:
  // the sweep's predictor divides by these, on every rank alike.
  CpuCeilings c;
  if (comm_.rank() == 0) {
    progress.step("measuring this machine's GEMM rate and copy bandwidth (rank 0)");
    c = measure_cpu_ceilings();
  }
  double v[7] = {c.gemm_flops, c.gemm_min, c.gemm_max, c.copy_bw, c.copy_min, c.copy_max, static_cast<double>(c.repeats)};
  comm_.broadcast(v, sizeof(v), 0, std::string(kHarnessLabel) + "ceilings");
  c = {v[0], v[1], v[2], v[3], v[4], v[5], static_cast<int>(v[6])};
  return CpuBackend::ceilings_of(c, cpu_.cpu_name());
}

double DistCpuBackend::usable_memory_bytes() const { return cpu_.usable_memory_bytes() / comm_.size(); }

std::string DistCpuBackend::usable_memory_name() const {
  return cpu_.usable_memory_name() + " / " + std::to_string(comm_.size()) + " ranks";
}

double DistCpuBackend::generation_bytes(const ModelConfig& cfg, Precision p, double batch, double prompt, double gen,
                                        double prefill_chunk) const {
  // A rank holds the weights and about 1/R of the caches (the CPU's estimate is the whole model's).
  return cpu_.generation_bytes(cfg, p, batch, prompt / comm_.size() + 1, gen, prefill_chunk);
}

std::unique_ptr<ModelRunner> DistCpuBackend::create_runner(const ModelConfig& cfg, Precision p, uint64_t seed) {
  return DistRunner::create(cfg, p, WeightSource::from_seed(seed), comm_);
}

double DistCpuBackend::time(const std::function<void()>& region) {
  return max_over_ranks(comm_, cpu_.time(region), "time");
}

std::vector<Reading> DistCpuBackend::memory_breakdown(const ModelRunner& runner, int64_t n, Precision p) {
  return agreed_over_ranks(comm_, cpu_.memory_breakdown(runner, n, p), "memory");
}

std::vector<Reading> DistCpuBackend::memory_peaks() {
  return agreed_over_ranks(comm_, cpu_.memory_peaks(), "memory peaks");
}

std::vector<PhaseReading> DistCpuBackend::decode_extras(ModelRunner& runner, int64_t batch) {
  (void)batch;
  auto* d = dynamic_cast<DistRunner*>(&runner);
  return d ? comm_readings(*d) : std::vector<PhaseReading>{};
}

std::vector<PhaseReading> DistCpuBackend::prefill_extras(ModelRunner& runner) {
  auto* d = dynamic_cast<DistRunner*>(&runner);
  return d ? comm_readings(*d, /*decode=*/false) : std::vector<PhaseReading>{};
}

std::vector<PhaseReading> comm_readings(DistRunner& runner, bool decode) {
  dist::Communicator& comm = runner.communicator();
  const int R = comm.size();
  std::vector<PhaseReading> out;
  auto add = [&](const std::string& phase, const std::map<std::string, dist::CommCount>& mine, const std::string& what) {
    // The labels are the same on every rank (the same calls in the same order); "" is every collective.
    std::vector<std::pair<std::string, dist::CommCount>> labels(mine.begin(), mine.end());
    dist::CommCount total;
    for (const auto& [label, c] : labels) {
      total.calls += c.calls;
      total.bytes_sent += c.bytes_sent;
      total.bytes_received += c.bytes_received;
    }
    labels.emplace_back("", total);
    for (const auto& [label, c] : labels) {
      const double v[3] = {static_cast<double>(c.bytes_received), static_cast<double>(c.bytes_sent),
                           static_cast<double>(c.calls)};
      std::vector<double> all(3 * static_cast<size_t>(R));
      comm.allgather(v, sizeof(v), all.data(), std::string(kHarnessLabel) + "comm");
      double recv = 0, sent = 0;
      std::string received_by_rank, sent_by_rank;
      for (int r = 0; r < R; ++r) {
        recv = std::max(recv, all[3 * r]);
        sent = std::max(sent, all[3 * r + 1]);
        received_by_rank += (r ? ", " : "") + strf("%.0f", all[3 * r]);
        sent_by_rank += (r ? ", " : "") + strf("%.0f", all[3 * r + 1]);
      }
      // Each row's note lists its own metric by rank (the sent row listed the bytes received).
      // A structured binding is not captured by a lambda before C++20's P1091 (clang 15 refuses it).
      const std::string collective = label.empty() ? ", every collective" : ", collective '" + label + "'";
      const auto notes = [&](const char* verb, const std::string& by_rank) {
        return what + collective +
               strf(", %.0f calls", all[2]) + "; the busiest of " + std::to_string(R) + " ranks (bytes " + verb +
               " by rank: " + by_rank + "); " + runner.sharding();
      };
      const std::string ph = label.empty() ? phase : phase + ":" + label;
      out.push_back({ph, {"comm_bytes_received", recv, "B", "exact", 1, notes("received", received_by_rank), {}, {}}});
      out.push_back({ph, {"comm_bytes_sent", sent, "B", "exact", 1, notes("sent", sent_by_rank), {}, {}}});
    }
  };
  add("comm", runner.last_prefill_comm(), "the last prefill");
  if (decode) add("comm_decode", runner.last_decode_comm(), "one decode step (the last)");
  return out;
}

}  // namespace yoco::cli
