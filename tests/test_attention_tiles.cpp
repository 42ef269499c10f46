// The prefill attention kernel's index maths (cuda/attention/attention_tiles.hpp)
// against brute force: for every small (Sq, q0, W, Bc, Br), the key-block range
// of each query tile holds exactly the blocks with a visible key, every visible
// key lies in it, and "needs mask" is true exactly for blocks with a hidden
// (query, key) pair; the GQA map; 64-bit offsets at 1M tokens x 24 heads x 128.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "attention/attention_tiles.hpp"
#include "attention/merge_math.hpp"
#include "attention/ring_plan.hpp"

namespace yoco::cuda::attn {
namespace {

// Written independently of the header: visible iff the key is not in the
// future and, with a window, fewer than W positions back.
bool visible_brute(int64_t j, int64_t p, int64_t w) {
  if (j > p) return false;
  if (w > 0 && p - j >= w) return false;
  return true;
}

TEST(AttentionTiles, VisibilityPredicate) {
  for (int64_t p = 0; p < 40; ++p)
    for (int64_t j = 0; j < 45; ++j)
      for (int64_t w : {0, 1, 2, 3, 7, 64})
        EXPECT_EQ(key_visible(j, p, w), visible_brute(j, p, w)) << j << " " << p << " " << w;
  for (int64_t p = 0; p < 40; ++p)
    for (int64_t j = 0; j < 45; ++j)
      for (int64_t w : {0, 1, 2, 3, 7, 64})
        EXPECT_EQ(key_visible_delta(static_cast<int32_t>(j - p), static_cast<int32_t>(w)), visible_brute(j, p, w));
  // At the launcher's limits: capacity < 2^30, so |delta| < 2^30.
  const int64_t big = (int64_t{1} << 30) - 1;
  EXPECT_TRUE(key_visible_delta(static_cast<int32_t>(0 - big), 0));
  EXPECT_FALSE(key_visible_delta(static_cast<int32_t>(0 - big), static_cast<int32_t>(big)));
  EXPECT_TRUE(key_visible_delta(static_cast<int32_t>(1 - big), static_cast<int32_t>(big)));
  EXPECT_TRUE(key_visible(5, 5, 1));   // window 1: the query sees itself only
  EXPECT_FALSE(key_visible(4, 5, 1));
  EXPECT_TRUE(key_visible(0, 1000000, 0));
}

TEST(AttentionTiles, BlockRangeCoversExactlyTheVisibleKeys) {
  int64_t checked = 0;
  for (int64_t sq = 1; sq <= 13; ++sq)
    for (int64_t q0 = 0; q0 <= 19; ++q0)
      for (int64_t w : {0, 1, 2, 3, 5, 7, 16, 1000})
        for (int64_t bc : {1, 2, 3, 4, 5, 8, 16})
          for (int64_t br : {1, 2, 3, 4, 8, 16}) {
            const int64_t sk = q0 + sq;
            for (int64_t t = 0; t < query_tiles(sq, br); ++t) {
              const int64_t i0 = t * br, i1 = i0 + br < sq ? i0 + br : sq;  // valid rows [i0, i1)
              const int64_t p_first = q0 + i0, p_last = q0 + i1 - 1;
              const KeyBlockRange r = key_block_range(p_first, p_last, w, bc);
              ASSERT_LE(r.first, r.last);
              // Every visible key is inside the range.
              for (int64_t j = 0; j < sk; ++j) {
                bool vis = false;
                for (int64_t i = i0; i < i1; ++i) vis = vis || visible_brute(j, q0 + i, w);
                if (vis) {
                  EXPECT_GE(j / bc, r.first) << sq << " " << q0 << " " << w << " " << bc << " " << br;
                  EXPECT_LT(j / bc, r.last) << sq << " " << q0 << " " << w << " " << bc << " " << br;
                }
              }
              // Every block in the range holds a visible key (none is loaded for nothing),
              // lies inside the cache, and needs the mask exactly when some pair is hidden.
              for (int64_t blk = r.first; blk < r.last; ++blk) {
                bool any = false, all = true;
                for (int64_t j = blk * bc; j < (blk + 1) * bc; ++j)
                  for (int64_t i = i0; i < i1; ++i) {
                    const bool v = visible_brute(j, q0 + i, w);
                    any = any || v;
                    all = all && v;
                  }
                EXPECT_TRUE(any) << "empty block " << blk << ": " << sq << " " << q0 << " " << w << " " << bc;
                EXPECT_LT(blk * bc, sk);
                EXPECT_EQ(key_block_needs_mask(blk, bc, p_first, p_last, w), !all)
                    << blk << ": " << sq << " " << q0 << " " << w << " " << bc << " " << br;
                ++checked;
              }
            }
          }
  EXPECT_GT(checked, 100000);
}

TEST(AttentionTiles, BlockRangeAtKernelTileSizes) {
  // The kernel's tiles (128 rows, 64 or 32 keys), a chunk at q0 = 96K.
  const int64_t q0 = 96 * 1024;
  for (int64_t bc : {32, 64}) {
    const KeyBlockRange r = key_block_range(q0 + 128, q0 + 255, 0, bc);
    EXPECT_EQ(r.first, 0);
    EXPECT_EQ(r.last, (q0 + 256) / bc);
    EXPECT_FALSE(key_block_needs_mask(r.last - 1 - 128 / bc, bc, q0 + 128, q0 + 255, 0));
    EXPECT_TRUE(key_block_needs_mask(r.last - 1, bc, q0 + 128, q0 + 255, 0));
    const KeyBlockRange rw = key_block_range(q0 + 128, q0 + 255, 1024, bc);
    EXPECT_EQ(rw.first, (q0 + 128 - 1023) / bc);
  }
}

// query_tile against brute force: the tile's valid rows, their positions, and [kv_lo, kv_hi) =
// exactly the keys visible to some valid row (within the cache).
TEST(AttentionTiles, QueryTileAgainstBruteForce) {
  for (int64_t br : {1, 4, 8})
    for (int64_t q_start : {0, 3, 17})
      for (int64_t q_len : {1, 5, 8, 13})
        for (int64_t w : {0, 1, 3, 64})
          for (int64_t tile = 0; tile < 5; ++tile) {
            const int64_t capacity = q_start + q_len + 2;
            const QueryTile t = query_tile(tile, br, q_start, q_len, w, capacity, 4);
            int64_t rows = 0, lo = -1, hi = -1;
            for (int64_t i = tile * br; i < (tile + 1) * br && i < q_len; ++i) {
              ++rows;
              for (int64_t j = 0; j < capacity; ++j)
                if (visible_brute(j, q_start + i, w)) {
                  lo = lo < 0 || j < lo ? j : lo;
                  hi = j + 1 > hi ? j + 1 : hi;
                }
            }
            const std::string at = std::to_string(br) + " " + std::to_string(q_start) + " " + std::to_string(q_len) +
                                   " " + std::to_string(w) + " " + std::to_string(tile);
            EXPECT_EQ(t.rows_valid > 0 ? t.rows_valid : 0, rows) << at;
            if (rows == 0) continue;
            EXPECT_EQ(t.i0, tile * br) << at;
            EXPECT_EQ(t.p_first, q_start + tile * br) << at;
            EXPECT_EQ(t.p_last, q_start + tile * br + rows - 1) << at;
            EXPECT_EQ(t.kv_lo, lo) << at;
            EXPECT_EQ(t.kv_hi, hi) << at;
            const KeyBlockRange r = key_block_range(t.p_first, t.p_last, w, 4);
            EXPECT_EQ(t.blocks.first, r.first) << at;
            EXPECT_EQ(t.blocks.last, r.last) << at;
          }
}

// key_block_inside against brute force, and the property v3 (cuda/attention/flash_prefill_v3.cu)
// relies on to TMA-load K verbatim: a block the kernel does not mask lies wholly inside the
// readable rows [kv_lo, kv_hi), so an unwritten (NaN) row is always either masked to -inf (K) or
// in a block that is zero-filled (V).
TEST(AttentionTiles, UnmaskedBlocksHoldOnlyReadableRows) {
  for (int64_t bc : {1, 4, 8})
    for (int64_t lo = 0; lo < 12; ++lo)
      for (int64_t hi = lo; hi < 30; ++hi)
        for (int64_t blk = 0; blk < 8; ++blk) {
          bool all = true;
          for (int64_t j = blk * bc; j < (blk + 1) * bc; ++j) all = all && j >= lo && j < hi;
          EXPECT_EQ(key_block_inside(blk, bc, lo, hi), all) << bc << " " << lo << " " << hi << " " << blk;
        }
  for (int64_t bc : {4, 8})
    for (int64_t w : {0, 1, 3, 7, 64})
      for (int64_t p_first = 0; p_first < 40; ++p_first)
        for (int64_t rows = 1; rows <= 10; ++rows)
          for (int64_t cap_extra : {0, 1, 5}) {
            const int64_t p_last = p_first + rows - 1, capacity = p_last + 1 + cap_extra;
            // As the kernels compute them.
            const int64_t kv_lo = w > 0 && p_first - w + 1 > 0 ? p_first - w + 1 : 0;
            const int64_t kv_hi = p_last + 1 < capacity ? p_last + 1 : capacity;
            const KeyBlockRange r = key_block_range(p_first, p_last, w, bc);
            for (int64_t blk = r.first; blk < r.last; ++blk) {
              if (!key_block_needs_mask(blk, bc, p_first, p_last, w)) {
                EXPECT_TRUE(key_block_inside(blk, bc, kv_lo, kv_hi)) << bc << " " << w << " " << p_first << " " << rows;
              }
            }
          }
}

// Queries past the cache (ring attention's block of earlier keys, v1): the key blocks a tile
// visits, clamped to the cache, hold every key below `capacity` some row sees and no block past
// it; a block is masked (needs_mask or past the cache) exactly when some (row, block row) pair is
// not a visible key -- a row at or past `capacity` counts as no key.
TEST(AttentionTiles, KeysEndAtTheCacheForQueriesPastIt) {
  int64_t checked = 0;
  for (int64_t bc : {1, 4, 8})
    for (int64_t capacity = 1; capacity <= 20; ++capacity)
      for (int64_t q_start : {int64_t{0}, capacity - 1, capacity, capacity + 3, 3 * capacity + 5})
        for (int64_t rows = 1; rows <= 9; ++rows)
          for (int64_t w : {0, 2, 7}) {
            const int64_t p_first = q_start, p_last = q_start + rows - 1;
            const KeyBlockRange r = key_blocks_in_cache(key_block_range(p_first, p_last, w, bc), capacity, bc);
            const std::string at = std::to_string(bc) + " " + std::to_string(capacity) + " " +
                                   std::to_string(q_start) + " " + std::to_string(rows) + " " + std::to_string(w);
            for (int64_t j = 0; j < capacity; ++j) {
              bool vis = false;
              for (int64_t p = p_first; p <= p_last; ++p) vis = vis || visible_brute(j, p, w);
              if (vis) {
                EXPECT_GE(j / bc, r.first) << at;
                EXPECT_LT(j / bc, r.last) << at;
              }
            }
            for (int64_t blk = r.first; blk < r.last; ++blk) {
              EXPECT_LT(blk * bc, capacity) << at;
              bool all = true;
              for (int64_t j = blk * bc; j < (blk + 1) * bc; ++j)
                for (int64_t p = p_first; p <= p_last; ++p) all = all && j < capacity && visible_brute(j, p, w);
              EXPECT_EQ(key_block_needs_mask(blk, bc, p_first, p_last, w) || key_block_past_cache(blk, bc, capacity),
                        !all)
                  << at << " block " << blk;
              ++checked;
            }
            // Within the old contract (q_start + rows <= capacity) the clamp changes nothing.
            if (q_start + rows <= capacity) {
              const KeyBlockRange u = key_block_range(p_first, p_last, w, bc);
              EXPECT_EQ(r.first, u.first) << at;
              EXPECT_EQ(r.last, u.last) << at;
            }
          }
  EXPECT_GT(checked, 10000);
  // Ring attention's fully visible block: 32K queries after a 32K-key chunk visit its 512 blocks.
  const KeyBlockRange full = key_blocks_in_cache(key_block_range(98304, 98304 + 127, 0, 64), 32768, 64);
  EXPECT_EQ(full.first, 0);
  EXPECT_EQ(full.last, 512);
}

// The merge of two normalised partials (ring attention's step) against the
// direct softmax over the union, in double: random scores split in two sets.
TEST(AttentionMerge, WeightsGiveTheSoftmaxOfTheUnion) {
  std::mt19937_64 rng(5);
  std::normal_distribution<double> d(0.0, 4.0);
  for (int trial = 0; trial < 2000; ++trial) {
    const int na = 1 + trial % 7, nb = 1 + (trial / 7) % 5;
    std::vector<double> s(static_cast<size_t>(na + nb)), v(s.size());
    for (size_t j = 0; j < s.size(); ++j) {
      s[j] = d(rng) + (trial % 3 == 0 && static_cast<int>(j) < na ? 60.0 : 0.0);  // one side far larger
      v[j] = d(rng);
    }
    auto partial = [&](int lo, int hi, double& lse, double& o) {
      double mx = -INFINITY, sum = 0, acc = 0;
      for (int j = lo; j < hi; ++j) mx = std::max(mx, s[j]);
      for (int j = lo; j < hi; ++j) {
        sum += std::exp(s[j] - mx);
        acc += std::exp(s[j] - mx) * v[j];
      }
      lse = mx + std::log(sum);
      o = acc / sum;
    };
    double la, oa, lb, ob, lu, ou;
    partial(0, na, la, oa);
    partial(na, na + nb, lb, ob);
    partial(0, na + nb, lu, ou);
    const attn::MergeWeights w = attn::merge_weights(static_cast<float>(la), static_cast<float>(lb));
    EXPECT_NEAR(w.a + w.b, 1.0, 1e-6);
    EXPECT_NEAR(w.lse, lu, 1e-5 * std::max(1.0, std::abs(lu))) << trial;
    EXPECT_NEAR(w.a * oa + w.b * ob, ou, 1e-5 * std::max(1.0, std::abs(ou))) << trial;
  }
  // A side without keys weighs nothing; neither side: no keys, output 0.
  const attn::MergeWeights one = attn::merge_weights(-INFINITY, 2.5f);
  EXPECT_EQ(one.a, 0.0f);
  EXPECT_EQ(one.b, 1.0f);
  EXPECT_EQ(one.lse, 2.5f);
  const attn::MergeWeights none = attn::merge_weights(-INFINITY, -INFINITY);
  EXPECT_EQ(none.a, 0.0f);
  EXPECT_EQ(none.b, 0.0f);
  EXPECT_EQ(none.lse, -INFINITY);
  // Far apart: no overflow, the smaller side underflows to a zero weight.
  const attn::MergeWeights far = attn::merge_weights(1000.0f, -1000.0f);
  EXPECT_EQ(far.a, 1.0f);
  EXPECT_EQ(far.b, 0.0f);
  EXPECT_EQ(far.lse, 1000.0f);
}

// The load-balanced ring over R ranks and uneven chunks: every (query, key)
// pair with key <= query is attended exactly once, by the block kind that
// sees it (full: every key; diagonal: key <= query by their offsets), and no
// other pair; the relative q_start of a full block is at least its key count
// (flash prefill v1 then sees every key); every rank holds two chunks; the
// keeper holds the last position.
TEST(RingPlan, EveryCausalPairOnceOverTheRing) {
  for (int R = 1; R <= 5; ++R) {
    // 2R chunks of uneven lengths 1 .. 5.
    std::vector<int64_t> bounds = {0};
    for (int c = 0; c < 2 * R; ++c) bounds.push_back(bounds.back() + 1 + (c * 7 + R) % 5);
    const int64_t N = bounds.back();
    std::vector<int> seen(static_cast<size_t>(N * N), 0);
    std::vector<int> pieces_of_chunk(static_cast<size_t>(2 * R), 0);
    for (int r = 0; r < R; ++r) {
      for (int piece = 0; piece < 2; ++piece) ++pieces_of_chunk[static_cast<size_t>(ring::chunk_of(r, piece, R))];
      for (int s = 0; s < R; ++s) {
        const int src = ring::source_at(r, s, R);
        if (s == 0) { EXPECT_EQ(src, r); }
        EXPECT_EQ(ring::source_at((r + 1) % R, s + 1, R), src) << "the next rank holds this block one step later";
        for (int kp = 0; kp < 2; ++kp)
          for (int qp = 0; qp < 2; ++qp) {
            const int c = ring::chunk_of(src, kp, R), q = ring::chunk_of(r, qp, R);
            const ring::Block kind = ring::block_kind(q, c);
            if (kind == ring::Block::skip) continue;
            const int64_t rel = ring::relative_q_start(bounds[q], bounds[c]);
            const int64_t keys = bounds[c + 1] - bounds[c];
            if (kind == ring::Block::full) { EXPECT_GE(rel, keys); }
            if (kind == ring::Block::diagonal) { EXPECT_EQ(rel, 0); }
            for (int64_t i = 0; i < bounds[q + 1] - bounds[q]; ++i)
              for (int64_t j = 0; j < keys; ++j)
                if (j <= rel + i) ++seen[static_cast<size_t>((bounds[q] + i) * N + bounds[c] + j)];
          }
      }
    }
    for (int64_t p = 0; p < N; ++p)
      for (int64_t j = 0; j < N; ++j)
        EXPECT_EQ(seen[static_cast<size_t>(p * N + j)], j <= p ? 1 : 0) << "R " << R << " query " << p << " key " << j;
    for (int c = 0; c < 2 * R; ++c) EXPECT_EQ(pieces_of_chunk[static_cast<size_t>(c)], 1) << "R " << R;
    EXPECT_EQ(ring::chunk_of(ring::keeper(), 1, R), 2 * R - 1);
  }
}

TEST(AttentionTiles, GqaHeadMap) {
  for (int64_t H : {4, 8, 24, 32})
    for (int64_t Hkv = 1; Hkv <= H; ++Hkv) {
      if (H % Hkv) continue;
      for (int64_t h = 0; h < H; ++h) EXPECT_EQ(kv_head_of(h, H, Hkv), h * Hkv / H);
    }
  EXPECT_EQ(kv_head_of(3, 24, 8), 1);  // not 3 % 8
  EXPECT_EQ(kv_head_of(1, 4, 2), 0);   // not 1 % 2
  EXPECT_EQ(kv_head_of(7, 8, 1), 0);
}

TEST(AttentionTiles, OffsetsDoNotWrapAtOneMillionTokens) {
  const int64_t T = int64_t{1} << 20, H = 24, Hkv = 8, D = 128;
  // Dense q: the last element of a 1M x 24 x 128 tensor.
  EXPECT_EQ(q_offset(0, T - 1, H - 1, D - 1, T, H * D, D), 3221225471);
  EXPECT_EQ(o_offset(0, T - 1, H - 1, D - 1, T, H, D), 3221225471);
  // Past the first wrap point (token 699,050 of q/o rows of 3,072).
  EXPECT_GT(q_offset(0, 699051, 0, 0, T, H * D, D), int64_t{std::numeric_limits<int32_t>::max()});
  // A fused QKV projection row (q_stride = (H + 2 Hkv) D) and batch 8.
  EXPECT_EQ(q_offset(7, T - 1, H - 1, D - 1, T, (H + 2 * Hkv) * D, D), (8 * T - 1) * 5120 + 3071);
  // K cache: batch 8 of 1M + 1024 rows.
  const int64_t cap = T + 1024;
  EXPECT_EQ(kv_offset(7, cap - 1, Hkv - 1, D - 1, cap, Hkv * D, D), 8 * cap * 1024 - 1);
  EXPECT_GT(kv_offset(7, cap - 1, Hkv - 1, D - 1, cap, Hkv * D, D), int64_t{1} << 33);
  EXPECT_EQ(lse_offset(7, H - 1, T - 1, H, T), 8 * H * T - 1);
  EXPECT_EQ(query_tiles(T, 128), 8192);
  EXPECT_EQ(query_tiles(T + 1, 128), 8193);
}

}  // namespace
}  // namespace yoco::cuda::attn
