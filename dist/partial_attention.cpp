#include "partial_attention.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace yoco::dist {

template <class T>
void attention_partial(const Mat<T>& q, const std::vector<const Mat<T>*>& k, const std::vector<const Mat<T>*>& v,
                       int64_t rows, int64_t n_heads, int64_t n_kv_heads, int64_t head_dim, double scale,
                       std::vector<double>& out) {
  const int64_t group = n_heads / n_kv_heads, batch = q.rows();
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t h = 0; h < n_heads; ++h) {
      const int64_t hk = h / group;
      Vec<double> s(rows);
      for (int64_t j = 0; j < rows; ++j)
        s(j) = static_cast<double>(
                   (q.block(b, h * head_dim, 1, head_dim).cwiseProduct(k[b]->block(j, hk * head_dim, 1, head_dim))).sum()) *
               scale;
      const double m = rows > 0 ? s.maxCoeff() : -std::numeric_limits<double>::infinity();
      double l = 0;
      std::vector<double> acc(head_dim, 0.0);
      for (int64_t j = 0; j < rows; ++j) {
        const double p = std::exp(s(j) - m);
        l += p;
        for (int64_t e = 0; e < head_dim; ++e) acc[e] += p * static_cast<double>((*v[b])(j, hk * head_dim + e));
      }
      out.push_back(m);
      out.push_back(l);
      out.insert(out.end(), acc.begin(), acc.end());
    }
}

template <class T>
Mat<T> attention_combine(const std::vector<double>& partials, int ranks, int64_t batch, int64_t n_heads,
                         int64_t head_dim) {
  const int64_t w = partial_width(head_dim), per_rank = batch * n_heads * w;
  Mat<T> out(batch, n_heads * head_dim);
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t h = 0; h < n_heads; ++h) {
      const int64_t at = (b * n_heads + h) * w;
      double m = -std::numeric_limits<double>::infinity();
      for (int r = 0; r < ranks; ++r) m = std::max(m, partials[r * per_rank + at]);
      double l = 0;
      std::vector<double> acc(head_dim, 0.0);
      for (int r = 0; r < ranks; ++r) {
        const double* p = &partials[r * per_rank + at];
        if (p[1] == 0) continue;  // a rank without keys for this sequence
        const double f = std::exp(p[0] - m);
        l += f * p[1];
        for (int64_t e = 0; e < head_dim; ++e) acc[e] += f * p[2 + e];
      }
      for (int64_t e = 0; e < head_dim; ++e) out(b, h * head_dim + e) = static_cast<T>(acc[e] / l);
    }
  return out;
}

AttentionAccumulator::AttentionAccumulator(int64_t batch, int64_t n, int64_t pos0, int64_t n_heads, int64_t head_dim)
    : batch_(batch), n_(n), pos0_(pos0), heads_(n_heads), dim_(head_dim),
      m_(batch * n * n_heads, -std::numeric_limits<double>::infinity()), l_(batch * n * n_heads, 0.0),
      acc_(batch * n * n_heads * head_dim, 0.0) {}

template <class T>
void AttentionAccumulator::add(const Mat<T>& q, const Mat<T>& k, const Mat<T>& v, int64_t m, int64_t k_pos0,
                               int64_t n_kv_heads, double scale) {
  const int64_t group = heads_ / n_kv_heads;
  for (int64_t b = 0; b < batch_; ++b)
    for (int64_t i = 0; i < n_; ++i) {
      const int64_t qpos = pos0_ + i, visible = std::clamp<int64_t>(qpos - k_pos0 + 1, 0, m);
      if (visible == 0) continue;
      for (int64_t h = 0; h < heads_; ++h) {
        const int64_t hk = h / group, at = (b * n_ + i) * heads_ + h;
        Vec<double> s(visible);
        for (int64_t j = 0; j < visible; ++j)
          s(j) = static_cast<double>((q.block(b * n_ + i, h * dim_, 1, dim_)
                                          .cwiseProduct(k.block(b * m + j, hk * dim_, 1, dim_)))
                                         .sum()) *
                 scale;
        const double mx = std::max(m_[at], s.maxCoeff()), f = std::exp(m_[at] - mx);
        l_[at] *= f;
        double* acc = &acc_[at * dim_];
        for (int64_t e = 0; e < dim_; ++e) acc[e] *= f;
        for (int64_t j = 0; j < visible; ++j) {
          const double p = std::exp(s(j) - mx);
          l_[at] += p;
          for (int64_t e = 0; e < dim_; ++e) acc[e] += p * static_cast<double>(v(b * m + j, hk * dim_ + e));
        }
        m_[at] = mx;
      }
    }
}

void AttentionAccumulator::partials(std::vector<double>& out) const {
  for (int64_t at = 0; at < batch_ * n_ * heads_; ++at) {
    out.push_back(m_[at]);
    out.push_back(l_[at]);
    out.insert(out.end(), acc_.begin() + at * dim_, acc_.begin() + (at + 1) * dim_);
  }
}

template <class T>
Mat<T> AttentionAccumulator::result() const {
  Mat<T> out(batch_ * n_, heads_ * dim_);
  for (int64_t r = 0; r < batch_ * n_; ++r)
    for (int64_t h = 0; h < heads_; ++h) {
      const int64_t at = r * heads_ + h;
      for (int64_t e = 0; e < dim_; ++e) out(r, h * dim_ + e) = static_cast<T>(l_[at] > 0 ? acc_[at * dim_ + e] / l_[at] : 0.0);
    }
  return out;
}

template void AttentionAccumulator::add<float>(const Mat<float>&, const Mat<float>&, const Mat<float>&, int64_t, int64_t,
                                               int64_t, double);
template void AttentionAccumulator::add<double>(const Mat<double>&, const Mat<double>&, const Mat<double>&, int64_t,
                                                int64_t, int64_t, double);
template Mat<float> AttentionAccumulator::result<float>() const;
template Mat<double> AttentionAccumulator::result<double>() const;

template void attention_partial<float>(const Mat<float>&, const std::vector<const Mat<float>*>&,
                                       const std::vector<const Mat<float>*>&, int64_t, int64_t, int64_t, int64_t,
                                       double, std::vector<double>&);
template void attention_partial<double>(const Mat<double>&, const std::vector<const Mat<double>*>&,
                                        const std::vector<const Mat<double>*>&, int64_t, int64_t, int64_t, int64_t,
                                        double, std::vector<double>&);
template Mat<float> attention_combine<float>(const std::vector<double>&, int, int64_t, int64_t, int64_t);
template Mat<double> attention_combine<double>(const std::vector<double>&, int, int64_t, int64_t, int64_t);

}  // namespace yoco::dist
