// gRet chunkwise prefill, variant v2 (plan kernel 2): 4 warps per (batch,
// head, segment, V-slice) CTA, mma.sync, padded tiles. The launch around it
// (the three phases, the checks) is gret_chunk.cu's; cuda/gret/NOTES-gret_chunk.md.
#include "gret/gret_chunk_device.cuh"

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
__global__ void __launch_bounds__(kThreads, GretTile<D, VS, C>::min_blocks) gret_chunk_v2_kernel(const GretPass a) {
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
        ldmatrix_x4(smem_u32(sQ + (rb * 16 + (lane & 15)) * QS + kk * 16 + (lane >> 4) * 8), a0, a1, a2, a3);
#pragma unroll
        for (int np = 0; np < 4; ++np) {
          if (np <= rb) {  // key columns [16np, 16np+16) are visible to rows [16rb, 16rb+16) only if np <= rb
            uint32_t b0, b1, b2, b3;
            ldmatrix_x4(smem_u32(cK + (np * 16 + (lane & 7) + ((lane >> 4) << 3)) * QS + kk * 16 + ((lane >> 3) & 1) * 8),
                    b0, b1, b2, b3);
            mma_bf16(acc[2 * np], a0, a1, a2, a3, b0, b1);
            mma_bf16(acc[2 * np + 1], a0, a1, a2, a3, b2, b3);
          }
        }
#pragma unroll
        for (int np = 0; np < NT / 2; ++np) {
          uint32_t b0, b1, b2, b3;
          ldmatrix_x4_trans(smem_u32(sS + (kk * 16 + (lane & 7) + ((lane >> 3) & 1) * 8) * VSS + np * 16 + (lane >> 4) * 8),
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
            ldmatrix_x4_trans(smem_u32(cV + (kk * 16 + (lane & 7) + ((lane >> 3) & 1) * 8) * VSS + np * 16 + (lane >> 4) * 8),
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
          ldmatrix_x4_trans(smem_u32(cV + (kk * 16 + (lane & 7) + ((lane >> 3) & 1) * 8) * VSS + np * 16 + (lane >> 4) * 8),
                    bv[2 * np][0], bv[2 * np][1], bv[2 * np + 1][0], bv[2 * np + 1][1]);
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
          uint32_t a0, a1, a2, a3;
          // A = K^T (m = state row d, k = token): transposed 8x8 loads from K's rows.
          ldmatrix_x4_trans(smem_u32(cK + (kk * 16 + (lane & 7) + (lane >> 4) * 8) * QS + warp * (D / 4) + mt * 16 +
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

template <int D, int VS, bool kStateOnly>
cudaError_t launch_pass(const GretPass& a, int64_t batch, cudaStream_t stream) {
  constexpr int C = 64;
  using T = GretTile<D, VS, C>;
  auto kern = gret_chunk_v2_kernel<D, VS, C, kStateOnly>;
  cudaError_t e = cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(T::bytes));
  if (e != cudaSuccess) return e;
  const int64_t ctas = gret_num_seg_ctas(batch, a.heads, a.grid_segments, a.slices);
  if (ctas <= 0) return cudaSuccess;
  kern<<<static_cast<unsigned>(ctas), kThreads, T::bytes, stream>>>(a);
  return cudaGetLastError();
}

}  // namespace

cudaError_t gret_detail::launch_gret_chunk_v2_pass(const GretPass& a, int64_t batch, int64_t head_dim,
                                                   int slice_cols, bool state_only, cudaStream_t stream) {
#define YOCO_GRET_CASE(D, VS)                                                              \
  if (head_dim == D && slice_cols == VS)                                                   \
    return state_only ? launch_pass<D, VS, true>(a, batch, stream) : launch_pass<D, VS, false>(a, batch, stream);
  YOCO_GRET_CASE(64, 16) YOCO_GRET_CASE(64, 32) YOCO_GRET_CASE(64, 64)
  YOCO_GRET_CASE(128, 16) YOCO_GRET_CASE(128, 32) YOCO_GRET_CASE(128, 64)
  YOCO_GRET_CASE(256, 16) YOCO_GRET_CASE(256, 32)
#undef YOCO_GRET_CASE
  return cudaErrorInvalidValue;
}

}  // namespace yoco::cuda
