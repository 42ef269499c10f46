// gRet chunkwise prefill on Hopper warpgroup MMA (plan kernel 6, head_dim 128,
// chunk 64): the pair of reference/gret.hpp gret_chunkwise, launched through
// launch_gret_chunk (cuda/gret/gret_chunk.cu runs the three-phase segment launch
// around it; phase 1 is v3's state-only kernel). cuda/gret/NOTES-gret_chunk.md, v6.
//
// Why: v3 (mma.sync) reads ~614 KB of shared memory a head-chunk through
// ldmatrix (every warp loads its own copy of the B operands): at 128 B/clk that
// alone is ~4,800 clk a head-chunk, the limit that keeps it at 45-50 % of copy.
// wgmma reads each B operand once per warpgroup: ~150 KB a head-chunk.
//
// One CTA of 3 warpgroups per (batch, head, segment), one CTA an SM:
//  - warpgroup 0 (outputs), warp w rows [16w, +16) of the chunk:
//      acc_s = Q K^T              wgmma m64n64k16,  A = Q, B = K (smem, K-major)
//      acc_o = Q S^               wgmma m64n128k16, A = Q, B = S^ (smem, N-major)
//      A = bf16((Q K^T) .* E)     in registers, E_ij = exp(G_i - G_j), j <= i (a select)
//      acc_o = exp(G_i) acc_o + A V   wgmma m64n128k16, A from registers, B = V (N-major)
//    then O is staged through its own rows of the O tile and written in 16-byte pieces;
//  - warpgroups 1, 2 (state rows [64 s, +64) x all 128 columns, s = wg - 1, as
//    the m64n128 accumulators of their four warps):
//      S = exp(G_C) S + K'^T V    wgmma m64n128k16, A = K'^T from registers
//                                 (ldmatrix.trans of K, scaled by exp(G_C - G_j), rounded once),
//                                 B = V (N-major)
//    then S^ = bf16(S) into the other S^ buffer for the next chunk.
// The two roles never wait for each other inside a chunk: the outputs of chunk
// c read S^(c) (written during chunk c-1), the state warpgroups write S^(c+1).
//
// Pipeline: kGretV6Stages stages of Q, K, V and log-gamma; the state
// warpgroups issue cp.async for chunk c+2 right after the chunk-c barrier (its
// stage was last read in chunk c-1). One CTA-wide barrier a chunk, after each
// thread's cp.async groups of chunk c have landed and fence.proxy.async made
// them (and the S^ stores) visible to the async proxy. Barriers are CTA-uniform
// (the loop bounds depend only on blockIdx) and sit outside the role branches.
//
// v7 (plan kernel 7) is the same kernel with two output warpgroups (512 threads):
// warpgroup j in {0, 1} forms output columns [64 j, +64) -- Q K^T and the mask in
// both, Q S^ and A V as m64n64 halves, half the O epilogue each -- and the state
// warpgroups are 2 and 3. Why (cuda/gret/NOTES-gret_chunk.md, the H200 profile):
// v6's output warpgroup's serial chain sets the chunk period (43.8 % of warp
// cycles wait at the chunk barrier, tensor pipes at most 20.8 % busy); halving
// its Q S^, A V and epilogue shortens that chain, and 16 warps give each
// scheduler 4 instead of 3. v7 has no fused norm and gate (it needs a whole row).
//
// Arithmetic: the rounding points of gret_chunk_emulate (the host mirror): A
// and K' rounded to bf16 once, S^ = bf16(S), fp32 accumulators, every exponent
// clamped <= 0; the mask uses exp(G_i - G_j) directly (as the emulation), not
// v3's factored decays; the sums run in wgmma's order, so v6 is not bit-equal to v3.
#include <atomic>

#include "gret/gret_chunk_device.cuh"
#include "gret/gret_norm_gate.cuh"
#include "gret/gret_plan.hpp"
#include "arch/tma_sm90.cuh"
#include "arch/wgmma_sm90.cuh"

