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

template void attention_partial<float>(const Mat<float>&, const std::vector<const Mat<float>*>&,
                                       const std::vector<const Mat<float>*>&, int64_t, int64_t, int64_t, int64_t,
                                       double, std::vector<double>&);
template void attention_partial<double>(const Mat<double>&, const std::vector<const Mat<double>*>&,
                                        const std::vector<const Mat<double>*>&, int64_t, int64_t, int64_t, int64_t,
                                        double, std::vector<double>&);
template Mat<float> attention_combine<float>(const std::vector<double>&, int, int64_t, int64_t, int64_t);
template Mat<double> attention_combine<double>(const std::vector<double>&, int, int64_t, int64_t, int64_t);

}  // namespace yoco::dist
