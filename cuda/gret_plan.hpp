#pragma once
// Index maths and the launch plan of the gated-retention chunkwise prefill
// kernel (cuda/gret_chunk.cu; reference/gret.hpp: gret_chunkwise), shared by
// the kernel (device) and the CPU tests (host). Everything that can pass 2^31
// is int64_t (KERNELS.md §5 row 1: q/o wrap from about token 699,050 at
// 24 heads x 128).
//
// Work decomposition: one CTA per (batch, head, V-slice). A V-slice is a block
// of `slice_cols` columns of v, of o and of the state (S[:, slice]); the slice
// CTA walks every chunk of its head in order, keeping its state slice in fp32
// registers. Q K^T and the decay mask are recomputed per slice. The CTA index
// puts a head's slices next to each other, so they run together and L2 serves
// the repeated q/k reads.
//
// Under YOCO_GRET_EMULATION (tests only) this header also provides a host
// emulation of the kernel's exact arithmetic (same chunk, same bf16 rounding
// points, the same fp32 scan of the log-decays), which gives the expected
// error for DESIGN §6.
#include <cstdint>

#include "hd.hpp"

namespace yoco::cuda {

struct GretChunkShape {
  int64_t batch = 1, heads = 0, head_dim = 0;  // head_dim: 64, 128, 256
  int64_t seq_len = 0;                         // tokens in this launch (a prefill chunk of the sequence)
  int64_t row_stride = 0;                      // elements between consecutive tokens in q/k/v
};

struct GretChunkPlan {
  int chunk = 64;        // tokens per chunk (the kernel's C); 64 is the one compiled
  int slice_cols = 32;   // V columns per CTA: 16, 32 or 64 (head_dim 256: 16 or 32)
  int slices = 4;        // head_dim / slice_cols
  int segments = 1;      // sequence segments per head (1: not implemented beyond)
};

// ---- index maths (all int64) ----
YOCO_HD constexpr int64_t gret_num_chunks(int64_t seq_len, int64_t chunk) { return (seq_len + chunk - 1) / chunk; }
YOCO_HD constexpr int64_t gret_chunk_begin(int64_t c, int64_t chunk) { return c * chunk; }
// Valid tokens of chunk c (the last one may be ragged).
YOCO_HD constexpr int64_t gret_chunk_valid(int64_t c, int64_t chunk, int64_t seq_len) {
  const int64_t r = seq_len - c * chunk;
  return r < chunk ? (r < 0 ? 0 : r) : chunk;
}
// q, k, v: [batch, seq_len, row_stride], head h at columns [h*D, (h+1)*D).
YOCO_HD constexpr int64_t gret_qkv_offset(int64_t b, int64_t t, int64_t h, int64_t d, int64_t seq_len,
                                          int64_t row_stride, int64_t head_dim) {
  return (b * seq_len + t) * row_stride + h * head_dim + d;
}
// log_gamma: [batch, seq_len, heads].
YOCO_HD constexpr int64_t gret_gate_offset(int64_t b, int64_t t, int64_t h, int64_t seq_len, int64_t heads) {
  return (b * seq_len + t) * heads + h;
}
// o: [batch, seq_len, heads * D].
YOCO_HD constexpr int64_t gret_out_offset(int64_t b, int64_t t, int64_t h, int64_t d, int64_t seq_len, int64_t heads,
                                          int64_t head_dim) {
  return ((b * seq_len + t) * heads + h) * head_dim + d;
}
// state: [batch, heads, D, D], S[i][j] sums k_i v_j.
YOCO_HD constexpr int64_t gret_state_offset(int64_t b, int64_t h, int64_t i, int64_t j, int64_t heads,
                                            int64_t head_dim) {
  return ((b * heads + h) * head_dim + i) * head_dim + j;
}

struct GretCta {
  int64_t batch, head, slice;
};
YOCO_HD constexpr int64_t gret_num_ctas(int64_t batch, int64_t heads, int64_t slices) { return batch * heads * slices; }
YOCO_HD constexpr GretCta gret_cta(int64_t cta, int64_t heads, int64_t slices) {
  return GretCta{cta / (heads * slices), (cta / slices) % heads, cta % slices};
}
// First V column of a slice.
YOCO_HD constexpr int64_t gret_slice_begin(int64_t slice, int64_t slice_cols) { return slice * slice_cols; }

// Whether the compiled kernel supports this (head_dim, slice_cols) pair: the
// state slice is head_dim x slice_cols fp32 over 128 threads, at most 64
// registers a thread.
YOCO_HD constexpr bool gret_slice_supported(int64_t head_dim, int64_t slice_cols) {
  const bool d_ok = head_dim == 64 || head_dim == 128 || head_dim == 256;
  const bool s_ok = slice_cols == 16 || slice_cols == 32 || slice_cols == 64;
  return d_ok && s_ok && slice_cols <= head_dim && head_dim * slice_cols <= 8192;
}

inline bool gret_plan_valid(const GretChunkShape& s, const GretChunkPlan& p) {
  return p.chunk == 64 && p.segments == 1 && gret_slice_supported(s.head_dim, p.slice_cols) &&
         p.slices * static_cast<int64_t>(p.slice_cols) == s.head_dim;
}

// Host planner: the widest slice whose grid covers at least half the SMs;
// each halving of the slice re-reads q and k once more from L2 and repeats
// Q K^T, but doubles the CTAs walking the chain. Measured on H100 (v1,
// mma.sync): at (1, 32K-512K, 24, 128) v4 (96 CTAs) beats v2 by 10 % and v8
// by 11 %; at (2, 16K, 16, 128) v4 (128 CTAs) beats v2 and v8.
inline GretChunkPlan plan_gret_chunk(const GretChunkShape& s, int sm_count) {
  GretChunkPlan p;
  p.chunk = 64;
  p.segments = 1;
  const int64_t bh = s.batch * s.heads;
  int cols = 64;
  while (cols > 16 && !gret_slice_supported(s.head_dim, cols)) cols /= 2;
  while (cols > 16 && 2 * bh * (s.head_dim / cols) < sm_count && gret_slice_supported(s.head_dim, cols / 2)) cols /= 2;
  p.slice_cols = cols;
  p.slices = static_cast<int>(s.head_dim / cols);
  if (p.slices < 1) p.slices = 1;
  return p;
}

}  // namespace yoco::cuda

