#pragma once
// The collectives a rank of a sharded model needs, behind one interface with
// real transports under it (MPI here, NCCL for device buffers on a GPU): no
// home-made transport. Every collective carries a label, and each rank counts
// the bytes it moves under that label, so the communication of a prefill or a
// decode step is a result (phase `comm`), not an estimate.
#include <cstdint>
#include <functional>
#include <map>
#include <string>

namespace yoco::dist {

// What one rank moved under one label: the payload each collective must move
// at the least (allgather: its part to, and every other part from, each of
// the other ranks; broadcast: the root its buffer to each other rank, the
// others it once; sendrecv: what it sends and what it receives). A transport's own overheads (headers, tree or ring hops)
// are not counted: the formula is the transport-independent one.
struct CommCount {
  int64_t calls = 0;
  int64_t bytes_sent = 0, bytes_received = 0;
};

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual const char* backend() const = 0;  // "mpi", "nccl"
  // Every rank's `bytes` into `recv` (size() * bytes, rank-major), on every rank.
  virtual void allgather(const void* send, int64_t bytes, void* recv, const std::string& label) = 0;
  // The root's `bytes` of `buf` into every rank's `buf`.
  virtual void broadcast(void* buf, int64_t bytes, int root, const std::string& label) = 0;
  // To `dest` and from `src` at once (a ring's step): send_bytes out, recv_bytes in.
  virtual void sendrecv(const void* send, int64_t send_bytes, int dest, void* recv, int64_t recv_bytes, int src,
                        const std::string& label) = 0;

  // Ends this rank at once, saying why on stderr ("yoco: rank r of R: why;
  // ending every rank"), unfinalised with status 3, which makes mpirun end the
  // others: for a failure on one rank between collectives (its device out of
  // memory), which would leave the others waiting in the next one.
  [[noreturn]] void end_job(const std::string& why) const;

  const std::map<std::string, CommCount>& counts() const { return counts_; }
  void reset_counts() { counts_.clear(); }

 protected:
  // Polls `done` until it returns true. Past `timeout_s` (counted from this
  // call) it says which collective did not complete (this rank, `op`,
  // `label`) on stderr, runs `abandon` (the backend's cleanup), and ends this
  // process unfinalised with status 3: a rank that exits non-zero without
  // finalising makes mpirun end the whole job. Never returns in that case.
  void wait_or_end(const char* op, const std::string& label, double timeout_s, const std::function<bool()>& done,
                   const std::function<void()>& abandon = {}) const;
  void count_allgather(int64_t bytes, const std::string& label);
  void count_broadcast(int64_t bytes, int root, const std::string& label);
  void count_sendrecv(int64_t send_bytes, int64_t recv_bytes, const std::string& label);

 private:
  std::map<std::string, CommCount> counts_;
};

}  // namespace yoco::dist
