// gRet chunkwise prefill with chunks of C = 128 or 256 tokens (plan kernel 5,
// head_dim 128): the pair of reference/gret.hpp gret_chunkwise at
// chunk_size 128 / 256, launched through launch_gret_chunk (cuda/gret/gret_chunk.cu
// runs the three-phase segment launch around it; cuda/gret/NOTES-gret_chunk.md, v5).
//
// One CTA of 8 warps per (batch, head, segment), one CTA an SM:
//  - warp w keeps state rows [16w, +16) x all 128 columns in mma accumulators
//    (64 fp32 registers), as in v3;
//  - the chunk's log-decays are scanned per 64-token sub-tile (v3's scan) plus
//    a running carry, lane l holding G at tokens 64s + 2l and 64s + 2l + 1 of
//    sub-tile s (gret_emulate_chunk_scan mirrors the order);
//  - output: warp w owns columns [64 (w & 1), +64) of C/64 row blocks
//    (gret_v5_row_block: equal causal work a warp). Per row block its Q
//    fragments (32 registers) are loaded once; O = exp(G_i) Q S^ fills 32
//    accumulators; then key block by key block (kb <= rb) A = Q K^T is masked
//    and decayed, rounded to a bf16 A fragment and used at once, O += A V.
//    A is never held across key blocks, so the register need does not grow
//    with C; __launch_bounds__(256, 1) allows 255 registers;
//  - the state update S = exp(G_C) S + K'^T V over the C tokens,
//    K' = bf16(K .* exp(G_C - G_j)), runs after the outputs (they read S^, the
//    bf16 copy of the chunk's incoming state), then S^ is rewritten.
// Pipeline (barriers are CTA-uniform: the chunk loop bounds depend only on
// blockIdx). C 128: K, V and log-gamma double-buffered (chunk c+1 is issued
// right after barrier B1 of chunk c), Q refilled after B2 (every warp done
// with the outputs). C 256: one buffer of each (230,400 B of the 227 KB a
// block may have): Q refilled after B2, K/V/log-gamma after B3 (state update
// done), so only the Q load overlaps compute.
#include "gret/gret_chunk_device.cuh"
#include "gret/gret_plan.hpp"

