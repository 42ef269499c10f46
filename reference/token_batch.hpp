#pragma once
// A batch of B token sequences of equal length, stacked row-wise: row
// b * n + i of an activation matrix is token i of sequence b.
#include <cstdint>
#include <string>
#include <vector>

#include "errors.hpp"

namespace yoco {

struct TokenBatch {
  int64_t batch = 0, length = 0;
  std::vector<int64_t> ids;  // batch * length, sequence-major

  static TokenBatch from_sequences(const std::vector<std::vector<int64_t>>& seqs) {
    TokenBatch tb;
    tb.batch = static_cast<int64_t>(seqs.size());
    if (tb.batch == 0) throw InputError("empty batch");
    tb.length = static_cast<int64_t>(seqs[0].size());
    for (const auto& s : seqs) {
      if (static_cast<int64_t>(s.size()) != tb.length)
        throw InputError("all sequences of a batch must have the same length (got " + std::to_string(tb.length) +
                         " and " + std::to_string(s.size()) + ")");
      tb.ids.insert(tb.ids.end(), s.begin(), s.end());
    }
    return tb;
  }
  static TokenBatch single(const std::vector<int64_t>& s) { return from_sequences({s}); }
  // Columns [start, start + n) of every sequence.
  TokenBatch slice(int64_t start, int64_t n) const {
    TokenBatch tb;
    tb.batch = batch;
    tb.length = n;
    for (int64_t b = 0; b < batch; ++b)
      tb.ids.insert(tb.ids.end(), ids.begin() + b * length + start, ids.begin() + b * length + start + n);
    return tb;
  }
};

// Absolute positions of the rows of a stacked [batch * n] block starting at pos0.
inline std::vector<int64_t> stacked_positions(int64_t batch, int64_t n, int64_t pos0) {
  std::vector<int64_t> p(static_cast<size_t>(batch * n));
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t i = 0; i < n; ++i) p[b * n + i] = pos0 + i;
  return p;
}

}  // namespace yoco
