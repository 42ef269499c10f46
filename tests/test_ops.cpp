// Ops against values computed by hand or by a naive element-by-element loop.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "ops.hpp"
#include "random_inputs.hpp"

namespace yoco {
namespace {

using testing::randn;

TEST(Rope, InverseFrequencyRules) {
  // YOCO: theta^-linspace(0, 1, D/2).
  const auto y = rope_inv_freq_linspace(8, 10000.0);
  ASSERT_EQ(y.size(), 4u);
  EXPECT_DOUBLE_EQ(y[0], 1.0);
  EXPECT_NEAR(y[1], 0.046415888336127795, 1e-16);
  EXPECT_NEAR(y[2], 0.0021544346900318843, 1e-17);
  EXPECT_NEAR(y[3], 1e-4, 1e-19);
  // Llama: theta^(-2i/D).
  const auto l = rope_inv_freq_pow(8, 10000.0);
  EXPECT_DOUBLE_EQ(l[0], 1.0);
  EXPECT_NEAR(l[1], 0.1, 1e-16);
  EXPECT_NEAR(l[2], 0.01, 1e-17);
  EXPECT_NEAR(l[3], 0.001, 1e-18);
}

TEST(Rope, InterleavedByHand) {
  // D = 4, inverse frequencies [1, 1e-4], position 3: pairs (x0,x1) by 3 rad, (x2,x3) by 3e-4 rad.
  Mat<double> x(1, 4);
  x << 1, 2, 3, 4;
  apply_rope(x, 1, 4, {3}, rope_inv_freq_linspace(4, 10000.0), RopeLayout::interleaved);
  EXPECT_NEAR(x(0, 0), -1.27223251272018, 1e-14);
  EXPECT_NEAR(x(0, 1), -1.8388649851410237, 1e-14);
  EXPECT_NEAR(x(0, 2), 2.998799865018001, 1e-14);
  EXPECT_NEAR(x(0, 3), 4.000899819986501, 1e-14);
}

TEST(Rope, HalfSplitByHand) {
  // D = 4, inverse frequencies [1, 0.01], position 3: pairs (x0,x2) by 3 rad, (x1,x3) by 0.03 rad.
  Mat<double> x(1, 4);
  x << 1, 2, 3, 4;
  apply_rope(x, 1, 4, {3}, rope_inv_freq_pow(4, 10000.0), RopeLayout::half_split);
  EXPECT_NEAR(x(0, 0), -1.413352520780047, 1e-14);
  EXPECT_NEAR(x(0, 1), 1.8791180666879925, 1e-14);
  EXPECT_NEAR(x(0, 2), -2.828857481741469, 1e-14);
  EXPECT_NEAR(x(0, 3), 4.058191135400942, 1e-14);
}

TEST(Rope, PositionZeroIsIdentityAndHeadsAreIndependent) {
  Mat<double> x = randn<double>(2, 12, 3);
  const Mat<double> orig = x;
  apply_rope(x, 3, 4, {0, 5}, rope_inv_freq_linspace(4, 500.0), RopeLayout::interleaved);
  EXPECT_EQ(x.row(0), orig.row(0));
  // Every head of row 1 rotates alike: the same input gives the same output.
  Mat<double> same(1, 12);
  same << orig.row(1).head(4), orig.row(1).head(4), orig.row(1).head(4);
  apply_rope(same, 3, 4, {5}, rope_inv_freq_linspace(4, 500.0), RopeLayout::interleaved);
  EXPECT_EQ(same.row(0).segment(0, 4), same.row(0).segment(4, 4));
  // Rotation keeps each pair's norm.
  EXPECT_NEAR(x.row(1).norm(), orig.row(1).norm(), 1e-12);
}

TEST(RmsNorm, ByHand) {
  Mat<double> x(1, 2);
  x << 3, 4;
  const double w[2] = {2.0, -1.0};
  const auto y = rms_norm<double>(x, w, 0.5);  // mean square 12.5, + eps 0.5 = 13
  EXPECT_NEAR(y(0, 0), 3.0 / std::sqrt(13.0) * 2.0, 1e-15);
  EXPECT_NEAR(y(0, 1), -4.0 / std::sqrt(13.0), 1e-15);
  Mat<double> h(1, 4);
  h << 3, 4, 1, 1;
  rms_norm_heads_inplace(h, 2, 0.0);
  EXPECT_NEAR(h(0, 0), 3.0 / std::sqrt(12.5), 1e-15);
  EXPECT_NEAR(h(0, 3), 1.0, 1e-15);
}

TEST(Gate, LogSigmoid) {
  EXPECT_NEAR(logsigmoid(0.0), -std::log(2.0), 1e-16);
  // log(1 / (1 + e^-2)) evaluated naively carries ~1e-16 error of its own.
  EXPECT_NEAR(logsigmoid(2.0), std::log(1.0 / (1.0 + std::exp(-2.0))), 1e-15);
  EXPECT_NEAR(logsigmoid(-800.0), -800.0, 1e-12);  // no overflow
  EXPECT_EQ(logsigmoid(800.0), -0.0);
  EXPECT_TRUE(std::isfinite(logsigmoid(-100.0f)));
  EXPECT_NEAR(silu(1.0), 1.0 / (1.0 + std::exp(-1.0)), 1e-16);
}

TEST(Ffn, SwiGluByHand) {
  // d = 1, F = 2: W2 (silu(W1 x) * W3 x).
  Mat<double> x(1, 1), w1(2, 1), w3(2, 1), w2(1, 2);
  x << 2;
  w1 << 1, -1;
  w3 << 3, 0.5;
  w2 << 1, 2;
  const auto y = swiglu_ffn<double>(x, w1, w3, w2);
  const double want = silu(2.0) * 6.0 + 2.0 * silu(-2.0) * 1.0;
  EXPECT_NEAR(y(0, 0), want, 1e-14);
}

// Naive attention, one (query, head) at a time.
Mat<double> naive_attention(const Mat<double>& q, const Mat<double>& k, const Mat<double>& v, int64_t H, int64_t Hkv,
                            int64_t D, int64_t q0, int64_t k0, int64_t window, double scale) {
  Mat<double> out = Mat<double>::Zero(q.rows(), H * D);
  for (int64_t i = 0; i < q.rows(); ++i)
    for (int64_t h = 0; h < H; ++h) {
      const int64_t hk = h / (H / Hkv);
      std::vector<double> w(k.rows(), 0.0);
      double mx = -1e300, sum = 0;
      for (int64_t j = 0; j < k.rows(); ++j) {
        const int64_t qp = q0 + i, kp = k0 + j;
        if (kp > qp || (window > 0 && kp <= qp - window)) continue;
        double s = 0;
        for (int64_t c = 0; c < D; ++c) s += q(i, h * D + c) * k(j, hk * D + c);
        w[j] = s * scale;
        mx = std::max(mx, w[j]);
      }
      for (int64_t j = 0; j < k.rows(); ++j) {
        const int64_t qp = q0 + i, kp = k0 + j;
        if (kp > qp || (window > 0 && kp <= qp - window)) {
          w[j] = 0;
          continue;
        }
        w[j] = std::exp(w[j] - mx);
        sum += w[j];
      }
      for (int64_t j = 0; j < k.rows(); ++j)
        for (int64_t c = 0; c < D; ++c) out(i, h * D + c) += w[j] / sum * v(j, hk * D + c);
    }
  return out;
}

struct AttnCase {
  int64_t H, Hkv, n, m, q0, k0, window;
};

void PrintTo(const AttnCase& c, std::ostream* os) {
  *os << "H=" << c.H << " Hkv=" << c.Hkv << " n=" << c.n << " m=" << c.m << " q0=" << c.q0 << " k0=" << c.k0
      << " window=" << c.window;
}

class AttentionVsNaive : public ::testing::TestWithParam<AttnCase> {};

TEST_P(AttentionVsNaive, Matches) {
  const auto c = GetParam();
  const int64_t D = 8;
  const auto q = randn<double>(c.n, c.H * D, 1);
  const auto k = randn<double>(c.m, c.Hkv * D, 2);
  const auto v = randn<double>(c.m, c.Hkv * D, 3);
  const double scale = 1.0 / std::sqrt(8.0);
  const auto got = attention<double>(q, k, v, c.H, c.Hkv, D, c.q0, c.k0, c.window, scale);
  const auto want = naive_attention(q, k, v, c.H, c.Hkv, D, c.q0, c.k0, c.window, scale);
  EXPECT_LE(rms_ratio(got, want), 1e-13);
  // float follows double closely
  const auto gotf = attention<float>(q.cast<float>(), k.cast<float>(), v.cast<float>(), c.H, c.Hkv, D, c.q0, c.k0,
                                     c.window, scale);
  EXPECT_LE(rms_ratio(gotf, want), 1e-5);
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, AttentionVsNaive,
    ::testing::Values(AttnCase{4, 4, 50, 50, 0, 0, 0},       // MHA, causal (GQA group 1)
                      AttnCase{6, 2, 50, 50, 0, 0, 0},       // group 3
                      AttnCase{8, 1, 300, 300, 0, 0, 0},     // group 8, several query blocks
                      AttnCase{6, 2, 17, 120, 103, 0, 0},    // chunk of queries at an offset in a longer cache
                      AttnCase{6, 2, 1, 77, 76, 0, 0},       // one decode query
                      AttnCase{4, 4, 200, 200, 0, 0, 16},    // sliding window
                      AttnCase{4, 4, 40, 55, 100, 85, 16},   // window, keys start mid-sequence
                      AttnCase{4, 4, 130, 130, 0, 0, 1}));   // window 1: each query sees itself only

TEST(Attention, WindowOneReturnsOwnValue) {
  const auto q = randn<double>(5, 4, 1), k = randn<double>(5, 4, 2), v = randn<double>(5, 4, 3);
  const auto o = attention<double>(q, k, v, 1, 1, 4, 0, 0, 1, 0.5);
  EXPECT_LE(rms_ratio(o, v), 1e-15);
}

}  // namespace
}  // namespace yoco
