#pragma once
// One consumer warpgroup of the wgmma prefill kernels (v2 cuda/attention/flash_prefill_v2.cu, v3
// cuda/attention/flash_prefill_v3.cu): 64 query rows of head dim 128 against key blocks of 128, its
// accumulators, the masked online softmax and the epilogue. The kernels differ only in how tiles
// reach shared memory and how the warpgroups are ordered; the maths is this one definition.
//
//   S = Q K^T  : wgmma m64n128k16, A = Q (smem, K-major), B = K (smem, K-major); descriptor
//                SBO = 1024 B (8-row groups), LBO unused (16); the k16 step kk starts at half
//                kk/4, byte (kk%4)*32 of the row.
//   O += P V   : wgmma m64n128k16, A = P (registers: the S accumulators of key columns
//                16kk..16kk+15 are exactly A's fragment for step kk), B = V (smem, N-major,
//                imm-trans-b 1): LBO = half stride (128 keys * 128 B), SBO = 1024 B (8-key
//                groups); step kk starts at key 16kk = byte 2048*kk.
// Accumulator layout (m64nNk16, per warp w of the warpgroup, g = lane/4, t = lane%4): d[4i + e]
// is row 16w + g + 8*(e>>1), column 8i + 2t + (e&1).
#include <cmath>
#include <cstdint>

#include "attention/attention_tiles.hpp"
#include "arch/wgmma_sm90.cuh"

namespace yoco::cuda::sm90 {

constexpr int kFlashD = 128;                       // head dim
constexpr int kFlashBr = 128;                      // query rows per CTA (two warpgroups of 64)
constexpr int kFlashBc = 128;                      // keys per block
constexpr int kFlashTileBytes = 128 * kFlashD * 2; // Q, K or V tile: 32 KiB
constexpr int kFlashHalfBytes = 128 * 128;         // one 64-column half of a 128-row tile
static_assert(kFlashBr == attn::kPrefillTileRows, "the cost model counts prefill attention in tiles of kPrefillTileRows");
static_assert(kFlashBc % 16 == 0 && kFlashBc <= 256 && kFlashD % 16 == 0 && kFlashD <= 256, "wgmma shapes");
static_assert(kFlashHalfBytes / 16 < (1 << 14), "LBO fits the descriptor");

struct FlashRows {
  float o_acc[64];
  float s_acc[64];
  uint32_t p_frag[32];
  float m_row[2], l_row[2];

  __device__ __forceinline__ void init() {
#pragma unroll
    for (int i = 0; i < 64; ++i) o_acc[i] = 0.0f;
#pragma unroll
    for (int i = 0; i < 32; ++i) p_frag[i] = 0u;
    m_row[0] = m_row[1] = -INFINITY;
    l_row[0] = l_row[1] = 0.0f;
  }

  // S = Q K^T (one commit group). q_base: this warpgroup's 64 rows of the Q tile.
  __device__ __forceinline__ void issue_s(uint32_t q_base, uint32_t k_tile) {
    reg_fence(s_acc);
    reg_fence(o_acc);
    reg_fence(p_frag);
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < kFlashD / 16; ++kk) {
      const uint32_t off = static_cast<uint32_t>((kk >> 2) * kFlashHalfBytes + (kk & 3) * 32);
      wgmma_ss_m64n128k16<0>(s_acc, sw128_desc(q_base + off, 16, 1024), sw128_desc(k_tile + off, 16, 1024), kk > 0);
    }
    wgmma_commit();
  }
  // O += P V (one commit group); right after issue_s, whose wgmma fence covers it.
  __device__ __forceinline__ void issue_pv(uint32_t v_tile) {
#pragma unroll
    for (int kk = 0; kk < kFlashBc / 16; ++kk)
      wgmma_rs_m64n128k16_tb(o_acc, p_frag[4 * kk], p_frag[4 * kk + 1], p_frag[4 * kk + 2], p_frag[4 * kk + 3],
                             sw128_desc(v_tile + static_cast<uint32_t>(kk * 2048), kFlashHalfBytes, 1024));
    wgmma_commit();
  }
  // O += P V of the last block, on its own, waited for.
  __device__ __forceinline__ void last_pv(uint32_t v_tile) {
    reg_fence(o_acc);
    reg_fence(p_frag);
    wgmma_fence();
    issue_pv(v_tile);
    wgmma_wait<0>();
    reg_fence(o_acc);
  }

