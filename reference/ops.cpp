#include "ops.hpp"

#include <algorithm>
#include <limits>
#include <stdexcept>

#include "memory.hpp"

namespace yoco {

template <class T>
Mat<T> rms_norm(const Eigen::Ref<const Mat<T>>& x, const T* w, double eps) {
  Mat<T> y(x.rows(), x.cols());
  const T e = static_cast<T>(eps);
  for (int64_t r = 0; r < x.rows(); ++r) {
    const T inv = T(1) / std::sqrt(x.row(r).squaredNorm() / static_cast<T>(x.cols()) + e);
    y.row(r) = x.row(r) * inv;
  }
  if (w) y.array().rowwise() *= Eigen::Map<const Eigen::Array<T, 1, Eigen::Dynamic>>(w, x.cols());
  return y;
}

template <class T>
void rms_norm_heads_inplace(Mat<T>& x, int64_t head_dim, double eps) {
  const T e = static_cast<T>(eps);
  const int64_t heads = x.cols() / head_dim;
  for (int64_t r = 0; r < x.rows(); ++r)
    for (int64_t h = 0; h < heads; ++h) {
      auto seg = x.row(r).segment(h * head_dim, head_dim);
      seg *= T(1) / std::sqrt(seg.squaredNorm() / static_cast<T>(head_dim) + e);
    }
}

std::vector<double> rope_inv_freq_linspace(int64_t head_dim, double theta) {
  const int64_t half = head_dim / 2;
  std::vector<double> f(half);
  for (int64_t i = 0; i < half; ++i) {
    // torch.linspace(0, 1, 1) is [0]: a single pair does not rotate-scale.
    const double t = half > 1 ? static_cast<double>(i) / static_cast<double>(half - 1) : 0.0;
    f[i] = std::pow(theta, -t);
  }
  return f;
}

std::vector<double> rope_inv_freq_pow(int64_t head_dim, double theta) {
  const int64_t half = head_dim / 2;
  std::vector<double> f(half);
  for (int64_t i = 0; i < half; ++i) f[i] = std::pow(theta, -2.0 * static_cast<double>(i) / static_cast<double>(head_dim));
  return f;
}

template <class T>
void apply_rope(Mat<T>& x, int64_t n_heads, int64_t head_dim, const std::vector<int64_t>& positions,
                const std::vector<double>& inv_freq, RopeLayout layout) {
  if (static_cast<int64_t>(positions.size()) != x.rows()) throw std::logic_error("apply_rope: positions/rows mismatch");
  const int64_t half = head_dim / 2;
  std::vector<T> c(half), s(half);
  for (int64_t r = 0; r < x.rows(); ++r) {
    for (int64_t i = 0; i < half; ++i) {
      const double a = static_cast<double>(positions[r]) * inv_freq[i];
      c[i] = static_cast<T>(std::cos(a));
      s[i] = static_cast<T>(std::sin(a));
    }
    T* row = x.row(r).data();
    for (int64_t h = 0; h < n_heads; ++h) {
      T* p = row + h * head_dim;
      for (int64_t i = 0; i < half; ++i) {
        const int64_t a = layout == RopeLayout::interleaved ? 2 * i : i;
        const int64_t b = layout == RopeLayout::interleaved ? 2 * i + 1 : i + half;
        const T x0 = p[a], x1 = p[b];
        p[a] = x0 * c[i] - x1 * s[i];
        p[b] = x1 * c[i] + x0 * s[i];
      }
    }
  }
}

template <class T>
Mat<T> swiglu_ffn(const Eigen::Ref<const Mat<T>>& x, const Mat<T>& w1, const Mat<T>& w3, const Mat<T>& w2) {
  ActivationGuard guard(2 * x.rows() * w1.rows() * static_cast<int64_t>(sizeof(T)));
  Mat<T> a = x * w1.transpose();
  const Mat<T> b = x * w3.transpose();
  a = a.unaryExpr([](T z) { return silu(z); }).cwiseProduct(b);
  return a * w2.transpose();
}

template <class T>
Mat<T> attention(const Eigen::Ref<const Mat<T>>& q, const Eigen::Ref<const Mat<T>>& k,
                 const Eigen::Ref<const Mat<T>>& v, int64_t n_heads, int64_t n_kv_heads, int64_t head_dim,
                 int64_t q_pos0, int64_t k_pos0, int64_t window, double scale) {
  const int64_t n = q.rows(), m = k.rows();
  const int64_t group = n_heads / n_kv_heads;
  Mat<T> out = Mat<T>::Zero(n, n_heads * head_dim);
  // Queries in blocks so that the score matrix stays small at long lengths.
  constexpr int64_t kBlock = 128;
  ActivationGuard guard(std::min(kBlock, n) * m * static_cast<int64_t>(sizeof(T)));
  const T sc = static_cast<T>(scale);
  for (int64_t i0 = 0; i0 < n; i0 += kBlock) {
    const int64_t nb = std::min(kBlock, n - i0);
    // Key columns any query of the block can see.
    const int64_t hi_pos = q_pos0 + i0 + nb - 1;
    const int64_t lo_pos = window > 0 ? q_pos0 + i0 - window + 1 : k_pos0;
    const int64_t j0 = std::clamp<int64_t>(lo_pos - k_pos0, 0, m);
    const int64_t j1 = std::clamp<int64_t>(hi_pos - k_pos0 + 1, 0, m);
    if (j1 <= j0) continue;
    const int64_t mb = j1 - j0;
    for (int64_t h = 0; h < n_heads; ++h) {
      const int64_t hk = h / group;
      Mat<T> s = (q.block(i0, h * head_dim, nb, head_dim) * k.block(j0, hk * head_dim, mb, head_dim).transpose()) * sc;
      for (int64_t i = 0; i < nb; ++i) {
        // Visible keys of one query form one contiguous range [lo, hi).
        const int64_t qpos = q_pos0 + i0 + i;
        const int64_t lo = std::clamp<int64_t>((window > 0 ? qpos - window + 1 : k_pos0) - k_pos0 - j0, 0, mb);
        const int64_t hi = std::clamp<int64_t>(qpos - k_pos0 - j0 + 1, 0, mb);
        auto row = s.row(i);
        if (hi <= lo) {
          row.setZero();  // no visible key: output 0 (cannot happen in the models)
          continue;
        }
        auto seg = row.segment(lo, hi - lo).array();
        seg = (seg - seg.maxCoeff()).exp();
        seg /= seg.sum();
        row.head(lo).setZero();
        row.tail(mb - hi).setZero();
      }
      out.block(i0, h * head_dim, nb, head_dim).noalias() = s * v.block(j0, hk * head_dim, mb, head_dim);
    }
  }
  return out;
}

#define YOCO_INSTANTIATE_OPS(T)                                                                                    \
  template Mat<T> rms_norm<T>(const Eigen::Ref<const Mat<T>>&, const T*, double);                                  \
  template void rms_norm_heads_inplace<T>(Mat<T>&, int64_t, double);                                               \
  template void apply_rope<T>(Mat<T>&, int64_t, int64_t, const std::vector<int64_t>&, const std::vector<double>&, \
                              RopeLayout);                                                                         \
  template Mat<T> swiglu_ffn<T>(const Eigen::Ref<const Mat<T>>&, const Mat<T>&, const Mat<T>&, const Mat<T>&);     \
  template Mat<T> attention<T>(const Eigen::Ref<const Mat<T>>&, const Eigen::Ref<const Mat<T>>&,                   \
                               const Eigen::Ref<const Mat<T>>&, int64_t, int64_t, int64_t, int64_t, int64_t,       \
                               int64_t, double);
YOCO_INSTANTIATE_OPS(float)
YOCO_INSTANTIATE_OPS(double)

}  // namespace yoco
