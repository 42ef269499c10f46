#include "communicator.hpp"

namespace yoco::dist {

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
