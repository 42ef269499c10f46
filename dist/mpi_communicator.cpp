#include "mpi_communicator.hpp"

#include <mpi.h>

#include <climits>
#include <stdexcept>

#include "errors.hpp"

namespace yoco::dist {

namespace {
// MPI counts are int: payloads go as 8-byte elements, refused past INT_MAX of them (16 GiB).
int elements_of(int64_t bytes, const char* op, const std::string& label) {
  if (bytes < 0 || bytes % 8 != 0)
    throw std::invalid_argument(std::string(op) + " '" + label + "': " + std::to_string(bytes) +
                                " bytes is not a whole number of 8-byte elements");
  if (bytes / 8 > INT_MAX)
    throw InputError(std::string(op) + " '" + label + "': " + std::to_string(bytes) +
                     " bytes is past what one MPI collective takes here (2^31 - 1 elements of 8 bytes)");
  return static_cast<int>(bytes / 8);
}
}  // namespace

MpiCommunicator::MpiCommunicator(double timeout_s) : timeout_s_(timeout_s) {
  int initialised = 0;
  MPI_Initialized(&initialised);
  if (!initialised) {
    int provided = 0;
    MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided);
    owns_mpi_ = true;
  }
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &size_);
}

MpiCommunicator::~MpiCommunicator() {
  int finalised = 0;
  MPI_Finalized(&finalised);
  if (owns_mpi_ && !finalised) MPI_Finalize();
}

void MpiCommunicator::wait(void* requests, int n, const char* op, const std::string& label) {
  MPI_Request* req = static_cast<MPI_Request*>(requests);
  wait_or_end(op, label, timeout_s_, [&] {
    int done = 0;
    MPI_Testall(n, req, &done, MPI_STATUSES_IGNORE);
    return done != 0;
  });
}

void MpiCommunicator::allgather(const void* send, int64_t bytes, void* recv, const std::string& label) {
  const int n = elements_of(bytes, "allgather", label);
  MPI_Request req;
  MPI_Iallgather(send, n, MPI_DOUBLE, recv, n, MPI_DOUBLE, MPI_COMM_WORLD, &req);
  wait(&req, 1, "allgather", label);
  count_allgather(bytes, label);
}

void MpiCommunicator::broadcast(void* buf, int64_t bytes, int root, const std::string& label) {
  const int n = elements_of(bytes, "broadcast", label);
  MPI_Request req;
  MPI_Ibcast(buf, n, MPI_DOUBLE, root, MPI_COMM_WORLD, &req);
  wait(&req, 1, "broadcast", label);
  count_broadcast(bytes, root, label);
}

void MpiCommunicator::sendrecv(const void* send, int64_t send_bytes, int dest, void* recv, int64_t recv_bytes,
                               int src, const std::string& label) {
  const int ns = elements_of(send_bytes, "sendrecv", label), nr = elements_of(recv_bytes, "sendrecv", label);
  MPI_Request req[2];
  MPI_Irecv(recv, nr, MPI_DOUBLE, src, 7, MPI_COMM_WORLD, &req[0]);
  MPI_Isend(send, ns, MPI_DOUBLE, dest, 7, MPI_COMM_WORLD, &req[1]);
  wait(req, 2, "sendrecv", label);
  count_sendrecv(send_bytes, recv_bytes, label);
}

}  // namespace yoco::dist
