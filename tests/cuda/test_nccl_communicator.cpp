// dist/'s NCCL backend on device buffers, one rank (the lent machine has one
// GPU, and NCCL refuses two ranks on one device): every collective moves the
// bytes it should on the stream, in order with the caller's work, and counts
// them as the MPI backend does (one rank: nothing crosses a link).
#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "gpu_test_support.hpp"
#include "nccl_communicator.hpp"

namespace {

using yoco::dist::NcclCommunicator;

struct DeviceBytes {
  explicit DeviceBytes(size_t n) : n(n) { EXPECT_EQ(cudaMalloc(&p, n), cudaSuccess); }
  ~DeviceBytes() { cudaFree(p); }
  std::vector<uint8_t> host() const {
    std::vector<uint8_t> h(n);
    EXPECT_EQ(cudaMemcpy(h.data(), p, n, cudaMemcpyDeviceToHost), cudaSuccess);
    return h;
  }
  void* p = nullptr;
  size_t n;
};

std::vector<uint8_t> pattern(size_t n, int seed) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>((i * 131 + seed * 17 + 7) & 0xff);
  return v;
}

TEST(NcclCommunicator, OneRankMovesEveryCollectivesBytesOnItsStream) {
  YOCO_REQUIRE_GPU();
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  {
    NcclCommunicator comm(0, s, 60.0);
    EXPECT_EQ(comm.rank(), 0);
    EXPECT_EQ(comm.size(), 1);
    EXPECT_STREQ(comm.backend(), "nccl");
    const size_t n = (size_t{3} << 20) + 8;  // past one NCCL chunk, not a power of two
    DeviceBytes a(n), b(n);
    const std::vector<uint8_t> pa = pattern(n, 1), pb = pattern(n, 2);
    // Ordered after the caller's own work on the stream.
    ASSERT_EQ(cudaMemcpyAsync(a.p, pa.data(), n, cudaMemcpyHostToDevice, s), cudaSuccess);
    ASSERT_EQ(cudaMemsetAsync(b.p, 0, n, s), cudaSuccess);
    comm.allgather(a.p, static_cast<int64_t>(n), b.p, "gather");
    EXPECT_EQ(b.host(), pa);
    ASSERT_EQ(cudaMemcpyAsync(b.p, pb.data(), n, cudaMemcpyHostToDevice, s), cudaSuccess);
    comm.broadcast(b.p, static_cast<int64_t>(n), 0, "bcast");
    EXPECT_EQ(b.host(), pb);
    comm.sendrecv(a.p, static_cast<int64_t>(n), 0, b.p, static_cast<int64_t>(n), 0, "ring");
    EXPECT_EQ(b.host(), pa);
    const auto& c = comm.counts();
    ASSERT_EQ(c.size(), 3u);
    EXPECT_EQ(c.at("gather").calls, 1);
    EXPECT_EQ(c.at("gather").bytes_received, 0);  // R - 1 = 0 peers
    EXPECT_EQ(c.at("bcast").bytes_sent, 0);
    EXPECT_EQ(c.at("ring").bytes_sent, static_cast<int64_t>(n));  // a sendrecv counts what it moves, to itself too
    EXPECT_THROW(comm.broadcast(b.p, 8, 1, "bad root"), std::invalid_argument);
  }
  cudaStreamDestroy(s);
}

}  // namespace
