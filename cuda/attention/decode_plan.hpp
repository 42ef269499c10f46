#pragma once
// The split-KV decode plan (KERNELS.md §2, §6): which keys a query sees (whole
// cache, a trailing window of a linear cache, or a ring buffer of W slots),
// how those keys are cut into splits on KV-tile boundaries, how many splits a
// launch uses, and the int64 offsets the kernel reads and writes. Pure
// integer functions, callable from host and device, tested on the CPU
// (tests/test_decode_plan.cpp) before any GPU runs them.
#include <cstdint>

#include "arch/hd.hpp"

namespace yoco::cuda::decode_plan {

YOCO_HD constexpr int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
YOCO_HD constexpr int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }
YOCO_HD constexpr int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }

// ---- Which keys the query sees -------------------------------------------------
// Keys [begin, begin + count) of a sequence's cache rows.
struct KeyRange {
  int64_t begin = 0, count = 0;
};

// Ring buffer of W slots: the token at absolute position p lives in slot p mod W.
YOCO_HD constexpr int64_t ring_slot(int64_t pos, int64_t window) { return pos % window; }
// After `len` tokens (positions 0 .. len-1) the occupied slots are [0, min(len, W)),
// and those hold exactly the positions [max(0, len - W), len).
YOCO_HD constexpr int64_t ring_valid_slots(int64_t len, int64_t window) { return min64(len, window); }

// len: tokens seen so far (the query is at position len - 1).
//  ring:            slots [0, min(len, window))     (softmax ignores order)
//  window > 0:      rows  [max(0, len - window), len)
//  window == 0:     rows  [0, len)
YOCO_HD constexpr KeyRange decode_key_range(int64_t len, int64_t window, bool ring) {
  if (len <= 0) return {0, 0};
  if (ring) return {0, ring_valid_slots(len, window)};
  if (window > 0) {
    const int64_t b = max64(int64_t{0}, len - window);
    return {b, len - b};
  }
  return {0, len};
}

// ---- Splits ----------------------------------------------------------------------
// Split i of `splits` over n keys cut into tiles of `tile` keys: relative key
// range [begin, end) in [0, n). The effective split count is min(splits,
// tiles); split i < effective gets base or base + 1 whole tiles (the first
// `tiles mod effective` get one more), so no effective split is empty, every
// tile is in exactly one split, every edge is a multiple of `tile` except the
// last split's end, which is n (ragged). Splits i >= effective are empty
// ([n, n)): the kernel writes LSE = -inf for them and the combine skips them.
struct SplitRange {
  int64_t begin = 0, end = 0;
};

YOCO_HD constexpr int64_t effective_splits(int64_t n_keys, int64_t tile, int64_t splits) {
  return n_keys <= 0 ? 0 : min64(splits, ceil_div(n_keys, tile));
}

YOCO_HD constexpr SplitRange split_key_range(int64_t n_keys, int64_t tile, int64_t splits, int64_t i) {
  const int64_t eff = effective_splits(n_keys, tile, splits);
  if (i >= eff) return {max64(n_keys, int64_t{0}), max64(n_keys, int64_t{0})};
  const int64_t tiles = ceil_div(n_keys, tile);
  const int64_t base = tiles / eff, rem = tiles % eff;
  const int64_t first = i * base + min64(i, rem);
  const int64_t count = base + (i < rem ? 1 : 0);
  return {first * tile, min64(n_keys, (first + count) * tile)};
}

// ---- Occupancy and the split count ----------------------------------------------
// KERNELS.md §6: blocks/SM = min(65536 / (ceil(regs/8)*8 * threads),
// 228 KB / (smem + 1 KB), 2048 / threads, 32).
constexpr int64_t blocks_per_sm(int64_t regs_per_thread, int64_t threads, int64_t smem_bytes) {
  const int64_t regs = ceil_div(regs_per_thread, 8) * 8 * threads;
  const int64_t by_regs = 65536 / regs;
  const int64_t by_smem = (228 * 1024) / (smem_bytes + 1024);
  const int64_t by_threads = 2048 / threads;
  return min64(min64(by_regs, by_smem), min64(by_threads, int64_t{32}));
}

