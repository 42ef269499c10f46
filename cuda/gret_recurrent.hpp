#pragma once
// One gRet decode step for every (sequence, head): S = γ S + kᵀ v, o = q S
// (reference/gret.hpp: gret_recurrent, one token). The state stays fp32 on the
// device (the authors keep it in bf16 and drift; DESIGN.md §3). Memory-bound:
// the state is read and written once per step; q, k, v are tiny.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace yoco::cuda {

// q, k, v: rows of `row_stride` elements per sequence (q/k/v may sit inside a
// fused projection output), head h at columns [h·D, (h+1)·D). k is already
// RoPE'd and scaled by D^-1/2, as the reference's op expects.
// log_gamma: [batch, heads] fp32. state: [batch, heads, Dk, Dv] fp32, updated
// in place. o: [batch, heads·Dv] bf16. Dk = Dv = head_dim ≤ 1024.
cudaError_t launch_gret_recurrent_step(const __nv_bfloat16* q, const __nv_bfloat16* k, const __nv_bfloat16* v,
                                       int64_t row_stride, const float* log_gamma, float* state, __nv_bfloat16* o,
                                       int64_t batch, int64_t heads, int64_t head_dim, cudaStream_t stream);

}  // namespace yoco::cuda
