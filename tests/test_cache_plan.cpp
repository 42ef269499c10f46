// The cache kernels' index maths (cuda/attention/cache_plan.hpp) on the CPU, before any
// GPU runs it (KERNELS.md §6):
// - a ring write of n rows at pos0 (only the last min(n, W) rows written, in
//   parallel) leaves exactly the state of writing the n rows one by one, and no
//   two written rows share a slot (no race), over a grid of W, pos0 and n with
//   n < W, n = W, n > W and pos0 crossing wraps; a linear write puts row i at
//   pos0 + i and writes every row;
// - after a history of ring writes in random chunk sizes, the gather returns
//   positions first .. first + count - 1 in order, for every valid (first, count);
// - RoPE row positions equal positions[b] + k for row b * rows_per_seq + k;
// - the flattened copy range visits every (sequence, row, chunk) exactly once;
// - the 16-byte vector rule;
// - int64 offsets past 2^31 elements (1M + 1024 rows, batch 8, 3072 wide) exact.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <random>
#include <set>
#include <vector>

#include "attention/cache_plan.hpp"

namespace yoco::cuda::cache_plan {
namespace {

// Usable at compile time (and so on the device without surprises).
static_assert(rows_written(10, 4) == 4 && first_written_row(10, 4) == 6);
static_assert(rows_written(3, 4) == 3 && first_written_row(3, 4) == 0);
static_assert(rows_written(10, 0) == 10 && first_written_row(10, 0) == 0);
static_assert(cache_dest_row(5, 2, 4) == 3 && cache_dest_row(5, 2, 0) == 7);
static_assert(gather_src_slot(6, 3, 4) == 1);
static_assert(rope_position(100, 7, 3) == 101 && rope_seq_of_row(7, 3) == 2);

// What the kernel does: rows with row_is_written go to cache_dest_row, all at once.
// Returns false if two written rows share a destination (a race on the GPU).
bool plan_write(std::vector<int64_t>& slots, int64_t pos0, int64_t n, int64_t ring, const std::vector<int64_t>& src) {
  std::set<int64_t> seen;
  int64_t written = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (!row_is_written(i, n, ring)) continue;
    const int64_t d = cache_dest_row(pos0, i, ring);
    if (!seen.insert(d).second) return false;
    slots[static_cast<size_t>(d)] = src[static_cast<size_t>(i)];
    ++written;
  }
  return written == rows_written(n, ring);
}

TEST(CachePlan, RingWriteEqualsSequentialWrites) {
  for (int64_t W : {1, 2, 3, 4, 5, 7, 8, 16}) {
    for (int64_t pos0 = 0; pos0 <= 3 * W + 2; ++pos0) {
      for (int64_t n = 0; n <= 3 * W + 2; ++n) {
        SCOPED_TRACE("W " + std::to_string(W) + " pos0 " + std::to_string(pos0) + " n " + std::to_string(n));
        // Prior contents: distinct negative markers, so stale slots are visible.
        std::vector<int64_t> seq(static_cast<size_t>(W)), par;
        for (int64_t s = 0; s < W; ++s) seq[static_cast<size_t>(s)] = -1 - s;
        par = seq;
        std::vector<int64_t> src(static_cast<size_t>(n));
        for (int64_t i = 0; i < n; ++i) src[static_cast<size_t>(i)] = 1000 * (pos0 + i) + 7;  // tagged by position
        for (int64_t i = 0; i < n; ++i) seq[static_cast<size_t>((pos0 + i) % W)] = src[static_cast<size_t>(i)];
        ASSERT_TRUE(plan_write(par, pos0, n, W, src)) << "two written rows share a slot, or wrong count";
        ASSERT_EQ(par, seq);
        // Every slot that holds a row of this call holds the position congruent to it.
        for (int64_t s = 0; s < W; ++s) {
          if (par[static_cast<size_t>(s)] >= 0) {
            EXPECT_EQ(((par[static_cast<size_t>(s)] - 7) / 1000) % W, s);
          }
        }
        // The written rows are exactly the last min(n, W).
        for (int64_t i = 0; i < n; ++i) EXPECT_EQ(row_is_written(i, n, W), i >= n - std::min(n, W)) << i;
      }
    }
  }
}

TEST(CachePlan, LinearWriteWritesEveryRowAtItsPosition) {
  for (int64_t pos0 : std::initializer_list<int64_t>{0, 1, 5, 1000, (int64_t{1} << 20) + 17}) {
    for (int64_t n : {0, 1, 2, 7, 64, 300}) {
      EXPECT_EQ(rows_written(n, 0), n);
      EXPECT_EQ(first_written_row(n, 0), 0);
      std::vector<int64_t> cache(static_cast<size_t>(pos0 + n), -1), src(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) src[static_cast<size_t>(i)] = pos0 + i;
      ASSERT_TRUE(plan_write(cache, pos0, n, 0, src));
      for (int64_t p = 0; p < pos0 + n; ++p) EXPECT_EQ(cache[static_cast<size_t>(p)], p < pos0 ? -1 : p) << p;
    }
  }
}

// Prefill in random chunks through the ring (each chunk as the kernel writes it),
// then every valid gather reads back positions first .. first + count - 1.
TEST(CachePlan, GatherAfterChunkedRingWritesReturnsPositionsInOrder) {
  std::mt19937_64 rng(11);
  for (int64_t W : {1, 2, 3, 4, 7, 8, 16, 33}) {
    for (int trial = 0; trial < 6; ++trial) {
      std::vector<int64_t> ring(static_cast<size_t>(W), -1);
      int64_t len = 0;
      const int64_t total = 4 * W + static_cast<int64_t>(rng() % 7);
      while (len < total) {
        const int64_t n = std::min<int64_t>(total - len, 1 + static_cast<int64_t>(rng() % (2 * W + 2)));
        std::vector<int64_t> src(static_cast<size_t>(n));
        for (int64_t i = 0; i < n; ++i) src[static_cast<size_t>(i)] = len + i;  // the row holds its position
        ASSERT_TRUE(plan_write(ring, len, n, W, src));
        len += n;
        // The ring holds exactly positions [max(0, len - W), len), at their slots.
        for (int64_t p = std::max<int64_t>(0, len - W); p < len; ++p)
          ASSERT_EQ(ring[static_cast<size_t>(decode_plan::ring_slot(p, W))], p) << "W " << W << " len " << len;
        for (int64_t first = std::max<int64_t>(0, len - W); first <= len; ++first) {
          for (int64_t count = 0; first + count <= len && count <= W; ++count) {
            for (int64_t t = 0; t < count; ++t) {
              const int64_t s = gather_src_slot(first, t, W);
              ASSERT_GE(s, 0);
              ASSERT_LT(s, W);
              ASSERT_EQ(ring[static_cast<size_t>(s)], first + t)
                  << "W " << W << " len " << len << " first " << first << " t " << t;
            }
          }
        }
      }
    }
  }
}

TEST(CachePlan, RopeRowPositions) {
  const std::vector<int64_t> positions = {0, 5, (int64_t{1} << 20) - 3, 77};
  for (int64_t rps : {1, 2, 3, 64}) {
    for (int64_t b = 0; b < static_cast<int64_t>(positions.size()); ++b) {
      for (int64_t k = 0; k < rps; ++k) {
        const int64_t r = b * rps + k;
        ASSERT_EQ(rope_seq_of_row(r, rps), b);
        ASSERT_EQ(rope_position(positions[static_cast<size_t>(rope_seq_of_row(r, rps))], r, rps),
                  positions[static_cast<size_t>(b)] + k);
      }
    }
  }
}

TEST(CachePlan, CopyItemsVisitEveryChunkOnce) {
  for (int64_t batch : {1, 2, 3, 8}) {
    for (int64_t rows : {1, 2, 5, 17}) {
      for (int64_t chunks : {1, 3, 8, 128}) {
        const int64_t total = copy_items(batch, rows, chunks);
        ASSERT_EQ(total, batch * rows * chunks);
        std::vector<int> hit(static_cast<size_t>(total), 0);
        for (int64_t e = 0; e < total; ++e) {
          const CopyItem it = copy_item(e, rows, chunks);
          ASSERT_GE(it.b, 0);
          ASSERT_LT(it.b, batch);
          ASSERT_GE(it.j, 0);
          ASSERT_LT(it.j, rows);
          ASSERT_GE(it.c, 0);
          ASSERT_LT(it.c, chunks);
          ++hit[static_cast<size_t>((it.b * rows + it.j) * chunks + it.c)];
        }
        for (int h : hit) ASSERT_EQ(h, 1);
      }
    }
  }
  // Far past 2^32 items: batch 8, 1M + 1024 rows, 3072 elements each.
  const int64_t rows = (int64_t{1} << 20) + 1024, chunks = 3072;
  const int64_t e = copy_items(8, rows, chunks) - 1;
  const CopyItem last = copy_item(e, rows, chunks);
  EXPECT_EQ(last.b, 7);
  EXPECT_EQ(last.j, rows - 1);
  EXPECT_EQ(last.c, chunks - 1);
  const CopyItem mid = copy_item((5 * rows + 123456) * chunks + 77, rows, chunks);
  EXPECT_EQ(mid.b, 5);
  EXPECT_EQ(mid.j, 123456);
  EXPECT_EQ(mid.c, 77);
}

TEST(CachePlan, Vec16Rule) {
  EXPECT_TRUE(vec16_ok(1024, 1024, 3072, 0x1000, 0x2000));
  EXPECT_TRUE(vec16_ok(8, 8, 16, 16, 32));
  EXPECT_FALSE(vec16_ok(1020, 1024, 1024, 0x1000, 0x2000));  // width
  EXPECT_FALSE(vec16_ok(1024, 1028, 1024, 0x1000, 0x2000));  // source stride
  EXPECT_FALSE(vec16_ok(1024, 1024, 1030, 0x1000, 0x2000));  // destination stride
  EXPECT_FALSE(vec16_ok(1024, 1024, 1024, 0x1008, 0x2000));  // source address
  EXPECT_FALSE(vec16_ok(1024, 1024, 1024, 0x1000, 0x2002));  // destination address
}

TEST(CachePlan, OffsetsPast2To31AreExact) {
  // Sequence 7 of a [8, 1M + 1024, 3072] cache: element offsets near 2.6e10.
  const int64_t cap = (int64_t{1} << 20) + 1024, stride = 3072;
  for (int64_t row : {int64_t{0}, int64_t{1}, cap / 2, cap - 1}) {
    const int64_t off = row_offset(7, cap, row, stride);
    const __int128 want = (static_cast<__int128>(7) * cap + row) * stride;
    ASSERT_EQ(static_cast<__int128>(off), want) << row;
    ASSERT_GT(off, int64_t{std::numeric_limits<int32_t>::max()});
    // The same row counted in 16-byte vectors.
    EXPECT_EQ(row_offset(7, cap, row, stride / kVecElems) * kVecElems, off);
  }
  // A ring write at a far position, and a gather from it.
  const int64_t W = 1024, pos0 = (int64_t{1} << 20) + 1000;
  EXPECT_EQ(cache_dest_row(pos0, 30, W), (pos0 + 30) % W);
  EXPECT_EQ(gather_src_slot(pos0, 30, W), (pos0 + 30) % W);
  EXPECT_EQ(row_offset(7, W, cache_dest_row(pos0, 30, W), stride), (7 * W + (pos0 + 30) % W) * stride);
  // Linear destination rows past 2^31 tokens stay exact too.
  EXPECT_EQ(cache_dest_row(int64_t{3} << 31, 5, 0), (int64_t{3} << 31) + 5);
}

}  // namespace
}  // namespace yoco::cuda::cache_plan

