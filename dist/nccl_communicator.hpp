#pragma once
// The NCCL backend (the CUDA toolkit's NCCL) for device buffers: the same
// collectives as MpiCommunicator, on a CUDA stream, with buffers in GPU
// memory. The ranks find each other through a bootstrap communicator (MPI:
// rank 0's ncclUniqueId broadcast to the others), one GPU a rank (NCCL refuses
// two ranks on one device: ranks that share a GPU use the MPI backend with
// host-staged buffers). Each collective is waited for against a deadline, so
// that a rank that left makes the others end with a message naming the rank,
// the collective and its label (the communicator aborted, the process exited),
// never a hang.
#include <cuda_runtime.h>

#include <string>

#include "communicator.hpp"

struct ncclComm;

namespace yoco::dist {

class NcclCommunicator final : public Communicator {
 public:
  // `bootstrap`: the same ranks over another transport (its rank and size are
  // this one's); `device`: this rank's GPU; `stream`: where the collectives
  // run (the caller's work on it is ordered before and after them).
  NcclCommunicator(Communicator& bootstrap, int device, cudaStream_t stream, double timeout_s = 600.0);
  // One rank, no bootstrap: the same code path as R ranks, with no peer.
  NcclCommunicator(int device, cudaStream_t stream, double timeout_s = 600.0);
  ~NcclCommunicator() override;
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const char* backend() const override { return "nccl"; }
  // Device pointers; each call returns once the collective completed on the stream.
  void allgather(const void* send, int64_t bytes, void* recv, const std::string& label) override;
  void broadcast(void* buf, int64_t bytes, int root, const std::string& label) override;
  void sendrecv(const void* send, int64_t send_bytes, int dest, void* recv, int64_t recv_bytes, int src,
                const std::string& label) override;

 private:
  void init(const void* unique_id);
  void wait(const char* op, const std::string& label);
  ncclComm* comm_ = nullptr;
  cudaStream_t stream_;
  int rank_ = 0, size_ = 1, device_ = 0;
  double timeout_s_;
};

}  // namespace yoco::dist
