#pragma once
// Index maths of the prefill attention kernel (cuda/attention/flash_prefill_v1.cu, and v2/v3 through it), on
// int64, callable from host and device so that tests/test_attention_tiles.cpp
// proves it against brute force on the CPU (KERNELS.md §1(e), §6).
//
// Positions are absolute: key row j of the cache holds position j; a query at
// absolute position p sees key j iff j <= p and (window == 0 or j > p - window)
// (causal, bottom-right aligned; with a window the query sees itself and the
// window - 1 keys before it).
//
// The GPU oracle (cuda/attention/attention_oracle.cu) deliberately does NOT use this
// header: it writes its mask inline, so that a bug here cannot pass both.
#include <cstdint>

#include "arch/hd.hpp"

namespace yoco::cuda::attn {

// Key j visible to the query at absolute position p.
YOCO_HD constexpr bool key_visible(int64_t j, int64_t p, int64_t window) {
  return j <= p && (window == 0 || j > p - window);
}

// The same test on the key's offset from the query, delta = j - p, in 32 bits
// (the kernel's inner loop; valid while |delta| and window fit in int32, which
// the launcher guarantees by refusing capacity >= 2^30).
YOCO_HD constexpr bool key_visible_delta(int32_t delta, int32_t window) {
  return delta <= 0 && (window == 0 || delta > -window);
}

// Half-open range [first, last) of key blocks of `block_keys` keys.
struct KeyBlockRange {
  int64_t first = 0, last = 0;
};

// The key blocks that hold at least one key visible to some query at absolute
// positions p_first <= p <= p_last (p_first <= p_last, both >= 0): the visible
// band is the contiguous key range [max(0, p_first - window + 1), p_last].
YOCO_HD constexpr KeyBlockRange key_block_range(int64_t p_first, int64_t p_last, int64_t window,
                                                int64_t block_keys) {
  int64_t lo = window > 0 ? p_first - window + 1 : 0;
  if (lo < 0) lo = 0;
  return KeyBlockRange{lo / block_keys, p_last / block_keys + 1};
}

// Whether key block `block` has some (query, key) pair that is not visible for
// queries p_first..p_last, i.e. whether the kernel must apply the mask there.
// False means every key of the block is visible to every query of the tile.
YOCO_HD constexpr bool key_block_needs_mask(int64_t block, int64_t block_keys, int64_t p_first, int64_t p_last,
                                            int64_t window) {
  const int64_t j0 = block * block_keys, j1 = j0 + block_keys - 1;  // first and last key of the block
  const bool all_causal = j1 <= p_first;                            // the earliest query sees the last key
  const bool all_in_window = window == 0 || j0 > p_last - window;   // the latest query sees the first key
  return !(all_causal && all_in_window);
}

// Ring attention (baselines/transformer_ring.cpp) attends a block of keys that lies wholly
// before its queries: q_start + q_len may then pass the cache's rows, and positions at or past
// `capacity` hold no key (v1 serves this; cuda/attention/flash_prefill.hpp). The key blocks a
// tile visits end with the cache ...
YOCO_HD constexpr KeyBlockRange key_blocks_in_cache(KeyBlockRange r, int64_t capacity, int64_t block_keys) {
  const int64_t end = (capacity + block_keys - 1) / block_keys;
  if (r.last > end) r.last = end;
  return r;
}
// ... and a block with rows past the cache's last one is masked: those rows are no keys.
YOCO_HD constexpr bool key_block_past_cache(int64_t block, int64_t block_keys, int64_t capacity) {
  return (block + 1) * block_keys > capacity;
}

// Query rows one prefill CTA computes, in every variant (v1 at head dims 64, 128 and 256; v2
// and v3): a step's query rows of a sequence run in tiles of this many, the last one padded
// (its rows past q_len are zeros the tensor cores multiply all the same). The calibrated cost
// model counts a prefill's attention as these tiles (bench/analytic/cost_model.hpp).
inline constexpr int64_t kPrefillTileRows = 128;

// The query tile a prefill CTA owns (rows [i0, i0 + rows_per_tile) of a sequence whose q_len
// queries sit at absolute positions q_start ..) and the keys it reads. rows_valid <= 0: the tile
// lies past the sequence's queries and the CTA has nothing to do.
struct QueryTile {
  int64_t i0 = 0, rows_valid = 0;   // first query row of the tile; rows of it below q_len
  int64_t p_first = 0, p_last = 0;  // absolute positions of its first and last valid rows
  int64_t kv_lo = 0, kv_hi = 0;     // readable key rows: visible to some valid row and inside the cache
  KeyBlockRange blocks;             // the key blocks of block_keys keys to visit
};

YOCO_HD constexpr QueryTile query_tile(int64_t tile, int64_t rows_per_tile, int64_t q_start, int64_t q_len,
                                       int64_t window, int64_t capacity, int64_t block_keys) {
  QueryTile t;
  t.i0 = tile * rows_per_tile;
  t.rows_valid = q_len - t.i0 < rows_per_tile ? q_len - t.i0 : rows_per_tile;
  if (t.rows_valid <= 0) return t;
  t.p_first = q_start + t.i0;
  t.p_last = t.p_first + t.rows_valid - 1;
  t.kv_lo = window > 0 && t.p_first - window + 1 > 0 ? t.p_first - window + 1 : 0;
  t.kv_hi = t.p_last + 1 < capacity ? t.p_last + 1 : capacity;
  t.blocks = key_block_range(t.p_first, t.p_last, window, block_keys);
  return t;
}

// Whether every key of block `block` lies in [lo, hi), the rows a kernel may read as they are:
// a block that is not wholly inside holds rows that may be unwritten cache (NaN), which a TMA
// load copies verbatim and P = 0 does not cancel (0 * NaN = NaN), so V must be zero-filled there.
YOCO_HD constexpr bool key_block_inside(int64_t block, int64_t block_keys, int64_t lo, int64_t hi) {
  return block * block_keys >= lo && (block + 1) * block_keys <= hi;
}

// GQA: query head h reads KV head h / (H / Hkv) (= floor(h * Hkv / H)), never h % Hkv.
YOCO_HD constexpr int64_t kv_head_of(int64_t h, int64_t n_heads, int64_t n_kv_heads) {
  return h / (n_heads / n_kv_heads);
}

// Element offsets (64-bit: 1M tokens x 24 heads x 128 already passes 2^31).
// q: [batch, q_rows, q_stride]; element (b, i, h, d) of head_dim-wide heads.
YOCO_HD constexpr int64_t q_offset(int64_t b, int64_t i, int64_t h, int64_t d, int64_t q_rows, int64_t q_stride,
                                   int64_t head_dim) {
  return (b * q_rows + i) * q_stride + h * head_dim + d;
}
// k, v: [batch, capacity, kv_stride]; element (b, j, kvh, d).
YOCO_HD constexpr int64_t kv_offset(int64_t b, int64_t j, int64_t kvh, int64_t d, int64_t capacity,
                                    int64_t kv_stride, int64_t head_dim) {
  return (b * capacity + j) * kv_stride + kvh * head_dim + d;
}
// o: [batch, q_rows, H * head_dim] (dense rows).
YOCO_HD constexpr int64_t o_offset(int64_t b, int64_t i, int64_t h, int64_t d, int64_t q_rows, int64_t n_heads,
                                   int64_t head_dim) {
  return (b * q_rows + i) * (n_heads * head_dim) + h * head_dim + d;
}
// lse: [batch, H, q_rows].
YOCO_HD constexpr int64_t lse_offset(int64_t b, int64_t h, int64_t i, int64_t n_heads, int64_t q_rows) {
  return (b * n_heads + h) * q_rows + i;
}

// Number of query tiles of `tile_rows` rows that cover q_rows rows.
YOCO_HD constexpr int64_t query_tiles(int64_t q_rows, int64_t tile_rows) { return (q_rows + tile_rows - 1) / tile_rows; }

}  // namespace yoco::cuda::attn
