#include "yoco_model.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "errors.hpp"
#include "inference_checks.hpp"
#include "ops.hpp"

namespace yoco {

namespace {
std::string self_prefix(int64_t l) { return "self_decoder.layers." + std::to_string(l) + "."; }
std::string cross_prefix(int64_t l) { return "cross_decoder.layers." + std::to_string(l) + "."; }
template <class T>
int64_t bytes_of(const Mat<T>& m) {
  return m.size() * static_cast<int64_t>(sizeof(T));
}
}  // namespace

template <class T>
int64_t YocoCache<T>::kv_cache_bytes() const {
  int64_t b = 0;
  for (const auto& m : k_hat) b += bytes_of(m);
  for (const auto& m : v_hat) b += bytes_of(m);
  return b;
}

template <class T>
int64_t YocoCache<T>::state_bytes() const {
  int64_t b = 0;
  for (const auto& layer : gret_state)
    for (const auto& m : layer) b += bytes_of(m);
  for (const auto& layer : swa_k)
    for (const auto& m : layer) b += bytes_of(m);
  for (const auto& layer : swa_v)
    for (const auto& m : layer) b += bytes_of(m);
  return b;
}

template <class T>
YocoModel<T>::YocoModel(ModelConfig cfg, Weights<T> weights) : cfg_(std::move(cfg)), w_(std::move(weights)) {
  if (!cfg_.is_yoco()) throw InputError(cfg_.name + " is not a YOCO config");
  self_freq_ = rope_inv_freq_linspace(cfg_.self_head_dim(), cfg_.rope_theta);
  cross_freq_ = rope_inv_freq_linspace(cfg_.attn_head_dim(), cfg_.rope_theta);
}

template <class T>
Mat<T> YocoModel<T>::embed(const TokenBatch& tokens) const {
  validate_tokens(cfg_, tokens.ids);
  const Mat<T>& e = w_["embed_tokens.weight"];
  Mat<T> x(static_cast<int64_t>(tokens.ids.size()), cfg_.dim);
  const T scale = static_cast<T>(std::sqrt(static_cast<double>(cfg_.dim)));
  for (size_t r = 0; r < tokens.ids.size(); ++r) x.row(r) = e.row(tokens.ids[r]) * scale;
  return x;
}

template <class T>
Mat<T> YocoModel<T>::gret_mixer(int64_t l, const Mat<T>& h, int64_t batch, int64_t n, int64_t pos0,
                                GretParadigm paradigm, YocoCache<T>* cache,
                                const SequenceExchange<T>* exchange) const {
  const std::string p = self_prefix(l) + "mixer.";
  const int64_t Hs = cfg_.n_self_heads, D = cfg_.self_head_dim();
  ActivationGuard guard(5 * h.rows() * cfg_.dim * static_cast<int64_t>(sizeof(T)));
  Mat<T> q = linear<T>(h, w_[p + "q_proj.weight"]);
  Mat<T> k = linear<T>(h, w_[p + "k_proj.weight"]);
  const Mat<T> v = linear<T>(h, w_[p + "v_proj.weight"]);
  const Mat<T> g = linear<T>(h, w_[p + "g_proj.weight"]);
  const Mat<T> z = linear<T>(h, w_[p + "gt_proj.weight"]);  // [rows, Hs]
  const auto pos = stacked_positions(batch, n, pos0);
  apply_rope(q, Hs, D, pos, self_freq_, RopeLayout::interleaved);
  apply_rope(k, Hs, D, pos, self_freq_, RopeLayout::interleaved);
  k *= static_cast<T>(1.0 / std::sqrt(static_cast<double>(D)));
  const T inv_norm = static_cast<T>(1.0 / cfg_.gate_logit_normalizer);
  const Mat<T> log_gamma = z.unaryExpr([inv_norm](T x) { return logsigmoid(x) * inv_norm; });

  if (exchange) {
    // A shard of the sequence: this rank's state from a zero start and its
    // total decay go to the exchange, which returns the state entering its
    // first position (a scan over the ranks); the outputs are then run from it.
    if (!cache) throw std::logic_error("gret_mixer: a sequence exchange needs a cache to hold the states");
    std::vector<T> log_decay(batch * Hs);
    std::vector<Mat<T>> states(batch * Hs);
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t hd = 0; hd < Hs; ++hd) {
        const Vec<T> lg = log_gamma.block(b * n, hd, n, 1);
        log_decay[b * Hs + hd] = lg.sum();
        states[b * Hs + hd] = gret_run<T>(GretParadigm::chunkwise, q.block(b * n, hd * D, n, D),
                                          k.block(b * n, hd * D, n, D), v.block(b * n, hd * D, n, D), lg, nullptr,
                                          cfg_.gret_chunk_size)
                                  .state;
      }
    exchange->gret_states_in(l, log_decay, states);
    for (int64_t i = 0; i < batch * Hs; ++i) cache->gret_state[l][i] = std::move(states[i]);
  }
  Mat<T> o(h.rows(), cfg_.dim);
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t hd = 0; hd < Hs; ++hd) {
      const Vec<T> lg = log_gamma.block(b * n, hd, n, 1);
      Mat<T>* state = cache ? &cache->gret_state[l][b * Hs + hd] : nullptr;
      auto r = gret_run<T>(paradigm, q.block(b * n, hd * D, n, D), k.block(b * n, hd * D, n, D),
                           v.block(b * n, hd * D, n, D), lg, state, cfg_.gret_chunk_size);
      o.block(b * n, hd * D, n, D) = r.o;
      if (state) *state = std::move(r.state);
    }
  }
  rms_norm_heads_inplace(o, D, cfg_.norm_eps);
  o = g.unaryExpr([](T x) { return silu(x); }).cwiseProduct(o);
  return linear<T>(o, w_[p + "out_proj.weight"]);
}

