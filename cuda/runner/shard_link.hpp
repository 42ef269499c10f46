#pragma once
// The CUDA runners with the sequence split across ranks (issue 33, paper
// appendix A): the points where one rank's runner meets the others, as an
// interface the runner calls and dist/ implements over a communicator
// (dist/cuda_shard_link.hpp). The runner knows no transport; the link knows no
// kernel. YOCO (cuda/runner/yoco_cuda_model.hpp) is the pair of dist/
// yoco_sharded.hpp ShardedYoco, the Transformer (baselines/
// transformer_cuda_runner.hpp) of dist/transformer_context_parallel.hpp
// ContextParallelTransformer: the CPU references of the same algorithms.
//
// The Transformer's ranks hold two mirrored chunks each (RingShard, the
// schedule of cuda/attention/ring_plan.hpp): each layer's keys and values go
// around the ring (ring_pass, "ring_kv"), rank 0 keeps the last position and
// the generated rows, decode combines the ranks' partials ("decode_partial").
//
// YOCO's rank holds positions [begin, begin + length) of every sequence: its shard
// runs through the self-decoder as one prefill step, layer by layer, so that
// each layer's exchange sees every rank's finished shard; at prefill its rows
// of the global K-hat / V-hat stay on it (never gathered: the last position's
// attention combines across ranks). The last rank also holds the final gRet
// states / SWA windows and the rows decode appends. A forward (logits at
// every position) gathers the global K-hat / V-hat once instead.
//
// Every call synchronises the runner's stream (the exchange is host-staged or
// a blocking NCCL collective) and is made by every rank in the same order.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include <vector>

#include "attention/ring_plan.hpp"
#include "errors.hpp"

namespace yoco::cuda {

struct Shard {
  int rank = 0, ranks = 1;
  int64_t begin = 0;   // first position of every sequence on this rank
  int64_t length = 0;  // positions on this rank (>= 1)
  int64_t total = 0;   // the prompt's length (the last rank's begin + length)
  bool last() const { return rank == ranks - 1; }
};

// The Transformer's context-parallel shard: the prompt in 2R chunks, this
// rank holding piece 0 = chunk `rank` and piece 1 = chunk 2R-1-rank.
struct RingShard {
  int rank = 0, ranks = 1;
  std::vector<int64_t> bounds;  // 2R + 1 chunk bounds: chunk c is [bounds[c], bounds[c + 1])

  int64_t total() const { return bounds.empty() ? 0 : bounds.back(); }
  int chunk(int piece) const { return ring::chunk_of(rank, piece, ranks); }
  int64_t chunk_begin(int c) const { return bounds[static_cast<size_t>(c)]; }
  int64_t chunk_length(int c) const { return bounds[static_cast<size_t>(c) + 1] - bounds[static_cast<size_t>(c)]; }
  int64_t piece_begin(int piece) const { return chunk_begin(chunk(piece)); }
  int64_t piece_length(int piece) const { return chunk_length(chunk(piece)); }
  // Positions of rank j (both its chunks): its block's rows on the ring.
  int64_t rows_of(int j) const {
    return chunk_length(ring::chunk_of(j, 0, ranks)) + chunk_length(ring::chunk_of(j, 1, ranks));
  }
  int64_t rows() const { return rows_of(rank); }
  // Holds the last chunk: the prompt's last position, and the rows decode appends.
  bool keeper() const { return rank == ring::keeper(); }
};

class ShardLink {
 public:
  virtual ~ShardLink() = default;
  virtual const Shard& shard() const = 0;
  virtual const RingShard& ring_shard() const = 0;

  // YOCO's gRet self-decoder layer `layer`. On entry `state` ([batch * heads, D, D]
  // fp32, device) holds this shard's final states from a zero state, and
  // `log_gamma` ([batch, n, heads] fp32, device) the shard's log decays.
  // Returns false when the state entering this shard is zero (rank 0): state
  // and outputs are final as they are. Else writes that incoming state into
  // `state` -- S_in(r) = sum_{j<r} exp(sum of log decays of ranks j+1..r-1)
  // S_loc(j), one fixed-size collective -- and returns true: the runner then
  // reruns the chunk kernel from it (outputs and final state corrected).
  virtual bool gret_state_in(int64_t layer, float* state, const float* log_gamma, int64_t batch, int64_t n,
                             int64_t heads, int64_t head_dim, cudaStream_t stream) = 0;

  // YOCO's SWA self-decoder layer `layer`: `kv` ([batch, n, stride] bf16, device)
  // holds this shard's RoPE'd keys at columns [0, d) and values at [d, 2d).
  // Writes the previous ranks' keys | values of positions [max(0, begin -
  // (window - 1)), begin) into `ring` ([batch, window, 2d] bf16, device, slot
  // p mod window), the slots a chunk starting at `begin` reads.
  virtual void swa_window_in(int64_t layer, const __nv_bfloat16* kv, int64_t stride, int64_t batch, int64_t n,
                             int64_t d, int64_t window, __nv_bfloat16* ring, cudaStream_t stream) = 0;

