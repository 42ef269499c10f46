#pragma once
// The small memory-bound kernels both CUDA runners share, each paired with the
// reference op it must equal (reference/ops.hpp). Storage: bf16 activations
// and weights, fp32 residual stream, fp32 arithmetic. Sizes are int64_t and
// every index inside the kernels is 64-bit, but RoPE's, which are 32-bit when
// they provably fit.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "ops.hpp"  // RopeLayout: one definition for CPU and GPU

namespace yoco::cuda {

using bf16 = __nv_bfloat16;

// residual[r, :] = scale * table[tokens[r], :]  (YOCO: scale sqrt(d); Transformer: 1).
cudaError_t launch_embedding(const int64_t* tokens, int64_t rows, const bf16* table, int64_t dim, float scale,
                             float* residual, cudaStream_t stream);

// The two RMSNorm kernels, one block a row, equal bit for bit (the same operations in the same order).
// looped: any width; the second pass reads the row again. cached: rows of up to 4096 columns
// (rms_norm_cached_fits); each thread keeps its pieces of the row in registers between the passes and
// loads its weights first, so that a decode step's one-row norm, whose weights are cold in the L2, waits
// for them once, beside the first pass, and not once per piece after the reduction. automatic: cached
// where it fits and the rows are a decode step's few (up to 256), looped for a prefill's. A kernel asked
// for where it does not fit: cudaErrorInvalidValue.
enum class RmsNormKernel { automatic, looped, cached };
// Whether the cached kernel takes rows of `dim` columns (`vectorized`: in pieces of 4, the launchers'
// choice when dim % 4 == 0 and every pointer is aligned for them).
bool rms_norm_cached_fits(int64_t dim, bool vectorized);

// out = x / sqrt(mean(x^2) + eps) * w, per row (w may be null: no weight).  ↔ rms_norm
cudaError_t launch_rms_norm(const float* x, const bf16* w, int64_t rows, int64_t dim, float eps, bf16* out,
                            cudaStream_t stream, RmsNormKernel kernel = RmsNormKernel::automatic);

// residual += delta, then out = rms_norm(residual) * w: the pre-norm block's
// add and the next norm in one pass over the row.  ↔ x + delta, rms_norm
cudaError_t launch_add_rms_norm(float* residual, const bf16* delta, const bf16* w, int64_t rows, int64_t dim,
                                float eps, bf16* out, cudaStream_t stream,
                                RmsNormKernel kernel = RmsNormKernel::automatic);

// A layer's two sublayer outputs joined with one store of its residual (issue 34; YOCO_RESIDUAL_PER_LAYER,
// runner/runner_support.hpp). Between the sublayers, launch_rms_norm_of_sum: out = rms_norm(residual + first)
// * w, the residual left as it was (8 bytes an element, not add + RMSNorm's 12). After the second,
// launch_add2_rms_norm: residual = (residual + first) + second, out = rms_norm(residual) * w (14 bytes). The
// sums are fp32 in the order two launch_add_rms_norm passes form them, so out and the residual are theirs
// bit for bit, with 22 bytes an element moved a layer instead of 24. first and second may alias out (each
// thread reads its pieces before the block's barrier, or again itself, and writes them after); null first
// or second: cudaErrorInvalidValue.  ↔ x + delta, rms_norm
cudaError_t launch_rms_norm_of_sum(const float* residual, const bf16* first, const bf16* w, int64_t rows,
                                   int64_t dim, float eps, bf16* out, cudaStream_t stream,
                                   RmsNormKernel kernel = RmsNormKernel::automatic);
cudaError_t launch_add2_rms_norm(float* residual, const bf16* first, const bf16* second, const bf16* w, int64_t rows,
                                 int64_t dim, float eps, bf16* out, cudaStream_t stream,
                                 RmsNormKernel kernel = RmsNormKernel::automatic);

// h13 rows are [W1 x (F) | W3 x (F)]; out = silu(W1 x) * W3 x, [rows, F].  ↔ the middle of swiglu_ffn
cudaError_t launch_swiglu(const bf16* h13, int64_t rows, int64_t ffn_dim, bf16* out, cudaStream_t stream);

// Rotates `n_heads` heads of `head_dim` at the start of each row (row stride
// `row_stride` elements, so q or k inside a fused projection output can be
// rotated in place). Row r is at position pos0 + r % rows_per_seq. inv_freq:
// head_dim/2 doubles on the device (from rope_inv_freq_*); angles and their
// sines in double, as the reference (fp32 angles lose ~0.06 rad at 1M tokens).
// scale multiplies the rotated pair before its one rounding to bf16 (gRet's
// key scale D^-1/2, which the reference applies after RoPE), except in the
// first `unscaled_heads` heads: q and k of a fused projection, adjacent, in
// one pass (one angle per row and pair for both, and q's bits as with scale
// 1).  ↔ apply_rope
cudaError_t launch_rope(bf16* x, int64_t rows, int64_t row_stride, int64_t n_heads, int64_t head_dim, int64_t pos0,
                        int64_t rows_per_seq, const double* inv_freq, RopeLayout layout, cudaStream_t stream,
                        double scale = 1.0, int64_t unscaled_heads = 0);

}  // namespace yoco::cuda
