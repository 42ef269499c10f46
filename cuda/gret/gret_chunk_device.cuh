#pragma once
// Device helpers shared by the gRet chunk kernels (cuda/gret/gret_chunk.cu: v2,
// v3; cuda/gret/gret_chunk_v5.cu: chunks of 128 and 256; cuda/gret/gret_chunk_v6.cu: wgmma): cp.async, ldmatrix,
// mma.sync m16n8k16, bf16 packing, the clamped decay, the swizzled tile
// addressing, the 64-token chunk scan, and GretPass, the arguments of one
// pass of the three-phase launch (gret_plan.hpp).
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "arch/cp_async.cuh"
#include "arch/device_math.cuh"
#include "arch/ldmatrix.cuh"
#include "arch/swizzle.hpp"
#include "gret/gret_plan.hpp"

namespace yoco::cuda::gret_detail {

using dev::cp_async16;
using dev::cp_async4;
using dev::cp_async_commit;
using dev::cp_async_wait_all;
using dev::ldmatrix_x4;
using dev::ldmatrix_x4_trans;
using dev::mma_bf16;
using dev::pack_bf16;
using dev::smem_u32;

// Multiplies both halves of a bf16x2 by fp32 factors and rounds back once.
__device__ __forceinline__ uint32_t scale_bf16x2(uint32_t x, float f_lo, float f_hi) {
  __nv_bfloat162 h = *reinterpret_cast<const __nv_bfloat162*>(&x);
  const float2 f = __bfloat1622float2(h);
  return pack_bf16(f.x * f_lo, f.y * f_hi);
}
__device__ __forceinline__ float decay(float x) { return __expf(fminf(x, 0.0f)); }  // every exponent clamped <= 0


// Arguments of one pass over a grid of (batch, head, segment, slice) CTAs.
struct GretPass {
  const __nv_bfloat16* q;
  const __nv_bfloat16* k;
  const __nv_bfloat16* v;
  const float* log_gamma;
  const float* s_in;       // incoming state slot of segment p: s_in + p*s_in_seg ([B,H,D,D]); nullptr: zero
  int64_t s_in_seg;
  float* s_out;            // state written at the end (segment p: s_out + p*s_out_seg), nullptr: none
  int64_t s_out_seg;
  int64_t write_from;      // only segments >= write_from write s_out
  float* gamma;            // [B, H, P] total log-decay of each segment (slice 0 writes), nullptr: none
  __nv_bfloat16* o;
  int64_t heads, seq_len, row_stride, slices, segments, grid_segments;
  // Kernel 6's fused pass only (nullptr: o as it is): o is written as
  // silu(g) ⊙ rms_norm(o) per head (gret_norm_gate.cuh), the norm + gate
  // kernel's bits; g laid out as q (row t of sequence b at
  // g + (b·seq_len + t)·g_stride + h·D), 16-byte aligned, g_stride % 8 == 0.
  const __nv_bfloat16* g = nullptr;
  int64_t g_stride = 0;
  float eps = 0.0f;
};

// The tiles' XOR swizzle (arch/swizzle.hpp): swz<D>(r, c) is the byte offset
// of the 16-byte piece holding columns [c, c+8) of row r, swz_elem<D> adds
// (c & 7) * 2 inside it.
using dev::swz;
using dev::swz_elem;

// An opaque copy: addresses derived from it are formed where used, not
// hoisted out of the chunk loop into registers.
__device__ __forceinline__ uint32_t opaque_u32(uint32_t x) {
  asm volatile("mov.b32 %0, %0;\n" : "+r"(x));
  return x;
}

// The chunk's inclusive cumsum of log-gamma as 32 lanes do it (the order
// gret_emulate_chunk_scan mirrors): lane l sums the pair (2l, 2l+1), a
// Hillis-Steele scan of the pair sums, G[2l] = exclusive prefix + x0.
__device__ __forceinline__ void chunk_scan(const float* lg, int lane, float& g0, float& g1, float& GC) {
  const float x0 = lg[2 * lane], x1 = lg[2 * lane + 1];
  float sc = x0 + x1;
#pragma unroll
  for (int off = 1; off < 32; off *= 2) {
    const float y = __shfl_up_sync(0xffffffffu, sc, off);
    if (lane >= off) sc += y;
  }
  float ex = __shfl_up_sync(0xffffffffu, sc, 1);
  if (lane == 0) ex = 0.0f;
  GC = __shfl_sync(0xffffffffu, sc, 31);
  g0 = ex + x0;
  g1 = sc;
}

// ---- pieces of the full-width kernels (v3, v5): D bf16 columns a tile row,
// a warp's state block in mma accumulator layout (rows sr0 and sr0 + 8,
// columns scol + 8 nt + 2t and + 1).

// A full-width CTA's (batch, head, segment) and its chunks [c_begin, c_end)
// of C tokens. 32-bit: B*H*P and the chunk count stay far below 2^31; every
// address is formed in int64 where it is used.
struct FullWidthCta {
  int b, h, seg, c_begin, c_end;
};
template <int C>
__device__ __forceinline__ FullWidthCta full_width_cta(const GretPass& a) {
  const GretSegCta cta = gret_seg_cta(blockIdx.x, a.heads, a.grid_segments, 1);
  FullWidthCta r;
  r.b = static_cast<int>(cta.batch);
  r.h = static_cast<int>(cta.head);
  r.seg = static_cast<int>(cta.segment);
  const int64_t nchunks = gret_num_chunks(a.seq_len, C);
  r.c_begin = static_cast<int>(gret_segment_begin(r.seg, nchunks, a.segments));
  r.c_end = static_cast<int>(gret_segment_begin(r.seg + 1, nchunks, a.segments));
  return r;
}

// cp.async of one C x D swizzled tile from `base` (the tile's first row, rows
// `row_stride` elements apart) by kThreads threads, thread index `tid`; rows
// >= nv are zero-filled and nothing past them is read.
template <int D, int C, int kThreads>
__device__ __forceinline__ void load_swizzled_tile(uint32_t dst, const __nv_bfloat16* base, int64_t nv,
                                                   int64_t row_stride, int tid) {
  constexpr int kPieces = C * D / 8;
  static_assert(kPieces % kThreads == 0, "whole pieces a thread");
#pragma unroll
  for (int i = 0; i < kPieces / kThreads; ++i) {
    const int idx = tid + i * kThreads;
    const int r = idx / (D / 8), cc = idx % (D / 8);
    const bool ok = r < nv;
    const int64_t go = ok ? static_cast<int64_t>(r) * row_stride + cc * 8 : 0;
    cp_async16(dst + swz<D>(r, cc * 8), base + go, ok);
  }
}

// The state block from `sin` ([D, D] fp32; nullptr: zero); with kWriteS its
// bf16 copy S^ into the swizzled tile at pS too.
template <int D, int NT, bool kWriteS>
__device__ __forceinline__ void load_state_block(float (&s)[NT][4], const float* sin, unsigned char* pS, int sr0,
                                                 int scol, int t) {
#pragma unroll
  for (int nt = 0; nt < NT; ++nt) {
    const int col = scol + nt * 8 + 2 * t;
    float2 x = make_float2(0.0f, 0.0f), y = make_float2(0.0f, 0.0f);
    if (sin) {
      x = *reinterpret_cast<const float2*>(sin + static_cast<int64_t>(sr0) * D + col);
      y = *reinterpret_cast<const float2*>(sin + static_cast<int64_t>(sr0 + 8) * D + col);
    }
    s[nt][0] = x.x;
    s[nt][1] = x.y;
    s[nt][2] = y.x;
    s[nt][3] = y.y;
    if constexpr (kWriteS) {
      *reinterpret_cast<uint32_t*>(pS + swz_elem<D>(sr0, col)) = pack_bf16(x.x, x.y);
      *reinterpret_cast<uint32_t*>(pS + swz_elem<D>(sr0 + 8, col)) = pack_bf16(y.x, y.y);
    }
  }
}

// S^ <- bf16(state block).
template <int D, int NT>
__device__ __forceinline__ void store_state_bf16(const float (&s)[NT][4], unsigned char* pS, int sr0, int scol, int t) {
#pragma unroll
  for (int nt = 0; nt < NT; ++nt) {
    const int col = scol + nt * 8 + 2 * t;
    *reinterpret_cast<uint32_t*>(pS + swz_elem<D>(sr0, col)) = pack_bf16(s[nt][0], s[nt][1]);
    *reinterpret_cast<uint32_t*>(pS + swz_elem<D>(sr0 + 8, col)) = pack_bf16(s[nt][2], s[nt][3]);
  }
}

// The state block (fp32) to `so` ([D, D]).
template <int D, int NT>
__device__ __forceinline__ void store_state_block(const float (&s)[NT][4], float* so, int sr0, int scol, int t) {
#pragma unroll
  for (int nt = 0; nt < NT; ++nt) {
    const int col = scol + nt * 8 + 2 * t;
    *reinterpret_cast<float2*>(so + static_cast<int64_t>(sr0) * D + col) = make_float2(s[nt][0], s[nt][1]);
    *reinterpret_cast<float2*>(so + static_cast<int64_t>(sr0 + 8) * D + col) = make_float2(s[nt][2], s[nt][3]);
  }
}

// The bf16 A fragment of one 16 x 16 block of (Q K^T) .* E from its fp32
// accumulators: rows i0, i1 = i0 + 8 (log-decays Gi0, Gi1), keys of key block
// kb (chunk-local first key 16 kb); kl = kb's block inside its 64-token
// sub-tile, whose G the lanes hold as pairs (g0: G[2l], g1: G[2l+1]).
// Off the diagonal every key j <= m = 16 kb + 15 < i, so
// exp(G_i - G_j) = exp(G_i - G_m) exp(G_m - G_j), both exponents <= 0: 6
// exponentials instead of 16. On it, a select on j <= i (never a product with
// an overflowed factor). Every lane of the warp must call it (shuffles).
__device__ __forceinline__ void masked_decayed_fragment(uint32_t (&af)[4], const float (&acc)[2][4], bool diagonal,
                                                        float Gi0, float Gi1, float g0, float g1, int kb, int kl,
                                                        int i0, int i1, int t) {
  if (!diagonal) {
    const float Gm = __shfl_sync(0xffffffffu, g1, 8 * kl + 7);
    const float r0 = decay(Gi0 - Gm), r1 = decay(Gi1 - Gm);
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const float Gj0 = __shfl_sync(0xffffffffu, g0, 8 * kl + 4 * half + t);
      const float Gj1 = __shfl_sync(0xffffffffu, g1, 8 * kl + 4 * half + t);
      const float c0 = decay(Gm - Gj0), c1 = decay(Gm - Gj1);
      af[2 * half] = pack_bf16(acc[half][0] * (r0 * c0), acc[half][1] * (r0 * c1));
      af[2 * half + 1] = pack_bf16(acc[half][2] * (r1 * c0), acc[half][3] * (r1 * c1));
    }
  } else {
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int j0 = kb * 16 + half * 8 + 2 * t, j1 = j0 + 1;
      const float Gj0 = __shfl_sync(0xffffffffu, g0, 8 * kl + 4 * half + t);
      const float Gj1 = __shfl_sync(0xffffffffu, g1, 8 * kl + 4 * half + t);
      const float p00 = j0 <= i0 ? acc[half][0] * decay(Gi0 - Gj0) : 0.0f;
      const float p01 = j1 <= i0 ? acc[half][1] * decay(Gi0 - Gj1) : 0.0f;
      const float p10 = j0 <= i1 ? acc[half][2] * decay(Gi1 - Gj0) : 0.0f;
      const float p11 = j1 <= i1 ? acc[half][3] * decay(Gi1 - Gj1) : 0.0f;
      af[2 * half] = pack_bf16(p00, p01);
      af[2 * half + 1] = pack_bf16(p10, p11);
    }
  }
}