namespace yoco::cuda {

namespace {

using gret_detail::FullWidthCta;
using gret_detail::GretPass;
using sm90::sw128_desc;
using sm90::sw128_offset;

constexpr int kD = 128, kC = 64;
constexpr int kThreadsV6 = 384;  // 3 warpgroups
constexpr int kThreadsV7 = 512;  // 4 warpgroups
// Threads of the kernel with G output warpgroups (the state warpgroups are always 2).
constexpr int wgmma_chunk_threads(int G) { return 128 * (G + 2); }
// v7's registers by role (512 threads launch with 128 each): the outputs give 8 a thread to the
// state warpgroups (2 x 128 x 120 + 2 x 128 x 136 = 65,536). ptxas (CUDA 13.0, sm_90a): 128 for
// both spills 8 bytes, 112 / 144 spills 8, 104 / 152 spills 76, 120 / 136 none.
constexpr int kV7OutputRegs = 120, kV7StateRegs = 136;
static_assert(wgmma_chunk_threads(1) == kThreadsV6 && wgmma_chunk_threads(2) == kThreadsV7, "thread counts");
constexpr int kNS = kGretV6Stages;
constexpr uint32_t kHalf64 = 64 * 128;    // one 64-column half of a 64-row tile (bytes)
constexpr uint32_t kHalf128 = 128 * 128;  // ... of the 128-row S^ tile
constexpr unsigned kFull = 0xffffffffu;
static_assert(gret_v6_smem_bytes() <= 227 * 1024, "shared memory per block");
static_assert(gret_v6_off_stage(0) % 1024 == 0 && gret_v6_tile_bytes() % 1024 == 0, "tiles on 1024-byte atoms");
static_assert(kHalf64 / 16 < (1 << 14) && kHalf128 / 16 < (1 << 14), "LBO fits the descriptor");

// Warp-uniform warpgroup index (a shuffle the compiler can see is uniform), so
// the role branches are warpgroup-convergent for the wgmma instructions.
__device__ __forceinline__ int warpgroup_index() { return __shfl_sync(kFull, static_cast<int>(threadIdx.x) / 128, 0); }

// G of chunk rows r0 and r0 + 8 (lanes hold G[2l] in g0, G[2l+1] in g1).
__device__ __forceinline__ void rows_g(float g0, float g1, int r0, float& G0, float& G1) {
  const float a0 = __shfl_sync(kFull, g0, r0 >> 1), a1 = __shfl_sync(kFull, g1, r0 >> 1);
  const float b0 = __shfl_sync(kFull, g0, (r0 + 8) >> 1), b1 = __shfl_sync(kFull, g1, (r0 + 8) >> 1);
  G0 = (r0 & 1) ? a1 : a0;
  G1 = (r0 & 1) ? b1 : b0;
}

// acc += A V over the chunk's 64 keys (4 RS wgmma steps, V N-major at sV),
// A as 16 bf16x2 registers in the m64k16 A-fragment layout, waited for. Both
// roles end a chunk with one: the outputs (A = the masked, decayed Q K^T) and
// the state (A = K'^T). NACC 64: all 128 columns; NACC 32: the 64 columns of
// V's half at sV (a v7 output warpgroup's).
template <int NACC>
__device__ __forceinline__ void wgmma_times_v(float (&acc)[NACC], uint32_t (&a)[16], uint32_t sV) {
  static_assert(NACC == 64 || NACC == 32, "m64n128 or m64n64");
  sm90::reg_fence(acc);
  sm90::reg_fence(a);
  sm90::wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < kC / 16; ++kk) {
    const uint64_t b = sw128_desc(sV + kk * 2048, kHalf64, 1024);
    if constexpr (NACC == 64)
      sm90::wgmma_rs_m64n128k16_tb(acc, a[4 * kk], a[4 * kk + 1], a[4 * kk + 2], a[4 * kk + 3], b);
    else
      sm90::wgmma_rs_m64n64k16_tb(acc, a[4 * kk], a[4 * kk + 1], a[4 * kk + 2], a[4 * kk + 3], b);
  }
  sm90::wgmma_commit();
  sm90::wgmma_wait<0>();
  sm90::reg_fence(acc);
}

// The kernel's body with G output warpgroups (G 1: v6, G 2: v7), inlined into each
// __global__ below so that v6's compiled kernel and its name stay what they were.
template <int G>
__device__ __forceinline__ void gret_chunk_wgmma_body(const GretPass& a) {
  static_assert(G == 1 || G == 2, "one or two output warpgroups");
  constexpr int kThreads = wgmma_chunk_threads(G);
  constexpr int kNO = 64 / G;  // output accumulators a thread: 128 / G columns of 2 rows
  constexpr int kNC = 16 / G;  // 8-column groups a warpgroup's output half holds
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  const uint32_t raw_addr = static_cast<uint32_t>(__cvta_generic_to_shared(smem_raw));
  const uint32_t base = (raw_addr + 1023u) & ~1023u;  // swizzle atoms on 1024-byte boundaries
  unsigned char* smem = smem_raw + (base - raw_addr);

  const int tid = threadIdx.x, wg = warpgroup_index(), warp = (tid >> 5) & 3, lane = tid & 31;
  const int g = lane >> 2, t = lane & 3;
  const FullWidthCta cta = gret_detail::full_width_cta<kC>(a);
  const int b = cta.b, h = cta.h, seg = cta.seg, c_begin = cta.c_begin, c_end = cta.c_end;

  // Loads: the 256 threads of the state warpgroups issue every cp.async (Q, K,
  // V tiles: 4 passes of 16 rows; log-gammas: threads 0..63); the output
  // warpgroups commit empty groups so every thread counts the same groups.
  const int ltid = tid - 128 * G;
  auto load_chunk = [&](int c, int stage) {
    if (ltid < 0) return;
    const int64_t t0 = gret_chunk_begin(c, kC);
    const __nv_bfloat16* qg = a.q + gret_qkv_offset(b, t0, h, 0, a.seq_len, a.row_stride, kD);
    const __nv_bfloat16* kg = a.k + gret_qkv_offset(b, t0, h, 0, a.seq_len, a.row_stride, kD);
    const __nv_bfloat16* vg = a.v + gret_qkv_offset(b, t0, h, 0, a.seq_len, a.row_stride, kD);
    sm90::load_tile_sw128<kC, kD, 256>(base + static_cast<uint32_t>(gret_v6_off_q(stage)), qg, a.q, a.row_stride, t0,
                                       0, a.seq_len, ltid);
    sm90::load_tile_sw128<kC, kD, 256>(base + static_cast<uint32_t>(gret_v6_off_k(stage)), kg, a.k, a.row_stride, t0,
                                       0, a.seq_len, ltid);
    sm90::load_tile_sw128<kC, kD, 256>(base + static_cast<uint32_t>(gret_v6_off_v(stage)), vg, a.v, a.row_stride, t0,
                                       0, a.seq_len, ltid);
    if (ltid < kC) {
      const bool ok = ltid < gret_chunk_valid(c, kC, a.seq_len);  // past the end: 0 (no decay, k = v = 0)
      const int64_t go = ok ? gret_gate_offset(b, t0 + ltid, h, a.seq_len, a.heads) : 0;
      gret_detail::cp_async4(base + static_cast<uint32_t>(gret_v6_off_lg(stage) + ltid * 4), a.log_gamma + go, ok);
    }
  };
#pragma unroll
  for (int j = 0; j < kNS - 1; ++j) {
    if (c_begin + j < c_end) load_chunk(c_begin + j, j);
    gret_detail::cp_async_commit();
  }

  // Top of chunk c (the i-th of the segment), in both role loops: this
  // thread's copies of chunk c have landed; fence.proxy.async makes them and its
  // S^ stores visible to wgmma; the named barrier (the same one at two program
  // points: the role loops run the same trip count) makes everyone's visible
  // and orders every read of chunk c-1's stage and S^ buffer before the copies
  // of chunk c+2 into that stage.
  auto chunk_top = [&](int c, int i) {
    dev::cp_async_wait<kNS - 2>();
    sm90::fence_proxy_async();
    asm volatile("barrier.sync 1, %0;\n" ::"n"(kThreads) : "memory");
    if (c + kNS - 1 < c_end) load_chunk(c + kNS - 1, gret_v6_stage(i + kNS - 1));
    gret_detail::cp_async_commit();
  };

  if (wg < G) {
    // ---- outputs: rows r0 = 16 warp + g, r0 + 8 of each chunk; columns [c0, c0 + 128 / G) ----
    if constexpr (G == 2) sm90::setmaxnreg_dec<kV7OutputRegs>();
    const int r0 = 16 * warp + g;
    const int half = G == 1 ? 0 : wg, c0 = 64 * half;
    for (int c = c_begin; c < c_end; ++c) {
      const int i = c - c_begin, stage = gret_v6_stage(i);
      chunk_top(c, i);
      const uint32_t sQ = base + static_cast<uint32_t>(gret_v6_off_q(stage));
      const uint32_t sK = base + static_cast<uint32_t>(gret_v6_off_k(stage));
      const uint32_t sV = base + static_cast<uint32_t>(gret_v6_off_v(stage));
      const uint32_t sS = base + static_cast<uint32_t>(gret_v6_off_s(i & 1));
      float acc_s[32], acc_o[kNO];
      sm90::wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < kD / 16; ++kk) {
        const uint32_t off = (kk >> 2) * kHalf64 + (kk & 3) * 32;
        sm90::wgmma_ss_m64n64k16(acc_s, sw128_desc(sQ + off, 16, 1024), sw128_desc(sK + off, 16, 1024), kk > 0);
      }
      sm90::wgmma_commit();
#pragma unroll
      for (int kk = 0; kk < kD / 16; ++kk) {
        const uint32_t off = (kk >> 2) * kHalf64 + (kk & 3) * 32;
        if constexpr (G == 1)
          sm90::wgmma_ss_m64n128k16<1>(acc_o, sw128_desc(sQ + off, 16, 1024),
                                       sw128_desc(sS + kk * 2048, kHalf128, 1024), kk > 0);
        else  // S^'s column half: its own 64-column block of the tile, rows kk * 16 on
          sm90::wgmma_ss_m64n64k16<1>(acc_o, sw128_desc(sQ + off, 16, 1024),
                                      sw128_desc(sS + half * kHalf128 + kk * 2048, kHalf128, 1024), kk > 0);
      }
      sm90::wgmma_commit();

      float g0, g1, GC;
      gret_detail::chunk_scan(reinterpret_cast<const float*>(smem + gret_v6_off_lg(stage)), lane, g0, g1, GC);
      float Gr0, Gr1;
      rows_g(g0, g1, r0, Gr0, Gr1);
      sm90::wgmma_wait<1>();  // Q K^T done; Q S^ may still run
      sm90::reg_fence(acc_s);
      uint32_t af[16];
#pragma unroll
      for (int n = 0; n < 8; ++n) {
        // keys j = 8n + 2t, j + 1: lane 4n + t holds their G
        const float Gj0 = __shfl_sync(kFull, g0, 4 * n + t), Gj1 = __shfl_sync(kFull, g1, 4 * n + t);
        const int j0 = 8 * n + 2 * t, j1 = j0 + 1;
        const float p00 = j0 <= r0 ? acc_s[4 * n] * gret_detail::decay(Gr0 - Gj0) : 0.0f;
        const float p01 = j1 <= r0 ? acc_s[4 * n + 1] * gret_detail::decay(Gr0 - Gj1) : 0.0f;
        const float p10 = j0 <= r0 + 8 ? acc_s[4 * n + 2] * gret_detail::decay(Gr1 - Gj0) : 0.0f;
        const float p11 = j1 <= r0 + 8 ? acc_s[4 * n + 3] * gret_detail::decay(Gr1 - Gj1) : 0.0f;
        // A fragment of k-step n/2: a0 (row g, keys +2t), a1 (row g+8), a2 / a3 the same 8 keys later
        af[4 * (n >> 1) + 2 * (n & 1)] = sm90::pack_bf16(p00, p01);
        af[4 * (n >> 1) + 2 * (n & 1) + 1] = sm90::pack_bf16(p10, p11);
      }
      const float e0 = gret_detail::decay(Gr0), e1 = gret_detail::decay(Gr1);
      sm90::wgmma_wait<0>();  // Q S^ done
      sm90::reg_fence(acc_o);
#pragma unroll
      for (int n = 0; n < kNC; ++n) {
        acc_o[4 * n] *= e0;
        acc_o[4 * n + 1] *= e0;
        acc_o[4 * n + 2] *= e1;
        acc_o[4 * n + 3] *= e1;
      }
      wgmma_times_v(acc_o, af, sV + half * kHalf64);  // G 2: V's half j

      // Stage O through this warp's own 16 rows of the O tile, then 16-byte
      // pieces. The tile is the output warpgroups' alone (v7's two each hold one
      // 8 KB column half of it) and each warp writes and reads only its own rows
      // of its half, so program order and __syncwarp suffice. (It once
      // reused the Q tile: a stage the state warpgroups refill by cp.async, and
      // a warpgroup barrier was needed against the shared A operand's reads.)
      unsigned char* pO = smem + gret_v6_off_o();
#pragma unroll
      for (int n = 0; n < kNC; ++n) {
        const int col = c0 + 8 * n + 2 * t;
        *reinterpret_cast<uint32_t*>(pO + sw128_offset<kC>(r0, col)) = sm90::pack_bf16(acc_o[4 * n], acc_o[4 * n + 1]);
        *reinterpret_cast<uint32_t*>(pO + sw128_offset<kC>(r0 + 8, col)) =
            sm90::pack_bf16(acc_o[4 * n + 2], acc_o[4 * n + 3]);
      }
      __syncwarp();
      const int nv = static_cast<int>(gret_chunk_valid(c, kC, a.seq_len));
      const int64_t t0 = gret_chunk_begin(c, kC);
      // 16 / G lanes a row, 16 bytes (8 columns) a lane. With the fused norm +
      // gate (a.g, uniform over the grid) the row's sum of squares is taken
      // over the bf16 o in the norm + gate kernel's order (every lane joins
      // the shuffles; rows past the sequence are computed and not stored).
      // g's eight pieces are all loaded before the first store: g may alias
      // o as far as the compiler knows, so it would not hoist them itself.
      uint4 graw[8];
      if (G == 1 && a.g != nullptr) {
#pragma unroll
        for (int k = 0; k < 8; ++k) {
          const int idx = lane + 32 * k, r = 16 * warp + (idx >> 4), piece = idx & 15;
          graw[k] = r < nv ? *reinterpret_cast<const uint4*>(
                                 a.g + gret_qkv_offset(b, t0 + r, h, piece * 8, a.seq_len, a.g_stride, kD))
                           : make_uint4(0u, 0u, 0u, 0u);
        }
      }
#pragma unroll
      for (int k = 0; k < 8 / G; ++k) {
        // G 1: 16 pieces a row; G 2: the 8 pieces of this warpgroup's half
        const int idx = lane + 32 * k, r = 16 * warp + (idx >> (4 - (G - 1))),
                  piece = 8 * half + (idx & (16 / G - 1));
        uint4 piece_o = *reinterpret_cast<const uint4*>(pO + sw128_offset<kC>(r, piece * 8));
        if (G == 1 && a.g != nullptr) {
          float x[8], gv[8];
          gret_ng::unpack8(piece_o, x);
          gret_ng::unpack8(graw[k], gv);
          const float inv = gret_ng::inv_rms(gret_ng::head128_sum_sq(x), kD, a.eps);
#pragma unroll
          for (int e = 0; e < 8; ++e) x[e] = gret_ng::gated(gv[e], x[e], inv);
          piece_o = gret_ng::pack8(x);
        }
        if (r < nv)
          *reinterpret_cast<uint4*>(a.o + gret_out_offset(b, t0 + r, h, piece * 8, a.seq_len, a.heads, kD)) = piece_o;
      }
    }
  } else {
    // ---- state warpgroups: rows R0 = 64 s + 16 warp + g and R0 + 8, columns
    // 8i + 2t (+1) of the m64n128 accumulator; the incoming state also goes to
    // S^ buffer 0 (the first barrier orders it before the first Q S^).
    if constexpr (G == 2) sm90::setmaxnreg_inc<kV7StateRegs>();
    const int s_half = wg - G;
    const int R0 = 64 * s_half + 16 * warp + g;
    float st[64];
    {
      const float* sin = a.s_in ? a.s_in + seg * a.s_in_seg + gret_state_offset(b, h, 0, 0, a.heads, kD) : nullptr;
#pragma unroll
      for (int n = 0; n < 16; ++n)
#pragma unroll
        for (int hr = 0; hr < 2; ++hr) {
          const int r = R0 + 8 * hr, col = 8 * n + 2 * t;
          float2 x = make_float2(0.0f, 0.0f);
          if (sin) x = *reinterpret_cast<const float2*>(sin + static_cast<int64_t>(r) * kD + col);
          st[4 * n + 2 * hr] = x.x;
          st[4 * n + 2 * hr + 1] = x.y;
          *reinterpret_cast<uint32_t*>(smem + gret_v6_off_s(0) + sw128_offset<128>(r, col)) =
              sm90::pack_bf16(x.x, x.y);
        }
    }
    for (int c = c_begin; c < c_end; ++c) {
      const int i = c - c_begin, stage = gret_v6_stage(i);
      chunk_top(c, i);
      const uint32_t sK = base + static_cast<uint32_t>(gret_v6_off_k(stage));
      const uint32_t sV = base + static_cast<uint32_t>(gret_v6_off_v(stage));
      float g0, g1, GC;
      gret_detail::chunk_scan(reinterpret_cast<const float*>(smem + gret_v6_off_lg(stage)), lane, g0, g1, GC);
      // S = exp(G_C) S + K'^T V, K' = bf16(K .* exp(G_C - G_j))
      const float F0 = gret_detail::decay(GC - g0), F1 = gret_detail::decay(GC - g1);  // lane l: keys 2l, 2l+1
      uint32_t kf[16];
#pragma unroll
      for (int kk = 0; kk < kC / 16; ++kk) {
        // A = K^T (m = state row, k = key): transposed 8x8 loads of K's rows;
        // matrix q = lane >> 3: keys 16kk + 8 (q >> 1), state rows + 8 (q & 1)
        const int key = 16 * kk + (lane & 7) + (lane >> 4) * 8;
        const int row = 64 * s_half + 16 * warp + ((lane >> 3) & 1) * 8;
        gret_detail::ldmatrix_x4_trans(sK + sw128_offset<kC>(key, row), kf[4 * kk], kf[4 * kk + 1], kf[4 * kk + 2],
                               kf[4 * kk + 3]);
        // keys 16kk + 2t, +1 (a0, a1) and + 8 (a2, a3)
        const float f0 = __shfl_sync(kFull, F0, 8 * kk + t), f1 = __shfl_sync(kFull, F1, 8 * kk + t);
        const float f2 = __shfl_sync(kFull, F0, 8 * kk + 4 + t), f3 = __shfl_sync(kFull, F1, 8 * kk + 4 + t);
        kf[4 * kk] = gret_detail::scale_bf16x2(kf[4 * kk], f0, f1);
        kf[4 * kk + 1] = gret_detail::scale_bf16x2(kf[4 * kk + 1], f0, f1);
        kf[4 * kk + 2] = gret_detail::scale_bf16x2(kf[4 * kk + 2], f2, f3);
        kf[4 * kk + 3] = gret_detail::scale_bf16x2(kf[4 * kk + 3], f2, f3);
      }
      const float eC = gret_detail::decay(GC);
#pragma unroll
      for (int n = 0; n < 64; ++n) st[n] *= eC;
      wgmma_times_v(st, kf, sV);
      // S^ of chunk c+1 into the other buffer (last read by chunk c-1's
      // outputs, before this chunk's barrier); the next chunk_top fences and
      // orders these stores before its wgmma reads.
      unsigned char* pS = smem + gret_v6_off_s((i & 1) ^ 1);
#pragma unroll
      for (int n = 0; n < 16; ++n) {
        const int col = 8 * n + 2 * t;
        *reinterpret_cast<uint32_t*>(pS + sw128_offset<128>(R0, col)) = sm90::pack_bf16(st[4 * n], st[4 * n + 1]);
        *reinterpret_cast<uint32_t*>(pS + sw128_offset<128>(R0 + 8, col)) =
            sm90::pack_bf16(st[4 * n + 2], st[4 * n + 3]);
      }
    }
    if (a.s_out && seg >= a.write_from) {
      float* so = a.s_out + seg * a.s_out_seg + gret_state_offset(b, h, 0, 0, a.heads, kD);
#pragma unroll
      for (int n = 0; n < 16; ++n)
#pragma unroll
        for (int hr = 0; hr < 2; ++hr)
          *reinterpret_cast<float2*>(so + static_cast<int64_t>(R0 + 8 * hr) * kD + 8 * n + 2 * t) =
              make_float2(st[4 * n + 2 * hr], st[4 * n + 2 * hr + 1]);
    }
  }
  gret_detail::cp_async_wait_all();
}

