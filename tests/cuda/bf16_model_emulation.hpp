#pragma once
// The DESIGN.md §6 yardstick for the model-level GPU tests: the forward of
// YOCO (gRet or SWA self-decoder) and of the GQA Transformer in fp64
// arithmetic, rounding to bf16 exactly the tensors the CUDA runners store in
// bf16 (cuda/runner/cuda_model.hpp: bf16 weights, activations at GEMM inputs and
// outputs, and caches; fp32 residual stream, gRet state and logits). Its
// distance to the fp64 reference on the same bf16 weights is "the error of a
// CPU computation that rounds the same tensors to bf16"; a GPU result must
// stay within twice that.
//
// Rounded to bf16 here, as the runners store them:
//  - every normed activation (mixer / FFN / kv / final RMSNorm outputs, the
//    GEMM inputs);
//  - every projection output: q, k, v (and gRet's g) straight out of the GEMM;
//  - q and k again after RoPE (rotated in place in bf16; gRet's k with its
//    D^-1/2 scale applied before that one rounding, as launch_rope does);
//  - the retention / attention outputs; gRet's norm-and-gate output;
//  - the mixer's and the FFN's output projections (the bf16 `delta` that
//    add_rms_norm adds into the fp32 residual);
//  - the FFN's W1 x and W3 x and silu(W1 x) * W3 x;
//  - the caches: YOCO's global K-hat (after RoPE) and V-hat, SWA's keys and
//    values, the Transformer's per-layer K (after RoPE) and V.
// Kept in fp64 (the GPU's fp32): the residual stream (embedding included),
// gRet's gate logits z = Wgt x and log-decays (the runner computes them in
// fp32, cuda/gret/gret_gate.hpp), the gRet state, softmax and all accumulation,
// and the logits.
// Not emulated: roundings inside a kernel (flash attention's bf16 P, the gRet
// chunk kernel's bf16 score block, bf16 state copy and decay-scaled V). They
// are what the factor 2 of the bound leaves room for, with fp32 vs fp64.
//
// With round = false the same code is the plain fp64 model: the standalone
// CPU check compares it with YocoModel<double> / TransformerModel<double>
// (agreement ~1e-12) to prove the emulation has the reference's structure.
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "config.hpp"
#include "dtype.hpp"
#include "gret.hpp"
#include "ops.hpp"
#include "param_layout.hpp"
#include "tensor.hpp"
#include "token_batch.hpp"
#include "weights.hpp"

