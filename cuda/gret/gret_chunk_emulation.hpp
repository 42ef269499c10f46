#pragma once
// The host mirror of the gRet chunk kernels' arithmetic (cuda/gret/gret_chunk_v*.cu): the same chunk,
// the same bf16 rounding points, the same fp32 scan of the log-decays, in one launch or in segments as
// the planner splits one (gret_plan.hpp). Host code only (Eigen): the tests check the algorithm with
// it before a GPU sees it, and its error is the "CPU computation that rounds what the kernel rounds"
// of DESIGN.md 6 that the GPU tests' bounds and `yoco check gret`'s tolerance are derived from.
#include <algorithm>
#include <cmath>
#include <vector>

#include "dtype.hpp"
#include "gret/gret_plan.hpp"
#include "tensor.hpp"

namespace yoco::cuda {

// The kernel's G over one 64-token sub-tile: inclusive cumsum as 32 lanes do
// it, each lane summing a pair, a Hillis-Steele warp scan of the pair sums,
// then G[2l] = (exclusive prefix) + x0, G[2l+1] = (inclusive prefix).
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
// A chunk of C = 64 m tokens (v5 at 128 / 256): each 64-token sub-tile
// scanned as above, plus the carry of the earlier sub-tiles (fp32, in order):
// G[64 s + j] = carry_s + local_j, carry_{s+1} = carry_s + local_63. At C 64
// it is the sub-tile scan itself (0 + x == x).
inline void gret_emulate_chunk_scan(const float* lg, float* G, int chunk) {
  float carry = 0.0f;
  for (int s0 = 0; s0 < chunk; s0 += 64) {
    float local[64];
    gret_emulate_chunk_scan(lg + s0, local);
    for (int j = 0; j < 64; ++j) G[s0 + j] = carry + local[j];
    carry += local[63];
  }
}

struct GretEmulation {
  Mat<double> o;      // [n, D], rounded to bf16 as the kernel writes it
  Mat<double> state;  // [D, D], fp32 values
};

// Host mirror of launch_gret_chunk for one (batch, head) at chunk C (64, 128
// or 256; the kernels' C); fp32
// scan, decays, accumulators and state; bf16 operands at exactly the kernel's
// rounding points: the masked-and-decayed A = (Q K^T) .* E, the decayed
// K' = K .* exp(G_C - G_j), and the state copy S^ used in Q S^. Inputs q, k,
// v must already be bf16 values. Slices do not change the arithmetic.
inline GretEmulation gret_chunk_emulate(const Mat<double>& q, const Mat<double>& k, const Mat<double>& v,
                                        const Vec<double>& log_gamma, const Mat<double>* s0, int chunk = 64) {
  const int C = chunk;
  const int64_t n = q.rows(), D = q.cols();
  using MF = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  MF S = s0 ? MF(s0->cast<float>()) : MF(MF::Zero(D, D));
  GretEmulation r;
  r.o.resize(n, D);
  auto bf = [](float x) { return round_to_bf16(x); };
  for (int64_t t0 = 0; t0 < n; t0 += C) {
    const int64_t nv = std::min<int64_t>(C, n - t0);
    MF Q = MF::Zero(C, D), K = MF::Zero(C, D), V = MF::Zero(C, D);
    std::vector<float> lg(static_cast<size_t>(C), 0.0f), G(static_cast<size_t>(C));
    for (int64_t j = 0; j < nv; ++j) {
      Q.row(j) = q.row(t0 + j).cast<float>();
      K.row(j) = k.row(t0 + j).cast<float>();
      V.row(j) = v.row(t0 + j).cast<float>();
      lg[static_cast<size_t>(j)] = static_cast<float>(log_gamma(t0 + j));
    }
    gret_emulate_chunk_scan(lg.data(), G.data(), C);
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

// Host mirror of the segmented launch (P > 1): phase 1 (local end state of
// segments 0..P-2 from zero, Gamma_p = fp32 sum of the chunks' scan totals),
// phase 2 (fp32 scan), phase 3 (each segment from S_in(p)).
inline GretEmulation gret_chunk_emulate_segmented(const Mat<double>& q, const Mat<double>& k, const Mat<double>& v,
                                                  const Vec<double>& log_gamma, const Mat<double>* s0, int segments,
                                                  int chunk = 64) {
  const int64_t C = chunk, n = q.rows(), D = q.cols(), nc = gret_num_chunks(n, C);
  Mat<double> S_in = s0 ? *s0 : Mat<double>(Mat<double>::Zero(D, D));
  GretEmulation r;
  r.o.resize(n, D);
  for (int p = 0; p < segments; ++p) {
    const int64_t r0 = std::min(n, gret_segment_begin(p, nc, segments) * C);
    const int64_t r1 = std::min(n, gret_segment_begin(p + 1, nc, segments) * C);
    const int64_t len = r1 - r0;
    const Mat<double> Sin_f = S_in.cast<float>().cast<double>();
    const GretEmulation e = gret_chunk_emulate(q.middleRows(r0, len), k.middleRows(r0, len), v.middleRows(r0, len),
                                               log_gamma.segment(r0, len), &Sin_f, chunk);
    if (len > 0) r.o.middleRows(r0, len) = e.o;
    if (p + 1 == segments) {
      r.state = e.state;
      break;
    }
    const GretEmulation loc = gret_chunk_emulate(q.middleRows(r0, len), k.middleRows(r0, len), v.middleRows(r0, len),
                                                 log_gamma.segment(r0, len), nullptr, chunk);
    float gam = 0.0f;
    for (int64_t c0 = r0; c0 < r1; c0 += C) {
      std::vector<float> lg(static_cast<size_t>(C), 0.0f), G(static_cast<size_t>(C));
      for (int64_t j = 0; j < C && c0 + j < r1; ++j) lg[static_cast<size_t>(j)] = static_cast<float>(log_gamma(c0 + j));
      gret_emulate_chunk_scan(lg.data(), G.data(), chunk);
      gam += G[static_cast<size_t>(C - 1)];
    }
    const float f = std::exp(std::min(gam, 0.0f));
    Mat<double> next(D, D);
    for (int64_t i = 0; i < D * D; ++i)
      next.data()[i] = std::fma(f, static_cast<float>(S_in.data()[i]), static_cast<float>(loc.state.data()[i]));
    S_in = next;
  }
  return r;
}

}  // namespace yoco::cuda
