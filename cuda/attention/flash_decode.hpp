#pragma once
// FlashDecoding: attention of one new query per sequence over a long KV cache,
// split along the keys so that a batch of one still fills the GPU (issue 5).
// Each block serves one (sequence, KV head, split) and all G = H / Hkv query
// heads of that KV group from a single read of its keys and values (GQA
// packing); it writes a partial output and a log-sum-exp per head and split,
// and a combine kernel merges the splits. ↔ reference attention() with one query.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace yoco::cuda {

struct DecodeAttentionShape {
  int64_t batch = 1;
  int64_t n_heads = 0;     // H query heads
  int64_t n_kv_heads = 0;  // Hkv; H % Hkv == 0, H / Hkv <= 8
  int64_t head_dim = 0;    // 64, 128 or 256
  int64_t capacity = 0;    // rows per sequence in the cache buffers
  int64_t window = 0;      // 0: all keys; else the last `window` keys only (ring: the slot count W)
  float scale = 0;         // usually head_dim^-1/2
  // Ring-buffer mode (SWA decode): rows 0 .. window-1 of each sequence are W =
  // `window` slots, the token at position p in slot p mod W; lengths[b] counts
  // the tokens seen so far and the query attends to slots [0, min(len, W))
  // (softmax ignores order, so the ring is never unrolled). Needs window >= 1
  // and capacity >= window.
  bool ring = false;
  // Elements between consecutive cache rows; 0 means Hkv·Da (dense rows). Must be
  // a multiple of 8 (16-byte rows); lets K and V live inside a wider fused buffer.
  int64_t kv_stride = 0;
};

// Keys per KV tile (split edges fall on multiples of it) and resident blocks per
// SM of the split kernel for a head dim (64, 128, 256; else 0).
int decode_tile_keys();
int decode_blocks_per_sm(int64_t head_dim);

// Splits for this shape on a device with `sm_count` SMs (decode_plan.hpp
// choose_split_count): the smallest count whose wave efficiency over SMs x
// resident blocks is >= 85 % of the best, at most 128, and at least 2 KV tiles
// per split of the longest sequence (1 for short ones). Needs no device.
int choose_decode_splits(const DecodeAttentionShape& s, int64_t max_len, int sm_count);

// q: [batch, H·Da] bf16. k, v: [batch, capacity, kv_stride] bf16, head kvh at
// columns [kvh·Da, (kvh+1)·Da) of a row (row p holds position p; ring: slot p
// mod W). lengths: [batch] tokens per sequence (the query is at position
// lengths[b] - 1 and sees rows [max(0, len - window), len), or in ring mode
// slots [0, min(len, W))). workspace: fp32, at least
// decode_workspace_floats(shape, splits) elements (unused when splits == 1).
// out: [batch, H·Da] bf16. k and v must be 16-byte aligned, q 4-byte.
// Any splits >= 1 is valid (splits beyond a sequence's KV tiles are empty and
// weigh nothing); a sequence with no visible key gets a zero output.
int64_t decode_workspace_floats(const DecodeAttentionShape& s, int splits);
// Where a launch with splits > 1 leaves each split's partial in `workspace`
// (a cross-device combine reads them: dist/cuda_shard_link): part_o [batch, H,
// splits, D] fp32, the split's normalised output; part_lse [batch, H, splits]
// fp32, log2 of the sum of exp(scale q.k) over its keys, -inf for an empty split.
struct DecodePartials {
  float* part_o = nullptr;
  float* part_lse = nullptr;
};
DecodePartials decode_partials(const DecodeAttentionShape& s, int splits, float* workspace);
// Whether launch_flash_decode serves this head dim (64, 128, 256) and GQA group
// (query heads per KV head, 1..8).
bool flash_decode_supported(int64_t head_dim, int64_t group);
cudaError_t launch_flash_decode(const __nv_bfloat16* q, const __nv_bfloat16* k, const __nv_bfloat16* v,
                                const int64_t* lengths, const DecodeAttentionShape& s, int splits, float* workspace,
                                __nv_bfloat16* out, cudaStream_t stream);

}  // namespace yoco::cuda