template <class T>
Mat<T> YocoModel<T>::swa_mixer(int64_t l, const Mat<T>& h, int64_t batch, int64_t n, int64_t pos0,
                               YocoCache<T>* cache, const SequenceExchange<T>* exchange) const {
  const std::string p = self_prefix(l) + "mixer.";
  const int64_t Hs = cfg_.n_self_heads, D = cfg_.self_head_dim(), W = cfg_.window();
  ActivationGuard guard(4 * h.rows() * cfg_.dim * static_cast<int64_t>(sizeof(T)));
  Mat<T> q = linear<T>(h, w_[p + "q_proj.weight"]);
  Mat<T> k = linear<T>(h, w_[p + "k_proj.weight"]);
  const Mat<T> v = linear<T>(h, w_[p + "v_proj.weight"]);
  const auto pos = stacked_positions(batch, n, pos0);
  apply_rope(q, Hs, D, pos, self_freq_, RopeLayout::interleaved);
  apply_rope(k, Hs, D, pos, self_freq_, RopeLayout::interleaved);
  const double scale = 1.0 / std::sqrt(static_cast<double>(D));

  // A shard of the sequence: the keys and values before its first position
  // come from the ranks before it, not from this rank's ring buffer.
  std::vector<Mat<T>> prev_k, prev_v;
  if (exchange) {
    if (!cache) throw std::logic_error("swa_mixer: a sequence exchange needs a cache to hold the window");
    exchange->swa_previous(l, k, v, batch, n, prev_k, prev_v);
  }
  Mat<T> o(h.rows(), cfg_.dim);
  for (int64_t b = 0; b < batch; ++b) {
    const auto kb = k.middleRows(b * n, n);
    const auto vb = v.middleRows(b * n, n);
    if (!cache) {
      o.middleRows(b * n, n) = attention<T>(q.middleRows(b * n, n), kb, vb, Hs, Hs, D, pos0, pos0, W, scale);
      continue;
    }
    // The window's keys before this block: from the ranks before this one (a
    // shard of the sequence), else from this sequence's ring buffer.
    Mat<T>& ring_k = cache->swa_k[l][b];
    Mat<T>& ring_v = cache->swa_v[l][b];
    const int64_t prev = exchange ? prev_k[b].rows() : pos0 - std::max<int64_t>(0, pos0 - (W - 1));
    const int64_t first = pos0 - prev;
    Mat<T> keys(prev + n, cfg_.dim), vals(prev + n, cfg_.dim);
    for (int64_t t = first; t < pos0; ++t) {
      keys.row(t - first) = exchange ? prev_k[b].row(t - first) : ring_k.row(t % W);
      vals.row(t - first) = exchange ? prev_v[b].row(t - first) : ring_v.row(t % W);
    }
    keys.bottomRows(n) = kb;
    vals.bottomRows(n) = vb;
    o.middleRows(b * n, n) = attention<T>(q.middleRows(b * n, n), keys, vals, Hs, Hs, D, pos0, first, W, scale);
    // The ring ends holding the window's last W positions (after a shard's
    // prefill, some of them maybe another rank's).
    for (int64_t t = std::max<int64_t>(first, pos0 + n - W); t < pos0 + n; ++t) {
      ring_k.row(t % W) = keys.row(t - first);
      ring_v.row(t % W) = vals.row(t - first);
    }
  }
  return linear<T>(o, w_[p + "out_proj.weight"]);
}

