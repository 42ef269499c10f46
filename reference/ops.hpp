#pragma once
// The building blocks of both models (DESIGN.md §3), on [tokens, features]
// row-major matrices. Each CUDA kernel is checked against one of these.
#include <cmath>
#include <cstdint>
#include <vector>

#include "tensor.hpp"

namespace yoco {

// x / sqrt(mean(x^2) + eps) (* w), row by row. w may be null (no weight).
template <class T>
Mat<T> rms_norm(const Eigen::Ref<const Mat<T>>& x, const T* w, double eps);

// The same over each group of `head_dim` columns, no weight (gRet's per-head norm).
template <class T>
void rms_norm_heads_inplace(Mat<T>& x, int64_t head_dim, double eps);

// RoPE inverse frequencies for head dim D (D/2 values).
//  YOCO (authors' RetNetRelPos): theta^(-i/(D/2-1)), i.e. theta^-linspace(0,1,D/2).
//  Llama: theta^(-2i/D).
std::vector<double> rope_inv_freq_linspace(int64_t head_dim, double theta);
std::vector<double> rope_inv_freq_pow(int64_t head_dim, double theta);

enum class RopeLayout {
  interleaved,  // pairs (x[2i], x[2i+1]) rotate by pos * f[i]   (YOCO)
  half_split,   // pairs (x[i], x[i+D/2]) rotate by pos * f[i]   (Llama/HF)
};

// Rotates each head of each row of x in place; row r is at position positions[r].
// Angles and their sines are computed in double.
template <class T>
void apply_rope(Mat<T>& x, int64_t n_heads, int64_t head_dim, const std::vector<int64_t>& positions,
                const std::vector<double>& inv_freq, RopeLayout layout);

template <class T>
T logsigmoid(T x) {
  // log(sigmoid(x)) = -softplus(-x), written so that neither branch overflows.
  return x >= T(0) ? -std::log1p(std::exp(-x)) : x - std::log1p(std::exp(x));
}

template <class T>
T silu(T x) {
  return x / (T(1) + std::exp(-x));
}

// x W^T for a [out, in] weight.
template <class T>
Mat<T> linear(const Eigen::Ref<const Mat<T>>& x, const Mat<T>& w) {
  return x * w.transpose();
}

// W2 (silu(W1 x) * W3 x).
template <class T>
Mat<T> swiglu_ffn(const Eigen::Ref<const Mat<T>>& x, const Mat<T>& w1, const Mat<T>& w3, const Mat<T>& w2);

// Softmax attention with GQA. q: [n, H*Da] at absolute positions q_pos0 + i;
// k, v: [m, Hkv*Da] at positions k_pos0 + j. Query i sees key j when
// kpos <= qpos and (window == 0 or kpos > qpos - window). Query head h reads
// KV head h / (H / Hkv). Returns [n, H*Da].
template <class T>
Mat<T> attention(const Eigen::Ref<const Mat<T>>& q, const Eigen::Ref<const Mat<T>>& k,
                 const Eigen::Ref<const Mat<T>>& v, int64_t n_heads, int64_t n_kv_heads, int64_t head_dim,
                 int64_t q_pos0, int64_t k_pos0, int64_t window, double scale);

}  // namespace yoco
