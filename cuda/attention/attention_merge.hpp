#pragma once
// Ring attention's step (baselines/transformer_ring.cpp): the partial a
// prefill attention call leaves over one block of keys (its normalised bf16
// output and fp32 log-sum-exp, flash_prefill.hpp's o and lse) merged into a
// running fp32 partial over the blocks before it. Maths: merge_math.hpp; the
// pair of dist/partial_attention.hpp AttentionAccumulator (the CPU ring).
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace yoco::cuda {

// Rows are [batch * n] sequence-major, heads * head_dim wide (dense); a log-sum-exp is [batch, heads, n]
// (flash prefill's layouts with q_rows = n).
//   part_o bf16, part_lse fp32: the new block's partial;
//   acc_o fp32, acc_lse fp32: the running partial, updated in place (first: overwritten, never read);
//   out bf16 (optional, nullptr: not written): the merged output, rounded once.
// head_dim a multiple of 4 (64, 128, 256); acc_o 16-byte aligned, part_o and out 8-byte aligned.
// Returns cudaErrorInvalidValue on a bad shape, a null or misaligned pointer, else the launch's
// error. Asynchronous on `stream`.
cudaError_t launch_attention_merge(const __nv_bfloat16* part_o, const float* part_lse, int64_t batch, int64_t n,
                                   int64_t heads, int64_t head_dim, bool first, float* acc_o, float* acc_lse,
                                   __nv_bfloat16* out, cudaStream_t stream);

}  // namespace yoco::cuda
