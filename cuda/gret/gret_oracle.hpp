#pragma once
// GPU oracle for gated retention (KERNELS.md §4): the plain recurrent form,
//   S_t = gamma_t S_{t-1} + k_t^T v_t,  o_t = q_t S_t,
// one token at a time in fp32, to check the chunk kernel at 128K-1M tokens
// GPU against GPU. Deliberately shares no code (index maths, masks, tiles)
// with cuda/gret/gret_chunk.cu, so that one bug cannot pass both. Slow by design:
// one CTA per (batch, head), one thread per V column j holding S[:, j].
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace yoco::cuda {

// q, k, v: [batch, seq_len, row_stride] bf16, head h at columns [h*D, (h+1)*D).
// log_gamma: [batch, seq_len, heads] fp32. state_in: [batch, heads, D, D] fp32
// or nullptr (zero state). state_out: [batch, heads, D, D] fp32 (may equal
// state_in). o: [batch, seq_len, heads*D] fp32. head_dim 64, 128 or 256.
cudaError_t launch_gret_recurrent_oracle(const __nv_bfloat16* q, const __nv_bfloat16* k, const __nv_bfloat16* v,
                                         const float* log_gamma, const float* state_in, float* state_out, float* o,
                                         int64_t batch, int64_t heads, int64_t head_dim, int64_t seq_len,
                                         int64_t row_stride, cudaStream_t stream);

}  // namespace yoco::cuda
