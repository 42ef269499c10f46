#pragma once
// Gated retention (gRet) chunkwise prefill on the GPU: the device pair of
// reference/gret.hpp gret_chunkwise (KERNELS.md §3). Per head,
//   S_t = gamma_t S_{t-1} + k_t^T v_t,  o_t = q_t S_t,
// computed in chunks of C tokens (64; 128 or 256 with kernel 5) with tensor
// cores (mma.sync m16n8k16 bf16 -> fp32): intra-chunk ((Q K^T) .* E) V, inter-chunk diag(exp G) Q S^, and the
// state update S = exp(G_C) S + K'^T V, where K' = K .* exp(G_C - G_j). The
// fp32 state slice lives in registers for the whole launch; only the state
// update and its bf16 copy S^ sit on the chunk-to-chunk chain. One CTA per
// (batch, head, segment, V-slice); with P > 1 sequence segments a launch runs
// a state-only pass, a small fp32 scan over segments and the fused pass (see
// gret_plan.hpp for the plan, the phases and the index maths).
// GretChunkPlan::kernel picks the CTA shape: 2 (plan_gret_chunk_v2): 4 warps
// per 32/64-column V-slice; 3 / 4 (plan_gret_chunk_v3, head_dim 128 only): one
// CTA of 8 / 16 warps covering all 128 V columns, so Q K^T, the mask and the
// Q/K loads happen once per head-chunk (cuda/gret/NOTES-gret_chunk.md, v3).
// 5 (plan_gret_chunk_v5, cuda/gret/gret_chunk_v5.cu, head_dim 128): chunks of 128
// or 256 tokens, one CTA of 8 warps an SM.
// 6 (plan_gret_chunk_v6, cuda/gret/gret_chunk_v6.cu, head_dim 128, chunk 64):
// Hopper wgmma, one CTA of 3 warpgroups an SM (outputs | two state halves);
// phase 1 of a segmented launch runs v3's state-only pass.
// plan_gret_chunk, the planner to use, picks v3 with 8 warps for head_dim 128
// (measured fastest on the H100) and v2 otherwise; asked for a chunk of 128
// or 256 it picks v5 where that is compiled (the result does not depend on
// the chunk, DESIGN §3; only the rounding points move).
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "gret/gret_plan.hpp"

namespace yoco::cuda {

// q, k, v: [batch, seq_len, row_stride] bf16, head h at columns [h*D, (h+1)*D);
//   k already RoPE'd and scaled by D^-1/2. Pointers 16-byte aligned, row_stride
//   a multiple of 8 and >= heads*D.
// log_gamma: [batch, seq_len, heads] fp32, all <= 0 (not checked on the device;
//   every exponent is clamped to <= 0 anyway).
// state: [batch, heads, D, D] fp32: the incoming state is read, the final state
//   written in place (carried across prefill launches, handed to decode).
// o: [batch, seq_len, heads*D] bf16, 4-byte aligned (16-byte for kernel 6).
// workspace: gret_chunk_workspace_bytes(shape, plan) bytes of device memory,
//   16-byte aligned (fp32 states of the segments); may be nullptr only when
//   plan.segments == 1. Work is enqueued on `stream` (up to 3 kernels).
// Returns cudaErrorInvalidValue for a bad shape, plan, alignment or workspace.
cudaError_t launch_gret_chunk(const __nv_bfloat16* q, const __nv_bfloat16* k, const __nv_bfloat16* v,
                              const float* log_gamma, float* state, __nv_bfloat16* o, const GretChunkShape& shape,
                              const GretChunkPlan& plan, void* workspace, size_t workspace_bytes,
                              cudaStream_t stream);
// Without a workspace: plan.segments must be 1.
cudaError_t launch_gret_chunk(const __nv_bfloat16* q, const __nv_bfloat16* k, const __nv_bfloat16* v,
                              const float* log_gamma, float* state, __nv_bfloat16* o, const GretChunkShape& shape,
                              const GretChunkPlan& plan, cudaStream_t stream);

// One or more of the three phases of a launch, for timing them apart (bench
// rows "phase 1 / 2 / 3"): kGretPhaseStateOnly (phase 1: the state-only pass
// of segments 0..P-2), kGretPhaseScan (phase 2: the fp32 scan over segments),
// kGretPhaseFused (phase 3, or the only pass when P = 1). Only the full set
// (what launch_gret_chunk runs) computes the operator; a phase alone reads
// what an earlier full launch left in the workspace. Same checks and errors as
// launch_gret_chunk; an empty or unknown set is cudaErrorInvalidValue.
constexpr unsigned kGretPhaseStateOnly = 1u, kGretPhaseScan = 2u, kGretPhaseFused = 4u;
constexpr unsigned kGretAllPhases = kGretPhaseStateOnly | kGretPhaseScan | kGretPhaseFused;
cudaError_t launch_gret_chunk_phases(unsigned phases, const __nv_bfloat16* q, const __nv_bfloat16* k,
                                     const __nv_bfloat16* v, const float* log_gamma, float* state, __nv_bfloat16* o,
                                     const GretChunkShape& shape, const GretChunkPlan& plan, void* workspace,
                                     size_t workspace_bytes, cudaStream_t stream);

// Bytes of workspace the plan needs: 0 for one segment, else
// 4 * (S*B*H*D*D + B*H*S), S = gret_ws_slots(P, phase1_split).
size_t gret_chunk_workspace_bytes(const GretChunkShape& shape, const GretChunkPlan& plan);

// Dynamic shared memory the kernel uses for (head_dim, slice_cols); 0 if unsupported.
size_t gret_chunk_smem_bytes(int64_t head_dim, int64_t slice_cols);

}  // namespace yoco::cuda