__global__ void __launch_bounds__(kThreadsV6, 1) gret_chunk_v6_kernel(const GretPass a) { gret_chunk_wgmma_body<1>(a); }
__global__ void __launch_bounds__(kThreadsV7, 1) gret_chunk_v7_kernel(const GretPass a) { gret_chunk_wgmma_body<2>(a); }

}  // namespace

namespace {

// One wgmma chunk kernel over a's grid of batch x heads x grid_segments CTAs,
// with the layout's shared memory (v6 and v7 share it: one CTA an SM).
cudaError_t launch_wgmma_chunk(void (*kernel)(const GretPass), int threads, const GretPass& a, int64_t batch,
                               cudaStream_t stream) {
  const int bytes = static_cast<int>(gret_v6_smem_bytes());
  cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
  if (e != cudaSuccess) return e;
  const int64_t ctas = gret_num_seg_ctas(batch, a.heads, a.grid_segments, 1);
  if (ctas <= 0) return cudaSuccess;
  kernel<<<static_cast<unsigned>(ctas), threads, bytes, stream>>>(a);
  return cudaGetLastError();
}

}  // namespace

cudaError_t gret_detail::launch_gret_chunk_v6_pass(const GretPass& a, int64_t batch, cudaStream_t stream) {
  // The fused pass only: phase 1 of a segmented launch runs v3's state-only
  // kernel (launch_gret_chunk), and this kernel writes no Gamma.
  if (a.gamma != nullptr || a.o == nullptr) return cudaErrorInvalidValue;
  return launch_wgmma_chunk(gret_chunk_v6_kernel, kThreadsV6, a, batch, stream);
}

