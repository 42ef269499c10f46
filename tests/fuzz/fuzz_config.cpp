// libFuzzer target: model config JSON (reference/config.hpp): parse and
// validate from a string. InputError is the expected outcome of bad input;
// any other exception, a crash or a sanitizer report is a finding. A config
// that parses must survive config_to_json_text and parse back to the same
// shape.
#include <exception>
#include <string>

#include "config.hpp"
#include "errors.hpp"
#include "fuzz_common.hpp"

namespace {

bool same_shape(const yoco::ModelConfig& a, const yoco::ModelConfig& b) {
  return a.model_type == b.model_type && a.dim == b.dim && a.n_layers == b.n_layers && a.hidden_dim == b.hidden_dim &&
         a.vocab_size == b.vocab_size && a.n_attn_heads == b.n_attn_heads && a.n_attn_kv_heads == b.n_attn_kv_heads &&
         a.n_self_heads == b.n_self_heads && a.sliding_window == b.sliding_window &&
         a.gret_chunk_size == b.gret_chunk_size && a.attn_head_dim() == b.attn_head_dim();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  yoco::ModelConfig c;
  if (!yoco::fuzz::accepts("config_from_json_text", [&] { c = yoco::config_from_json_text(text, "fuzz.json"); }))
    return 0;
  // Accepted: the derived quantities every command uses must be defined.
  (void)c.q_width();
  (void)c.kv_width();
  if (c.is_yoco()) (void)c.self_head_dim();
  try {
    const auto back = yoco::config_from_json_text(yoco::config_to_json_text(c), "roundtrip.json");
    if (!same_shape(c, back)) yoco::fuzz::finding("config changed through config_to_json_text:\n" + text);
  } catch (const std::exception& e) {
    yoco::fuzz::finding(std::string("an accepted config does not read back after config_to_json_text: ") + e.what());
  }
  return 0;
}