// One 16-token step of the state update S += K'^T V: the K^T fragment of
// tokens 16 kk .. 16 kk + 15 (state rows srow ..) scaled by the decays
// f0, f1 (tokens 16 kk + 2t, +1) and f2, f3 (+8, +9), times V's columns
// scol .. scol + 8 NT.
template <int D, int NT>
__device__ __forceinline__ void state_update_step(float (&s)[NT][4], uint32_t cK, uint32_t cV, int kk, int srow,
                                                  int scol, int lane, float f0, float f1, float f2, float f3) {
  uint32_t a0, a1, a2, a3;
  // A = K^T (m = state row, k = token): transposed 8x8 loads from K's rows
  ldmatrix_x4_trans(cK + swz<D>(kk * 16 + (lane & 7) + (lane >> 4) * 8, srow + ((lane >> 3) & 1) * 8), a0, a1, a2, a3);
  a0 = scale_bf16x2(a0, f0, f1);
  a1 = scale_bf16x2(a1, f0, f1);
  a2 = scale_bf16x2(a2, f2, f3);
  a3 = scale_bf16x2(a3, f2, f3);
#pragma unroll
  for (int np = 0; np < NT / 2; ++np) {
    uint32_t b0, b1, b2, b3;
    ldmatrix_x4_trans(cV + swz<D>(kk * 16 + (lane & 7) + ((lane >> 3) & 1) * 8, scol + np * 16 + (lane >> 4) * 8), b0, b1, b2,
              b3);
    mma_bf16(s[2 * np], a0, a1, a2, a3, b0, b1);
    mma_bf16(s[2 * np + 1], a0, a1, a2, a3, b2, b3);
  }
}

