#pragma once
// One definition of a model's shape, shared by the CPU reference, the CUDA
// runners, the cost model and the harness. Field names follow the authors'
// released params.json (DESIGN.md §3) so their files load unchanged.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace yoco {

// Tokens of the whole batch a prefill step takes unless told otherwise
// (DESIGN.md §4): the runners', the sweep's and the cost model's default.
inline constexpr int64_t kDefaultPrefillChunk = 32768;

enum class ModelType { yoco, transformer };
enum class SelfDecoderKind { gret, swa };

struct ModelConfig {
  std::string name;  // preset name or config file path, for messages
  ModelType model_type = ModelType::yoco;

  int64_t dim = 0;         // d
  int64_t n_layers = 0;    // L (YOCO: L/2 self + L/2 cross)
  int64_t hidden_dim = 0;  // FFN width F
  int64_t vocab_size = 0;
  double rope_theta = 10000.0;
  double norm_eps = 1e-5;

  // YOCO
  int64_t n_self_heads = 0;     // Hs
  int64_t n_attn_heads = 0;     // H (cross-attention / Transformer query heads)
  int64_t n_attn_kv_heads = 0;  // Hkv
  std::optional<int64_t> sliding_window;  // set => SWA self-decoder
  int64_t gret_chunk_size = 256;          // chunk of the chunkwise paradigm
  double gate_logit_normalizer = 16.0;    // log gamma = logsigmoid(z) / this

  // Transformer: explicit head dim (the authors' field); 0 means dim / n_heads.
  int64_t head_dim = 0;

  SelfDecoderKind self_decoder() const {
    return sliding_window ? SelfDecoderKind::swa : SelfDecoderKind::gret;
  }
  bool is_yoco() const { return model_type == ModelType::yoco; }
  int64_t n_self_layers() const { return is_yoco() ? n_layers / 2 : 0; }
  int64_t n_cross_layers() const { return is_yoco() ? n_layers - n_layers / 2 : 0; }
  // Self-decoder head dim D = d / Hs.
  int64_t self_head_dim() const { return dim / n_self_heads; }
  // Attention head dim Da (cross-attention for YOCO, all layers for the Transformer).
  int64_t attn_head_dim() const {
    if (!is_yoco() && head_dim > 0) return head_dim;
    return dim / n_attn_heads;
  }
  int64_t q_width() const { return n_attn_heads * attn_head_dim(); }
  int64_t kv_width() const { return n_attn_kv_heads * attn_head_dim(); }
  int64_t window() const { return sliding_window.value_or(0); }

  // Throws InputError naming the offending field.
  void validate() const;
};

// Presets of DESIGN.md §3. Throws InputError listing the known names.
ModelConfig preset_config(const std::string& name);
std::vector<std::string> preset_names();

// Parses a params.json-style document. `source` names it in messages.
ModelConfig config_from_json_text(const std::string& text, const std::string& source);
ModelConfig load_config_file(const std::string& path);
// PRESET or FILE.json: a name that ends in .json or contains '/' is a file.
ModelConfig resolve_model(const std::string& preset_or_file);
std::string config_to_json_text(const ModelConfig& cfg);
// The first field (in config_to_json_text's order) where `a` computes another
// function than `b`, as "field a-value vs b-value"; nullopt when none. The name
// and gret_chunk_size (a paradigm's block: the same function) are not compared,
// nor gate_logit_normalizer between two SWA configs (only gRet reads it).
std::optional<std::string> config_difference(const ModelConfig& a, const ModelConfig& b);

// Checks every token id against the vocabulary.
void validate_tokens(const ModelConfig& cfg, const std::vector<int64_t>& tokens);

}  // namespace yoco
