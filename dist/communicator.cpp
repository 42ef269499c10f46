#include "communicator.hpp"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

namespace yoco::dist {

namespace {
void say_ending(int rank, int size, const std::string& why) {
  std::fprintf(stderr, "yoco: rank %d of %d: %s; ending every rank\n", rank, size, why.c_str());
  std::fflush(stderr);
}
}  // namespace

void Communicator::wait_or_end(const char* op, const std::string& label, double timeout_s,
                               const std::function<bool()>& done, const std::function<void()>& abandon) const {
  const auto start = std::chrono::steady_clock::now();
  for (int spins = 0;; ++spins) {
    if (done()) return;
    const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (waited > timeout_s) {
      char why[512];
      std::snprintf(why, sizeof(why),
                    "%s '%s' did not complete within %.0f s: another rank exited early or stopped taking part", op,
                    label.c_str(), timeout_s);
      say_ending(rank(), size(), why);  // first: the backend's cleanup may itself be slow
      if (abandon) abandon();
      std::_Exit(3);
    }
    // Ranks may share cores (mpirun --oversubscribe): yield after a short spin.
    if (spins > 64) std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

void Communicator::end_job(const std::string& why) const {
  say_ending(rank(), size(), why);
  // Not MPI_Abort: with a peer already finalised, OpenMPI 4.1's abort can
  // hang in mpirun (1 run in 6 here).
  std::_Exit(3);
}

void Communicator::count_allgather(int64_t bytes, const std::string& label) {
  CommCount& c = counts_[label];
  ++c.calls;
  c.bytes_sent += (size() - 1) * bytes;
  c.bytes_received += (size() - 1) * bytes;
}

void Communicator::count_broadcast(int64_t bytes, int root, const std::string& label) {
  CommCount& c = counts_[label];
  ++c.calls;
  if (rank() == root) c.bytes_sent += (size() - 1) * bytes;
  else c.bytes_received += bytes;
}

void Communicator::count_sendrecv(int64_t send_bytes, int64_t recv_bytes, const std::string& label) {
  CommCount& c = counts_[label];
  ++c.calls;
  c.bytes_sent += send_bytes;
  c.bytes_received += recv_bytes;
}

}  // namespace yoco::dist
