#pragma once
// The log-sum-exp of one attention row as the flash prefill kernels form it, in fp32, beside the
// exact (fp64) one on the same bf16 inputs: the "CPU computation that rounds what the kernel
// rounds" of DESIGN.md 6, from which the tests derive the LSE's bound (2x its error).
//
// What the kernels round (cuda/attention/flash_prefill_v1.cu, flash_prefill_wgmma_rows.cuh): fp32
// scores from exact bf16 products; an online softmax in the log2 domain over tiles of Bc keys
// (m = max(m, tile max * scale log2 e), p = exp2(fma(s, scale log2 e, -m)), l = l corr + tile sum);
// each row's sum kept as four partials, one a quad lane (columns 2t, 2t + 1 of every 8), summed by
// two shuffles at the end; LSE = (m + log2 l) ln 2. The tensor cores' order of the dot's sums is
// not IEEE's: a sequential fma stands for it (a few ulp of a score, far below the sums' rounding).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

namespace yoco::cuda_test {

struct LseOfRow {
  double exact = 0;         // fp64 scores and sums
  std::vector<float> fp32;  // the kernels' arithmetic, emulated, one per key tile asked for
};

// Keys lo..hi (inclusive) are visible to the row; the scores are formed once, then the online softmax
// runs over tiles of each size in `tiles` (starting at multiples of it). q(d) and key(j, d) give bf16
// values as float.
template <class Q, class Key>
LseOfRow lse_of_row(int64_t D, int64_t lo, int64_t hi, float scale, const std::vector<int>& tiles, const Q& q,
                    const Key& key) {
  const double sc = static_cast<double>(scale);
  const float sl2 = static_cast<float>(sc * 1.4426950408889634);  // flash_prefill_params.hpp's scale_log2
  const int64_t n = std::max<int64_t>(hi - lo + 1, 0);
  std::vector<float> s(static_cast<size_t>(n));  // fp32 scores of keys lo..hi
  std::vector<double> exact(static_cast<size_t>(n));
  for (int64_t j = lo; j <= hi; ++j) {
    float a = 0.0f;
    double e = 0.0;
    for (int64_t d = 0; d < D; ++d) {
      const float qd = q(d), kd = key(j, d);
      a = std::fma(qd, kd, a);
      e += static_cast<double>(qd) * static_cast<double>(kd);
    }
    s[static_cast<size_t>(j - lo)] = a;
    exact[static_cast<size_t>(j - lo)] = e * sc;
  }
  // A key outside lo..hi is masked: -inf, as the kernels set it before the max.
  auto score = [&](int64_t j) { return j < lo || j > hi ? -INFINITY : s[static_cast<size_t>(j - lo)]; };
  LseOfRow r;
  for (const int bc : tiles) {
    float m = -INFINITY, l[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    for (int64_t t0 = (lo / bc) * bc; t0 <= hi; t0 += bc) {
      float tile_max = -INFINITY;
      for (int c = 0; c < bc; ++c) tile_max = std::max(tile_max, score(t0 + c));
      const float m_new = std::max(m, tile_max * sl2);
      const float m_use = m_new == -INFINITY ? 0.0f : m_new;
      const float corr = std::exp2(m - m_use);
      m = m_new;
      float sum[4] = {0.0f, 0.0f, 0.0f, 0.0f};
      for (int c = 0; c + 1 < bc; c += 2) {
        const float p0 = std::exp2(std::fma(score(t0 + c), sl2, -m_use));
        const float p1 = std::exp2(std::fma(score(t0 + c + 1), sl2, -m_use));
        sum[(c % 8) / 2] += p0 + p1;
      }
      for (int t = 0; t < 4; ++t) l[t] = l[t] * corr + sum[t];
    }
    const float lsum = (l[0] + l[1]) + (l[2] + l[3]);
    r.fp32.push_back(lsum > 0.0f ? (m + std::log2(lsum)) * 0.69314718055994531f : -INFINITY);
  }
  if (exact.empty()) {
    r.exact = -INFINITY;
    return r;
  }
  const double mx = *std::max_element(exact.begin(), exact.end());
  double total = 0;
  for (double x : exact) total += std::exp(x - mx);
  r.exact = mx + std::log(total);
  return r;
}

// The bound DESIGN.md 6 gives the kernels' LSE on these rows: 2x the emulation's largest error
// against the exact LSE, plus one fp32 ulp of the largest |LSE| (a row the emulation gets exactly
// right must not make the bound 0).
inline double derived_lse_bound(const std::vector<LseOfRow>& rows) {
  double worst = 0, largest = 0;
  for (const LseOfRow& r : rows) {
    if (!std::isfinite(r.exact)) continue;
    for (const float f : r.fp32) worst = std::max(worst, std::abs(static_cast<double>(f) - r.exact));
    largest = std::max(largest, std::abs(r.exact));
  }
  const double ulp = std::nextafter(static_cast<float>(largest), INFINITY) - static_cast<float>(largest);
  return 2.0 * worst + ulp;
}

}  // namespace yoco::cuda_test
