#pragma once
// The two small gRet kernels around the retention itself (DESIGN.md §3):
// the decay log γ = logsigmoid(z)/16 from the gate projection, and the output's
// per-head RMSNorm (no weight) followed by the silu gate. Both are memory-bound
// elementwise passes with fp32 arithmetic; sizes are int64_t and every index
// inside the kernels is 64-bit.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace yoco::cuda {

// Per row r and head h, with x = o[r, h·D : (h+1)·D]:
//   inv = 1 / sqrt(Σ x² / D + eps);  out = silu(g) ⊙ (x · inv),  silu(g) = g / (1 + exp(-g)),
// in that order, as reference rms_norm_heads_inplace then silu(g) ⊙ o
// (reference/yoco_model.cpp gret_mixer; eps is the config's norm_eps, 1e-5).
// o, out: bf16 [rows, heads·D], contiguous; out may alias o (each element is
// read before it is written, by the same thread). g: bf16, row r's head h at
// g + r·g_stride + h·D (g may sit inside a fused projection output). fp32 math.
//
// Two kernels (both give the same bits; `kernel` picks):
// - per_warp: one warp per (row, head); 4/8/16-byte vector accesses when
//   D ∈ {64, 128, 256} and the pointers and g_stride allow it, a scalar loop
//   otherwise. Any D and alignment.
// - half_warp: D 128 only, 16 lanes a head, 16-byte accesses, two pairs of
//   heads in flight a warp, a persistent grid; needs o, out and g 16-byte
//   aligned and g_stride a multiple of 8, else cudaErrorInvalidValue (checked
//   before rows == 0 returns; nothing is launched).
// - automatic: per_warp today; half_warp at D 128 where it applies once
//   kNormGateHalfWarpByDefault is true.
// Refused (cudaErrorInvalidValue, nothing launched): rows < 0, heads < 1,
// head_dim < 1, g_stride < heads·D, a `kernel` outside the enum.
enum class NormGateKernel { automatic, per_warp, half_warp };

// Decision rule, written before any run: true once bench gret_decode's row
// "rows 32768 H24 D128, g in q|k|v|g rows, half-warp kernel" beats the per-warp
// row "rows 32768 H24 D128, g in q|k|v|g rows" (the model's strided g) in the same run.
inline constexpr bool kNormGateHalfWarpByDefault = false;

cudaError_t launch_gret_norm_gate(const __nv_bfloat16* o, const __nv_bfloat16* g, int64_t g_stride, int64_t rows,
                                  int64_t heads, int64_t head_dim, float eps, __nv_bfloat16* out,
                                  cudaStream_t stream, NormGateKernel kernel = NormGateKernel::automatic);

// log_gamma[r·heads + h] = logsigmoid(z) / normalizer, z = z_in[r·z_stride + h],
// computed as (min(z, 0) - log1p(exp(-|z|))) · (1 / normalizer): neither term
// overflows for any finite z. The result is always ≤ 0 for every finite or
// infinite z (NaN stays NaN); nothing is refused at run time. normalizer is the
// config's gate_logit_normalizer (16); it must be > 0.
//
// Which input the runner should use: the fp32 one. The gate projection is
// d → heads (24 outputs per token), so writing it in fp32 costs nothing, while
// a bf16 z carries 2^-9 relative error: at z ≈ 4 (γ ≈ 0.999, the regime that
// matters for long decode) that is ≈ 1.7 % of log γ, a systematic change of
// the decay horizon. The bf16 overload exists for a z left inside a fused bf16
// projection output.
cudaError_t launch_gret_log_decay(const float* z, int64_t z_stride, int64_t rows, int64_t heads, float normalizer,
                                  float* log_gamma, cudaStream_t stream);
cudaError_t launch_gret_log_decay(const __nv_bfloat16* z, int64_t z_stride, int64_t rows, int64_t heads,
                                  float normalizer, float* log_gamma, cudaStream_t stream);

}  // namespace yoco::cuda