cudaError_t gret_detail::launch_gret_chunk_v7_pass(const GretPass& a, int64_t batch, cudaStream_t stream) {
  // As v6's, without the fused norm and gate (an output warpgroup holds half a row).
  if (a.gamma != nullptr || a.o == nullptr || a.g != nullptr) return cudaErrorInvalidValue;
  // setmaxnreg moves registers between the roles inside the 128 a thread the kernel launches with.
  // Compiled to any other count (another toolchain), the state warpgroups' increase could wait for
  // registers no warp gives back: a hang. Refused instead.
  static_assert(2 * kV7OutputRegs + 2 * kV7StateRegs == 4 * 128, "the roles share 128 a thread");
  // Asked once it is known: a failed query (no context yet, a device error) is returned, not kept.
  static std::atomic<int> known_regs{0};
  int regs = known_regs.load(std::memory_order_acquire);
  if (regs == 0) {
    cudaFuncAttributes f{};
    if (const cudaError_t err = cudaFuncGetAttributes(&f, gret_chunk_v7_kernel); err != cudaSuccess) {
      (void)cudaGetLastError();  // this call's error, returned: not left for an unrelated later check
      return err;
    }
    regs = f.numRegs;
    known_regs.store(regs, std::memory_order_release);
  }
  if (regs != 128) return cudaErrorNotSupported;
  return launch_wgmma_chunk(gret_chunk_v7_kernel, kThreadsV7, a, batch, stream);
}

}  // namespace yoco::cuda