namespace yoco::cuda::cache_plan {
namespace {

// A prefill step's rows stay within the chunk whatever the batch; every
// sequence moves at least one token per step, and the steps cover the prompt.
TEST(CachePlan, PrefillStepsStayWithinTheChunk) {
  for (int64_t chunk : {1, 7, 64, 32768})
    for (int64_t batch : {1, 2, 3, 18, 400, 40000})
      for (int64_t length : {1, 5, 1000, 32768, 1 << 20}) {
        const int64_t n = prefill_tokens_per_sequence(chunk, batch, length);
        ASSERT_GE(n, 1);
        ASSERT_LE(n, length);
        if (batch <= chunk) {
          ASSERT_LE(batch * n, chunk) << chunk << " " << batch << " " << length;
        } else {
          ASSERT_EQ(n, 1) << "one token per sequence when the batch passes the chunk";
        }
        if (batch * length <= chunk) {
          ASSERT_EQ(n, length) << "one step when the whole batch fits";
        }
      }
  EXPECT_EQ(prefill_tokens_per_sequence(32768, 1, 1 << 20), 32768) << "batch 1: the chunk itself";
  EXPECT_EQ(prefill_tokens_per_sequence(32768, 18, 31744), 1820);
}

}  // namespace
}  // namespace yoco::cuda::cache_plan
