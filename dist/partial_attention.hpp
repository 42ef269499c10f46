#pragma once
// Split-KV attention across ranks: each rank's keys give, per query head, the
// running max m, the sum l of exp(s - m) and the unnormalised output
// sum exp(s - m) v; the ranks' partials combine by log-sum-exp
// (FlashDecoding's combine, across devices). One query row per sequence.
#include <cstdint>
#include <vector>

#include "tensor.hpp"

namespace yoco::dist {

// Doubles per (sequence, head) of a partial: m, l, then head_dim outputs.
inline int64_t partial_width(int64_t head_dim) { return head_dim + 2; }

// q: [batch, H * Da] (one query per sequence); k[b], v[b]: rows [0, rows) of
// that sequence's keys and values [*, Hkv * Da], all visible to the query.
// Appends batch * H * partial_width doubles to `out`.
template <class T>
void attention_partial(const Mat<T>& q, const std::vector<const Mat<T>*>& k, const std::vector<const Mat<T>*>& v,
                       int64_t rows, int64_t n_heads, int64_t n_kv_heads, int64_t head_dim, double scale,
                       std::vector<double>& out);

// Online softmax for a block of query rows over key blocks that arrive one
// by one (ring attention): per (row, head) the running max, sum and
// unnormalised output. Causal by absolute position: key p is seen by a
// query at q >= p. Rows are [batch * n] sequence-major, keys [batch * m].
class AttentionAccumulator {
 public:
  AttentionAccumulator(int64_t batch, int64_t n, int64_t pos0, int64_t n_heads, int64_t head_dim);
  template <class T>
  void add(const Mat<T>& q, const Mat<T>& k, const Mat<T>& v, int64_t m, int64_t k_pos0, int64_t n_kv_heads,
           double scale);
  // Its state as partials (attention_combine's layout; one row per sequence needs n == 1).
  void partials(std::vector<double>& out) const;
  template <class T>
  Mat<T> result() const;

 private:
  int64_t batch_, n_, pos0_, heads_, dim_;
  std::vector<double> m_, l_, acc_;  // [batch * n][heads], acc_ x dim
};

// `ranks` partials laid out one after another (each batch * H * width
// doubles) combined into [batch, H * Da], in rank order on every rank.
template <class T>
Mat<T> attention_combine(const std::vector<double>& partials, int ranks, int64_t batch, int64_t n_heads,
                         int64_t head_dim);

}  // namespace yoco::dist