namespace yoco::cuda_test {

// The GPU runs gRet chunkwise with chunk 64 whatever cfg.gret_chunk_size says;
// the emulation does the same (the paradigms agree to 1e-10 in fp64 anyway).
inline constexpr int64_t kEmulatedGretChunk = 64;

inline double bf16_round(double x) { return static_cast<double>(round_to_bf16(static_cast<float>(x))); }

// Rounds every element of m to bf16 when `on`.
inline void round_bf16_inplace(Mat<double>& m, bool on) {
  if (!on) return;
  double* p = m.data();
  const int64_t n = m.size();
  for (int64_t i = 0; i < n; ++i) p[i] = bf16_round(p[i]);
}

inline Mat<double> bf16_rounded(Mat<double> m, bool on) {
  round_bf16_inplace(m, on);
  return m;
}

// Weights<double>::init(cfg, seed) with every element of every tensor rounded
// to bf16: the values DeviceWeights holds for the same seed (the init draws
// floats, so bf16(double(float v)) == bf16(v) bit for bit).
inline Weights<double> bf16_weights(const ModelConfig& cfg, uint64_t seed) {
  Weights<double> w = Weights<double>::init(cfg, seed);
  for (const auto& p : param_layout(cfg)) round_bf16_inplace(w.mutable_tensor(p.name), true);
  return w;
}

namespace emulation_detail {

// W2 (silu(W1 h) * W3 h) with the GPU's three bf16 stores and the bf16 output.
inline Mat<double> ffn(const Mat<double>& h, const Mat<double>& w1, const Mat<double>& w3, const Mat<double>& w2,
                       bool r) {
  const Mat<double> a = bf16_rounded(linear<double>(h, w1), r);
  const Mat<double> b = bf16_rounded(linear<double>(h, w3), r);
  Mat<double> m = a.unaryExpr([](double x) { return silu(x); }).cwiseProduct(b);
  round_bf16_inplace(m, r);
  return bf16_rounded(linear<double>(m, w2), r);
}

inline Mat<double> norm(const Mat<double>& x, const Weights<double>& w, const std::string& name, double eps, bool r) {
  return bf16_rounded(rms_norm<double>(x, w[name].data(), eps), r);
}

// Logits of the selected rows of the final residual x (all rows when `rows` is
// empty): bf16 normed input, fp32 (here fp64) logits.
inline Mat<double> lm_head(const Mat<double>& x, const std::vector<int64_t>& rows, const Weights<double>& w,
                           const std::string& norm_name, const std::string& out_name, double eps, bool r) {
  Mat<double> sel;
  if (rows.empty()) {
    sel = x;
  } else {
    sel.resize(static_cast<int64_t>(rows.size()), x.cols());
    for (size_t i = 0; i < rows.size(); ++i) sel.row(static_cast<int64_t>(i)) = x.row(rows[i]);
  }
  return linear<double>(norm(sel, w, norm_name, eps, r), w[out_name]);
}

}  // namespace emulation_detail

// YOCO logits ([rows.size() or B*N, vocab]) of the stacked token batch, every
// position computed as the full forward does (self-decoder over all tokens,
// global K/V, cross-decoder over all positions). Rows index the stacked
// [B*N] positions (row b*N + i is token i of sequence b).
inline Mat<double> emulate_yoco_logits(const ModelConfig& c, const Weights<double>& w, const TokenBatch& tb,
                                       const std::vector<int64_t>& rows, bool r = true) {
  using namespace emulation_detail;
  const int64_t B = tb.batch, N = tb.length, d = c.dim;
  const double eps = c.norm_eps;
  const int64_t Hs = c.n_self_heads, D = c.self_head_dim(), H = c.n_attn_heads, Hkv = c.n_attn_kv_heads,
                Da = c.attn_head_dim();
  const auto pos = stacked_positions(B, N, 0);
  const auto self_freq = rope_inv_freq_linspace(D, c.rope_theta);
  const auto cross_freq = rope_inv_freq_linspace(Da, c.rope_theta);

  // Embedding into the fp32 residual: sqrt(d) * bf16 table row.
  const Mat<double>& e = w["embed_tokens.weight"];
  const double escale = std::sqrt(static_cast<double>(d));
  Mat<double> x(B * N, d);
  for (int64_t i = 0; i < B * N; ++i) x.row(i) = e.row(tb.ids[static_cast<size_t>(i)]) * escale;

  for (int64_t l = 0; l < c.n_self_layers(); ++l) {
    const std::string p = "self_decoder.layers." + std::to_string(l) + ".";
    const Mat<double> h = norm(x, w, p + "mixer_layer_norm.weight", eps, r);
    Mat<double> q = bf16_rounded(linear<double>(h, w[p + "mixer.q_proj.weight"]), r);
    Mat<double> k = bf16_rounded(linear<double>(h, w[p + "mixer.k_proj.weight"]), r);
    const Mat<double> v = bf16_rounded(linear<double>(h, w[p + "mixer.v_proj.weight"]), r);
    apply_rope(q, Hs, D, pos, self_freq, RopeLayout::interleaved);
    apply_rope(k, Hs, D, pos, self_freq, RopeLayout::interleaved);
    Mat<double> o(B * N, d);
    if (c.self_decoder() == SelfDecoderKind::gret) {
      const Mat<double> g = bf16_rounded(linear<double>(h, w[p + "mixer.g_proj.weight"]), r);
      const Mat<double> z = linear<double>(h, w[p + "mixer.gt_proj.weight"]);  // fp32 on the GPU: not rounded
      k *= 1.0 / std::sqrt(static_cast<double>(D));
      round_bf16_inplace(q, r);
      round_bf16_inplace(k, r);
      const double inv_norm = 1.0 / c.gate_logit_normalizer;
      const Mat<double> lg = z.unaryExpr([inv_norm](double t) { return logsigmoid(t) * inv_norm; });
      for (int64_t b = 0; b < B; ++b) {
        for (int64_t hd = 0; hd < Hs; ++hd) {
          const Vec<double> lgb = lg.block(b * N, hd, N, 1);
          const auto res = gret_chunkwise<double>(q.block(b * N, hd * D, N, D), k.block(b * N, hd * D, N, D),
                                                  v.block(b * N, hd * D, N, D), lgb, nullptr, kEmulatedGretChunk);
          o.block(b * N, hd * D, N, D) = res.o;
        }
      }
      round_bf16_inplace(o, r);  // the retention output
      rms_norm_heads_inplace(o, D, eps);
      o = g.unaryExpr([](double t) { return silu(t); }).cwiseProduct(o);
      round_bf16_inplace(o, r);  // norm-and-gate output
    } else {
      round_bf16_inplace(q, r);
      round_bf16_inplace(k, r);  // also what the SWA ring holds
      const double scale = 1.0 / std::sqrt(static_cast<double>(D));
      for (int64_t b = 0; b < B; ++b)
        o.middleRows(b * N, N) = attention<double>(q.middleRows(b * N, N), k.middleRows(b * N, N),
                                                   v.middleRows(b * N, N), Hs, Hs, D, 0, 0, c.window(), scale);
      round_bf16_inplace(o, r);
    }
    x += bf16_rounded(linear<double>(o, w[p + "mixer.out_proj.weight"]), r);
    const Mat<double> h2 = norm(x, w, p + "final_layer_norm.weight", eps, r);
    x += ffn(h2, w[p + "ffn.fc1.weight"], w[p + "ffn.gate.weight"], w[p + "ffn.fc2.weight"], r);
  }

  // The one global cache, bf16: K-hat after RoPE, V-hat.
  const Mat<double> mn = norm(x, w, "cross_decoder.kv_layer_norm.weight", eps, r);
  Mat<double> kh = bf16_rounded(linear<double>(mn, w["cross_decoder.k_proj.weight"]), r);
  const Mat<double> vh = bf16_rounded(linear<double>(mn, w["cross_decoder.v_proj.weight"]), r);
  apply_rope(kh, Hkv, Da, pos, cross_freq, RopeLayout::interleaved);
  round_bf16_inplace(kh, r);

  const double ascale = 1.0 / std::sqrt(static_cast<double>(Da));
  for (int64_t l = 0; l < c.n_cross_layers(); ++l) {
    const std::string p = "cross_decoder.layers." + std::to_string(l) + ".";
    const Mat<double> h = norm(x, w, p + "mixer_layer_norm.weight", eps, r);
    Mat<double> q = bf16_rounded(linear<double>(h, w[p + "mixer.q_proj.weight"]), r);
    apply_rope(q, H, Da, pos, cross_freq, RopeLayout::interleaved);
    round_bf16_inplace(q, r);
    Mat<double> a(B * N, c.q_width());
    for (int64_t b = 0; b < B; ++b)
      a.middleRows(b * N, N) = attention<double>(q.middleRows(b * N, N), kh.middleRows(b * N, N),
                                                 vh.middleRows(b * N, N), H, Hkv, Da, 0, 0, 0, ascale);
    round_bf16_inplace(a, r);
    x += bf16_rounded(linear<double>(a, w[p + "mixer.out_proj.weight"]), r);
    const Mat<double> h2 = norm(x, w, p + "final_layer_norm.weight", eps, r);
    x += ffn(h2, w[p + "ffn.fc1.weight"], w[p + "ffn.gate.weight"], w[p + "ffn.fc2.weight"], r);
  }
  return lm_head(x, rows, w, "layer_norm.weight", "output_projection.weight", eps, r);
}

// The Transformer's logits, as above.
inline Mat<double> emulate_transformer_logits(const ModelConfig& c, const Weights<double>& w, const TokenBatch& tb,
                                              const std::vector<int64_t>& rows, bool r = true) {
  using namespace emulation_detail;
  const int64_t B = tb.batch, N = tb.length, d = c.dim;
  const double eps = c.norm_eps;
  const int64_t H = c.n_attn_heads, Hkv = c.n_attn_kv_heads, Da = c.attn_head_dim();
  const auto pos = stacked_positions(B, N, 0);
  const auto freq = rope_inv_freq_pow(Da, c.rope_theta);
  const double ascale = 1.0 / std::sqrt(static_cast<double>(Da));

  const Mat<double>& e = w["tok_embeddings.weight"];
  Mat<double> x(B * N, d);
  for (int64_t i = 0; i < B * N; ++i) x.row(i) = e.row(tb.ids[static_cast<size_t>(i)]);

  for (int64_t l = 0; l < c.n_layers; ++l) {
    const std::string p = "layers." + std::to_string(l) + ".";
    const Mat<double> h = norm(x, w, p + "attention_norm.weight", eps, r);
    Mat<double> q = bf16_rounded(linear<double>(h, w[p + "attention.wq.weight"]), r);
    Mat<double> k = bf16_rounded(linear<double>(h, w[p + "attention.wk.weight"]), r);
    const Mat<double> v = bf16_rounded(linear<double>(h, w[p + "attention.wv.weight"]), r);  // the V cache
    apply_rope(q, H, Da, pos, freq, RopeLayout::half_split);
    apply_rope(k, Hkv, Da, pos, freq, RopeLayout::half_split);
    round_bf16_inplace(q, r);
    round_bf16_inplace(k, r);  // the K cache
    Mat<double> a(B * N, c.q_width());
    for (int64_t b = 0; b < B; ++b)
      a.middleRows(b * N, N) = attention<double>(q.middleRows(b * N, N), k.middleRows(b * N, N),
                                                 v.middleRows(b * N, N), H, Hkv, Da, 0, 0, 0, ascale);
    round_bf16_inplace(a, r);
    x += bf16_rounded(linear<double>(a, w[p + "attention.wo.weight"]), r);
    const Mat<double> h2 = norm(x, w, p + "ffn_norm.weight", eps, r);
    x += ffn(h2, w[p + "feed_forward.w1.weight"], w[p + "feed_forward.w3.weight"], w[p + "feed_forward.w2.weight"], r);
  }
  return lm_head(x, rows, w, "norm.weight", "output.weight", eps, r);
}

inline Mat<double> emulate_logits(const ModelConfig& c, const Weights<double>& w, const TokenBatch& tb,
                                  const std::vector<int64_t>& rows, bool r = true) {
  return c.is_yoco() ? emulate_yoco_logits(c, w, tb, rows, r) : emulate_transformer_logits(c, w, tb, rows, r);
}

}  // namespace yoco::cuda_test