template <class T>
Mat<T> YocoModel<T>::self_layer(int64_t l, const Mat<T>& x, int64_t batch, int64_t n, int64_t pos0,
                                GretParadigm paradigm, YocoCache<T>* cache,
                                const SequenceExchange<T>* exchange) const {
  const std::string p = self_prefix(l);
  ActivationGuard guard(3 * x.size() * static_cast<int64_t>(sizeof(T)));
  const Mat<T> h = rms_norm<T>(x, w_[p + "mixer_layer_norm.weight"].data(), cfg_.norm_eps);
  Mat<T> y = x;
  if (cfg_.self_decoder() == SelfDecoderKind::gret) y += gret_mixer(l, h, batch, n, pos0, paradigm, cache, exchange);
  else y += swa_mixer(l, h, batch, n, pos0, cache, exchange);
  const Mat<T> h2 = rms_norm<T>(y, w_[p + "final_layer_norm.weight"].data(), cfg_.norm_eps);
  y += swiglu_ffn<T>(h2, w_[p + "ffn.fc1.weight"], w_[p + "ffn.gate.weight"], w_[p + "ffn.fc2.weight"]);
  return y;
}

template <class T>
void YocoModel<T>::global_kv(const Mat<T>& m, int64_t batch, int64_t n, int64_t pos0, Mat<T>& k, Mat<T>& v) const {
  const Mat<T> mn = rms_norm<T>(m, w_["cross_decoder.kv_layer_norm.weight"].data(), cfg_.norm_eps);
  k = linear<T>(mn, w_["cross_decoder.k_proj.weight"]);
  v = linear<T>(mn, w_["cross_decoder.v_proj.weight"]);
  // RoPE on keys only, never on values.
  apply_rope(k, cfg_.n_attn_kv_heads, cfg_.attn_head_dim(), stacked_positions(batch, n, pos0), cross_freq_,
             RopeLayout::interleaved);
}

template <class T>
Mat<T> YocoModel<T>::cross_query(int64_t l, const Mat<T>& x, int64_t batch, int64_t nq, int64_t q_pos0) const {
  const std::string p = cross_prefix(l);
  const Mat<T> h = rms_norm<T>(x, w_[p + "mixer_layer_norm.weight"].data(), cfg_.norm_eps);
  Mat<T> q = linear<T>(h, w_[p + "mixer.q_proj.weight"]);
  apply_rope(q, cfg_.n_attn_heads, cfg_.attn_head_dim(), stacked_positions(batch, nq, q_pos0), cross_freq_,
             RopeLayout::interleaved);
  return q;
}

