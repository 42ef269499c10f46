// The cache and position kernels (cuda/attention/cache_ops.hpp) against host
// computations on random data, every output bit compared:
// - cache writes, linear and ring, batch 1 and 3, several rows per call (ring:
//   n < W, n = W, n > W, positions crossing wraps, capacity > W), widths,
//   strides and base pointers that take the 16-byte path and ones that fall
//   back to element copies; the host writes the rows one by one in order, and
//   every element not written (poison, or a previous random cache) must keep
//   its value;
// - ring gathers at wrapping first positions, count up to W, in a wider
//   destination whose other rows and columns stay poisoned;
// - launch_rope_at bitwise equal to launch_rope at the same positions (per
//   sequence, positions near 1M included), both layouts, scale 1 and D^-1/2, and
//   within the bf16 bound of the fp64 reference apply_rope times the scale;
// - launch_rope over q and k in one pass equal to two passes, and its 4-byte
//   pair accesses equal to its 2-byte ones;
// - set and advance positions (batch 1, 3, 1000), the entries past the batch untouched;
// - a captured decode step (rope_at, ring write, advance) replayed 2W + 3 times
//   as a CUDA graph: the positions come from the device at every replay;
// - the launchers' argument checks and zero-size calls (no GPU needed).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "attention/cache_ops.hpp"
#include "device_test_data.hpp"
#include "dtype.hpp"
#include "ops/elementwise.hpp"
#include "gpu_test_support.hpp"
#include "ops.hpp"

