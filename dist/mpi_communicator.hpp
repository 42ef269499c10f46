#pragma once
// The MPI backend (Debian's OpenMPI, ranks started by mpirun): nonblocking
// collectives polled against a deadline, so that a rank that exited early or
// stopped taking part ends every rank with a message naming the rank, the
// collective and its label (then it exits, and mpirun ends the job), never
// a hang.
#include "communicator.hpp"

namespace yoco::dist {

class MpiCommunicator final : public Communicator {
 public:
  // Initialises MPI unless the program already did (then it also finalises
  // it); `timeout_s`: the most any one collective may take, counted from this
  // rank's call, so it includes the time its peers compute before theirs
  // (uneven shards, the last rank's decode self-decoder): keep it well above
  // the longest step.
  explicit MpiCommunicator(double timeout_s = 600.0);
  ~MpiCommunicator() override;
  MpiCommunicator(const MpiCommunicator&) = delete;
  MpiCommunicator& operator=(const MpiCommunicator&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const char* backend() const override { return "mpi"; }
  double timeout_s() const { return timeout_s_; }
  void allgather(const void* send, int64_t bytes, void* recv, const std::string& label) override;
  void broadcast(void* buf, int64_t bytes, int root, const std::string& label) override;
  void sendrecv(const void* send, int64_t send_bytes, int dest, void* recv, int64_t recv_bytes, int src,
                const std::string& label) override;

 private:
  void wait(void* requests, int n, const char* op, const std::string& label);
  int rank_ = 0, size_ = 1;
  double timeout_s_;
  bool owns_mpi_ = false;
};

}  // namespace yoco::dist