template <class T>
Mat<T> YocoModel<T>::cross_finish(int64_t l, const Mat<T>& x, const Mat<T>& attention_out) const {
  const std::string p = cross_prefix(l);
  Mat<T> y = x + linear<T>(attention_out, w_[p + "mixer.out_proj.weight"]);
  const Mat<T> h2 = rms_norm<T>(y, w_[p + "final_layer_norm.weight"].data(), cfg_.norm_eps);
  y += swiglu_ffn<T>(h2, w_[p + "ffn.fc1.weight"], w_[p + "ffn.gate.weight"], w_[p + "ffn.fc2.weight"]);
  return y;
}

template <class T>
Mat<T> YocoModel<T>::cross_layer(int64_t l, const Mat<T>& x, int64_t batch, int64_t nq, int64_t q_pos0,
                                 const std::vector<const Mat<T>*>& k, const std::vector<const Mat<T>*>& v,
                                 int64_t kv_len) const {
  const int64_t H = cfg_.n_attn_heads, Da = cfg_.attn_head_dim();
  ActivationGuard guard(4 * x.size() * static_cast<int64_t>(sizeof(T)));
  const Mat<T> q = cross_query(l, x, batch, nq, q_pos0);
  Mat<T> a(x.rows(), cfg_.q_width());
  const double scale = 1.0 / std::sqrt(static_cast<double>(Da));
  for (int64_t b = 0; b < batch; ++b)
    a.middleRows(b * nq, nq) = attention<T>(q.middleRows(b * nq, nq), k[b]->topRows(kv_len), v[b]->topRows(kv_len), H,
                                            cfg_.n_attn_kv_heads, Da, q_pos0, 0, 0, scale);
  return cross_finish(l, x, a);
}

template <class T>
Mat<T> YocoModel<T>::lm_head(const Mat<T>& x) const {
  ActivationGuard guard(x.rows() * (cfg_.dim + cfg_.vocab_size) * static_cast<int64_t>(sizeof(T)));
  const Mat<T> h = rms_norm<T>(x, w_["layer_norm.weight"].data(), cfg_.norm_eps);
  return linear<T>(h, w_["output_projection.weight"]);
}

template <class T>
Mat<T> YocoModel<T>::forward(const TokenBatch& tokens, GretParadigm paradigm) const {
  MeterScope scope(&meter_);
  meter_.reset_peak();
  const int64_t B = tokens.batch, N = tokens.length;
  if (N < 1) throw InputError("forward needs at least one token");
  Mat<T> x = embed(tokens);
  for (int64_t l = 0; l < cfg_.n_self_layers(); ++l) x = self_layer(l, x, B, N, 0, paradigm, nullptr);
  Mat<T> k, v;
  global_kv(x, B, N, 0, k, v);
  std::vector<Mat<T>> ks(B), vs(B);
  std::vector<const Mat<T>*> kp(B), vp(B);
  for (int64_t b = 0; b < B; ++b) {
    ks[b] = k.middleRows(b * N, N);
    vs[b] = v.middleRows(b * N, N);
    kp[b] = &ks[b];
    vp[b] = &vs[b];
  }
  for (int64_t l = 0; l < cfg_.n_cross_layers(); ++l) x = cross_layer(l, x, B, N, 0, kp, vp, N);
  return lm_head(x);
}

