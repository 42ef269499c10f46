#pragma once
// Index maths of the cache kernels (cuda/attention/cache_ops.hpp): where a new key or
// value row goes in a linear cache or a ring of W slots, which rows of a
// multi-row ring write are written at all, where a ring gather reads, the
// position of a RoPE row, and the int64 element offsets. Pure integer
// functions, callable from host and device, tested on the CPU against brute
// force (tests/test_cache_plan.cpp) before any GPU runs them. The ring slot of
// a position is decode_plan::ring_slot: the one mapping FlashDecoding reads.
#include <cstdint>

#include "attention/decode_plan.hpp"
#include "arch/hd.hpp"

namespace yoco::cuda::cache_plan {

YOCO_HD constexpr int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

// ---- Prefill steps ----------------------------------------------------------------
// Tokens of each sequence per prefill step: a step runs batch x this rows, at
// most `prefill_chunk` whatever the batch (and at least one token per
// sequence), so the prefill's activations are one chunk's (DESIGN.md §4) and a
// large throughput batch leaves its memory to the caches.
YOCO_HD constexpr int64_t prefill_tokens_per_sequence(int64_t prefill_chunk, int64_t batch, int64_t length) {
  return min64(length, prefill_chunk / batch > 1 ? prefill_chunk / batch : 1);
}

// ---- Offsets ------------------------------------------------------------------
// Row `row` of sequence b in a [batch, rows_per_seq, stride] buffer (a cache:
// rows_per_seq = capacity; a ring: W; a chunk's source rows: n). All int64.
// `stride` and the result are in whatever unit the caller counts (bf16
// elements, or 16-byte vectors of 8 elements when stride % 8 == 0).
YOCO_HD constexpr int64_t row_offset(int64_t b, int64_t rows_per_seq, int64_t row, int64_t stride) {
  return (b * rows_per_seq + row) * stride;
}

// ---- Cache writes ---------------------------------------------------------------
// ring == 0: linear cache, position p in row p. ring == W > 0: W slots, position p
// in slot p mod W.
YOCO_HD constexpr bool is_ring(int64_t ring) { return ring > 0; }

// Of n rows written at positions pos0 .. pos0 + n - 1, a ring write keeps only the
// last min(n, W): an earlier row's slot is overwritten by the row W positions
// later in the same call (and writing both in parallel would race).
YOCO_HD constexpr int64_t rows_written(int64_t n, int64_t ring) { return is_ring(ring) ? min64(n, ring) : n; }
// The first source row that is written: rows [first_written_row, n) are.
YOCO_HD constexpr int64_t first_written_row(int64_t n, int64_t ring) { return n - rows_written(n, ring); }
YOCO_HD constexpr bool row_is_written(int64_t i, int64_t n, int64_t ring) {
  return i >= first_written_row(n, ring) && i < n;
}

// Cache row (linear) or ring slot that source row i goes to.
YOCO_HD constexpr int64_t cache_dest_row(int64_t pos0, int64_t i, int64_t ring) {
  return is_ring(ring) ? decode_plan::ring_slot(pos0 + i, ring) : pos0 + i;
}

// ---- Ring gather ----------------------------------------------------------------
// Destination row t (position first + t) reads ring slot (first + t) mod W.
YOCO_HD constexpr int64_t gather_src_slot(int64_t first, int64_t t, int64_t window) {
  return decode_plan::ring_slot(first + t, window);
}

// ---- RoPE at device positions ---------------------------------------------------
// Row r belongs to sequence r / rows_per_seq and sits rows r % rows_per_seq after
// that sequence's position.
YOCO_HD constexpr int64_t rope_seq_of_row(int64_t r, int64_t rows_per_seq) { return r / rows_per_seq; }
YOCO_HD constexpr int64_t rope_position(int64_t seq_pos, int64_t r, int64_t rows_per_seq) {
  return seq_pos + r % rows_per_seq;
}

// ---- Flattened copy work ---------------------------------------------------------
// A copy of `rows` rows of `chunks` vectors for each of `batch` sequences is one
// grid-stride range of batch * rows * chunks items; item e is chunk c of row j of
// sequence b, c fastest (consecutive threads touch consecutive bytes).
struct CopyItem {
  int64_t b = 0, j = 0, c = 0;
};
YOCO_HD constexpr int64_t copy_items(int64_t batch, int64_t rows, int64_t chunks) { return batch * rows * chunks; }
YOCO_HD constexpr CopyItem copy_item(int64_t e, int64_t rows, int64_t chunks) {
  const int64_t row = e / chunks;
  return {row / rows, row % rows, e - row * chunks};
}

// 16-byte vectors (8 bf16) are usable when the width, both row strides and both
// base addresses are multiples of them; otherwise the kernels copy element by element.
constexpr int64_t kVecElems = 8;
YOCO_HD constexpr bool vec16_ok(int64_t width, int64_t stride_a, int64_t stride_b, uint64_t addr_a, uint64_t addr_b) {
  return width % kVecElems == 0 && stride_a % kVecElems == 0 && stride_b % kVecElems == 0 && addr_a % 16 == 0 &&
         addr_b % 16 == 0;
}

}  // namespace yoco::cuda::cache_plan