namespace yoco::cuda {

namespace {

using namespace gret_detail;

constexpr int kThreadsV5 = 256;
constexpr unsigned kFull = 0xffffffffu;

// x[i] by selects, never a local-memory array: i may be a run-time value
// (a row block's sub-tile) and the loops that index stay rolled.
template <int N>
__device__ __forceinline__ float pick(const float (&x)[N], int i) {
  float r = x[0];
#pragma unroll
  for (int k = 1; k < N; ++k) r = i == k ? x[k] : r;
  return r;
}

template <int D, int C>
struct GretTileV5 {
  static constexpr int kBuf = gret_v5_buffers(C);  // K / V / log-gamma buffers
  static constexpr int kSub = C / 64;               // 64-token sub-tiles; also row blocks a warp
  static constexpr size_t tile = static_cast<size_t>(C) * D * 2;  // one bf16 C x D tile, bytes
  static constexpr size_t s_tile = static_cast<size_t>(D) * D * 2;
  static constexpr size_t off_q = 0;
  static constexpr size_t off_k = off_q + tile;
  static constexpr size_t off_v = off_k + kBuf * tile;
  static constexpr size_t off_s = off_v + kBuf * tile;
  static constexpr size_t off_lg = off_s + s_tile;
  static constexpr size_t bytes = off_lg + static_cast<size_t>(kBuf) * C * 4;
  static_assert(D == 128 && (C == 128 || C == 256), "v5: 8 x 16 state rows, chunks of 128 or 256");
  static_assert(bytes == static_cast<size_t>(gret_v5_smem_bytes(D, C)), "gret_plan.hpp mirrors the layout");
  static_assert(bytes <= 227 * 1024, "shared memory a block");
  static_assert(off_lg % 16 == 0, "alignment");
};

template <int D, int C, bool kStateOnly>
__global__ void __launch_bounds__(kThreadsV5, 1) gret_chunk_v5_kernel(const GretPass a) {
  using T = GretTileV5<D, C>;
  constexpr int kBuf = T::kBuf, kSub = T::kSub;
  extern __shared__ __align__(128) unsigned char smem[];
  const uint32_t sbase = smem_u32(smem);
  const uint32_t sQ = sbase + static_cast<uint32_t>(T::off_q);
  const uint32_t sS = sbase + static_cast<uint32_t>(T::off_s);
  unsigned char* pS = smem + T::off_s;
  const float* sLg = reinterpret_cast<const float*>(smem + T::off_lg);

  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int g = lane >> 2, t = lane & 3;
  const FullWidthCta cta = full_width_cta<C>(a);
  const int b = cta.b, h = cta.h, seg = cta.seg, c_begin = cta.c_begin, c_end = cta.c_end;

  // cp.async of one C x D tile of chunk c (src: q, k or v; 8 or 16 pieces a
  // thread); rows past the end are zero-filled, nothing past the end is read.
  auto load_tile = [&](uint32_t dst, const __nv_bfloat16* src, int c) {
    const int64_t t0 = gret_chunk_begin(c, C);
    const int64_t nv = gret_chunk_valid(c, C, a.seq_len);
    const __nv_bfloat16* base = src + gret_qkv_offset(b, t0, h, 0, a.seq_len, a.row_stride, D);
    // an opaque thread index: the per-piece offsets are loop-invariant, and
    // hoisted out of the chunk loop they held 2 x 16 x 2 registers at C 256
    const int tq = static_cast<int>(opaque_u32(static_cast<uint32_t>(tid)));
    load_swizzled_tile<D, C, kThreadsV5>(dst, base, nv, a.row_stride, tq);
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

  if (c_begin < c_end) {
    load_kv(c_begin, 0);
    if constexpr (!kStateOnly) load_tile(sQ, a.q, c_begin);
  }
  cp_async_commit();

  // State rows [16 warp, +16) x all D columns: n-tile nt holds rows
  // sr0 = 16 warp + g and sr0 + 8, columns 8 nt + 2t, +1.
  constexpr int NT = D / 8;
  const int srow = warp * 16, sr0 = srow + g;
  float s[NT][4];
  load_state_block<D, NT, !kStateOnly>(
      s, a.s_in ? a.s_in + seg * a.s_in_seg + gret_state_offset(b, h, 0, 0, a.heads, D) : nullptr, pS, sr0, 0, t);

  const int cb = (warp & 1) * 64;  // first output column of this warp
  float gamma_sum = 0.0f;
  int buf = kBuf == 2 ? 1 : 0;  // K/V/log-gamma buffer of chunk c: 0 for the segment's first chunk
  for (int c = c_begin; c < c_end; ++c) {
    if constexpr (kBuf == 2) buf ^= 1;
    cp_async_wait_all();
    __syncthreads();  // B1: chunk c landed (K, V, lg, Q); every warp is done with chunk c-1; S^ written
    if constexpr (kBuf == 2) {
      if (c + 1 < c_end) load_kv(c + 1, buf ^ 1);
      cp_async_commit();
    }
    const uint32_t cK = sbase + static_cast<uint32_t>(T::off_k + buf * T::tile);
    const uint32_t cV = sbase + static_cast<uint32_t>(T::off_v + buf * T::tile);

    // G: sub-tile s, lane l: gs0[s] = G[64s + 2l], gs1[s] = G[64s + 2l + 1]
    // (carry of the earlier sub-tiles + the sub-tile's own scan); GC = G[C-1].
    float gs0[kSub], gs1[kSub];
    float GC = 0.0f;
#pragma unroll
    for (int sub = 0; sub < kSub; ++sub) {
      float l0, l1, total;
      chunk_scan(sLg + buf * C + 64 * sub, lane, l0, l1, total);
      gs0[sub] = GC + l0;
      gs1[sub] = GC + l1;
      GC += total;
    }
    if constexpr (kStateOnly) gamma_sum += GC;

    if constexpr (!kStateOnly) {
      const int nv = static_cast<int>(gret_chunk_valid(c, C, a.seq_len));
      const int64_t t0 = gret_chunk_begin(c, C);
#pragma unroll 1
      for (int u = 0; u < kSub; ++u) {
        const int rb = gret_v5_row_block(warp, u);  // warp-uniform
        const int i0 = rb * 16 + g, i1 = i0 + 8;   // chunk rows in this thread's accumulators
        // G of rows i0, i1: sub-tile rb >> 2, pair lanes 8 (rb & 3) + (g >> 1) and + 4
        float Gi0, Gi1;
        {
          const float x0 = pick(gs0, rb >> 2), x1 = pick(gs1, rb >> 2);
          const int lr = 8 * (rb & 3) + (g >> 1);
          const float a0 = __shfl_sync(kFull, x0, lr), a1 = __shfl_sync(kFull, x1, lr);
          const float b0 = __shfl_sync(kFull, x0, lr + 4), b1 = __shfl_sync(kFull, x1, lr + 4);
          Gi0 = (g & 1) ? a1 : a0;
          Gi1 = (g & 1) ? b1 : b0;
        }
        // Q fragments of the row block, once
        uint32_t qf[D / 16][4];
#pragma unroll
        for (int kk = 0; kk < D / 16; ++kk)
          ldmatrix_x4(sQ + swz<D>(rb * 16 + (lane & 15), kk * 16 + (lane >> 4) * 8), qf[kk][0], qf[kk][1], qf[kk][2],
                  qf[kk][3]);
        // O = exp(G_i) (Q S^), 64 columns
        float out[8][4];
#pragma unroll
        for (int nt = 0; nt < 8; ++nt) out[nt][0] = out[nt][1] = out[nt][2] = out[nt][3] = 0.0f;
#pragma unroll
        for (int kk = 0; kk < D / 16; ++kk)
#pragma unroll
          for (int np = 0; np < 4; ++np) {
            uint32_t b0, b1, b2, b3;
            ldmatrix_x4_trans(sS + swz<D>(kk * 16 + (lane & 7) + ((lane >> 3) & 1) * 8, cb + np * 16 + (lane >> 4) * 8), b0,
                      b1, b2, b3);
            mma_bf16(out[2 * np], qf[kk][0], qf[kk][1], qf[kk][2], qf[kk][3], b0, b1);
            mma_bf16(out[2 * np + 1], qf[kk][0], qf[kk][1], qf[kk][2], qf[kk][3], b2, b3);
          }
        {
          const float e0 = decay(Gi0), e1 = decay(Gi1);
#pragma unroll
          for (int nt = 0; nt < 8; ++nt) {
            out[nt][0] *= e0;
            out[nt][1] *= e0;
            out[nt][2] *= e1;
            out[nt][3] *= e1;
          }
        }
        // + A V, key block by key block (kb <= rb: causal); a rolled loop
        // (registers: the unrolled one had ptxas prefetch K fragments of
        // several blocks)
#pragma unroll 1
        for (int kb = 0; kb <= rb; ++kb) {
          {
            const int ks = kb >> 2, kl = kb & 3;  // sub-tile of the key block and its block in there
            const float gk0 = pick(gs0, ks), gk1 = pick(gs1, ks);
            float acc[2][4];
#pragma unroll
            for (int n = 0; n < 2; ++n) acc[n][0] = acc[n][1] = acc[n][2] = acc[n][3] = 0.0f;
#pragma unroll
            for (int kk = 0; kk < D / 16; ++kk) {
              uint32_t b0, b1, b2, b3;
              ldmatrix_x4(cK + swz<D>(kb * 16 + (lane & 7) + ((lane >> 4) << 3), kk * 16 + ((lane >> 3) & 1) * 8), b0, b1,
                      b2, b3);
              mma_bf16(acc[0], qf[kk][0], qf[kk][1], qf[kk][2], qf[kk][3], b0, b1);
              mma_bf16(acc[1], qf[kk][0], qf[kk][1], qf[kk][2], qf[kk][3], b2, b3);
            }
            uint32_t af[4];
            masked_decayed_fragment(af, acc, !(kb < rb), Gi0, Gi1, gk0, gk1, kb, kl, i0, i1, t);
#pragma unroll
            for (int np = 0; np < 4; ++np) {
              uint32_t b0, b1, b2, b3;
              ldmatrix_x4_trans(cV + swz<D>(kb * 16 + (lane & 7) + ((lane >> 3) & 1) * 8, cb + np * 16 + (lane >> 4) * 8), b0,
                        b1, b2, b3);
              mma_bf16(out[2 * np], af[0], af[1], af[2], af[3], b0, b1);
              mma_bf16(out[2 * np + 1], af[0], af[1], af[2], af[3], b2, b3);
            }
          }
        }
        // store o (rows past the end are not written)
        store_output_rows(out, a.o + gret_out_offset(b, t0 + i0, h, cb + 2 * t, a.seq_len, a.heads, D),
                          8 * a.heads * D, i0 < nv, i1 < nv);
      }
      __syncthreads();  // B2: every warp is done with Q and S^ of chunk c
      if (c + 1 < c_end) load_tile(sQ, a.q, c + 1);
      cp_async_commit();
    }

    // ---- state: S = exp(G_C) S + K'^T V, K' = bf16(K .* exp(G_C - G_j)) ----
    {
      float F0[kSub], F1[kSub];  // exp(G_C - G_j) of this lane's tokens
#pragma unroll
      for (int sub = 0; sub < kSub; ++sub) {
        F0[sub] = decay(GC - gs0[sub]);
        F1[sub] = decay(GC - gs1[sub]);
      }
      const float eC = decay(GC);
#pragma unroll
      for (int nt = 0; nt < NT; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) s[nt][e] *= eC;
#pragma unroll 4  // whole unrolling at C 256 had ptxas hoist V fragments into spills
      for (int kk = 0; kk < C / 16; ++kk) {
        const int ks = kk >> 2, kl = kk & 3;
        // tokens j = 16 kk + 2t, j+1 (a0, a1) and j+8, j+9 (a2, a3)
        const float fa = pick(F0, ks), fb = pick(F1, ks);
        const float f0 = __shfl_sync(kFull, fa, 8 * kl + t);
        const float f1 = __shfl_sync(kFull, fb, 8 * kl + t);
        const float f2 = __shfl_sync(kFull, fa, 8 * kl + 4 + t);
        const float f3 = __shfl_sync(kFull, fb, 8 * kl + 4 + t);
        state_update_step<D, NT>(s, cK, cV, kk, srow, 0, lane, f0, f1, f2, f3);
      }
      if constexpr (!kStateOnly) {
        // S^ of chunk c+1: B2 ordered every read of the old S^ before these
        // stores; the next B1 orders them before the next chunk's reads.
        store_state_bf16<D, NT>(s, pS, sr0, 0, t);
      }
    }
    if constexpr (kBuf == 1) {
      __syncthreads();  // B3: every warp is done with K, V and log-gamma of chunk c
      if (c + 1 < c_end) load_kv(c + 1, 0);
      cp_async_commit();
    }
  }
  cp_async_wait_all();

  if (a.gamma && tid == 0) a.gamma[(static_cast<int64_t>(b) * a.heads + h) * a.segments + seg] = gamma_sum;
  if (a.s_out && seg >= a.write_from) {
    float* so = a.s_out + seg * a.s_out_seg + gret_state_offset(b, h, 0, 0, a.heads, D);
    store_state_block<D, NT>(s, so, sr0, 0, t);
  }
}

template <int D, int C, bool kStateOnly>
cudaError_t launch_pass_v5(const GretPass& a, int64_t batch, cudaStream_t stream) {
  using T = GretTileV5<D, C>;
  auto kern = gret_chunk_v5_kernel<D, C, kStateOnly>;
  cudaError_t e = cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(T::bytes));
  if (e != cudaSuccess) return e;
  const int64_t ctas = gret_num_seg_ctas(batch, a.heads, a.grid_segments, 1);
  if (ctas <= 0) return cudaSuccess;
  kern<<<static_cast<unsigned>(ctas), kThreadsV5, T::bytes, stream>>>(a);
  return cudaGetLastError();
}

}  // namespace

cudaError_t gret_detail::launch_gret_chunk_v5_pass(const GretPass& a, int64_t batch, int chunk, bool state_only,
                                                   cudaStream_t stream) {
  if (chunk == 128) return state_only ? launch_pass_v5<128, 128, true>(a, batch, stream)
                                      : launch_pass_v5<128, 128, false>(a, batch, stream);
  if (chunk == 256) return state_only ? launch_pass_v5<128, 256, true>(a, batch, stream)
                                      : launch_pass_v5<128, 256, false>(a, batch, stream);
  return cudaErrorInvalidValue;
}

}  // namespace yoco::cuda
