// gRet chunkwise prefill, variant v3 (plan kernel 3): full-width CTAs of 8
// warps, mma.sync, swizzled tiles, head_dim 128. (Its 16-warp form v3w16 lost
// at every measured shape and is retired: tag retired/gret-chunk-v3w16.)
// Its state-only instantiation is also phase 1 of v6. The launch around it is
// gret_chunk.cu's; cuda/gret/NOTES-gret_chunk.md.
#include "gret/gret_chunk_device.cuh"

#include <cstdint>

namespace yoco::cuda {

namespace {

using namespace gret_detail;

// ===========================================================================
// v3: one CTA of 8 warps per (batch, head, segment), all D = 128 V columns.
// Q K^T, the decay mask and the Q/K loads happen once per head-chunk.
// Warp w: state rows [16w, 16w+16) x all 128 columns in mma accumulators
// (64 fp32 registers a thread); output rows [16rb, 16rb+16) x columns
// [64(w&1), 64(w&1)+64) with rb = w>>1 for w < 4 and 3 - ((w-4)>>1) for w >= 4,
// so each SM sub-partition (warps w and w+4) holds row blocks summing to 3
// (equal causal work). The warp pair sharing rb computes that row block's
// Q K^T twice (cheaper than a third barrier and an smem round trip for A).
// Tiles are unpadded and XOR-swizzled by 16-byte pieces (piece c of row r at
// c ^ (r & 7)), so every ldmatrix (8 consecutive rows, one logical piece) and
// every fragment store hits 8 distinct bank groups.
// Per chunk: barrier B1 (chunk c landed, chunk c-1 done) -> prefetch K, V,
// log-gamma of c+1 -> G scan in registers (shuffles) -> A = Q K^T masked ->
// O = exp(G) Q S^ + A V (passes of 16 columns) -> barrier B2 (Q and S^ free)
// -> prefetch Q of c+1 -> state update -> S^ rewrite.
struct V3Cfg {
  static constexpr int kWarps = 8;
  static constexpr int kThreads = kWarps * 32;
  static constexpr int kMinBlocks = 2;
  static constexpr int kStateNT = 16;  // 8-column state n-tiles a warp
  static constexpr int kOutCols = 16;  // output columns a pass (a warp owns 64)
  static constexpr int kOutNT = kOutCols / 8;  // accumulator n-tiles a pass
  static constexpr int kOutPasses = 64 / kOutCols;
};

template <int D, int C>
struct GretTileV3 {
  static constexpr size_t tile = static_cast<size_t>(C) * D * 2;  // one bf16 C x D tile, bytes
  static constexpr size_t s_tile = static_cast<size_t>(D) * D * 2;
  static constexpr size_t off_q = 0;
  static constexpr size_t off_k = off_q + tile;
  static constexpr size_t off_v = off_k + 2 * tile;
  static constexpr size_t off_s = off_v + 2 * tile;
  static constexpr size_t off_lg = off_s + s_tile;
  static constexpr size_t bytes = off_lg + 2 * C * 4;
  static_assert(D == 128 && C == 64, "v3: 8 x 16 state rows, 4 row blocks of 16");
  static_assert(bytes == static_cast<size_t>(gret_v3_smem_bytes(D, C)), "gret_plan.hpp mirrors the layout");
  static_assert(V3Cfg::kMinBlocks * (bytes + 1024) <= 228 * 1024, "CTAs an SM");
};

template <int D, int C, bool kStateOnly>
__global__ void __launch_bounds__(V3Cfg::kThreads, V3Cfg::kMinBlocks) gret_chunk_v3_kernel(const GretPass a) {
  using T = GretTileV3<D, C>;
  using Cfg = V3Cfg;
  constexpr int kThreadsV3 = Cfg::kThreads;
  constexpr int kOutCols = Cfg::kOutCols, kOutNT = Cfg::kOutNT, kOutPasses = Cfg::kOutPasses;
  extern __shared__ __align__(128) unsigned char smem[];
  const uint32_t sbase = smem_u32(smem);
  const uint32_t sQ = sbase + static_cast<uint32_t>(T::off_q);
  const uint32_t sS = sbase + static_cast<uint32_t>(T::off_s);
  unsigned char* pS = smem + T::off_s;
  const float* sLg = reinterpret_cast<const float*>(smem + T::off_lg);

  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int g = lane >> 2, t = lane & 3;
  // Few live scalars (the fused pass sits at the 128-register cap): 32-bit
  // CTA and chunk indices; a.* lives in the constant bank.
  const FullWidthCta cta = full_width_cta<C>(a);
  const int b = cta.b, h = cta.h, seg = cta.seg, c_begin = cta.c_begin, c_end = cta.c_end;

  // cp.async of one C x D tile of chunk c (src: q, k or v); rows past the end
  // are zero-filled, nothing past the end is read.
  auto load_tile = [&](uint32_t dst, const __nv_bfloat16* src, int c) {
    const int64_t t0 = gret_chunk_begin(c, C);
    const int64_t nv = gret_chunk_valid(c, C, a.seq_len);
    const __nv_bfloat16* base = src + gret_qkv_offset(b, t0, h, 0, a.seq_len, a.row_stride, D);
    load_swizzled_tile<D, C, kThreadsV3>(dst, base, nv, a.row_stride, tid);
  };
  auto load_kv = [&](int c, int buf) {
    load_tile(sbase + static_cast<uint32_t>(T::off_k + buf * T::tile), a.k, c);
    load_tile(sbase + static_cast<uint32_t>(T::off_v + buf * T::tile), a.v, c);
    if (tid < C) {
      const int64_t t0 = gret_chunk_begin(c, C);
      const bool ok = tid < gret_chunk_valid(c, C, a.seq_len);
      const int64_t go = ok ? gret_gate_offset(b, t0 + tid, h, a.seq_len, a.heads) : 0;
      cp_async4(sbase + static_cast<uint32_t>(T::off_lg + (buf * C + tid) * 4), a.log_gamma + go, ok);
    }
  };
  auto load_q = [&](int c) { load_tile(sQ, a.q, c); };

  if (c_begin < c_end) {
    load_kv(c_begin, 0);
    if constexpr (!kStateOnly) load_q(c_begin);
  }
  cp_async_commit();

  // State rows [16 (warp & 7), +16) x columns [scol, scol + 8 NT): n-tile nt
  // holds rows sr0 = 16 (warp & 7) + g and sr0 + 8, columns scol + 8 nt + 2t, +1.
  constexpr int NT = Cfg::kStateNT;
  const int srow = (warp & 7) * 16, sr0 = srow + g;
  const int scol = 0;
  float s[NT][4];
  load_state_block<D, NT, !kStateOnly>(
      s, a.s_in ? a.s_in + seg * a.s_in_seg + gret_state_offset(b, h, 0, 0, a.heads, D) : nullptr, pS, sr0, scol, t);

  // output row block and first output column
  const int rb = warp < 4 ? (warp >> 1) : 3 - ((warp - 4) >> 1);
  const int cbase = (warp & 1) * 64;
  const int i0 = rb * 16 + g, i1 = i0 + 8;                          // chunk rows in this thread's accumulators
  float gamma_sum = 0.0f;

  int buf = 1;  // K/V/log-gamma buffer of chunk c: 0 for the segment's first chunk, then alternating
  for (int c = c_begin; c < c_end; ++c) {
    buf ^= 1;
    cp_async_wait_all();
    __syncthreads();  // B1: chunk c landed (K, V, lg, Q); every warp is done with chunk c-1; S^ written
    if (c + 1 < c_end) {
      load_kv(c + 1, buf ^ 1);
    }
    cp_async_commit();
    const uint32_t cK = sbase + static_cast<uint32_t>(T::off_k + buf * T::tile);
    const uint32_t cV = sbase + static_cast<uint32_t>(T::off_v + buf * T::tile);
    const uint32_t cQ = sQ, cS = sS;  // Q and S^ of chunk c (one buffer each)
    unsigned char* pS_next = pS;       // S^ of chunk c+1, rewritten after B2

    // G: inclusive cumsum of the chunk's log-gammas, lane l holding G[2l]
    // (g0) and G[2l+1] (g1). Every warp the same.
    float g0, g1, GC;
    chunk_scan(sLg + buf * C, lane, g0, g1, GC);
    if constexpr (kStateOnly) gamma_sum += GC;

    if constexpr (!kStateOnly) {
      // G of this thread's two chunk rows i0 = 16 rb + g, i1 = i0 + 8
      float Gi0, Gi1;
      {
        const float a0 = __shfl_sync(0xffffffffu, g0, 8 * rb + (g >> 1));
        const float a1 = __shfl_sync(0xffffffffu, g1, 8 * rb + (g >> 1));
        const float b0 = __shfl_sync(0xffffffffu, g0, 8 * rb + 4 + (g >> 1));
        const float b1 = __shfl_sync(0xffffffffu, g1, 8 * rb + 4 + (g >> 1));
        Gi0 = (g & 1) ? a1 : a0;
        Gi1 = (g & 1) ? b1 : b0;
      }
      // ---- A = Q K^T, key block by key block (kb <= rb: causal), masked and
      // decayed (a select on the diagonal block), rounded to bf16 A fragments.
      // One key block at a time keeps 8 accumulators live, not 32 (the Q
      // fragments are re-read per block instead).
      uint32_t af[4][4];
#pragma unroll
      for (int kb = 0; kb < 4; ++kb) {
        af[kb][0] = af[kb][1] = af[kb][2] = af[kb][3] = 0u;
        if (kb <= rb) {
          float acc[2][4];
#pragma unroll
          for (int n = 0; n < 2; ++n) acc[n][0] = acc[n][1] = acc[n][2] = acc[n][3] = 0.0f;
          const uint32_t oQ = opaque_u32(cQ);  // no hoisted per-kk addresses (128-register cap)
#pragma unroll
          for (int kk = 0; kk < D / 16; ++kk) {
            uint32_t a0, a1, a2, a3, b0, b1, b2, b3;
            ldmatrix_x4(oQ + swz<D>(rb * 16 + (lane & 15), kk * 16 + (lane >> 4) * 8), a0, a1, a2, a3);
            ldmatrix_x4(cK + swz<D>(kb * 16 + (lane & 7) + ((lane >> 4) << 3), kk * 16 + ((lane >> 3) & 1) * 8), b0, b1,
                    b2, b3);
            mma_bf16(acc[0], a0, a1, a2, a3, b0, b1);
            mma_bf16(acc[1], a0, a1, a2, a3, b2, b3);
          }
          masked_decayed_fragment(af[kb], acc, !(kb < rb), Gi0, Gi1, g0, g1, kb, kb, i0, i1, t);
        }
      }
      // ---- O = exp(G_i) (Q S^) + A V, in kOutPasses passes of kOutCols columns
      // (few accumulators live next to the state: the 128-register cap) ----
      const float e0 = decay(Gi0), e1 = decay(Gi1);
      const int nv = static_cast<int>(gret_chunk_valid(c, C, a.seq_len));
#pragma unroll 1
      for (int hh = 0; hh < kOutPasses; ++hh) {
        const int cb = cbase + hh * kOutCols;
        const uint32_t oQ = opaque_u32(cQ), oS = opaque_u32(cS), oV = opaque_u32(cV);
        float out[kOutNT][4];
#pragma unroll
        for (int nt = 0; nt < kOutNT; ++nt) out[nt][0] = out[nt][1] = out[nt][2] = out[nt][3] = 0.0f;
#pragma unroll
        for (int kk = 0; kk < D / 16; ++kk) {
          uint32_t a0, a1, a2, a3;
          ldmatrix_x4(oQ + swz<D>(rb * 16 + (lane & 15), kk * 16 + (lane >> 4) * 8), a0, a1, a2, a3);
#pragma unroll
          for (int np = 0; np < kOutNT / 2; ++np) {
            uint32_t b0, b1, b2, b3;
            ldmatrix_x4_trans(oS + swz<D>(kk * 16 + (lane & 7) + ((lane >> 3) & 1) * 8, cb + np * 16 + (lane >> 4) * 8), b0,
                      b1, b2, b3);
            mma_bf16(out[2 * np], a0, a1, a2, a3, b0, b1);
            mma_bf16(out[2 * np + 1], a0, a1, a2, a3, b2, b3);
          }
        }
#pragma unroll
        for (int nt = 0; nt < kOutNT; ++nt) {
          out[nt][0] *= e0;
          out[nt][1] *= e0;
          out[nt][2] *= e1;
          out[nt][3] *= e1;
        }
#pragma unroll
        for (int kk = 0; kk < 4; ++kk) {
          if (kk <= rb) {
#pragma unroll
            for (int np = 0; np < kOutNT / 2; ++np) {
              uint32_t b0, b1, b2, b3;
              ldmatrix_x4_trans(oV + swz<D>(kk * 16 + (lane & 7) + ((lane >> 3) & 1) * 8, cb + np * 16 + (lane >> 4) * 8), b0,
                        b1, b2, b3);
              mma_bf16(out[2 * np], af[kk][0], af[kk][1], af[kk][2], af[kk][3], b0, b1);
              mma_bf16(out[2 * np + 1], af[kk][0], af[kk][1], af[kk][2], af[kk][3], b2, b3);
            }
          }
        }
        store_output_rows(out,
                          a.o + gret_out_offset(b, gret_chunk_begin(c, C) + i0, h, cb + 2 * t, a.seq_len, a.heads, D),
                          8 * a.heads * D, i0 < nv, i1 < nv);
      }
      __syncthreads();  // B2: every warp is done with Q and S^ of chunk c
      if (c + 1 < c_end) load_q(c + 1);
      cp_async_commit();
    }

    // ---- state: S = exp(G_C) S + K'^T V, K' = bf16(K .* exp(G_C - G_j)) ----
    {
      const float F0 = decay(GC - g0), F1 = decay(GC - g1);  // lane l: tokens 2l, 2l+1
      const float eC = decay(GC);
#pragma unroll
      for (int nt = 0; nt < NT; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) s[nt][e] *= eC;
#pragma unroll
      for (int kk = 0; kk < 4; ++kk) {
        // tokens j = 16 kk + 2t, j+1 (a0, a1) and j+8, j+9 (a2, a3)
        const float f0 = __shfl_sync(0xffffffffu, F0, 8 * kk + t);
        const float f1 = __shfl_sync(0xffffffffu, F1, 8 * kk + t);
        const float f2 = __shfl_sync(0xffffffffu, F0, 8 * kk + 4 + t);
        const float f3 = __shfl_sync(0xffffffffu, F1, 8 * kk + 4 + t);
        state_update_step<D, NT>(s, cK, cV, kk, srow, scol, lane, f0, f1, f2, f3);
      }
      if constexpr (!kStateOnly) {
        // S^ for the next chunk, in the same buffer: B2 ordered every read of
        // the old S^ before these stores; the next B1 orders the stores before
        // the next chunk's reads.
        store_state_bf16<D, NT>(s, pS_next, sr0, scol, t);
      }
    }
  }
  cp_async_wait_all();

  if (a.gamma && tid == 0) a.gamma[(static_cast<int64_t>(b) * a.heads + h) * a.segments + seg] = gamma_sum;
  if (a.s_out && seg >= a.write_from) {
    float* so = a.s_out + seg * a.s_out_seg + gret_state_offset(b, h, 0, 0, a.heads, D);
    store_state_block<D, NT>(s, so, sr0, scol, t);
  }
}

template <int D, bool kStateOnly>
cudaError_t launch_pass_v3(const GretPass& a, int64_t batch, cudaStream_t stream) {
  constexpr int C = 64;
  using T = GretTileV3<D, C>;
  auto kern = gret_chunk_v3_kernel<D, C, kStateOnly>;
  cudaError_t e = cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(T::bytes));
  if (e != cudaSuccess) return e;
  const int64_t ctas = gret_num_seg_ctas(batch, a.heads, a.grid_segments, 1);
  if (ctas <= 0) return cudaSuccess;
  kern<<<static_cast<unsigned>(ctas), V3Cfg::kThreads, T::bytes, stream>>>(a);
  return cudaGetLastError();
}

}  // namespace

cudaError_t gret_detail::launch_gret_chunk_v3_pass(const GretPass& a, int64_t batch, bool state_only,
                                                   cudaStream_t stream) {
  return state_only ? launch_pass_v3<128, true>(a, batch, stream) : launch_pass_v3<128, false>(a, batch, stream);
}

}  // namespace yoco::cuda