  // Cross attention of one query per sequence over every rank's keys: this
  // rank's FlashDecoding split partials over its rows (part_o [batch, heads,
  // splits, D] fp32, each split's normalised output; part_lse [batch, heads,
  // splits] fp32, its log2-sum-exp, -inf when empty) combined by log-sum-exp
  // with every other rank's into `out` ([batch, heads * D] bf16, device).
  // `label`: YOCO's "cross_partial", the Transformer's "decode_partial".
  virtual void attention_across(const float* part_o, const float* part_lse, int64_t batch, int64_t heads, int splits,
                                int64_t head_dim, __nv_bfloat16* out, const char* label, cudaStream_t stream) = 0;

  // Rank `root`'s `elems` floats of `x` (device) into every rank's `x` (YOCO:
  // the last rank's last hidden state; the Transformer: the keeper's logits), label "last_hidden".
  virtual void hidden_from(int root, float* x, int64_t elems, cudaStream_t stream) = 0;

  // One step of the ring: `send_bytes` of `send` to rank + 1 and `recv_bytes`
  // from rank - 1 into `recv` (device memory both, distinct), label "ring_kv".
  virtual void ring_pass(const void* send, int64_t send_bytes, void* recv, int64_t recv_bytes,
                         cudaStream_t stream) = 0;

  // The Transformer's forward: every rank's rows in position order on every
  // rank (label "logits"). This rank's rows are `mine` = piece 0's [batch,
  // piece_length(0)] rows then piece 1's [batch, piece_length(1)]; position p
  // of sequence b goes to `all` + (b * total + p) * row_bytes (device memory both).
  virtual void gather_ring_rows(const void* mine, void* all, int64_t batch, int64_t row_bytes,
                                cudaStream_t stream) = 0;

  // Every rank's rows of a sequence-major tensor, in position order, on every
  // rank (YOCO's forward: the global K-hat / V-hat gathered once for all
  // cross layers, label "kv_gather"; the logits of a forward, "logits"). Row i < length of
  // sequence b of this rank is at `mine` + (b * mine_seq_rows + i) *
  // row_bytes; position p < total of sequence b goes to `all` + (b *
  // all_seq_rows + p) * row_bytes (device memory both; `mine` may lie inside
  // `all`).
  virtual void gather_rows(const void* mine, int64_t mine_seq_rows, void* all, int64_t all_seq_rows, int64_t batch,
                           int64_t row_bytes, const char* label, cudaStream_t stream) = 0;
};

// The link's shard of a prompt of `length` tokens (the link plans it before
// each prefill or forward), checked: InputError naming `what` otherwise.
inline Shard checked_shard(const ShardLink& link, const char* what, int64_t length) {
  const Shard sh = link.shard();
  if (sh.ranks < 1 || sh.rank < 0 || sh.rank >= sh.ranks || sh.begin < 0 || sh.length < 1 ||
      sh.begin + sh.length > sh.total || (sh.last() && sh.begin + sh.length != sh.total) || sh.total != length)
    throw InputError(std::string(what) + " of " + std::to_string(length) + " tokens: rank " + std::to_string(sh.rank) +
                     " of " + std::to_string(sh.ranks) + " holds positions [" + std::to_string(sh.begin) + ", " +
                     std::to_string(sh.begin + sh.length) + ") of a " + std::to_string(sh.total) + "-token shard plan");
  return sh;
}

// The link's ring shard of a prompt of `length` tokens, checked (2R chunks
// of at least one position, covering the prompt): InputError naming `what` otherwise.
inline RingShard checked_ring_shard(const ShardLink& link, const char* what, int64_t length) {
  const RingShard sh = link.ring_shard();
  bool ok = sh.ranks >= 1 && sh.rank >= 0 && sh.rank < sh.ranks &&
            sh.bounds.size() == static_cast<size_t>(2 * sh.ranks + 1) && sh.bounds.front() == 0 &&
            sh.total() == length;
  for (size_t c = 0; ok && c + 1 < sh.bounds.size(); ++c) ok = sh.bounds[c + 1] > sh.bounds[c];
  if (!ok)
    throw InputError(std::string(what) + " of " + std::to_string(length) + " tokens: rank " + std::to_string(sh.rank) +
                     " of " + std::to_string(sh.ranks) + " has no plan of " + std::to_string(2 * sh.ranks) +
                     " chunks covering it (the plan covers " + std::to_string(sh.total()) + " positions)");
  return sh;
}

}  // namespace yoco::cuda
