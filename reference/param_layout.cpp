#include "param_layout.hpp"

#include <cmath>

namespace yoco {
namespace {

// Linear weights: uniform(-1/sqrt(in), 1/sqrt(in)), so outputs keep the scale of
// their inputs. Norm weights: 1 + U(-1/4, 1/4), not all ones, so a norm weight
// applied to the wrong tensor changes the result. Embeddings: chosen so that the
// first residual has RMS about 1/sqrt(3) in both models (YOCO multiplies by sqrt(d)).
InitRule linear_rule(int64_t in) { return {0.0f, static_cast<float>(1.0 / std::sqrt(static_cast<double>(in)))}; }
constexpr InitRule kNormRule{1.0f, 0.25f};

void add(std::vector<ParamSpec>& v, std::string name, std::vector<int64_t> shape, InitRule r) {
  v.push_back(ParamSpec{std::move(name), std::move(shape), r});
}

void add_ffn(std::vector<ParamSpec>& v, const std::string& prefix, int64_t d, int64_t f, bool yoco_names) {
  if (yoco_names) {
    add(v, prefix + "ffn.fc1.weight", {f, d}, linear_rule(d));
    add(v, prefix + "ffn.gate.weight", {f, d}, linear_rule(d));
    add(v, prefix + "ffn.fc2.weight", {d, f}, linear_rule(f));
  } else {
    add(v, prefix + "feed_forward.w1.weight", {f, d}, linear_rule(d));
    add(v, prefix + "feed_forward.w3.weight", {f, d}, linear_rule(d));
    add(v, prefix + "feed_forward.w2.weight", {d, f}, linear_rule(f));
  }
}

}  // namespace

std::vector<ParamSpec> param_layout(const ModelConfig& c) {
  std::vector<ParamSpec> v;
  const int64_t d = c.dim, f = c.hidden_dim, V = c.vocab_size;
  if (c.is_yoco()) {
    add(v, "embed_tokens.weight", {V, d}, linear_rule(d));
    for (int64_t l = 0; l < c.n_self_layers(); ++l) {
      const std::string p = "self_decoder.layers." + std::to_string(l) + ".";
      add(v, p + "mixer_layer_norm.weight", {d}, kNormRule);
      add(v, p + "mixer.q_proj.weight", {d, d}, linear_rule(d));
      add(v, p + "mixer.k_proj.weight", {d, d}, linear_rule(d));
      add(v, p + "mixer.v_proj.weight", {d, d}, linear_rule(d));
      if (c.self_decoder() == SelfDecoderKind::gret) {
        add(v, p + "mixer.g_proj.weight", {d, d}, linear_rule(d));
        add(v, p + "mixer.gt_proj.weight", {c.n_self_heads, d}, linear_rule(d));
      }
      add(v, p + "mixer.out_proj.weight", {d, d}, linear_rule(d));
      add(v, p + "final_layer_norm.weight", {d}, kNormRule);
      add_ffn(v, p, d, f, true);
    }
    add(v, "cross_decoder.kv_layer_norm.weight", {d}, kNormRule);
    add(v, "cross_decoder.k_proj.weight", {c.kv_width(), d}, linear_rule(d));
    add(v, "cross_decoder.v_proj.weight", {c.kv_width(), d}, linear_rule(d));
    for (int64_t l = 0; l < c.n_cross_layers(); ++l) {
      const std::string p = "cross_decoder.layers." + std::to_string(l) + ".";
      add(v, p + "mixer_layer_norm.weight", {d}, kNormRule);
      add(v, p + "mixer.q_proj.weight", {c.q_width(), d}, linear_rule(d));
      add(v, p + "mixer.out_proj.weight", {d, c.q_width()}, linear_rule(c.q_width()));
      add(v, p + "final_layer_norm.weight", {d}, kNormRule);
      add_ffn(v, p, d, f, true);
    }
    add(v, "layer_norm.weight", {d}, kNormRule);
    add(v, "output_projection.weight", {V, d}, linear_rule(d));
  } else {
    add(v, "tok_embeddings.weight", {V, d}, InitRule{0.0f, 1.0f});
    for (int64_t l = 0; l < c.n_layers; ++l) {
      const std::string p = "layers." + std::to_string(l) + ".";
      add(v, p + "attention_norm.weight", {d}, kNormRule);
      add(v, p + "attention.wq.weight", {c.q_width(), d}, linear_rule(d));
      add(v, p + "attention.wk.weight", {c.kv_width(), d}, linear_rule(d));
      add(v, p + "attention.wv.weight", {c.kv_width(), d}, linear_rule(d));
      add(v, p + "attention.wo.weight", {d, c.q_width()}, linear_rule(c.q_width()));
      add(v, p + "ffn_norm.weight", {d}, kNormRule);
      add_ffn(v, p, d, f, false);
    }
    add(v, "norm.weight", {d}, kNormRule);
    add(v, "output.weight", {V, d}, linear_rule(d));
  }
  return v;
}

std::string shape_string(const std::vector<int64_t>& shape) {
  std::string r = "[";
  for (size_t i = 0; i < shape.size(); ++i) r += (i ? ", " : "") + std::to_string(shape[i]);
  return r + "]";
}

int64_t param_count(const ModelConfig& c) {
  int64_t n = 0;
  for (const auto& p : param_layout(c)) n += p.numel();
  return n;
}

}  // namespace yoco
