#pragma once
// One gRet decode step for every (sequence, head): S = γ S + kᵀ v, o = q S
// (reference/gret.hpp: gret_recurrent, one token). The state stays fp32 on the
// device (the authors keep it in bf16 and drift; DESIGN.md §3). Memory-bound:
// the state is read and written once per step, B·H·2·D²·4 bytes; q, k, v are
// tiny (KERNELS.md §3 "Decode step").
//
// Layout of the work: one CTA per (sequence, head, V-slice of W columns), so a
// batch of one still spreads over many SMs (192 CTAs at H 24, D 128, W 16;
// W 32 and 256 threads at head dims 160-256 that are multiples of 32, the
// fused and deferred steps' width, so that all of them sum o in one order).
// Each thread owns a 4-column quad of the slice on D/32 (W 16) rows: it loads
// its whole part of the tile with 16-byte loads before any store, updates it,
// stores it, and o = q S is reduced across the rows by warp shuffles and one
// shared-memory pass. The state layout stays [batch, heads, Dk, Dv] row-major
// (what the chunk prefill kernel hands over).
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "gret/gret_pending.hpp"

namespace yoco::cuda {

// q, k, v: rows of `row_stride` elements per sequence (q/k/v may sit inside a
// fused projection output), head h at columns [h·D, (h+1)·D). k is already
// RoPE'd and scaled by D^-1/2, as the reference's op expects.
// log_gamma: [batch, heads] fp32 (≤ 0). Near γ = 1 (log γ > −0.5) the decay is
// applied as S − δS with δ = −expm1(log γ), so that fp32's rounding of γ does
// not accumulate over long decodes (KERNELS.md §5 row 2).
// state: [batch, heads, Dk, Dv] fp32, updated in place. o: [batch, heads·Dv]
// bf16. Dk = Dv = head_dim ≤ 1024.
// The sliced fast path runs for head_dim % 16 == 0, head_dim ≤ 256 and a
// 16-byte-aligned state; any other shape takes a slower one-CTA-per-head path
// with the same results.
//
// overlap_previous (sliced path only; ignored elsewhere): launch as a
// programmatic dependent of the previous kernel in the stream, so that this
// step's state loads run while that kernel finishes; q, k, v and log_gamma are
// read only after it has completed. At batch 1 a step moves ~3 MB, about 1 µs
// at the copy rate, less than a launch: this overlap is what lets a chain of
// layers approach the byte floor. Contract: the kernel just before this one in
// the stream must not write `state` (true in a decode step, where the
// previous kernel is another layer's or a projection; false when one layer's
// step is repeated back to back).
cudaError_t launch_gret_recurrent_step(const __nv_bfloat16* q, const __nv_bfloat16* k, const __nv_bfloat16* v,
                                       int64_t row_stride, const float* log_gamma, float* state, __nv_bfloat16* o,
                                       int64_t batch, int64_t heads, int64_t head_dim, cudaStream_t stream,
                                       bool overlap_previous = false);

// Whether launch_gret_recurrent_step serves this head_dim (1..1024).
bool gret_step_supported(int64_t head_dim);

// Whether the fused step below supports this head_dim: head_dim % 16 == 0 and
// head_dim ≤ 128, or head_dim % 32 == 0 and head_dim ≤ 256 (≤ 8 V-slices per
// head, one thread-block cluster per head).
bool gret_fused_step_supported(int64_t head_dim);

// The step, then the gRet output's per-head RMSNorm (no weight) and gate in
// the same kernel: out = silu(g) ⊙ (o / sqrt(mean(o²) + eps)) per head, with o
// the fp32 result of the step (never rounded to bf16 before the norm). A
// head's V-slice CTAs form one cluster and add their sums of squares through
// distributed shared memory. g: bf16, head h at columns [h·D, (h+1)·D) of a
// row of `g_stride` elements per sequence. out: [batch, heads·D] bf16.
// The state is updated exactly as launch_gret_recurrent_step does.
// Returns cudaErrorInvalidValue where !gret_fused_step_supported(head_dim) or
// the state is not 16-byte aligned (then run the step and
// launch_gret_norm_gate instead).  ↔ the step, rms_norm_heads_inplace, silu(g) ⊙ o
cudaError_t launch_gret_recurrent_step_norm_gate(const __nv_bfloat16* q, const __nv_bfloat16* k,
                                                 const __nv_bfloat16* v, int64_t row_stride, const float* log_gamma,
                                                 float* state, const __nv_bfloat16* g, int64_t g_stride, float eps,
                                                 __nv_bfloat16* out, int64_t batch, int64_t heads, int64_t head_dim,
                                                 cudaStream_t stream);

// ---- The deferred step (gret_pending.hpp says why) ----
// The same step, with the state kept one step behind: `state` holds S_{t−1}
// after step t, and `pending` (gret_pending_bytes(batch, heads, head_dim)
// bytes, 16-byte aligned, zeroed before the first step: all-zero is "no
// update") holds step t's (k, v, log γ). Each step first applies the pending
// update to the state, before it waits for the previous kernel, then reads
// q, k, v and log γ and writes o (or out) exactly as the eager step does: the
// outputs are bit-identical to launch_gret_recurrent_step's and
// launch_gret_recurrent_step_norm_gate's, and after launch_gret_pending_flush
// so is the state. Only the order of the state traffic differs: it leaves the
// path that waits for the previous kernel.
// Supported where gret_fused_step_supported(head_dim) (same CTAs as the fused
// step); otherwise cudaErrorInvalidValue, as for a misaligned state or pending.
// overlap_previous: as for launch_gret_recurrent_step, and the contract is
// wider since the state is written before the wait: no kernel that may still
// be running when this one starts may read or write `state` or `pending`.
// That is the kernel just before it in the stream, and the one before that
// too if the one just before releases its dependents before its own wait
// (the gRet steps release after theirs). So one layer's steps back to back
// must not overlap.
// Anything else that reads the state (a chunked prefill continuing from it,
// a test) must call launch_gret_pending_flush first.
cudaError_t launch_gret_deferred_step(const __nv_bfloat16* q, const __nv_bfloat16* k, const __nv_bfloat16* v,
                                      int64_t row_stride, const float* log_gamma, float* state, void* pending,
                                      __nv_bfloat16* o, int64_t batch, int64_t heads, int64_t head_dim,
                                      cudaStream_t stream, bool overlap_previous = false);

// The deferred step with the per-head RMSNorm and gate (a cluster per head,
// as launch_gret_recurrent_step_norm_gate), optionally a programmatic
// dependent launch as well.
cudaError_t launch_gret_deferred_step_norm_gate(const __nv_bfloat16* q, const __nv_bfloat16* k,
                                                const __nv_bfloat16* v, int64_t row_stride, const float* log_gamma,
                                                float* state, void* pending, const __nv_bfloat16* g,
                                                int64_t g_stride, float eps, __nv_bfloat16* out, int64_t batch,
                                                int64_t heads, int64_t head_dim, cudaStream_t stream,
                                                bool overlap_previous = false);

// Applies the pending updates to the state and zeroes `pending`: afterwards
// the state is what the eager steps would have left, bit for bit.
cudaError_t launch_gret_pending_flush(float* state, void* pending, int64_t batch, int64_t heads, int64_t head_dim,
                                      cudaStream_t stream);

// ---- The split step: the output on the dependent path, the state update off it ----
// Why (cuda/gret/NOTES-gret_decode.md): at batch 1 a step's cost in a chain of
// layers is its dependent part, and the eager step's includes storing and
// draining the whole state before the next kernel may go on. Nothing but the
// same layer's next step reads that state, so the step is cut in two:
//   launch_gret_output_step[_norm_gate]: o (or the normed, gated out) exactly
//     as the eager step (or the fused step) writes it, bit for bit: the same
//     γ S + kᵀ v formed in registers, never stored; the state is only read.
//     overlap_previous: a programmatic dependent launch, as for
//     launch_gret_recurrent_step (the state loads overlap the previous
//     kernel; q, k, v and log γ are read after it completes); the contract is
//     the eager step's: the kernel before must not write `state`.
//   launch_gret_state_update: S ← γ S + kᵀ v, the eager step's arithmetic on
//     the same values, so that afterwards the state is the eager step's bit
//     for bit. It must start after the output step has completed (it
//     overwrites what that step reads), and complete before anything
//     overwrites k, v or log γ and before the layer's next step. Launched on
//     a side stream (gret_update_branches.hpp), it runs beside the layer's
//     later kernels instead of in front of them.
// Both serve gret_fused_step_supported(head_dim) with a 16-byte-aligned
// state (the shared CTA shape); otherwise cudaErrorInvalidValue.
cudaError_t launch_gret_output_step(const __nv_bfloat16* q, const __nv_bfloat16* k, const __nv_bfloat16* v,
                                    int64_t row_stride, const float* log_gamma, const float* state,
                                    __nv_bfloat16* o, int64_t batch, int64_t heads, int64_t head_dim,
                                    cudaStream_t stream, bool overlap_previous = false);

cudaError_t launch_gret_output_step_norm_gate(const __nv_bfloat16* q, const __nv_bfloat16* k,
                                              const __nv_bfloat16* v, int64_t row_stride, const float* log_gamma,
                                              const float* state, const __nv_bfloat16* g, int64_t g_stride,
                                              float eps, __nv_bfloat16* out, int64_t batch, int64_t heads,
                                              int64_t head_dim, cudaStream_t stream, bool overlap_previous = false);

cudaError_t launch_gret_state_update(const __nv_bfloat16* k, const __nv_bfloat16* v, int64_t row_stride,
                                     const float* log_gamma, float* state, int64_t batch, int64_t heads,
                                     int64_t head_dim, cudaStream_t stream);

}  // namespace yoco::cuda
