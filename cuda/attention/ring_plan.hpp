#pragma once
// Ring attention with causal load balancing (the Transformer's context
// parallelism; Megatron / TransformerEngine): the prompt cut into 2R chunks,
// rank r holding chunks r and 2R-1-r (one early and one late: every rank the
// same causal work), R steps per layer, at step s rank r holding the keys and
// values of rank (r - s) mod R and passing them on to rank r + 1. Against a
// query chunk q, a key chunk c < q is wholly visible, c == q is causal from
// its first row, c > q is never seen. The schedule of
// dist/transformer_context_parallel.cpp (the CPU reference) and of
// baselines/transformer_ring.cpp, proved on the CPU by
// tests/test_attention_tiles.cpp.
#include <cstdint>

#include "arch/hd.hpp"

namespace yoco::cuda::ring {

// Rank `rank`'s piece 0 or 1 (of R ranks): its chunk of the 2R.
YOCO_HD constexpr int chunk_of(int rank, int piece, int ranks) { return piece == 0 ? rank : 2 * ranks - 1 - rank; }

// The rank whose keys and values rank `rank` holds at step `step` (0: its own).
YOCO_HD constexpr int source_at(int rank, int step, int ranks) { return ((rank - step) % ranks + ranks) % ranks; }

// The rank that holds the last chunk (2R - 1): the prompt's last position and the rows decode appends.
YOCO_HD constexpr int keeper() { return 0; }

enum class Block { skip, diagonal, full };

// What a query chunk does with a key chunk.
YOCO_HD constexpr Block block_kind(int query_chunk, int key_chunk) {
  return key_chunk > query_chunk ? Block::skip : key_chunk == query_chunk ? Block::diagonal : Block::full;
}

// The prefill attention's q_start for a query chunk at `query_begin` over a key chunk at
// `key_begin` whose rows sit at 0.. of their own buffer: the queries' positions relative to
// the keys' (0 on the diagonal; >= the key chunk's length when it is wholly visible, which
// flash prefill v1 serves: cuda/attention/flash_prefill.hpp).
YOCO_HD constexpr int64_t relative_q_start(int64_t query_begin, int64_t key_begin) { return query_begin - key_begin; }

}  // namespace yoco::cuda::ring
