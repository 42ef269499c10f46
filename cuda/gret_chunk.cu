#include "gret_chunk.hpp"
#include "gret_chunk_device.cuh"

#include <algorithm>
#include <cstdint>

namespace yoco::cuda {

namespace {

using namespace gret_detail;

constexpr int kThreads = 128;  // 4 warps; per chunk, warp w owns chunk rows [16rb, 16rb+16) (rb = w or 3-w,
                               // alternating by chunk) and state rows [w*D/4, (w+1)*D/4)

// Shared-memory layout of one CTA (gret_smem_bytes in gret_plan.hpp mirrors
// it). Rows are padded by 16 bytes so that the 8 row addresses of an ldmatrix
// (and of the fragment stores) fall in 8 distinct 16-byte bank groups: no bank
// conflicts without a swizzle. Q and S^ have one buffer (refilled after the
// mid-chunk barrier), K, V and log-gamma two (the next chunk's copy lands
// while this one is computed): 75,264 B at D 128 / 32 columns, so 3 CTAs an SM.
template <int D, int VS, int C>
struct GretTile {
  static constexpr int QS = D + 8;   // Q/K row stride (bf16 elements)
  static constexpr int VSS = VS + 8; // V/S^ row stride
  static constexpr int MT = D / 64;  // 16-row m-tiles of the state per warp
  static constexpr int NT = VS / 8;  // 8-column n-tiles of the slice
  static constexpr size_t q_elems = static_cast<size_t>(C) * QS;
  static constexpr size_t v_elems = static_cast<size_t>(C) * VSS;
  static constexpr size_t s_elems = static_cast<size_t>(D) * VSS;
  // bytes: Q[1], K[2], V[2], S^[1] (bf16), then log_gamma[2][C], G[4][C], F[4][C] (fp32)
  static constexpr size_t off_q = 0;
  static constexpr size_t off_k = off_q + q_elems * 2;
  static constexpr size_t off_v = off_k + 2 * q_elems * 2;
  static constexpr size_t off_s = off_v + 2 * v_elems * 2;
  static constexpr size_t off_lg = off_s + s_elems * 2;
  static constexpr size_t off_g = off_lg + 2 * C * 4;
  static constexpr size_t off_f = off_g + 4 * C * 4;
  static constexpr size_t bytes = off_f + 4 * C * 4;
  static constexpr int min_blocks = gret_ctas_per_sm(D, VS);
  static_assert(C == 64, "4 warps x 16 rows: the chunk is 64 tokens");
  static_assert(D % 64 == 0 && VS % 16 == 0 && VS <= D, "tile shape");
  static_assert(MT * NT * 4 <= 64, "state slice: at most 64 fp32 registers a thread");
  static_assert((QS * 2) % 16 == 0 && (VSS * 2) % 16 == 0, "16-byte aligned rows for cp.async/ldmatrix");
  static_assert(off_k % 16 == 0 && off_v % 16 == 0 && off_s % 16 == 0 && off_lg % 16 == 0, "alignment");
  static_assert(bytes == static_cast<size_t>(gret_smem_bytes(D, VS, C)), "gret_plan.hpp mirrors the layout");
  static_assert(bytes <= 227 * 1024, "shared memory per block");
};

// kStateOnly (phase 1): reads k, v and log-gamma only, starts from s_in (or
// zero), writes no output; its end state and Gamma go to s_out and gamma.
// Otherwise (phase 3, or the whole launch when P = 1): the fused pass.
template <int D, int VS, int C, bool kStateOnly>
__global__ void __launch_bounds__(kThreads, GretTile<D, VS, C>::min_blocks) gret_chunk_kernel(const GretPass a) {
  using T = GretTile<D, VS, C>;
  constexpr int MT = T::MT, NT = T::NT, QS = T::QS, VSS = T::VSS;
  extern __shared__ __align__(16) unsigned char smem[];
  __nv_bfloat16* sQ = reinterpret_cast<__nv_bfloat16*>(smem + T::off_q);
  __nv_bfloat16* sK = reinterpret_cast<__nv_bfloat16*>(smem + T::off_k);
  __nv_bfloat16* sV = reinterpret_cast<__nv_bfloat16*>(smem + T::off_v);
  __nv_bfloat16* sS = reinterpret_cast<__nv_bfloat16*>(smem + T::off_s);
  float* sLg = reinterpret_cast<float*>(smem + T::off_lg);
  float* sG = reinterpret_cast<float*>(smem + T::off_g);
  float* sF = reinterpret_cast<float*>(smem + T::off_f);

  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int g = lane >> 2, t = lane & 3;
  const GretSegCta cta = gret_seg_cta(blockIdx.x, a.heads, a.grid_segments, a.slices);
  const int64_t b = cta.batch, h = cta.head, seg = cta.segment;
  const int64_t v0 = gret_slice_begin(cta.slice, VS);
  const int64_t seq_len = a.seq_len, row_stride = a.row_stride, heads = a.heads;
  const int64_t nchunks = gret_num_chunks(seq_len, C);
  const int64_t c_begin = gret_segment_begin(seg, nchunks, a.segments);
  const int64_t c_end = gret_segment_begin(seg + 1, nchunks, a.segments);

  const __nv_bfloat16* qh = a.q + gret_qkv_offset(b, 0, h, 0, seq_len, row_stride, D);
  const __nv_bfloat16* kh = a.k + gret_qkv_offset(b, 0, h, 0, seq_len, row_stride, D);
  const __nv_bfloat16* vh = a.v + gret_qkv_offset(b, 0, h, v0, seq_len, row_stride, D);

  // cp.async loads of chunk c; rows past the end are zero-filled (k = v = 0,
  // log_gamma = 0), nothing past the end is read.
  auto load_q = [&](int64_t c) {
    const int64_t t0 = gret_chunk_begin(c, C);
    const int64_t nv = gret_chunk_valid(c, C, seq_len);
    constexpr int pieces = C * D / 8;  // 16-byte pieces
#pragma unroll 4
    for (int idx = tid; idx < pieces; idx += kThreads) {
      const int r = idx / (D / 8), cc = idx % (D / 8);
      const bool ok = r < nv;
      const int64_t go = ok ? (t0 + r) * row_stride + cc * 8 : 0;
      cp_async16(smem_u32(sQ + static_cast<size_t>(r) * QS + cc * 8), qh + go, ok);
    }
  };
  auto load_kv = [&](int64_t c, int buf) {
    const int64_t t0 = gret_chunk_begin(c, C);
    const int64_t nv = gret_chunk_valid(c, C, seq_len);
    constexpr int pieces = C * D / 8;
#pragma unroll 4
    for (int idx = tid; idx < pieces; idx += kThreads) {
      const int r = idx / (D / 8), cc = idx % (D / 8);
      const bool ok = r < nv;
      const int64_t go = ok ? (t0 + r) * row_stride + cc * 8 : 0;
      cp_async16(smem_u32(sK + static_cast<size_t>(buf) * T::q_elems + static_cast<size_t>(r) * QS + cc * 8), kh + go,
                 ok);
    }
    constexpr int vpieces = C * VS / 8;
#pragma unroll
    for (int idx = tid; idx < vpieces; idx += kThreads) {
      const int r = idx / (VS / 8), cc = idx % (VS / 8);
      const bool ok = r < nv;
      const int64_t go = ok ? (t0 + r) * row_stride + cc * 8 : 0;
      cp_async16(smem_u32(sV + static_cast<size_t>(buf) * T::v_elems + static_cast<size_t>(r) * VSS + cc * 8), vh + go,
                 ok);
    }
    if (tid < C) {
      const bool ok = tid < nv;
      const int64_t go = ok ? gret_gate_offset(b, t0 + tid, h, seq_len, heads) : 0;
      cp_async4(smem_u32(sLg + buf * C + tid), a.log_gamma + go, ok);
    }
  };

  if (c_begin < c_end) {
    load_kv(c_begin, 0);
    if constexpr (!kStateOnly) load_q(c_begin);
  }
  cp_async_commit();

  // The state slice S[:, v0:v0+VS] in the mma accumulator layout: warp w,
  // m-tile mt, n-tile nt: rows r0 = w*D/4 + 16 mt + g and r0 + 8, columns
  // 8 nt + 2t, +1.
  float s[MT][NT][4];
  {
    const float* sin =
        a.s_in ? a.s_in + seg * a.s_in_seg + gret_state_offset(b, h, 0, v0, heads, D) : nullptr;
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
      const int r0 = warp * (D / 4) + mt * 16 + g;
#pragma unroll
      for (int nt = 0; nt < NT; ++nt) {
        const int col = nt * 8 + 2 * t;
        float2 x = make_float2(0.0f, 0.0f), y = make_float2(0.0f, 0.0f);
        if (sin) {
          x = *reinterpret_cast<const float2*>(sin + static_cast<int64_t>(r0) * D + col);
          y = *reinterpret_cast<const float2*>(sin + static_cast<int64_t>(r0 + 8) * D + col);
        }
        s[mt][nt][0] = x.x;
        s[mt][nt][1] = x.y;
        s[mt][nt][2] = y.x;
        s[mt][nt][3] = y.y;
        if constexpr (!kStateOnly) {
          *reinterpret_cast<uint32_t*>(sS + static_cast<size_t>(r0) * VSS + col) = pack_bf16(x.x, x.y);
          *reinterpret_cast<uint32_t*>(sS + static_cast<size_t>(r0 + 8) * VSS + col) = pack_bf16(y.x, y.y);
        }
      }
    }
  }

