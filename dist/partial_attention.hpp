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

// `ranks` partials laid out one after another (each batch * H * width
// doubles) combined into [batch, H * Da], in rank order on every rank.
template <class T>
Mat<T> attention_combine(const std::vector<double>& partials, int ranks, int64_t batch, int64_t n_heads,
                         int64_t head_dim);

}  // namespace yoco::dist
