#pragma once
// Gated retention (gRet) chunkwise prefill on the GPU: the device pair of
// reference/gret.hpp gret_chunkwise (KERNELS.md §3). Per head,
//   S_t = gamma_t S_{t-1} + k_t^T v_t,  o_t = q_t S_t,
// computed in chunks of C tokens on tensor cores: intra-chunk
// ((Q K^T) .* E) V, inter-chunk diag(exp G) Q S^, and the state update
// S = exp(G_C) S + K'^T V with K' = K .* exp(G_C - G_j), every exponent <= 0.
// A plan (gret_plan.hpp) names the variant (GretChunkPlan::kernel), the chunk
// and the split: one CTA per (batch, head, segment, V-slice); with P > 1
// sequence segments a launch runs a state-only pass, a small fp32 scan over
// segments and the fused pass. Take plans from select_gret_chunk
// (gret_select.hpp), which knows the measured default; the variants and their
// evidence are in cuda/README.md and cuda/gret/NOTES-gret_chunk.md.
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
//   plan.segments == 1. Work is enqueued on `stream` (up to 3 kernels; one
//   more with a norm_gate the plan does not fuse).
// Returns cudaErrorInvalidValue for a bad shape, plan, alignment or workspace.
// norm_gate (optional): o is written as silu(g) ⊙ rms_norm(o) per head, bit
// for bit what this launch followed by launch_gret_norm_gate(o, g, g_stride,
// batch·seq_len, heads, head_dim, eps, o) writes (gret_gate.hpp). Kernel 6
// does it in its epilogue when the plan sets fuse_norm_gate and g is 16-byte
// aligned with g_stride % 8 == 0 (gret_chunk_fuses_norm_gate); otherwise the
// launch runs the norm + gate kernel after the chunk (the planners' choice:
// gret_plan.hpp, fuse_norm_gate). g is laid out as q (row stride g_stride) and must
// not overlap o (the fused path reads g while it writes o).
struct GretNormGate {
  const __nv_bfloat16* g;
  int64_t g_stride;
  float eps;
};
// Whether a launch of `plan` with `ng` applies it in the chunk kernel (one
// kernel fewer) rather than by the norm + gate kernel after it.
bool gret_chunk_fuses_norm_gate(const GretChunkPlan& plan, const GretNormGate& ng);
cudaError_t launch_gret_chunk(const __nv_bfloat16* q, const __nv_bfloat16* k, const __nv_bfloat16* v,
                              const float* log_gamma, float* state, __nv_bfloat16* o, const GretChunkShape& shape,
                              const GretChunkPlan& plan, void* workspace, size_t workspace_bytes,
                              cudaStream_t stream, const GretNormGate* norm_gate = nullptr);
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
// With norm_gate, the norm and gate belong to phase 3.
cudaError_t launch_gret_chunk_phases(unsigned phases, const __nv_bfloat16* q, const __nv_bfloat16* k,
                                     const __nv_bfloat16* v, const float* log_gamma, float* state, __nv_bfloat16* o,
                                     const GretChunkShape& shape, const GretChunkPlan& plan, void* workspace,
                                     size_t workspace_bytes, cudaStream_t stream,
                                     const GretNormGate* norm_gate = nullptr);

// Bytes of workspace: gret_chunk_workspace_bytes (gret/gret_plan.hpp).

// Dynamic shared memory the kernel uses for (head_dim, slice_cols); 0 if unsupported.
size_t gret_chunk_smem_bytes(int64_t head_dim, int64_t slice_cols);

}  // namespace yoco::cuda