#if defined(YOCO_GRET_EMULATION) && !defined(__CUDACC__)
#include <algorithm>
#include <cmath>
#include <vector>

#include "dtype.hpp"
#include "tensor.hpp"

namespace yoco::cuda {

// The kernel's G: inclusive cumsum over a 64-token chunk as 32 lanes do it,
// each lane summing a pair, a Hillis-Steele warp scan of the pair sums, then
// G[2l] = (exclusive prefix) + x0, G[2l+1] = (inclusive prefix).
inline void gret_emulate_chunk_scan(const float* lg64, float* G64) {
  float x0[32], x1[32], sc[32];
  for (int l = 0; l < 32; ++l) {
    x0[l] = lg64[2 * l];
    x1[l] = lg64[2 * l + 1];
    sc[l] = x0[l] + x1[l];
  }
  for (int off = 1; off < 32; off *= 2) {
    float nx[32];
    for (int l = 0; l < 32; ++l) nx[l] = l >= off ? sc[l] + sc[l - off] : sc[l];
    for (int l = 0; l < 32; ++l) sc[l] = nx[l];
  }
  for (int l = 0; l < 32; ++l) {
    const float ex = l > 0 ? sc[l - 1] : 0.0f;
    G64[2 * l] = ex + x0[l];
    G64[2 * l + 1] = sc[l];
  }
}

struct GretEmulation {
  Mat<double> o;      // [n, D], rounded to bf16 as the kernel writes it
  Mat<double> state;  // [D, D], fp32 values
};

// Host mirror of launch_gret_chunk for one (batch, head): chunk 64; fp32
// scan, decays, accumulators and state; bf16 operands at exactly the kernel's
// rounding points: the masked-and-decayed A = (Q K^T) .* E, the decayed
// K' = K .* exp(G_C - G_j), and the state copy S^ used in Q S^. Inputs q, k,
// v must already be bf16 values. Slices do not change the arithmetic.
inline GretEmulation gret_chunk_emulate(const Mat<double>& q, const Mat<double>& k, const Mat<double>& v,
                                        const Vec<double>& log_gamma, const Mat<double>* s0) {
  constexpr int C = 64;
  const int64_t n = q.rows(), D = q.cols();
  using MF = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  MF S = s0 ? MF(s0->cast<float>()) : MF(MF::Zero(D, D));
  GretEmulation r;
  r.o.resize(n, D);
  auto bf = [](float x) { return round_to_bf16(x); };
  for (int64_t t0 = 0; t0 < n; t0 += C) {
    const int64_t nv = std::min<int64_t>(C, n - t0);
    MF Q = MF::Zero(C, D), K = MF::Zero(C, D), V = MF::Zero(C, D);
    float lg[C] = {}, G[C];
    for (int64_t j = 0; j < nv; ++j) {
      Q.row(j) = q.row(t0 + j).cast<float>();
      K.row(j) = k.row(t0 + j).cast<float>();
      V.row(j) = v.row(t0 + j).cast<float>();
      lg[j] = static_cast<float>(log_gamma(t0 + j));
    }
    gret_emulate_chunk_scan(lg, G);
    const float GC = G[C - 1];
    MF Sh = S.unaryExpr(bf);  // S^: the bf16 copy of the incoming state
    MF A = Q * K.transpose();
    for (int i = 0; i < C; ++i)
      for (int j = 0; j < C; ++j)
        A(i, j) = j <= i ? bf(A(i, j) * std::exp(std::min(G[i] - G[j], 0.0f))) : 0.0f;
    MF O = Q * Sh;
    for (int i = 0; i < C; ++i) O.row(i) *= std::exp(std::min(G[i], 0.0f));
    O += A * V;
    for (int64_t j = 0; j < nv; ++j)
      for (int64_t c = 0; c < D; ++c) r.o(t0 + j, c) = round_to_bf16(O(j, c));
    MF Kd = K;
    for (int j = 0; j < C; ++j)
      for (int64_t c = 0; c < D; ++c) Kd(j, c) = bf(K(j, c) * std::exp(std::min(GC - G[j], 0.0f)));
    S *= std::exp(std::min(GC, 0.0f));
    S += Kd.transpose() * V;
  }
  r.state = S.cast<double>();
  return r;
}

}  // namespace yoco::cuda
#endif