  float* Gw = sG + warp * C;  // this warp's copy of G
  float* Fw = sF + warp * C;  // and of exp(G_C - G_j)
  float gamma_sum = 0.0f;     // total log-decay of the segment (fp32, chunk by chunk)

  for (int64_t c = c_begin; c < c_end; ++c) {
    const int buf = static_cast<int>((c - c_begin) & 1);
    cp_async_wait_all();
    __syncthreads();  // chunk c landed; every warp is done with chunk c-1 (its K/V buffer, G, F) and S^ is written
    if (c + 1 < c_end) load_kv(c + 1, buf ^ 1);
    cp_async_commit();

    const __nv_bfloat16* cK = sK + buf * T::q_elems;
    const __nv_bfloat16* cV = sV + buf * T::v_elems;

    // G: inclusive cumsum of log_gamma over the chunk (each warp its own copy),
    // and F_j = exp(min(G_C - G_j, 0)) for the state update.
    float GC;
    {
      float g0, g1;
      chunk_scan(sLg + buf * C, lane, g0, g1, GC);
      Gw[2 * lane] = g0;
      Gw[2 * lane + 1] = g1;
      Fw[2 * lane] = decay(GC - g0);
      Fw[2 * lane + 1] = decay(GC - g1);
      __syncwarp();
    }
    gamma_sum += GC;

    if constexpr (!kStateOnly) {
      // Row block of this warp in this chunk: alternating w and 3 - w from chunk
      // to chunk (and CTA to CTA), so the causal work (rb + 1 key blocks)
      // averages out over each warp / SM sub-partition.
      const int rb = ((c ^ static_cast<int64_t>(blockIdx.x)) & 1) ? 3 - warp : warp;
      const int i0 = rb * 16 + g, i1 = i0 + 8;  // the two chunk rows this thread holds in accumulators
      const float Gi0 = Gw[i0], Gi1 = Gw[i1];

      // ---- A = Q K^T (causal n-tiles only) and O = Q S^ ----
      float acc[8][4];
      float out[NT][4];
#pragma unroll
      for (int nt = 0; nt < 8; ++nt) acc[nt][0] = acc[nt][1] = acc[nt][2] = acc[nt][3] = 0.0f;
#pragma unroll
      for (int nt = 0; nt < NT; ++nt) out[nt][0] = out[nt][1] = out[nt][2] = out[nt][3] = 0.0f;
#pragma unroll
      for (int kk = 0; kk < D / 16; ++kk) {
        uint32_t a0, a1, a2, a3;
        ldsm_x4(smem_u32(sQ + (rb * 16 + (lane & 15)) * QS + kk * 16 + (lane >> 4) * 8), a0, a1, a2, a3);
#pragma unroll
        for (int np = 0; np < 4; ++np) {
          if (np <= rb) {  // key columns [16np, 16np+16) are visible to rows [16rb, 16rb+16) only if np <= rb
            uint32_t b0, b1, b2, b3;
            ldsm_x4(smem_u32(cK + (np * 16 + (lane & 7) + ((lane >> 4) << 3)) * QS + kk * 16 + ((lane >> 3) & 1) * 8),
                    b0, b1, b2, b3);
            mma_bf16(acc[2 * np], a0, a1, a2, a3, b0, b1);
            mma_bf16(acc[2 * np + 1], a0, a1, a2, a3, b2, b3);
          }
        }
#pragma unroll
        for (int np = 0; np < NT / 2; ++np) {
          uint32_t b0, b1, b2, b3;
          ldsm_x4_t(smem_u32(sS + (kk * 16 + (lane & 7) + ((lane >> 3) & 1) * 8) * VSS + np * 16 + (lane >> 4) * 8),
                    b0, b1, b2, b3);
          mma_bf16(out[2 * np], a0, a1, a2, a3, b0, b1);
          mma_bf16(out[2 * np + 1], a0, a1, a2, a3, b2, b3);
        }
      }
      __syncthreads();  // every warp is done with Q and S^ of chunk c: refill Q, rewrite S^ below
      if (c + 1 < c_end) load_q(c + 1);
      cp_async_commit();

      // inter-chunk part: scale rows of the fp32 product by exp(G_i)
      {
        const float e0 = decay(Gi0), e1 = decay(Gi1);
#pragma unroll
        for (int nt = 0; nt < NT; ++nt) {
          out[nt][0] *= e0;
          out[nt][1] *= e0;
          out[nt][2] *= e1;
          out[nt][3] *= e1;
        }
      }
      // ---- mask and decay A, round to bf16 A-fragments, O += A V ----
#pragma unroll
      for (int kk = 0; kk < 4; ++kk) {
        if (kk <= rb) {
          uint32_t af[4];
          if (kk < rb) {
            // Off-diagonal block: every key j <= m = 16 kk + 15 < i, so
            // exp(G_i - G_j) = exp(G_i - G_m) exp(G_m - G_j), both exponents <= 0:
            // 6 exponentials instead of 16.
            const float Gm = Gw[kk * 16 + 15];
            const float r0 = decay(Gi0 - Gm), r1 = decay(Gi1 - Gm);
#pragma unroll
            for (int half = 0; half < 2; ++half) {
              const int nt = 2 * kk + half;
              const int j0 = nt * 8 + 2 * t;
              const float c0 = decay(Gm - Gw[j0]), c1 = decay(Gm - Gw[j0 + 1]);
              af[2 * half] = pack_bf16(acc[nt][0] * (r0 * c0), acc[nt][1] * (r0 * c1));
              af[2 * half + 1] = pack_bf16(acc[nt][2] * (r1 * c0), acc[nt][3] * (r1 * c1));
            }
          } else {
#pragma unroll
            for (int half = 0; half < 2; ++half) {
              const int nt = 2 * kk + half;
              const int j0 = nt * 8 + 2 * t, j1 = j0 + 1;
              const float Gj0 = Gw[j0], Gj1 = Gw[j1];
              // a select, never a product with an overflowed factor
              const float p00 = j0 <= i0 ? acc[nt][0] * decay(Gi0 - Gj0) : 0.0f;
              const float p01 = j1 <= i0 ? acc[nt][1] * decay(Gi0 - Gj1) : 0.0f;
              const float p10 = j0 <= i1 ? acc[nt][2] * decay(Gi1 - Gj0) : 0.0f;
              const float p11 = j1 <= i1 ? acc[nt][3] * decay(Gi1 - Gj1) : 0.0f;
              af[2 * half] = pack_bf16(p00, p01);
              af[2 * half + 1] = pack_bf16(p10, p11);
            }
          }
#pragma unroll
          for (int np = 0; np < NT / 2; ++np) {
            uint32_t b0, b1, b2, b3;
            ldsm_x4_t(smem_u32(cV + (kk * 16 + (lane & 7) + ((lane >> 3) & 1) * 8) * VSS + np * 16 + (lane >> 4) * 8),
                      b0, b1, b2, b3);
            mma_bf16(out[2 * np], af[0], af[1], af[2], af[3], b0, b1);
            mma_bf16(out[2 * np + 1], af[0], af[1], af[2], af[3], b2, b3);
          }
        }
      }
      // ---- store o (rows past the end are not written) ----
      {
        const int64_t t0 = gret_chunk_begin(c, C);
        const int64_t nv = gret_chunk_valid(c, C, seq_len);
        const int64_t base0 = gret_out_offset(b, t0 + i0, h, v0, seq_len, heads, D);
        const int64_t base1 = gret_out_offset(b, t0 + i1, h, v0, seq_len, heads, D);
#pragma unroll
        for (int nt = 0; nt < NT; ++nt) {
          const int col = nt * 8 + 2 * t;
          if (i0 < nv) *reinterpret_cast<uint32_t*>(a.o + base0 + col) = pack_bf16(out[nt][0], out[nt][1]);
          if (i1 < nv) *reinterpret_cast<uint32_t*>(a.o + base1 + col) = pack_bf16(out[nt][2], out[nt][3]);
        }
      }
    }
    // ---- state: S = exp(G_C) S + K'^T V, K' = bf16(K .* exp(G_C - G_j)) ----
    {
      const float eC = decay(GC);
#pragma unroll
      for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int nt = 0; nt < NT; ++nt)
#pragma unroll
          for (int e = 0; e < 4; ++e) s[mt][nt][e] *= eC;
#pragma unroll
      for (int kk = 0; kk < 4; ++kk) {
        const int j = kk * 16 + 2 * t;  // tokens j, j+1 (a0..a3) and j+8, j+9 (a4..a7)
        const float f0 = Fw[j], f1 = Fw[j + 1], f2 = Fw[j + 8], f3 = Fw[j + 9];
        uint32_t bv[NT][2];
#pragma unroll
        for (int np = 0; np < NT / 2; ++np)
          ldsm_x4_t(smem_u32(cV + (kk * 16 + (lane & 7) + ((lane >> 3) & 1) * 8) * VSS + np * 16 + (lane >> 4) * 8),
                    bv[2 * np][0], bv[2 * np][1], bv[2 * np + 1][0], bv[2 * np + 1][1]);
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
          uint32_t a0, a1, a2, a3;
          // A = K^T (m = state row d, k = token): transposed 8x8 loads from K's rows.
          ldsm_x4_t(smem_u32(cK + (kk * 16 + (lane & 7) + (lane >> 4) * 8) * QS + warp * (D / 4) + mt * 16 +
                             ((lane >> 3) & 1) * 8),
                    a0, a1, a2, a3);
          a0 = scale_bf16x2(a0, f0, f1);
          a1 = scale_bf16x2(a1, f0, f1);
          a2 = scale_bf16x2(a2, f2, f3);
          a3 = scale_bf16x2(a3, f2, f3);
#pragma unroll
          for (int nt = 0; nt < NT; ++nt) mma_bf16(s[mt][nt], a0, a1, a2, a3, bv[nt][0], bv[nt][1]);
        }
      }
      if constexpr (!kStateOnly) {
        // S^ for the next chunk: the mid-chunk barrier above ordered every read
        // of the old S^ before these stores; the next top barrier orders them
        // before the next chunk's reads.
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
          const int r0 = warp * (D / 4) + mt * 16 + g;
#pragma unroll
          for (int nt = 0; nt < NT; ++nt) {
            const int col = nt * 8 + 2 * t;
            *reinterpret_cast<uint32_t*>(sS + static_cast<size_t>(r0) * VSS + col) =
                pack_bf16(s[mt][nt][0], s[mt][nt][1]);
            *reinterpret_cast<uint32_t*>(sS + static_cast<size_t>(r0 + 8) * VSS + col) =
                pack_bf16(s[mt][nt][2], s[mt][nt][3]);
          }
        }
      }
    }
  }
  cp_async_wait_all();

  if (a.gamma && cta.slice == 0 && tid == 0)
    a.gamma[(b * heads + h) * a.segments + seg] = gamma_sum;
  // the end state (fp32)
  if (a.s_out && seg >= a.write_from) {
    float* so = a.s_out + seg * a.s_out_seg + gret_state_offset(b, h, 0, v0, heads, D);
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
      const int r0 = warp * (D / 4) + mt * 16 + g;
#pragma unroll
      for (int nt = 0; nt < NT; ++nt) {
        const int col = nt * 8 + 2 * t;
        *reinterpret_cast<float2*>(so + static_cast<int64_t>(r0) * D + col) = make_float2(s[mt][nt][0], s[mt][nt][1]);
        *reinterpret_cast<float2*>(so + static_cast<int64_t>(r0 + 8) * D + col) =
            make_float2(s[mt][nt][2], s[mt][nt][3]);
      }
    }
  }
}

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
// W = 16 warps (plan kernel 4, "v3w16"): 512 threads, 1 CTA an SM. Warp w
// holds state rows [16(w&7), +16) x columns [64(w>>3), +64) (32 registers)
// and output rows of block rb = ((w>>2) + (w&3)) & 3 x columns [32(w>>2), +32)
// (each sub-partition w&3 gets the four row blocks once); the four warps of a
// row block each compute its Q K^T. Q and S^ are double-buffered (164,352 B),
// so a chunk needs one barrier: Q of c+1 is prefetched with K and V, S^ of
// c+1 goes to the other buffer.
template <int W>
struct V3Cfg {
  static_assert(W == 8 || W == 16, "8 or 16 warps");
  static constexpr int kThreads = W * 32;
  static constexpr int kMinBlocks = W == 8 ? 2 : 1;
  static constexpr bool kDbl = W == 16;             // Q and S^ double-buffered, one barrier a chunk
  static constexpr int kStateNT = W == 8 ? 16 : 8;  // 8-column state n-tiles a warp
  static constexpr int kOutCols = W == 8 ? 16 : 32; // output columns a pass (a warp owns 64 or 32)
  static constexpr int kOutNT = kOutCols / 8;       // accumulator n-tiles a pass
  static constexpr int kOutPasses = (W == 8 ? 64 : 32) / kOutCols;
};

