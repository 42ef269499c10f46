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
  int64_t window = 0;      // 0: all keys; else the last `window` keys only
  float scale = 0;         // usually head_dim^-1/2
};

// Splits for this shape on a device with `sm_count` SMs: enough blocks to fill
// the device twice over, at least 256 keys per split, at most 128 splits.
int choose_decode_splits(const DecodeAttentionShape& s, int64_t max_len, int sm_count);

// q: [batch, H·Da] bf16. k, v: [batch, capacity, Hkv·Da] bf16 (row p holds
// position p). lengths: [batch] keys present per sequence (the query is at
// position lengths[b] - 1 and sees keys [max(0, len - window), len)).
// workspace: fp32, at least decode_workspace_floats(shape, splits) elements.
// out: [batch, H·Da] bf16.
int64_t decode_workspace_floats(const DecodeAttentionShape& s, int splits);
cudaError_t launch_flash_decode(const __nv_bfloat16* q, const __nv_bfloat16* k, const __nv_bfloat16* v,
                                const int64_t* lengths, const DecodeAttentionShape& s, int splits, float* workspace,
                                __nv_bfloat16* out, cudaStream_t stream);

}  // namespace yoco::cuda