template <class T>
Mat<T> YocoModel<T>::prefill(const TokenBatch& prompt, int64_t max_new_tokens, YocoCache<T>& cache,
                             int64_t prefill_chunk) const {
  check_prefill_args(prompt, max_new_tokens, prefill_chunk);
  const int64_t B = prompt.batch, N = prompt.length;
  validate_tokens(cfg_, prompt.ids);
  MeterScope scope(&meter_);
  meter_.reset_peak();

  const int64_t Ls = cfg_.n_self_layers(), D = cfg_.self_head_dim(), Hs = cfg_.n_self_heads;
  cache = YocoCache<T>{};
  cache.batch = B;
  cache.capacity = N + max_new_tokens;
  if (cfg_.self_decoder() == SelfDecoderKind::gret) {
    cache.gret_state.assign(Ls, std::vector<Mat<T>>(B * Hs, Mat<T>::Zero(D, D)));
  } else {
    cache.swa_k.assign(Ls, std::vector<Mat<T>>(B, Mat<T>::Zero(cfg_.window(), cfg_.dim)));
    cache.swa_v = cache.swa_k;
  }
  cache.k_hat.assign(B, Mat<T>::Zero(cache.capacity, cfg_.kv_width()));
  cache.v_hat.assign(B, Mat<T>::Zero(cache.capacity, cfg_.kv_width()));

  Mat<T> last(B, cfg_.dim);  // self-decoder output at the last prompt position
  for (int64_t s = 0; s < N; s += prefill_chunk) {
    const int64_t n = std::min(prefill_chunk, N - s);
    Mat<T> x = embed(prompt.slice(s, n));
    ActivationGuard guard(2 * x.size() * static_cast<int64_t>(sizeof(T)));
    for (int64_t l = 0; l < Ls; ++l) x = self_layer(l, x, B, n, s, GretParadigm::chunkwise, &cache);
    Mat<T> k, v;
    global_kv(x, B, n, s, k, v);
    for (int64_t b = 0; b < B; ++b) {
      cache.k_hat[b].middleRows(s, n) = k.middleRows(b * n, n);
      cache.v_hat[b].middleRows(s, n) = v.middleRows(b * n, n);
      if (s + n == N) last.row(b) = x.row(b * n + n - 1);
    }
  }
  cache.position = N;
  // Early exit: the cross-decoder runs for the last position only.
  std::vector<const Mat<T>*> kp(B), vp(B);
  for (int64_t b = 0; b < B; ++b) {
    kp[b] = &cache.k_hat[b];
    vp[b] = &cache.v_hat[b];
  }
  for (int64_t l = 0; l < cfg_.n_cross_layers(); ++l) last = cross_layer(l, last, B, 1, N - 1, kp, vp, N);
  return lm_head(last);
}

template <class T>
Mat<T> YocoModel<T>::decode_step(const std::vector<int64_t>& tokens, YocoCache<T>& cache) const {
  const int64_t B = cache.batch;
  const TokenBatch tb = check_decode_args(tokens, B, cache.position, cache.capacity);
  MeterScope scope(&meter_);
  meter_.reset_peak();
  const int64_t pos = cache.position;
  Mat<T> x = embed(tb);
  for (int64_t l = 0; l < cfg_.n_self_layers(); ++l) x = self_layer(l, x, B, 1, pos, GretParadigm::recurrent, &cache);
  Mat<T> k, v;
  global_kv(x, B, 1, pos, k, v);
  std::vector<const Mat<T>*> kp(B), vp(B);
  for (int64_t b = 0; b < B; ++b) {
    cache.k_hat[b].row(pos) = k.row(b);
    cache.v_hat[b].row(pos) = v.row(b);
    kp[b] = &cache.k_hat[b];
    vp[b] = &cache.v_hat[b];
  }
  for (int64_t l = 0; l < cfg_.n_cross_layers(); ++l) x = cross_layer(l, x, B, 1, pos, kp, vp, pos + 1);
  cache.position = pos + 1;
  return lm_head(x);
}

template <class T>
MemoryBreakdown YocoModel<T>::memory(const YocoCache<T>& cache) const {
  MemoryBreakdown m;
  m.weights = w_.bytes();
  m.kv_cache = cache.kv_cache_bytes();
  m.state = cache.state_bytes();
  m.activations = meter_.peak();
  return m;
}

template struct YocoCache<float>;
template struct YocoCache<double>;
template class YocoModel<float>;
template class YocoModel<double>;

}  // namespace yoco