// Output rows i0 (at o0) and i1 = i0 + 8 (at o0 + row8) as bf16 pairs, NTO
// n-tiles of 8 columns; a row past the end (ok0 / ok1 false) is not written.
template <int NTO>
__device__ __forceinline__ void store_output_rows(const float (&out)[NTO][4], __nv_bfloat16* o0, int64_t row8, bool ok0,
                                                  bool ok1) {
  __nv_bfloat16* o1 = o0 + row8;
#pragma unroll
  for (int nt = 0; nt < NTO; ++nt) {
    if (ok0) *reinterpret_cast<uint32_t*>(o0 + nt * 8) = pack_bf16(out[nt][0], out[nt][1]);
    if (ok1) *reinterpret_cast<uint32_t*>(o1 + nt * 8) = pack_bf16(out[nt][2], out[nt][3]);
  }
}

// One pass of v2 (cuda/gret/gret_chunk_v2.cu, plan kernel 2) at (head_dim,
// slice_cols) over a's grid of batch x heads x grid_segments x slices CTAs;
// the state-only instantiation when state_only. cudaErrorInvalidValue for a
// shape it is not compiled for.
cudaError_t launch_gret_chunk_v2_pass(const GretPass& a, int64_t batch, int64_t head_dim, int slice_cols,
                                      bool state_only, cudaStream_t stream);