template <int D, int C, int W>
struct GretTileV3 {
  static constexpr bool kDbl = V3Cfg<W>::kDbl;
  static constexpr size_t tile = static_cast<size_t>(C) * D * 2;  // one bf16 C x D tile, bytes
  static constexpr size_t s_tile = static_cast<size_t>(D) * D * 2;
  static constexpr size_t off_q = 0;
  static constexpr size_t off_k = off_q + (kDbl ? 2 : 1) * tile;
  static constexpr size_t off_v = off_k + 2 * tile;
  static constexpr size_t off_s = off_v + 2 * tile;
  static constexpr size_t off_lg = off_s + (kDbl ? 2 : 1) * s_tile;
  static constexpr size_t bytes = off_lg + 2 * C * 4;
  static_assert(D == 128 && C == 64, "v3: 8 x 16 state rows, 4 row blocks of 16");
  static_assert(bytes == static_cast<size_t>(gret_v3_smem_bytes(D, C, W)), "gret_plan.hpp mirrors the layout");
  static_assert(V3Cfg<W>::kMinBlocks * (bytes + 1024) <= 228 * 1024, "CTAs an SM");
};

template <int D, int C, int W, bool kStateOnly>
__global__ void __launch_bounds__(V3Cfg<W>::kThreads, V3Cfg<W>::kMinBlocks) gret_chunk_v3_kernel(const GretPass a) {
  using T = GretTileV3<D, C, W>;
  using Cfg = V3Cfg<W>;
  constexpr int kThreadsV3 = Cfg::kThreads;
  constexpr bool kDbl = Cfg::kDbl;
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
  auto load_q = [&](int c, int qb) { load_tile(sQ + static_cast<uint32_t>(qb * T::tile), a.q, c); };

  if (c_begin < c_end) {
    load_kv(c_begin, 0);
    if constexpr (!kStateOnly) load_q(c_begin, 0);
  }
  cp_async_commit();

  // State rows [16 (warp & 7), +16) x columns [scol, scol + 8 NT): n-tile nt
  // holds rows sr0 = 16 (warp & 7) + g and sr0 + 8, columns scol + 8 nt + 2t, +1.
  constexpr int NT = Cfg::kStateNT;
  const int srow = (warp & 7) * 16, sr0 = srow + g;
  const int scol = W == 8 ? 0 : (warp >> 3) * 64;
  float s[NT][4];
  load_state_block<D, NT, !kStateOnly>(
      s, a.s_in ? a.s_in + seg * a.s_in_seg + gret_state_offset(b, h, 0, 0, a.heads, D) : nullptr, pS, sr0, scol, t);

  // output row block and first output column
  const int rb = W == 8 ? (warp < 4 ? (warp >> 1) : 3 - ((warp - 4) >> 1)) : (((warp >> 2) + (warp & 3)) & 3);
  const int cbase = W == 8 ? (warp & 1) * 64 : (warp >> 2) * 32;
  const int i0 = rb * 16 + g, i1 = i0 + 8;                          // chunk rows in this thread's accumulators
  float gamma_sum = 0.0f;

  int buf = 1;  // K/V/log-gamma buffer of chunk c: 0 for the segment's first chunk, then alternating
  for (int c = c_begin; c < c_end; ++c) {
    buf ^= 1;
    cp_async_wait_all();
    __syncthreads();  // B1: chunk c landed (K, V, lg, Q); every warp is done with chunk c-1; S^ written
    if (c + 1 < c_end) {
      load_kv(c + 1, buf ^ 1);
      if constexpr (kDbl && !kStateOnly) load_q(c + 1, buf ^ 1);  // Q[buf^1] was last read in chunk c-1
    }
    cp_async_commit();
    const uint32_t cK = sbase + static_cast<uint32_t>(T::off_k + buf * T::tile);
    const uint32_t cV = sbase + static_cast<uint32_t>(T::off_v + buf * T::tile);
    const uint32_t cQ = sQ + static_cast<uint32_t>(kDbl ? buf * T::tile : 0);
    const uint32_t cS = sS + static_cast<uint32_t>(kDbl ? buf * T::s_tile : 0);  // S^ of chunk c
    unsigned char* pS_next = pS + (kDbl ? (buf ^ 1) * T::s_tile : 0);           // S^ of chunk c+1

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
            ldsm_x4(oQ + swz<D>(rb * 16 + (lane & 15), kk * 16 + (lane >> 4) * 8), a0, a1, a2, a3);
            ldsm_x4(cK + swz<D>(kb * 16 + (lane & 7) + ((lane >> 4) << 3), kk * 16 + ((lane >> 3) & 1) * 8), b0, b1,
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
          ldsm_x4(oQ + swz<D>(rb * 16 + (lane & 15), kk * 16 + (lane >> 4) * 8), a0, a1, a2, a3);
#pragma unroll
          for (int np = 0; np < kOutNT / 2; ++np) {
            uint32_t b0, b1, b2, b3;
            ldsm_x4_t(oS + swz<D>(kk * 16 + (lane & 7) + ((lane >> 3) & 1) * 8, cb + np * 16 + (lane >> 4) * 8), b0,
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
              ldsm_x4_t(oV + swz<D>(kk * 16 + (lane & 7) + ((lane >> 3) & 1) * 8, cb + np * 16 + (lane >> 4) * 8), b0,
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
      if constexpr (!kDbl) {
        __syncthreads();  // B2: every warp is done with Q and S^ of chunk c
        if (c + 1 < c_end) load_q(c + 1, 0);
        cp_async_commit();
      }
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
        // S^ for the next chunk. W 8: the same buffer; B2 ordered every read
        // of the old S^ before these stores. W 16: the other buffer, last read
        // in chunk c-1 (before this chunk's B1). The next B1 orders the stores
        // before the next chunk's reads.
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

// Phase 2: per element of the [B, H, D, D] state, in place over the workspace
// slots: slot 0 <- carried state; slot p <- exp(Gamma_{p-1}) slot(p-1) + S_loc(p-1)
// (slot p held S_loc(p-1) from phase 1), p < slots. Gamma of (b, h) at
// gamma[bh * gamma_stride + p]. fp32; the exponent is clamped <= 0.
__global__ void __launch_bounds__(256) gret_segment_scan_kernel(const float* __restrict__ state, float* ws,
                                                                 const float* __restrict__ gamma, int64_t elems,
                                                                 int64_t dd, int64_t slots, int64_t gamma_stride) {
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < elems;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t bh = e / dd;
    float x = state[e];
    ws[e] = x;
    for (int64_t p = 1; p < slots; ++p) {
      const float f = __expf(fminf(gamma[bh * gamma_stride + p - 1], 0.0f));
      x = fmaf(f, x, ws[p * elems + e]);
      ws[p * elems + e] = x;
    }
  }
}

template <int D, int VS, bool kStateOnly>
cudaError_t launch_pass(const GretPass& a, int64_t batch, cudaStream_t stream) {
  constexpr int C = 64;
  using T = GretTile<D, VS, C>;
  auto kern = gret_chunk_kernel<D, VS, C, kStateOnly>;
  cudaError_t e = cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(T::bytes));
  if (e != cudaSuccess) return e;
  const int64_t ctas = gret_num_seg_ctas(batch, a.heads, a.grid_segments, a.slices);
  if (ctas <= 0) return cudaSuccess;
  kern<<<static_cast<unsigned>(ctas), kThreads, T::bytes, stream>>>(a);
  return cudaGetLastError();
}

template <int D, int W, bool kStateOnly>
cudaError_t launch_pass_v3(const GretPass& a, int64_t batch, cudaStream_t stream) {
  constexpr int C = 64;
  using T = GretTileV3<D, C, W>;
  auto kern = gret_chunk_v3_kernel<D, C, W, kStateOnly>;
  cudaError_t e = cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(T::bytes));
  if (e != cudaSuccess) return e;
  const int64_t ctas = gret_num_seg_ctas(batch, a.heads, a.grid_segments, 1);
  if (ctas <= 0) return cudaSuccess;
  kern<<<static_cast<unsigned>(ctas), V3Cfg<W>::kThreads, T::bytes, stream>>>(a);
  return cudaGetLastError();
}

// The launch of every kernel version. P = 1: one fused pass, the state read
// and written in place (each thread its own elements). P > 1: phase 1
// (segments 0..P-2 from zero; S_loc(p) -> slot p+1, Gamma_p -> gamma), phase 2
// (the scan over segments), phase 3 (every segment from S_in(p) = slot p; the
// last writes the final state). pass(a, state_only) launches one pass of the
// plan's kernel over a's grid. `phases` (kGretAllPhases for a real launch)
// picks which of the three run: launch_gret_chunk_phases times them apart.
template <class Pass>
cudaError_t launch_phases(const __nv_bfloat16* q, const __nv_bfloat16* k, const __nv_bfloat16* v, const float* lg,
                          float* state, __nv_bfloat16* o, const GretChunkShape& s, const GretChunkPlan& p, float* ws,
                          cudaStream_t stream, Pass pass, unsigned phases) {
  GretPass a{q, k, v, lg, nullptr, 0, nullptr, 0, 0, nullptr, o, s.heads, s.seq_len, s.row_stride, p.slices,
             p.segments, p.segments};
  if (p.segments == 1) {
    a.s_in = state;
    a.s_out = state;
    return (phases & kGretPhaseFused) ? pass(a, false) : cudaSuccess;
  }
  // Phase 1 and the scan on the Q P finer segments (Q = phase1_split), phase 3
  // on the P: segment p starts from slot Q p (gret_ws_slots).
  const int64_t D = s.head_dim, Q = p.phase1_split, slots = gret_ws_slots(p.segments, Q);
  const int64_t elems = gret_ws_state_elems(s.batch, s.heads, D);
  float* gamma = ws + gret_ws_gamma_offset(s.batch, s.heads, D, slots);
  GretPass a1 = a;
  a1.o = nullptr;
  a1.s_in = nullptr;
  a1.s_out = ws + elems;
  a1.s_out_seg = elems;
  a1.write_from = 0;
  a1.gamma = gamma;
  a1.segments = slots;
  a1.grid_segments = Q * (p.segments - 1);
  cudaError_t e = (phases & kGretPhaseStateOnly) ? pass(a1, true) : cudaSuccess;
  if (e != cudaSuccess) return e;
  if (phases & kGretPhaseScan) {
    const int64_t blocks = std::min<int64_t>((elems + 255) / 256, 4096);
    gret_segment_scan_kernel<<<static_cast<unsigned>(blocks), 256, 0, stream>>>(state, ws, gamma, elems, D * D,
                                                                                Q * (p.segments - 1) + 1, slots);
    e = cudaGetLastError();
    if (e != cudaSuccess) return e;
  }
  GretPass a3 = a;
  a3.s_in = ws;
  a3.s_in_seg = Q * elems;
  a3.s_out = state;
  a3.s_out_seg = 0;
  a3.write_from = p.segments - 1;
  return (phases & kGretPhaseFused) ? pass(a3, false) : cudaSuccess;
}

// v2 with (D, VS), v3 with W warps: the pass launcher for launch_phases.
template <int D, int VS>
auto v2_pass(int64_t batch, cudaStream_t stream) {
  return [=](const GretPass& a, bool state_only) {
    return state_only ? launch_pass<D, VS, true>(a, batch, stream) : launch_pass<D, VS, false>(a, batch, stream);
  };
}
template <int D, int W>
auto v3_pass(int64_t batch, cudaStream_t stream) {
  return [=](const GretPass& a, bool state_only) {
    return state_only ? launch_pass_v3<D, W, true>(a, batch, stream) : launch_pass_v3<D, W, false>(a, batch, stream);
  };
}

bool misaligned(const void* p, uintptr_t a) { return (reinterpret_cast<uintptr_t>(p) % a) != 0; }

}  // namespace

size_t gret_chunk_smem_bytes(int64_t head_dim, int64_t slice_cols) {
  if (!gret_slice_supported(head_dim, slice_cols)) return 0;
  return static_cast<size_t>(gret_smem_bytes(head_dim, slice_cols, 64));
}

size_t gret_chunk_workspace_bytes(const GretChunkShape& s, const GretChunkPlan& p) {
  if (p.segments <= 1 || s.batch < 1 || s.heads < 1 || s.head_dim < 1) return 0;
  const int64_t slots = gret_ws_slots(p.segments, p.phase1_split);
  const int64_t floats = gret_ws_gamma_offset(s.batch, s.heads, s.head_dim, slots) + s.batch * s.heads * slots;
  return static_cast<size_t>(floats) * sizeof(float);
}

cudaError_t launch_gret_chunk(const __nv_bfloat16* q, const __nv_bfloat16* k, const __nv_bfloat16* v,
                              const float* log_gamma, float* state, __nv_bfloat16* o, const GretChunkShape& s,
                              const GretChunkPlan& p, void* workspace, size_t workspace_bytes, cudaStream_t stream) {
  return launch_gret_chunk_phases(kGretAllPhases, q, k, v, log_gamma, state, o, s, p, workspace, workspace_bytes,
                                  stream);
}

cudaError_t launch_gret_chunk_phases(unsigned phases, const __nv_bfloat16* q, const __nv_bfloat16* k,
                                     const __nv_bfloat16* v, const float* log_gamma, float* state, __nv_bfloat16* o,
                                     const GretChunkShape& s, const GretChunkPlan& p, void* workspace,
                                     size_t workspace_bytes, cudaStream_t stream) {
  if (phases == 0 || (phases & ~kGretAllPhases) != 0) return cudaErrorInvalidValue;
  if (!q || !k || !v || !log_gamma || !state || !o) return cudaErrorInvalidValue;
  if (s.batch < 1 || s.heads < 1 || s.seq_len < 0 || s.row_stride < s.heads * s.head_dim || s.row_stride % 8 != 0)
    return cudaErrorInvalidValue;
  if (!gret_plan_valid(s, p)) return cudaErrorInvalidValue;
  if (misaligned(q, 16) || misaligned(k, 16) || misaligned(v, 16) || misaligned(state, 8) || misaligned(o, 4) ||
      misaligned(log_gamma, 4))
    return cudaErrorInvalidValue;
  if (p.kernel == 6 && misaligned(o, 16)) return cudaErrorInvalidValue;  // v6 writes o in 16-byte pieces
  if (p.segments > 1 &&
      (!workspace || misaligned(workspace, 16) || workspace_bytes < gret_chunk_workspace_bytes(s, p)))
    return cudaErrorInvalidValue;
  if (gret_num_seg_ctas(s.batch, s.heads, p.segments, p.slices) > 0x7fffffffLL) return cudaErrorInvalidValue;
  if (s.seq_len == 0) return cudaSuccess;  // no tokens: o is empty and the state unchanged
  float* ws = static_cast<float*>(workspace);
  auto run = [&](auto pass) { return launch_phases(q, k, v, log_gamma, state, o, s, p, ws, stream, pass, phases); };
  if (p.kernel == 5)
    return run([=](const GretPass& a, bool state_only) {
      return launch_gret_chunk_v5_pass(a, s.batch, p.chunk, state_only, stream);
    });
  if (p.kernel == 6) {
    if (s.head_dim != 128) return cudaErrorInvalidValue;
    return run([=](const GretPass& a, bool state_only) {
      return state_only ? launch_pass_v3<128, 8, true>(a, s.batch, stream) : launch_gret_chunk_v6_pass(a, s.batch, stream);
    });
  }
  if (p.kernel == 3 || p.kernel == 4) {
    if (s.head_dim == 128 && p.kernel == 3) return run(v3_pass<128, 8>(s.batch, stream));
    if (s.head_dim == 128 && p.kernel == 4) return run(v3_pass<128, 16>(s.batch, stream));
    return cudaErrorInvalidValue;
  }
#define YOCO_GRET_CASE(D, VS) \
  if (s.head_dim == D && p.slice_cols == VS) return run(v2_pass<D, VS>(s.batch, stream));
  YOCO_GRET_CASE(64, 16) YOCO_GRET_CASE(64, 32) YOCO_GRET_CASE(64, 64)
  YOCO_GRET_CASE(128, 16) YOCO_GRET_CASE(128, 32) YOCO_GRET_CASE(128, 64)
  YOCO_GRET_CASE(256, 16) YOCO_GRET_CASE(256, 32)
#undef YOCO_GRET_CASE
  return cudaErrorInvalidValue;
}

cudaError_t launch_gret_chunk(const __nv_bfloat16* q, const __nv_bfloat16* k, const __nv_bfloat16* v,
                              const float* log_gamma, float* state, __nv_bfloat16* o, const GretChunkShape& s,
                              const GretChunkPlan& p, cudaStream_t stream) {
  return launch_gret_chunk(q, k, v, log_gamma, state, o, s, p, nullptr, 0, stream);
}

}  // namespace yoco::cuda
