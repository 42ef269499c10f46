#pragma once
// Gated retention for one head, in the three paradigms of the paper (§3.1,
// appendix B), which must compute the same function:
//
//   S_t = gamma_t S_{t-1} + k_t^T v_t,   o_t = q_t S_t,   S_0 = initial state
//
// q, k, v are [n, D] (k already scaled by D^-1/2), log_gamma is [n] with
// entries <= 0, the state is [D_k, D_v] (the authors' layout: S[i][j] sums
// k_i v_j). Each returns o [n, D] and the state after the last token.
#include <cstdint>
#include <string>

#include "tensor.hpp"

namespace yoco {

enum class GretParadigm { parallel, recurrent, chunkwise };
const char* paradigm_name(GretParadigm p);
// "parallel" | "recurrent" | "chunkwise"; throws InputError otherwise.
GretParadigm parse_paradigm(const std::string& s);

template <class T>
struct GretResult {
  Mat<T> o;
  Mat<T> state;
};

// O(n^2 D): (Q K^T .* Dm) V + diag(decay to start) Q S0, where
// Dm(i, j) = exp(sum_{t=j+1..i} log_gamma_t) for j <= i. Each exponent is a
// segment sum of non-positive terms, never a difference of large cumulative sums.
template <class T>
GretResult<T> gret_parallel(const Eigen::Ref<const Mat<T>>& q, const Eigen::Ref<const Mat<T>>& k,
                            const Eigen::Ref<const Mat<T>>& v, const Eigen::Ref<const Vec<T>>& log_gamma,
                            const Mat<T>* initial_state);

// O(n D^2): one step per token; the form used for decoding.
template <class T>
GretResult<T> gret_recurrent(const Eigen::Ref<const Mat<T>>& q, const Eigen::Ref<const Mat<T>>& k,
                             const Eigen::Ref<const Mat<T>>& v, const Eigen::Ref<const Vec<T>>& log_gamma,
                             const Mat<T>* initial_state);

// O(n (B + D) D): parallel inside chunks of `chunk` tokens, recurrent across
// them. Cumulative log-decays b restart at every chunk; every exponent used
// (b_i - b_j for j <= i, b_i, b_last - b_j) is <= 0 by construction.
template <class T>
GretResult<T> gret_chunkwise(const Eigen::Ref<const Mat<T>>& q, const Eigen::Ref<const Mat<T>>& k,
                             const Eigen::Ref<const Mat<T>>& v, const Eigen::Ref<const Vec<T>>& log_gamma,
                             const Mat<T>* initial_state, int64_t chunk);

template <class T>
GretResult<T> gret_run(GretParadigm p, const Eigen::Ref<const Mat<T>>& q, const Eigen::Ref<const Mat<T>>& k,
                       const Eigen::Ref<const Mat<T>>& v, const Eigen::Ref<const Vec<T>>& log_gamma,
                       const Mat<T>* initial_state, int64_t chunk);

}  // namespace yoco
