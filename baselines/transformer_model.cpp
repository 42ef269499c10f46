#include "transformer_model.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include "errors.hpp"
#include "inference_checks.hpp"
#include "ops.hpp"

namespace yoco {

template <class T>
int64_t TransformerCache<T>::kv_cache_bytes() const {
  int64_t b = 0;
  for (const auto* side : {&k, &v})
    for (const auto& layer : *side)
      for (const auto& m : layer) b += m.size() * static_cast<int64_t>(sizeof(T));
  return b;
}

template <class T>
TransformerModel<T>::TransformerModel(ModelConfig cfg, Weights<T> weights) : cfg_(std::move(cfg)), w_(std::move(weights)) {
  if (cfg_.is_yoco()) throw InputError(cfg_.name + " is not a Transformer config");
  freq_ = rope_inv_freq_pow(cfg_.attn_head_dim(), cfg_.rope_theta);
}

template <class T>
Mat<T> TransformerModel<T>::embed(const TokenBatch& tokens) const {
  validate_tokens(cfg_, tokens.ids);
  const Mat<T>& e = w_["tok_embeddings.weight"];
  Mat<T> x(static_cast<int64_t>(tokens.ids.size()), cfg_.dim);
  for (size_t r = 0; r < tokens.ids.size(); ++r) x.row(r) = e.row(tokens.ids[r]);
  return x;
}

template <class T>
void TransformerModel<T>::attention_inputs(int64_t l, const Mat<T>& x, int64_t batch, int64_t n, int64_t pos0,
                                           Mat<T>& q, Mat<T>& k, Mat<T>& v) const {
  const std::string p = "layers." + std::to_string(l) + ".";
  const int64_t H = cfg_.n_attn_heads, Hkv = cfg_.n_attn_kv_heads, Da = cfg_.attn_head_dim();
  const Mat<T> h = rms_norm<T>(x, w_[p + "attention_norm.weight"].data(), cfg_.norm_eps);
  q = linear<T>(h, w_[p + "attention.wq.weight"]);
  k = linear<T>(h, w_[p + "attention.wk.weight"]);
  v = linear<T>(h, w_[p + "attention.wv.weight"]);
  const auto pos = stacked_positions(batch, n, pos0);
  apply_rope(q, H, Da, pos, freq_, RopeLayout::half_split);
  apply_rope(k, Hkv, Da, pos, freq_, RopeLayout::half_split);
}

template <class T>
Mat<T> TransformerModel<T>::layer_finish(int64_t l, const Mat<T>& x, const Mat<T>& attention_out) const {
  const std::string p = "layers." + std::to_string(l) + ".";
  Mat<T> y = x + linear<T>(attention_out, w_[p + "attention.wo.weight"]);
  const Mat<T> h2 = rms_norm<T>(y, w_[p + "ffn_norm.weight"].data(), cfg_.norm_eps);
  y += swiglu_ffn<T>(h2, w_[p + "feed_forward.w1.weight"], w_[p + "feed_forward.w3.weight"],
                     w_[p + "feed_forward.w2.weight"]);
  return y;
}

template <class T>
Mat<T> TransformerModel<T>::layer(int64_t l, const Mat<T>& x, int64_t batch, int64_t n, int64_t pos0,
                                  TransformerCache<T>* cache) const {
  const int64_t H = cfg_.n_attn_heads, Hkv = cfg_.n_attn_kv_heads, Da = cfg_.attn_head_dim();
  ActivationGuard guard((3 * x.size() + x.rows() * (2 * cfg_.q_width() + 2 * cfg_.kv_width())) *
                        static_cast<int64_t>(sizeof(T)));
  Mat<T> q, k, v;
  attention_inputs(l, x, batch, n, pos0, q, k, v);
  const double scale = 1.0 / std::sqrt(static_cast<double>(Da));
  Mat<T> a(x.rows(), cfg_.q_width());
  for (int64_t b = 0; b < batch; ++b) {
    if (!cache) {
      a.middleRows(b * n, n) =
          attention<T>(q.middleRows(b * n, n), k.middleRows(b * n, n), v.middleRows(b * n, n), H, Hkv, Da, pos0, pos0, 0, scale);
      continue;
    }
    Mat<T>& kc = cache->k[l][b];
    Mat<T>& vc = cache->v[l][b];
    kc.middleRows(pos0, n) = k.middleRows(b * n, n);
    vc.middleRows(pos0, n) = v.middleRows(b * n, n);
    a.middleRows(b * n, n) = attention<T>(q.middleRows(b * n, n), kc.topRows(pos0 + n), vc.topRows(pos0 + n), H, Hkv, Da,
                                          pos0, 0, 0, scale);
  }
  return layer_finish(l, x, a);
}

template <class T>
Mat<T> TransformerModel<T>::lm_head(const Mat<T>& x) const {
  ActivationGuard guard(x.rows() * (cfg_.dim + cfg_.vocab_size) * static_cast<int64_t>(sizeof(T)));
  const Mat<T> h = rms_norm<T>(x, w_["norm.weight"].data(), cfg_.norm_eps);
  return linear<T>(h, w_["output.weight"]);
}

template <class T>
Mat<T> TransformerModel<T>::forward(const TokenBatch& tokens) const {
  MeterScope scope(&meter_);
  meter_.reset_peak();
  if (tokens.length < 1) throw InputError("forward needs at least one token");
  Mat<T> x = embed(tokens);
  for (int64_t l = 0; l < cfg_.n_layers; ++l) x = layer(l, x, tokens.batch, tokens.length, 0, nullptr);
  return lm_head(x);
}

template <class T>
Mat<T> TransformerModel<T>::prefill(const TokenBatch& prompt, int64_t max_new_tokens, TransformerCache<T>& cache,
                                    int64_t prefill_chunk) const {
  check_prefill_args(prompt, max_new_tokens, prefill_chunk);
  const int64_t B = prompt.batch, N = prompt.length;
  validate_tokens(cfg_, prompt.ids);
  MeterScope scope(&meter_);
  meter_.reset_peak();
  cache = TransformerCache<T>{};
  cache.batch = B;
  cache.capacity = N + max_new_tokens;
  cache.k.assign(cfg_.n_layers, std::vector<Mat<T>>(B, Mat<T>::Zero(cache.capacity, cfg_.kv_width())));
  cache.v = cache.k;
  Mat<T> last(B, cfg_.dim);
  for (int64_t s = 0; s < N; s += prefill_chunk) {
    const int64_t n = std::min(prefill_chunk, N - s);
    Mat<T> x = embed(prompt.slice(s, n));
    ActivationGuard guard(2 * x.size() * static_cast<int64_t>(sizeof(T)));
    for (int64_t l = 0; l < cfg_.n_layers; ++l) x = layer(l, x, B, n, s, &cache);
    if (s + n == N)
      for (int64_t b = 0; b < B; ++b) last.row(b) = x.row(b * n + n - 1);
  }
  cache.position = N;
  return lm_head(last);
}

template <class T>
Mat<T> TransformerModel<T>::decode_step(const std::vector<int64_t>& tokens, TransformerCache<T>& cache) const {
  const int64_t B = cache.batch;
  const TokenBatch tb = check_decode_args(tokens, B, cache.position, cache.capacity);
  MeterScope scope(&meter_);
  meter_.reset_peak();
  Mat<T> x = embed(tb);
  for (int64_t l = 0; l < cfg_.n_layers; ++l) x = layer(l, x, B, 1, cache.position, &cache);
  ++cache.position;
  return lm_head(x);
}

template <class T>
MemoryBreakdown TransformerModel<T>::memory(const TransformerCache<T>& cache) const {
  MemoryBreakdown m;
  m.weights = w_.bytes();
  m.kv_cache = cache.kv_cache_bytes();
  m.activations = meter_.peak();
  return m;
}

template struct TransformerCache<float>;
template struct TransformerCache<double>;
template class TransformerModel<float>;
template class TransformerModel<double>;

}  // namespace yoco
