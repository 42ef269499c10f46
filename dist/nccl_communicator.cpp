#include "nccl_communicator.hpp"

#include <nccl.h>

#include <stdexcept>

#include "errors.hpp"

namespace yoco::dist {

namespace {

void check(ncclResult_t r, const std::string& what) {
  if (r != ncclSuccess) throw DeviceError("NCCL " + what + ": " + ncclGetErrorString(r));
}
void check(cudaError_t e, const std::string& what) {
  if (e != cudaSuccess) throw DeviceError("CUDA " + what + ": " + cudaGetErrorString(e));
}

}  // namespace

NcclCommunicator::NcclCommunicator(Communicator& bootstrap, int device, cudaStream_t stream, double timeout_s)
    : stream_(stream), rank_(bootstrap.rank()), size_(bootstrap.size()), device_(device), timeout_s_(timeout_s) {
  static_assert(sizeof(ncclUniqueId) % 8 == 0, "the bootstrap moves whole 8-byte elements");
  ncclUniqueId id{};
  if (rank_ == 0) check(ncclGetUniqueId(&id), "ncclGetUniqueId");
  bootstrap.broadcast(&id, sizeof(id), 0, "nccl_bootstrap");
  init(&id);
}

NcclCommunicator::NcclCommunicator(int device, cudaStream_t stream, double timeout_s)
    : stream_(stream), device_(device), timeout_s_(timeout_s) {
  ncclUniqueId id{};
  check(ncclGetUniqueId(&id), "ncclGetUniqueId");
  init(&id);
}

void NcclCommunicator::init(const void* unique_id) {
  check(cudaSetDevice(device_), "cudaSetDevice");
  check(ncclCommInitRank(&comm_, size_, *static_cast<const ncclUniqueId*>(unique_id), rank_),
        "ncclCommInitRank (rank " + std::to_string(rank_) + " of " + std::to_string(size_) + ", device " +
            std::to_string(device_) + ")");
}

NcclCommunicator::~NcclCommunicator() {
  if (comm_) ncclCommDestroy(comm_);
}

void NcclCommunicator::wait(const char* op, const std::string& label) {
  wait_or_end(op, label, timeout_s_, [&] {
    const cudaError_t e = cudaStreamQuery(stream_);
    if (e == cudaSuccess) return true;
    ncclResult_t async = ncclSuccess;
    const ncclResult_t q = ncclCommGetAsyncError(comm_, &async);
    if (e != cudaErrorNotReady || q != ncclSuccess || async != ncclSuccess) {
      // Kernels may still wait on a peer: abort (a destroy would block), then say why.
      ncclCommAbort(comm_);
      comm_ = nullptr;
      check(e == cudaErrorNotReady ? cudaSuccess : e, std::string(op) + " '" + label + "'");
      check(q != ncclSuccess ? q : async, std::string(op) + " '" + label + "' (asynchronous error)");
    }
    return false;
  }, [&] {
    ncclCommAbort(comm_);  // frees the kernels stuck waiting for the peer
    comm_ = nullptr;
  });
}

void NcclCommunicator::allgather(const void* send, int64_t bytes, void* recv, const std::string& label) {
  if (bytes < 0) throw std::invalid_argument("allgather '" + label + "': negative size");
  check(ncclAllGather(send, recv, static_cast<size_t>(bytes), ncclChar, comm_, stream_), "allgather '" + label + "'");
  wait("allgather", label);
  count_allgather(bytes, label);
}

void NcclCommunicator::broadcast(void* buf, int64_t bytes, int root, const std::string& label) {
  if (bytes < 0 || root < 0 || root >= size_) throw std::invalid_argument("broadcast '" + label + "': bad size or root");
  check(ncclBroadcast(buf, buf, static_cast<size_t>(bytes), ncclChar, root, comm_, stream_),
        "broadcast '" + label + "'");
  wait("broadcast", label);
  count_broadcast(bytes, root, label);
}

void NcclCommunicator::sendrecv(const void* send, int64_t send_bytes, int dest, void* recv, int64_t recv_bytes,
                                int src, const std::string& label) {
  if (send_bytes < 0 || recv_bytes < 0 || dest < 0 || dest >= size_ || src < 0 || src >= size_)
    throw std::invalid_argument("sendrecv '" + label + "': bad size or rank");
  // Grouped: a ring's send and receive go together (no rank waits on the next one's receive).
  // The group is always closed (an open one would hold every later call on this thread).
  check(ncclGroupStart(), "ncclGroupStart");
  const ncclResult_t sent = ncclSend(send, static_cast<size_t>(send_bytes), ncclChar, dest, comm_, stream_);
  const ncclResult_t received = ncclRecv(recv, static_cast<size_t>(recv_bytes), ncclChar, src, comm_, stream_);
  const ncclResult_t ended = ncclGroupEnd();
  check(sent, "send '" + label + "'");
  check(received, "recv '" + label + "'");
  check(ended, "ncclGroupEnd '" + label + "'");
  wait("sendrecv", label);
  count_sendrecv(send_bytes, recv_bytes, label);
}

}  // namespace yoco::dist
