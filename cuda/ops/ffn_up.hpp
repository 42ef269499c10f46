#pragma once
// The FFN's up half, h = silu(x W1ᵀ) ⊙ (x W3ᵀ), as both runners run it: one selector between the
// pair (cuBLAS's W1|W3 GEMM into a [rows, 2F] buffer, then launch_swiglu) and the fused kernel
// (ops/gemm_swiglu.hpp). The fused kernel takes a call when the runner asked for it
// (YOCO_FFN_FUSED=1) on a device it runs on, the call has kMinRowsToFuse rows or more and the
// shape and pointers are its; a runner knows ahead which steps those are
// (gemm_swiglu::fused_on_every_block), allocates no [rows, 2F] buffer for them and passes
// h13 = nullptr. The memory formula (runner/generation_bytes.hpp) asks the same question.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "ops/gemm.hpp"
#include "ops/gemm_swiglu.hpp"  // GemmSwigluCtas

namespace yoco::cuda {

// Whether the fused kernel can take a runner's calls here: `asked` (YOCO_FFN_FUSED=1) and the
// current device is compute capability 9.0.
bool ffn_up_fused_here(bool asked);

// h[rows, F] from x[rows, dim] and [W1; W3] ([2F, dim]): the fused kernel where `fused`
// (ffn_up_fused_here) and it serves the call, else the pair through h13. Empty string on success,
// else what failed: a fused launch that fails is an error, not a fallback; so is the pair's turn
// without an h13 of enough rows (a runner that sized the buffer for calls the kernel takes).
// h13 holds h13_rows rows (0 with no buffer).
// `ctas`: which fused kernel (the one-CTA kernel, or its CTA pairs: YOCO_FFN_FUSED=pairs).
std::string ffn_up_swiglu(Gemm& gemm, const __nv_bfloat16* x, int64_t rows, int64_t dim, const __nv_bfloat16* w13,
                          int64_t ffn_dim, __nv_bfloat16* h13, int64_t h13_rows, __nv_bfloat16* out, bool fused,
                          cudaStream_t stream, GemmSwigluCtas ctas = GemmSwigluCtas::one);

}  // namespace yoco::cuda
