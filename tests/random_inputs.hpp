#pragma once
// Deterministic random test inputs (std::mt19937_64, fixed seeds).
#include <cstdint>
#include <random>

#include "ops.hpp"
#include "tensor.hpp"

namespace yoco::testing {

template <class T>
Mat<T> randn(int64_t rows, int64_t cols, uint64_t seed, double scale = 1.0) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> nd(0.0, scale);
  Mat<T> m(rows, cols);
  for (int64_t i = 0; i < m.size(); ++i) m.data()[i] = static_cast<T>(nd(rng));
  return m;
}

// log gamma = logsigmoid(randn) / n: n = 0.1 decays to nothing within a few
// tokens, n = 16 (the model's value) keeps memory over hundreds of tokens.
template <class T>
Vec<T> log_gates(int64_t n, double normalizer, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> nd(0.0, 1.0);
  Vec<T> g(n);
  for (int64_t i = 0; i < n; ++i) g(i) = static_cast<T>(logsigmoid(nd(rng)) / normalizer);
  return g;
}

}  // namespace yoco::testing
