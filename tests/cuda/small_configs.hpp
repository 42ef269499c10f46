#pragma once
// The model-level GPU tests' small shapes (test_cuda_models, test_dist_cuda).
#include <string>

#include "config.hpp"

namespace yoco::cuda_test {

// The small shapes, written out here (not read from preset_config) so that
// this file does not depend on when the presets land: d 256, L 4, 4 heads of
// 64 (YOCO: 4 gRet / SWA heads of 64 and 4 cross heads of 64), 2 KV heads,
// FFN 768, vocab 4096; yoco-swa-small has a window of 128. yoco-small-hd128
// (test only) has 2 gRet heads of 128, the head dim of yoco-3b's gRet, which
// the head-dim-128 chunk kernels (v3, v6) serve.
inline ModelConfig small_config(const std::string& name) {
  ModelConfig c;
  c.name = name;
  c.dim = 256;
  c.n_layers = 4;
  c.hidden_dim = 768;
  c.vocab_size = 4096;
  c.n_attn_heads = 4;
  c.n_attn_kv_heads = 2;
  if (name == "transformer-small") {
    c.model_type = ModelType::transformer;
    c.head_dim = 64;
  } else {
    c.model_type = ModelType::yoco;
    c.n_self_heads = name == "yoco-small-hd128" ? 2 : 4;
    if (name == "yoco-swa-small") c.sliding_window = 128;
  }
  c.validate();
  return c;
}

}  // namespace yoco::cuda_test