  // Masked online softmax of the finished S of key block n, in place (s_acc -> unnormalised P in
  // fp32); returns the row rescale factors through corr and updates m, l. Raw scores; the scale
  // sits in the exponent.
  // lane: this thread's lane; row0: its warp's first row in the CTA tile; sl2: scale * log2(e).
  __device__ __forceinline__ void softmax(int64_t n, int64_t p_first, int64_t p_last, int64_t window, int lane,
                                          int row0, float sl2, float (&corr)[2]) {
    if (attn::key_block_needs_mask(n, kFlashBc, p_first, p_last, window)) {
      const int window32 = static_cast<int>(window);                       // window < capacity < 2^30
      const int delta0 = static_cast<int>(n * kFlashBc - (p_first + row0));  // |.| < 2^30
#pragma unroll
      for (int i = 0; i < 16; ++i)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int delta = delta0 + i * 8 + (lane & 3) * 2 + (e & 1) - ((lane >> 2) + (e >> 1) * 8);
          if (!attn::key_visible_delta(delta, window32)) s_acc[4 * i + e] = -INFINITY;
        }
    }
    // Log2 domain: m = running max of scale*log2(e)*s (scale > 0).
#pragma unroll
    for (int hr = 0; hr < 2; ++hr) {
      float mx = -INFINITY;
#pragma unroll
      for (int i = 0; i < 16; ++i) mx = fmaxf(mx, fmaxf(s_acc[4 * i + 2 * hr], s_acc[4 * i + 2 * hr + 1]));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
      const float m_new = fmaxf(m_row[hr], mx * sl2);         // -inf * sl2 = -inf
      const float m_use = m_new == -INFINITY ? 0.0f : m_new;  // no visible key yet: never -inf - -inf
      corr[hr] = fast_exp2(m_row[hr] - m_use);
      m_row[hr] = m_new;
      float sum = 0.0f;
#pragma unroll
      for (int i = 0; i < 16; ++i) {
        const float p0 = fast_exp2(fmaf(s_acc[4 * i + 2 * hr], sl2, -m_use));  // masked: -inf -> 0
        const float p1 = fast_exp2(fmaf(s_acc[4 * i + 2 * hr + 1], sl2, -m_use));
        s_acc[4 * i + 2 * hr] = p0;
        s_acc[4 * i + 2 * hr + 1] = p1;
        sum += p0 + p1;
      }
      l_row[hr] = l_row[hr] * corr[hr] + sum;  // this thread's partial; the quad reduces at the end
    }
  }

  // O *= corr (O idle: no P V in flight), then P (bf16 A fragments) from s_acc.
  __device__ __forceinline__ void rescale_and_pack(const float (&corr)[2]) {
#pragma unroll
    for (int i = 0; i < 16; ++i) {
      o_acc[4 * i] *= corr[0];
      o_acc[4 * i + 1] *= corr[0];
      o_acc[4 * i + 2] *= corr[1];
      o_acc[4 * i + 3] *= corr[1];
    }
#pragma unroll
    for (int kk = 0; kk < kFlashBc / 16; ++kk) {
      p_frag[4 * kk] = pack_bf16(s_acc[8 * kk], s_acc[8 * kk + 1]);          // row g,   keys 16kk + 2t..
      p_frag[4 * kk + 1] = pack_bf16(s_acc[8 * kk + 2], s_acc[8 * kk + 3]);  // row g+8, keys 16kk + 2t..
      p_frag[4 * kk + 2] = pack_bf16(s_acc[8 * kk + 4], s_acc[8 * kk + 5]);  // row g,   keys 16kk + 8 + 2t..
      p_frag[4 * kk + 3] = pack_bf16(s_acc[8 * kk + 6], s_acc[8 * kk + 7]);  // row g+8, keys 16kk + 8 + 2t..
    }
  }

  // Epilogue: reduce l over the quad, normalise, stage O through this warp's own 16 rows of the
  // swizzled Q tile at q_tile (only this warp's wgmmas read them, and those are complete), write
  // 16-byte pieces of each valid row to og (row r at og + r * o_stride); lse (nullable) gets the
  // natural-log LSE of row r at lse[lse_row0 + r].
  __device__ __forceinline__ void store(unsigned char* q_tile, __nv_bfloat16* og, int64_t o_stride,
                                        int64_t rows_valid, float* lse, int64_t lse_row0, int lane, int row0) {
    const float kLn2 = 0.69314718055994531f;
#pragma unroll
    for (int hr = 0; hr < 2; ++hr) {
      float l = l_row[hr];
      l += __shfl_xor_sync(0xffffffffu, l, 1);
      l += __shfl_xor_sync(0xffffffffu, l, 2);
      const float inv = l > 0.0f ? 1.0f / l : 0.0f;
      const int r = row0 + (lane >> 2) + hr * 8;
#pragma unroll
      for (int i = 0; i < 16; ++i) {
        const uint32_t packed = pack_bf16(o_acc[4 * i + 2 * hr] * inv, o_acc[4 * i + 2 * hr + 1] * inv);
        *reinterpret_cast<uint32_t*>(q_tile + sw128_offset<kFlashBr>(r, i * 8 + (lane & 3) * 2)) = packed;
      }
      if (lse != nullptr && (lane & 3) == 0 && r < rows_valid) {
        const float val = l > 0.0f ? (m_row[hr] + __log2f(l)) * kLn2 : -INFINITY;
        lse[lse_row0 + r] = val;
      }
    }
    __syncwarp();
    constexpr int C = kFlashD / 8;
#pragma unroll
    for (int idx = lane & 31; idx < 16 * C; idx += 32) {  // lane < 32 spelt out: a fixed trip count
      const int r = row0 + idx / C, c = idx % C;
      if (r < rows_valid)
        *reinterpret_cast<uint4*>(og + static_cast<int64_t>(r) * o_stride + c * 8) =
            *reinterpret_cast<const uint4*>(q_tile + sw128_offset<kFlashBr>(r, c * 8));
    }
  }
};

}  // namespace yoco::cuda::sm90