namespace yoco::cuda {
namespace {

using namespace yoco::cuda_test;

constexpr uint16_t kPoison = 0xffff;  // what DeviceArray fills bf16 with

std::vector<uint16_t> random_bits(size_t n, uint64_t seed) {
  const auto v = random_bf16_values(n, seed);
  std::vector<uint16_t> b(n);
  for (size_t i = 0; i < n; ++i) b[i] = float_to_bf16_bits(v[i]);
  return b;
}

void upload_bits(DeviceArray<bf16>& d, const std::vector<uint16_t>& h) {
  ASSERT_EQ(h.size(), d.n);
  ASSERT_EQ(cudaMemcpy(d.ptr, h.data(), h.size() * 2, cudaMemcpyHostToDevice), cudaSuccess);
}

std::vector<uint16_t> download_bits(const DeviceArray<bf16>& d) {
  std::vector<uint16_t> h(d.n);
  EXPECT_EQ(cudaMemcpy(h.data(), d.ptr, d.n * 2, cudaMemcpyDeviceToHost), cudaSuccess);
  return h;
}

// Index of the first difference, or -1.
int64_t first_mismatch(const std::vector<uint16_t>& got, const std::vector<uint16_t>& want) {
  if (got.size() != want.size()) return 0;
  for (size_t i = 0; i < got.size(); ++i)
    if (got[i] != want[i]) return static_cast<int64_t>(i);
  return -1;
}

// Row width, the source (or ring) stride, the destination stride, and the
// destination's offset in elements from a 256-byte aligned allocation (1: not
// 16-byte aligned). The comment says which path launch_* takes.
struct CopyCase {
  int64_t width, src_stride, dst_stride, dst_off;
  const char* path;
};
const CopyCase kCopyCases[] = {
    {1024, 1024, 1024, 0, "vector"},
    {256, 264, 272, 0, "vector, strided"},
    {256, 256, 256, 8, "vector, destination 16 B in"},
    {250, 250, 256, 0, "scalar: width"},
    {256, 260, 256, 0, "scalar: source stride"},
    {256, 256, 256, 1, "scalar: destination address"},
    {3, 5, 7, 3, "scalar: tiny"},
};

// The semantics, row by row in order: row i of sequence b to position pos0[b] + i.
void host_write_rows(std::vector<uint16_t>& cache, int64_t off, const std::vector<uint16_t>& src, int64_t src_stride,
                     int64_t batch, int64_t n, int64_t width, const std::vector<int64_t>& pos0, int64_t capacity,
                     int64_t cache_stride, int64_t ring) {
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t i = 0; i < n; ++i) {
      const int64_t p = pos0[static_cast<size_t>(b)] + i, row = ring > 0 ? p % ring : p;
      for (int64_t c = 0; c < width; ++c)
        cache[static_cast<size_t>(off + (b * capacity + row) * cache_stride + c)] =
            src[static_cast<size_t>((b * n + i) * src_stride + c)];
    }
}

// One launch_cache_write_rows against host_write_rows; `prior`: the cache starts
// random (a previous state) instead of poisoned.
void check_write(const CopyCase& cc, int64_t batch, int64_t n, int64_t capacity, int64_t ring,
                 const std::vector<int64_t>& pos0, bool prior, uint64_t seed) {
  SCOPED_TRACE(std::string(cc.path) + ": batch " + std::to_string(batch) + " n " + std::to_string(n) + " capacity " +
               std::to_string(capacity) + " ring " + std::to_string(ring) + (prior ? " prior" : " poison"));
  const int64_t src_elems = batch * n * cc.src_stride, cache_elems = cc.dst_off + batch * capacity * cc.dst_stride;
  const auto src = random_bits(static_cast<size_t>(src_elems), seed);
  std::vector<uint16_t> want =
      prior ? random_bits(static_cast<size_t>(cache_elems), seed + 1) : std::vector<uint16_t>(cache_elems, kPoison);
  DeviceArray<bf16> dsrc(static_cast<size_t>(src_elems)), dcache(static_cast<size_t>(cache_elems));
  DeviceArray<int64_t> dpos(static_cast<size_t>(batch));
  upload_bits(dsrc, src);
  if (prior) upload_bits(dcache, want);
  upload(dpos, std::vector<int64_t>(pos0.begin(), pos0.begin() + batch));
  ASSERT_EQ(launch_cache_write_rows(dsrc.ptr, cc.src_stride, batch, n, cc.width, dpos.ptr, dcache.ptr + cc.dst_off,
                                    capacity, cc.dst_stride, ring, nullptr),
            cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  host_write_rows(want, cc.dst_off, src, cc.src_stride, batch, n, cc.width, pos0, capacity, cc.dst_stride, ring);
  const auto got = download_bits(dcache);
  const int64_t bad = first_mismatch(got, want);
  EXPECT_EQ(bad, -1) << "element " << bad << " got " << (bad >= 0 ? got[bad] : 0) << " want "
                     << (bad >= 0 ? want[bad] : 0);
  EXPECT_EQ(download(dpos), std::vector<int64_t>(pos0.begin(), pos0.begin() + batch)) << "pos0 must not change";
}

TEST(CudaCacheOps, LinearWritesPutEveryRowAtItsPosition) {
  YOCO_REQUIRE_GPU();
  uint64_t seed = 100;
  for (const CopyCase& cc : kCopyCases)
    for (int64_t batch : {1, 3})
      for (int64_t n : {1, 5, 37}) {
        const int64_t capacity = n + 20;
        // Sequences at different positions: the start, the very end, the middle.
        const std::vector<int64_t> pos0 = {0, capacity - n, (capacity - n) / 2};
        check_write(cc, batch, n, capacity, 0, pos0, (seed & 1) != 0, seed);
        ++seed;
      }
}

TEST(CudaCacheOps, RingWritesEqualWritingTheRowsOneByOne) {
  YOCO_REQUIRE_GPU();
  uint64_t seed = 500;
  for (const CopyCase& cc : kCopyCases)
    for (int64_t batch : {1, 3})
      for (int64_t W : {1, 16})
        for (int64_t n : {1, 3, 16, 21, 35}) {
          // pos0 crossing wraps: slot 0, the last slot, several laps in.
          const std::vector<int64_t> pos0 = {0, W - 1, 5 * W + 2};
          // capacity > W once: rows past W must stay untouched.
          const int64_t capacity = (n == 21) ? W + 3 : W;
          check_write(cc, batch, n, capacity, W, pos0, (seed & 1) != 0, seed);
          ++seed;
        }
}

TEST(CudaCacheOps, RingGatherUnrollsPositionsInOrder) {
  YOCO_REQUIRE_GPU();
  uint64_t seed = 900;
  const int64_t W = 16;
  for (const CopyCase& cc : kCopyCases)
    for (int64_t batch : {1, 3})
      for (int64_t first : {0, 13, 87})
        for (int64_t count : {1, 9, 16}) {
          SCOPED_TRACE(std::string(cc.path) + ": batch " + std::to_string(batch) + " first " + std::to_string(first) +
                       " count " + std::to_string(count));
          const int64_t dst_rows = count + 2;  // two more rows that must stay poisoned
          const int64_t ring_elems = batch * W * cc.src_stride, dst_elems = cc.dst_off + batch * dst_rows * cc.dst_stride;
          const auto ring = random_bits(static_cast<size_t>(ring_elems), seed++);
          DeviceArray<bf16> dring(static_cast<size_t>(ring_elems)), ddst(static_cast<size_t>(dst_elems));
          upload_bits(dring, ring);
          ASSERT_EQ(launch_ring_gather(dring.ptr, cc.src_stride, W, batch, first, count, cc.width, ddst.ptr + cc.dst_off,
                                       dst_rows, cc.dst_stride, nullptr),
                    cudaSuccess);
          ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
          std::vector<uint16_t> want(static_cast<size_t>(dst_elems), kPoison);
          for (int64_t b = 0; b < batch; ++b)
            for (int64_t t = 0; t < count; ++t)
              for (int64_t c = 0; c < cc.width; ++c)
                want[static_cast<size_t>(cc.dst_off + (b * dst_rows + t) * cc.dst_stride + c)] =
                    ring[static_cast<size_t>((b * W + (first + t) % W) * cc.src_stride + c)];
          const auto got = download_bits(ddst);
          EXPECT_EQ(first_mismatch(got, want), -1);
          EXPECT_EQ(download_bits(dring), ring) << "the ring must not change";
        }
}

// launch_rope_at over all rows at once vs launch_rope once per sequence at that
// sequence's position: the same bits. And both vs the fp64 reference. Five
// heads: launch_rope rotates four heads at a time, then one.
TEST(CudaCacheOps, RopeAtEqualsRopeAtTheSamePositions) {
  YOCO_REQUIRE_GPU();
  const int64_t heads = 5, D = 128, stride = heads * D + 40;
  const std::vector<int64_t> seq_pos = {(int64_t{1} << 20) - 7, 3, 1000};
  uint64_t seed = 1300;
  for (RopeLayout layout : {RopeLayout::interleaved, RopeLayout::half_split})
    for (double scale : {1.0, 1.0 / std::sqrt(static_cast<double>(D))})
      for (int64_t batch : {1, 3})
        for (int64_t rps : {1, 5}) {
          SCOPED_TRACE(std::string(layout == RopeLayout::interleaved ? "interleaved" : "half-split") + " scale " +
                       std::to_string(scale) + " batch " + std::to_string(batch) + " rows/seq " +
                       std::to_string(rps));
          const int64_t rows = batch * rps;
          const auto x = random_bits(static_cast<size_t>(rows * stride), seed++);
          const auto inv = layout == RopeLayout::interleaved ? rope_inv_freq_linspace(D, 10000.0)
                                                            : rope_inv_freq_pow(D, 10000.0);
          DeviceArray<bf16> da(x.size()), db(x.size());
          DeviceArray<double> dinv(inv.size());
          DeviceArray<int64_t> dpos(static_cast<size_t>(batch));
          upload_bits(da, x);
          upload_bits(db, x);
          upload(dinv, inv);
          upload(dpos, std::vector<int64_t>(seq_pos.begin(), seq_pos.begin() + batch));
          ASSERT_EQ(launch_rope_at(da.ptr, rows, stride, heads, D, dpos.ptr, rps, dinv.ptr, layout, scale, nullptr),
                    cudaSuccess);
          for (int64_t b = 0; b < batch; ++b) {
            const cudaError_t e =
                scale == 1.0 ? launch_rope(db.ptr + b * rps * stride, rps, stride, heads, D, seq_pos[b], rps, dinv.ptr,
                                           layout, nullptr)  // the default scale
                             : launch_rope(db.ptr + b * rps * stride, rps, stride, heads, D, seq_pos[b], rps, dinv.ptr,
                                           layout, nullptr, scale);
            ASSERT_EQ(e, cudaSuccess);
          }
          ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
          const auto got = download_bits(da), ref_bits = download_bits(db);
          EXPECT_EQ(first_mismatch(got, ref_bits), -1) << "rope_at and rope differ";
          // The fp64 reference, scaled after the rotation; columns past the heads untouched.
          std::vector<float> xf(x.size());
          for (size_t i = 0; i < x.size(); ++i) xf[i] = bf16_bits_to_float(x[i]);
          Mat<double> ref = to_mat(xf, rows, stride).leftCols(heads * D);
          std::vector<int64_t> pos(static_cast<size_t>(rows));
          for (int64_t r = 0; r < rows; ++r) pos[static_cast<size_t>(r)] = seq_pos[r / rps] + r % rps;
          apply_rope(ref, heads, D, pos, inv, layout);
          ref *= scale;
          std::vector<double> want, have;
          for (int64_t r = 0; r < rows; ++r) {
            for (int64_t c = 0; c < heads * D; ++c) {
              want.push_back(ref(r, c));
              have.push_back(bf16_bits_to_float(got[static_cast<size_t>(r * stride + c)]));
            }
            for (int64_t c = heads * D; c < stride; ++c)
              ASSERT_EQ(got[static_cast<size_t>(r * stride + c)], x[static_cast<size_t>(r * stride + c)]) << "untouched";
          }
          EXPECT_LE(rms_error(have, want), bf16_output_bound(want));
          EXPECT_EQ(download(dpos), std::vector<int64_t>(seq_pos.begin(), seq_pos.begin() + batch));
        }
}

// launch_rope over q and k in one pass (the first `unscaled_heads` heads at
// scale 1, the rest at D^-1/2) vs a pass over q at scale 1 then one over k at
// D^-1/2: the same bits. Five heads each, so a group of four spans the q/k
// boundary. And the interleaved layout's 4-byte pair accesses (an aligned
// buffer) vs its 2-byte ones (the same rows one element into the buffer):
// the same bits.
TEST(CudaCacheOps, RopeOfQAndKInOnePassEqualsTwoPasses) {
  YOCO_REQUIRE_GPU();
  const int64_t heads = 5, D = 64, stride = 4 * heads * D + 2, rows = 37;  // q | k | v | g and a pad
  const double scale = 1.0 / std::sqrt(static_cast<double>(D));
  uint64_t seed = 1400;
  for (RopeLayout layout : {RopeLayout::interleaved, RopeLayout::half_split}) {
    SCOPED_TRACE(layout == RopeLayout::interleaved ? "interleaved" : "half-split");
    const auto x = random_bits(static_cast<size_t>(rows * stride), seed++);
    const auto inv = rope_inv_freq_linspace(D, 10000.0);
    DeviceArray<bf16> one(x.size()), two(x.size()), shifted(x.size() + 1);
    DeviceArray<double> dinv(inv.size());
    upload_bits(one, x);
    upload_bits(two, x);
    std::vector<uint16_t> xs(x.size() + 1, 0);
    std::copy(x.begin(), x.end(), xs.begin() + 1);
    upload_bits(shifted, xs);
    upload(dinv, inv);
    const int64_t pos0 = (int64_t{1} << 20) - 11;
    ASSERT_EQ(launch_rope(one.ptr, rows, stride, 2 * heads, D, pos0, rows, dinv.ptr, layout, nullptr, scale, heads),
              cudaSuccess);
    ASSERT_EQ(launch_rope(two.ptr, rows, stride, heads, D, pos0, rows, dinv.ptr, layout, nullptr), cudaSuccess);
    ASSERT_EQ(launch_rope(two.ptr + heads * D, rows, stride, heads, D, pos0, rows, dinv.ptr, layout, nullptr, scale),
              cudaSuccess);
    ASSERT_EQ(launch_rope(shifted.ptr + 1, rows, stride, 2 * heads, D, pos0, rows, dinv.ptr, layout, nullptr, scale,
                          heads),
              cudaSuccess);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    const auto a = download_bits(one), b = download_bits(two), c = download_bits(shifted);
    EXPECT_EQ(first_mismatch(a, b), -1) << "one pass over q and k differs from two";
    if (layout == RopeLayout::interleaved) {  // the half-split layout has only the 2-byte path
      EXPECT_EQ(first_mismatch(a, std::vector<uint16_t>(c.begin() + 1, c.end())), -1)
          << "the 4-byte and the 2-byte pair accesses differ";
    }
    EXPECT_NE(first_mismatch(a, x), -1) << "nothing was rotated";
  }
  DeviceArray<bf16> buf(16);
  DeviceArray<double> dinv(8);
  EXPECT_EQ(launch_rope(buf.ptr, 1, 16, 1, 16, 0, 1, dinv.ptr, RopeLayout::interleaved, nullptr, 1.0, -1),
            cudaErrorInvalidValue);
}

TEST(CudaCacheOps, SetAndAdvancePositions) {
  YOCO_REQUIRE_GPU();
  for (int64_t batch : {1, 3, 1000}) {
    SCOPED_TRACE("batch " + std::to_string(batch));
    const size_t n = static_cast<size_t>(batch) + 2;  // two entries past the batch stay poisoned (-1)
    DeviceArray<int64_t> pos(n), len(n);
    ASSERT_EQ(launch_set_positions(pos.ptr, len.ptr, batch, 123, nullptr), cudaSuccess);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    std::vector<int64_t> want_pos(n, -1), want_len(n, -1);
    for (int64_t b = 0; b < batch; ++b) {
      want_pos[static_cast<size_t>(b)] = 123;
      want_len[static_cast<size_t>(b)] = 124;
    }
    EXPECT_EQ(download(pos), want_pos);
    EXPECT_EQ(download(len), want_len);
    // Different positions per sequence, then three steps.
    std::vector<int64_t> start(n, -1);
    for (int64_t b = 0; b < batch; ++b) start[static_cast<size_t>(b)] = (b * 7919) % 100003 + (b == 1 ? 1 << 20 : 0);
    upload(pos, start);
    for (int step = 0; step < 3; ++step) ASSERT_EQ(launch_advance_positions(pos.ptr, len.ptr, batch, nullptr), cudaSuccess);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    for (int64_t b = 0; b < batch; ++b) {
      want_pos[static_cast<size_t>(b)] = start[static_cast<size_t>(b)] + 3;
      want_len[static_cast<size_t>(b)] = start[static_cast<size_t>(b)] + 4;
    }
    EXPECT_EQ(download(pos), want_pos);
    EXPECT_EQ(download(len), want_len);
  }
}

// The decode step as a runner captures it: rotate the new key rows at the
// device positions, write them into the ring, advance. Replayed as a graph, each
// step must use that step's positions.
TEST(CudaCacheOps, CapturedDecodeStepReplaysAtAdvancingPositions) {
  YOCO_REQUIRE_GPU();
  const int64_t batch = 3, heads = 2, D = 128, width = heads * D, W = 8, steps = 2 * W + 3;
  const std::vector<int64_t> start = {0, 5, 8 * W - 1};
  const auto inv = rope_inv_freq_linspace(D, 10000.0);
  const double scale = 1.0 / std::sqrt(static_cast<double>(D));
  DeviceArray<bf16> src(static_cast<size_t>(batch * width)), check(static_cast<size_t>(batch * width));
  DeviceArray<bf16> ring(static_cast<size_t>(batch * W * width));
  DeviceArray<int64_t> pos(static_cast<size_t>(batch)), len(static_cast<size_t>(batch));
  DeviceArray<double> dinv(inv.size());
  upload(dinv, inv);
  upload(pos, start);
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  EXPECT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  EXPECT_EQ(launch_rope_at(src.ptr, batch, width, heads, D, pos.ptr, 1, dinv.ptr, RopeLayout::interleaved, scale, stream),
            cudaSuccess);
  EXPECT_EQ(launch_cache_write_rows(src.ptr, width, batch, 1, width, pos.ptr, ring.ptr, W, width, W, stream),
            cudaSuccess);
  EXPECT_EQ(launch_advance_positions(pos.ptr, len.ptr, batch, stream), cudaSuccess);
  EXPECT_EQ(cudaStreamEndCapture(stream, &graph), cudaSuccess);
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  std::vector<uint16_t> want(static_cast<size_t>(batch * W * width), kPoison);
  for (int64_t t = 0; t < steps; ++t) {
    SCOPED_TRACE("step " + std::to_string(t));
    const auto k = random_bits(static_cast<size_t>(batch * width), 2000 + static_cast<uint64_t>(t));
    upload_bits(src, k);
    upload_bits(check, k);
    ASSERT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    // The expected rotated rows: launch_rope at each sequence's position this step.
    for (int64_t b = 0; b < batch; ++b)
      ASSERT_EQ(launch_rope(check.ptr + b * width, 1, width, heads, D, start[b] + t, 1, dinv.ptr,
                            RopeLayout::interleaved, nullptr, scale),
                cudaSuccess);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    const auto rotated = download_bits(check);
    EXPECT_EQ(first_mismatch(download_bits(src), rotated), -1) << "rope_at in the graph";
    for (int64_t b = 0; b < batch; ++b) {
      const int64_t slot = (start[b] + t) % W;
      for (int64_t c = 0; c < width; ++c)
        want[static_cast<size_t>((b * W + slot) * width + c)] = rotated[static_cast<size_t>(b * width + c)];
    }
    EXPECT_EQ(first_mismatch(download_bits(ring), want), -1) << "ring";
    std::vector<int64_t> want_pos(start), want_len(start);
    for (int64_t b = 0; b < batch; ++b) {
      want_pos[static_cast<size_t>(b)] += t + 1;
      want_len[static_cast<size_t>(b)] += t + 2;
    }
    EXPECT_EQ(download(pos), want_pos);
    EXPECT_EQ(download(len), want_len);
  }
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(stream);
}

// Invalid arguments are refused and zero-size calls succeed, both before any
// CUDA call: no device needed (the pointers are never dereferenced).
TEST(CudaCacheOps, ArgumentChecks) {
  auto* p = reinterpret_cast<bf16*>(uintptr_t{0x1000});
  auto* ip = reinterpret_cast<int64_t*>(uintptr_t{0x2000});
  auto* dp = reinterpret_cast<const double*>(uintptr_t{0x3000});
  const cudaError_t bad = cudaErrorInvalidValue, ok = cudaSuccess;
  // launch_cache_write_rows(src, src_stride, batch, n, width, pos0, cache, capacity, cache_stride, ring, stream)
  EXPECT_EQ(launch_cache_write_rows(p, 8, -1, 1, 8, ip, p, 8, 8, 0, nullptr), bad);
  EXPECT_EQ(launch_cache_write_rows(p, 8, 1, -1, 8, ip, p, 8, 8, 0, nullptr), bad);
  EXPECT_EQ(launch_cache_write_rows(p, 8, 1, 1, -8, ip, p, 8, 8, 0, nullptr), bad);
  EXPECT_EQ(launch_cache_write_rows(p, 8, 1, 1, 8, ip, p, 8, 8, -1, nullptr), bad);    // ring < 0
  EXPECT_EQ(launch_cache_write_rows(p, 8, 1, 1, 8, ip, p, 7, 8, 8, nullptr), bad);     // capacity < W
  EXPECT_EQ(launch_cache_write_rows(p, 8, 1, 9, 8, ip, p, 8, 8, 0, nullptr), bad);     // n > capacity
  EXPECT_EQ(launch_cache_write_rows(p, 4, 1, 1, 8, ip, p, 8, 8, 0, nullptr), bad);     // width > src stride
  EXPECT_EQ(launch_cache_write_rows(p, 8, 1, 1, 8, ip, p, 8, 4, 0, nullptr), bad);     // width > cache stride
  EXPECT_EQ(launch_cache_write_rows(nullptr, 8, 1, 1, 8, ip, p, 8, 8, 0, nullptr), bad);
  EXPECT_EQ(launch_cache_write_rows(p, 8, 1, 1, 8, nullptr, p, 8, 8, 0, nullptr), bad);
  EXPECT_EQ(launch_cache_write_rows(p, 8, 0, 1, 8, ip, p, 8, 8, 0, nullptr), ok);      // batch 0
  EXPECT_EQ(launch_cache_write_rows(p, 8, 1, 0, 8, ip, p, 8, 8, 4, nullptr), ok);      // n 0
  EXPECT_EQ(launch_cache_write_rows(p, 8, 1, 20, 0, ip, p, 8, 8, 8, nullptr), ok);     // width 0, ring n > W
  // launch_ring_gather(ring, ring_stride, window, batch, first, count, width, dst, dst_rows, dst_stride, stream)
  EXPECT_EQ(launch_ring_gather(p, 8, 0, 1, 0, 0, 8, p, 4, 8, nullptr), bad);           // window < 1
  EXPECT_EQ(launch_ring_gather(p, 8, 4, 1, -1, 1, 8, p, 4, 8, nullptr), bad);          // first < 0
  EXPECT_EQ(launch_ring_gather(p, 8, 4, 1, 0, 5, 8, p, 8, 8, nullptr), bad);           // count > W
  EXPECT_EQ(launch_ring_gather(p, 8, 4, 1, 0, 4, 8, p, 3, 8, nullptr), bad);           // count > dst rows
  EXPECT_EQ(launch_ring_gather(p, 8, 4, 1, 0, 4, 9, p, 4, 16, nullptr), bad);          // width > ring stride
  EXPECT_EQ(launch_ring_gather(p, 8, 4, -1, 0, 4, 8, p, 4, 8, nullptr), bad);
  EXPECT_EQ(launch_ring_gather(p, 8, 4, 1, 0, 0, 8, p, 4, 8, nullptr), ok);            // count 0
  EXPECT_EQ(launch_ring_gather(p, 8, 4, 0, 0, 4, 8, p, 4, 8, nullptr), ok);            // batch 0
  // launch_rope_at(x, rows, row_stride, n_heads, head_dim, positions, rows_per_seq, inv_freq, layout, scale, stream)
  EXPECT_EQ(launch_rope_at(p, 1, 384, 3, 127, ip, 1, dp, RopeLayout::interleaved, 1.0, nullptr), bad);  // odd D
  EXPECT_EQ(launch_rope_at(p, 1, 384, 3, 128, ip, 0, dp, RopeLayout::interleaved, 1.0, nullptr), bad);  // rows/seq
  EXPECT_EQ(launch_rope_at(p, -1, 384, 3, 128, ip, 1, dp, RopeLayout::interleaved, 1.0, nullptr), bad);
  EXPECT_EQ(launch_rope_at(p, 1, 383, 3, 128, ip, 1, dp, RopeLayout::interleaved, 1.0, nullptr), bad);  // stride
  EXPECT_EQ(launch_rope_at(p, 1, 384, 3, 128, nullptr, 1, dp, RopeLayout::interleaved, 1.0, nullptr), bad);
  EXPECT_EQ(launch_rope_at(p, 0, 384, 3, 128, ip, 1, dp, RopeLayout::interleaved, 1.0, nullptr), ok);
  // positions
  EXPECT_EQ(launch_advance_positions(ip, ip, -1, nullptr), bad);
  EXPECT_EQ(launch_advance_positions(nullptr, ip, 2, nullptr), bad);
  EXPECT_EQ(launch_advance_positions(ip, ip, 0, nullptr), ok);
  EXPECT_EQ(launch_set_positions(ip, ip, -1, 0, nullptr), bad);
  EXPECT_EQ(launch_set_positions(ip, ip, 0, 5, nullptr), ok);
}

}  // namespace
}  // namespace yoco::cuda