// One pass of v3 (cuda/gret/gret_chunk_v3.cu, plan kernel 3, head_dim 128)
// over a's grid of batch x heads x grid_segments CTAs.
cudaError_t launch_gret_chunk_v3_pass(const GretPass& a, int64_t batch, bool state_only, cudaStream_t stream);

// One pass of the long-chunk kernel (cuda/gret/gret_chunk_v5.cu, plan kernel 5:
// head_dim 128, chunk 128 or 256) over a's grid of batch x heads x
// grid_segments CTAs; the state-only instantiation when state_only.
cudaError_t launch_gret_chunk_v5_pass(const GretPass& a, int64_t batch, int chunk, bool state_only,
                                      cudaStream_t stream);

// The fused pass of the wgmma kernel (cuda/gret/gret_chunk_v6.cu, plan kernel 6:
// head_dim 128, chunk 64) over a's grid of batch x heads x grid_segments CTAs.
// It has no state-only form: launch_gret_chunk runs phase 1 on v3's.
cudaError_t launch_gret_chunk_v6_pass(const GretPass& a, int64_t batch, cudaStream_t stream);
// The same with two output warpgroups (plan kernel 7, v7): no fused norm and gate.
cudaError_t launch_gret_chunk_v7_pass(const GretPass& a, int64_t batch, cudaStream_t stream);

}  // namespace yoco::cuda::gret_detail