// Wave efficiency of `ctas` blocks on `slots` = SMs x CTAs per SM, as the exact
// fraction num/den (waves / ceil(waves)).
struct Fraction {
  int64_t num = 0, den = 1;
};
constexpr Fraction wave_efficiency(int64_t ctas, int64_t slots) { return {ctas, slots * ceil_div(ctas, slots)}; }

// The split count of a launch (KERNELS.md §2, FA2's num_splits_heuristic):
// among s = 1 .. cap, the smallest whose wave efficiency is >= 85 % of the best,
// where cap = min(max_splits, tiles(max_len) / min_tiles_per_split) (at least
// 1): a split of the longest sequence never holds fewer than
// min_tiles_per_split tiles, and short sequences are not split at all.
// A pure function of the batch, KV heads, the longest length, SM count and
// resident CTAs per SM (plus the kernel's tile).
constexpr int64_t choose_split_count(int64_t batch, int64_t kv_heads, int64_t max_len, int64_t sm_count,
                                     int64_t ctas_per_sm, int64_t tile, int64_t max_splits = 128,
                                     int64_t min_tiles_per_split = 2) {
  const int64_t units = max64(int64_t{1}, batch * kv_heads);
  const int64_t slots = max64(int64_t{1}, sm_count * ctas_per_sm);
  const int64_t tiles = max64(int64_t{0}, ceil_div(max64(max_len, int64_t{0}), tile));
  const int64_t cap = max64(int64_t{1}, min64(max_splits, tiles / max64(int64_t{1}, min_tiles_per_split)));
  // best = max over s of num/den; compare fractions exactly with int64 cross products.
  Fraction best{0, 1};
  for (int64_t s = 1; s <= cap; ++s) {
    const Fraction e = wave_efficiency(units * s, slots);
    if (e.num * best.den > best.num * e.den) best = e;
  }
  for (int64_t s = 1; s <= cap; ++s) {
    const Fraction e = wave_efficiency(units * s, slots);
    // e >= 0.85 * best  <=>  100 * e.num * best.den >= 85 * best.num * e.den
    if (100 * e.num * best.den >= 85 * best.num * e.den) return s;
  }
  return 1;
}

// ---- Offsets (int64 everywhere: a 1M-token cache row index passes 2^31 elements) --
// Element offset of (sequence b, cache row r, KV head kvh, dim 0) in a K or V
// buffer of `capacity` rows per sequence, `kv_stride` elements between rows.
YOCO_HD constexpr int64_t kv_offset(int64_t b, int64_t row, int64_t kvh, int64_t capacity, int64_t kv_stride,
                                    int64_t head_dim) {
  return (b * capacity + row) * kv_stride + kvh * head_dim;
}
// Element offset of (sequence b, query head h, dim 0) in q or out [batch, H*D].
YOCO_HD constexpr int64_t q_offset(int64_t b, int64_t h, int64_t n_heads, int64_t head_dim) {
  return (b * n_heads + h) * head_dim;
}
// Partial slot of (sequence b, query head h, split i): part_o[slot * D + d], part_lse[slot].
YOCO_HD constexpr int64_t partial_slot(int64_t b, int64_t h, int64_t split, int64_t n_heads, int64_t splits) {
  return (b * n_heads + h) * splits + split;
}
// The query head h reads KV head h / (H / Hkv) (not h mod Hkv: KERNELS.md §5 row 9).
YOCO_HD constexpr int64_t kv_head_of(int64_t h, int64_t n_heads, int64_t n_kv_heads) {
  return h / (n_heads / n_kv_heads);
}

}  // namespace yoco::cuda::decode_plan
