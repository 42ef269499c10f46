#include "config.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "errors.hpp"

namespace yoco {
namespace {

[[noreturn]] void bad(const ModelConfig& c, const std::string& field, const std::string& why) {
  throw InputError(c.name + ": field '" + field + "' " + why);
}

// Llama's rule: round 8/3*d up to a multiple of 256.
int64_t llama_ffn(int64_t d) {
  const int64_t raw = (8 * d) / 3;
  return ((raw + 255) / 256) * 256;
}

struct Shape {
  int64_t d, layers, heads;
};

// Appendix D of the paper. Hs uses gRet head dim 256; Hkv = H/4 (our choice:
// the paper does not state it; a group of 4 divides every head count here).
const std::map<std::string, Shape>& scaling_family() {
  static const std::map<std::string, Shape> m = {
      {"160m", {768, 12, 12}},  {"400m", {1024, 24, 16}}, {"830m", {1536, 24, 12}},
      {"1.4b", {2048, 24, 16}}, {"2.7b", {2560, 32, 20}}, {"6.8b", {4096, 32, 32}},
      {"13b", {5120, 40, 40}}};
  return m;
}

ModelConfig make_yoco(const std::string& name, int64_t d, int64_t L, int64_t hs, int64_t h, int64_t hkv,
                      int64_t f, int64_t vocab) {
  ModelConfig c;
  c.name = name;
  c.model_type = ModelType::yoco;
  c.dim = d;
  c.n_layers = L;
  c.n_self_heads = hs;
  c.n_attn_heads = h;
  c.n_attn_kv_heads = hkv;
  c.hidden_dim = f;
  c.vocab_size = vocab;
  return c;
}

ModelConfig make_transformer(const std::string& name, int64_t d, int64_t L, int64_t h, int64_t hkv, int64_t f,
                             int64_t vocab) {
  ModelConfig c;
  c.name = name;
  c.model_type = ModelType::transformer;
  c.dim = d;
  c.n_layers = L;
  c.n_attn_heads = h;
  c.n_attn_kv_heads = hkv;
  c.head_dim = d / h;
  c.hidden_dim = f;
  c.vocab_size = vocab;
  return c;
}

std::optional<ModelConfig> try_preset(const std::string& name) {
  constexpr int64_t kVocab3b = 100288;
  if (name == "yoco-3b") return make_yoco(name, 3072, 26, 24, 24, 8, 8192, kVocab3b);
  if (name == "yoco-swa-3b") {
    auto c = make_yoco(name, 3072, 26, 24, 24, 8, 8192, kVocab3b);
    c.sliding_window = 1024;
    return c;
  }
  if (name == "transformer-3b") return make_transformer(name, 3072, 26, 24, 8, 8192, kVocab3b);
  // Llama-65B-like shape for the KV-per-token figure (Llama vocabulary).
  if (name == "yoco-65b") return make_yoco(name, 8192, 80, 64, 64, 8, 22016, 32000);
  if (name == "yoco-swa-65b") {
    auto c = make_yoco(name, 8192, 80, 64, 64, 8, 22016, 32000);
    c.sliding_window = 1024;
    return c;
  }
  if (name == "transformer-65b") return make_transformer(name, 8192, 80, 64, 8, 22016, 32000);
  if (name == "yoco-tiny") return make_yoco(name, 64, 4, 4, 4, 2, 192, 512);
  if (name == "yoco-swa-tiny") {
    auto c = make_yoco(name, 64, 4, 4, 4, 2, 192, 512);
    c.sliding_window = 64;
    return c;
  }
  if (name == "transformer-tiny") return make_transformer(name, 64, 4, 4, 2, 192, 512);
  // The smallest shapes the CUDA kernels serve (head dim 64): GPU demos and tests.
  if (name == "yoco-small") return make_yoco(name, 256, 4, 4, 4, 2, 768, 4096);
  if (name == "yoco-swa-small") {
    auto c = make_yoco(name, 256, 4, 4, 4, 2, 768, 4096);
    c.sliding_window = 128;
    return c;
  }
  if (name == "transformer-small") return make_transformer(name, 256, 4, 4, 2, 768, 4096);

  for (const auto& [size, s] : scaling_family()) {
    const int64_t hkv = s.heads / 4;
    if (name == "yoco-" + size || name == "yoco-swa-" + size) {
      auto c = make_yoco(name, s.d, s.layers, s.d / 256, s.heads, hkv, 3 * s.d, kVocab3b);
      if (name.rfind("yoco-swa-", 0) == 0) {
        // SWA has no gRet head-dim convention: it uses the model's head count.
        c.n_self_heads = s.heads;
        c.sliding_window = 1024;
      }
      return c;
    }
    if (name == "transformer-" + size) return make_transformer(name, s.d, s.layers, s.heads, hkv, llama_ffn(s.d), kVocab3b);
  }
  return std::nullopt;
}

// How a JSON value is shown in a message: scalars as written (cut short), a
// container by its type only. Never a full dump(): nlohmann's serializer is
// recursive, and a deeply nested value must not be walked (issue 12).
std::string cut(std::string s) {
  if (s.size() > 60) s = s.substr(0, 57) + "...";
  return s;
}
std::string shown(const nlohmann::json& v) {
  if (v.is_structured()) return std::string("an ") + v.type_name();
  if (v.is_boolean()) return "a boolean (" + v.dump() + ")";
  return cut(v.dump());  // null, a number, a quoted string
}

int64_t get_int(const nlohmann::json& j, const std::string& key, const std::string& source) {
  const auto& v = j.at(key);
  // An unsigned past int64 would wrap to a negative number and be reported as one.
  if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX))
    throw InputError(source + ": field '" + key + "' is out of range, got " + v.dump());
  if (v.is_number_integer()) return v.get<int64_t>();
  if (v.is_number_float()) {
    // A float that is a whole number (e.g. 4.0, 1e3) is that integer; 3.5 is not.
    const double x = v.get<double>();
    if (std::floor(x) == x && std::abs(x) < 9e15) return static_cast<int64_t>(x);
  }
  throw InputError(source + ": field '" + key + "' must be an integer, got " + shown(v));
}

double get_number(const nlohmann::json& j, const std::string& key, const std::string& source) {
  const auto& v = j.at(key);
  if (!v.is_number()) throw InputError(source + ": field '" + key + "' must be a number, got " + shown(v));
  return v.get<double>();
}

std::string get_string(const nlohmann::json& j, const std::string& key, const std::string& source) {
  const auto& v = j.at(key);
  if (!v.is_string()) throw InputError(source + ": field '" + key + "' must be a string, got " + shown(v));
  return v.get<std::string>();
}

// Far deeper than any config (an object of scalars: depth 1) or safetensors
// header (depth 3). Past it the document is rejected while it is parsed, before
// anything recursive (dump, copy) could walk it and overflow the stack.
constexpr int kMaxJsonDepth = 64;

// n * m and n + m saturated at INT64_MAX (both >= 0): size arithmetic that
// cannot overflow, only end up above every cap.
int64_t mul_sat(int64_t a, int64_t b) {
  int64_t r;
  return __builtin_mul_overflow(a, b, &r) ? INT64_MAX : r;
}
int64_t add_sat(int64_t a, int64_t b) {
  int64_t r;
  return __builtin_add_overflow(a, b, &r) ? INT64_MAX : r;
}

}  // namespace

std::vector<std::string> preset_names() {
  std::vector<std::string> names = {"yoco-tiny",      "yoco-swa-tiny",     "transformer-tiny", "yoco-small",
                                    "yoco-swa-small", "transformer-small", "yoco-3b",          "yoco-swa-3b",
                                    "transformer-3b", "yoco-65b",          "yoco-swa-65b",     "transformer-65b"};
  for (const auto& [size, s] : scaling_family()) {
    names.push_back("yoco-" + size);
    names.push_back("yoco-swa-" + size);
    names.push_back("transformer-" + size);
  }
  return names;
}

ModelConfig preset_config(const std::string& name) {
  if (auto c = try_preset(name)) {
    c->validate();
    return *c;
  }
  std::string known;
  for (const auto& n : preset_names()) known += (known.empty() ? "" : ", ") + n;
  throw InputError("unknown model preset '" + name + "' (known: " + known + "; or give a FILE.json)");
}

void ModelConfig::validate() const {
  auto positive = [&](const std::string& field, int64_t v) {
    if (v < 1) bad(*this, field, "must be >= 1, got " + std::to_string(v));
  };
  positive("dim", dim);
  positive("n_layers", n_layers);
  positive("hidden_dim", hidden_dim);
  positive("vocab_size", vocab_size);
  // Every command lays the parameters out per layer (param_layout: a few
  // tensors a layer) before anything else, the analytic `yoco model` included,
  // which has no host-memory gate since it models models larger than this
  // machine. Real models have at most a few hundred layers; a count past this
  // is a typo or a corrupt file, and would otherwise grow memory without bound.
  constexpr int64_t kMaxLayers = int64_t{1} << 16;
  if (n_layers > kMaxLayers)
    bad(*this, "n_layers", "must be <= " + std::to_string(kMaxLayers) + ", got " + std::to_string(n_layers));
  auto real = [](double x) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.17g", x);
    return std::string(buf);
  };
  if (!(rope_theta > 0) || !std::isfinite(rope_theta)) bad(*this, "rope_theta", "must be a positive number, got " + real(rope_theta));
  if (!(norm_eps > 0) || !std::isfinite(norm_eps)) bad(*this, "norm_eps", "must be a positive number, got " + real(norm_eps));
  if (vocab_size > (int64_t{1} << 31)) bad(*this, "vocab_size", "must be <= 2^31 (token ids are 32-bit on the device)");

  const std::string heads_field = is_yoco() ? "n_attn_heads" : "n_heads";
  const std::string kv_field = is_yoco() ? "n_attn_kv_heads" : "n_kv_heads";
  positive(heads_field, n_attn_heads);
  positive(kv_field, n_attn_kv_heads);
  if (n_attn_heads % n_attn_kv_heads != 0)
    bad(*this, kv_field,
        "(" + std::to_string(n_attn_kv_heads) + ") must divide " + heads_field + " (" + std::to_string(n_attn_heads) + ")");

  if (is_yoco()) {
    if (n_layers % 2 != 0) bad(*this, "n_layers", "must be even for YOCO (L/2 self + L/2 cross), got " + std::to_string(n_layers));
    positive("n_self_heads", n_self_heads);
    if (dim % n_self_heads != 0)
      bad(*this, "n_self_heads", "(" + std::to_string(n_self_heads) + ") must divide dim (" + std::to_string(dim) + ")");
    if (self_head_dim() % 2 != 0)
      bad(*this, "n_self_heads", "gives an odd head dimension " + std::to_string(self_head_dim()) + " (RoPE needs pairs)");
    if (dim % n_attn_heads != 0)
      bad(*this, "n_attn_heads", "(" + std::to_string(n_attn_heads) + ") must divide dim (" + std::to_string(dim) + ")");
    if (attn_head_dim() % 2 != 0)
      bad(*this, "n_attn_heads", "gives an odd head dimension " + std::to_string(attn_head_dim()) + " (RoPE needs pairs)");
    if (sliding_window && *sliding_window < 1) bad(*this, "sliding_window", "must be >= 1, got " + std::to_string(*sliding_window));
    positive("gret_chunk_size", gret_chunk_size);
    if (!(gate_logit_normalizer > 0) || !std::isfinite(gate_logit_normalizer))
      bad(*this, "gate_logit_normalizer", "must be a positive number, got " + real(gate_logit_normalizer));
  } else {
    if (head_dim == 0 && dim % n_attn_heads != 0)
      bad(*this, "n_heads", "(" + std::to_string(n_attn_heads) + ") must divide dim (" + std::to_string(dim) + ")");
    if (head_dim < 0) bad(*this, "head_dim", "must be >= 1");
    if (attn_head_dim() % 2 != 0)
      bad(*this, "head_dim", "is odd (" + std::to_string(attn_head_dim()) + "); RoPE needs pairs");
  }

  // The parameter count, with arithmetic that cannot overflow (the fields are
  // each <= INT64_MAX, their products need not be): past kMaxParams the model
  // is refused here, so that param_layout, param_count and every byte count of
  // the weights (elements x 8 bytes) stay exact in int64 and in double. Like
  // the layer cap this is a limit of the config itself, so every command
  // applies it at load time, `yoco model` included. The host-memory gate of
  // `weights init`, `forward` and `generate` is a limit of this machine instead:
  // `yoco model` does not apply it, since it models models larger than the
  // machine it runs on (yoco-65b, and configs of 1e14 parameters).
  constexpr int64_t kMaxParams = int64_t{1} << 50;  // about 1.1e15, 500x the largest published dense model
  const int64_t d = dim, f = hidden_dim, V = vocab_size;
  const int64_t head = (!is_yoco() && head_dim > 0) ? head_dim : dim / n_attn_heads;
  const int64_t qw = mul_sat(n_attn_heads, head), kvw = mul_sat(n_attn_kv_heads, head);
  const int64_t ffn = mul_sat(3, mul_sat(f, d));
  int64_t total = add_sat(mul_sat(2, mul_sat(V, d)), d);  // embedding, LM head, final norm
  if (is_yoco()) {
    int64_t self = add_sat(add_sat(mul_sat(2, d), mul_sat(4, mul_sat(d, d))), ffn);
    if (self_decoder() == SelfDecoderKind::gret) self = add_sat(self, add_sat(mul_sat(d, d), mul_sat(n_self_heads, d)));
    const int64_t cross = add_sat(add_sat(mul_sat(2, d), mul_sat(2, mul_sat(qw, d))), ffn);
    total = add_sat(total, add_sat(mul_sat(n_self_layers(), self), mul_sat(n_cross_layers(), cross)));
    total = add_sat(total, add_sat(d, mul_sat(2, mul_sat(kvw, d))));  // shared K/V projection and its norm
  } else {
    const int64_t layer = add_sat(add_sat(mul_sat(2, d), mul_sat(2, mul_sat(qw, d))), add_sat(mul_sat(2, mul_sat(kvw, d)), ffn));
    total = add_sat(total, mul_sat(n_layers, layer));
  }
  if (total > kMaxParams)
    throw InputError(name + ": model too large: " +
                     (total == INT64_MAX ? std::string("more than 2^63") : std::to_string(total)) +
                     " parameters, the limit is 2^50 (check dim, hidden_dim, vocab_size, the head counts and head_dim)");
}

ModelConfig config_from_json_text(const std::string& text, const std::string& source) {
  nlohmann::json j;
  // The keys seen so far in each open object, innermost last: nlohmann keeps
  // the last of a repeated key, so `"dim": 64, ..., "dim": 4096` would load a
  // model other than the one the reader of the file sees first.
  std::vector<std::set<std::string>> open_objects;
  using Event = nlohmann::json::parse_event_t;
  try {
    // NaN and Infinity are not JSON: the parser (strict, no comments) rejects them as parse errors.
    j = nlohmann::json::parse(text, [&](int depth, Event event, nlohmann::json& parsed) {
      if ((event == Event::object_start || event == Event::array_start) && depth >= kMaxJsonDepth)
        throw InputError(source + ": JSON nested deeper than " + std::to_string(kMaxJsonDepth) +
                         " levels (a config is one object of numbers and strings)");
      if (event == Event::object_start) open_objects.emplace_back();
      if (event == Event::object_end) open_objects.pop_back();
      if (event == Event::key && !open_objects.back().insert(parsed.get<std::string>()).second)
        throw InputError(source + ": duplicate key '" + cut(parsed.get<std::string>()) +
                         "' (JSON keeps only one of them: say it once)");
      return true;
    });
  } catch (const nlohmann::json::exception& e) {
    // parse_error and also out_of_range (a number too large for a double, e.g. 1e400).
    throw InputError(source + ": not valid JSON (" + std::string(e.what()) + ")");
  }
  if (!j.is_object()) throw InputError(source + ": expected a JSON object, got " + shown(j));

  ModelConfig c;
  c.name = source;
  if (j.contains("model_type")) {
    const auto t = get_string(j, "model_type", source);
    if (t == "yoco") c.model_type = ModelType::yoco;
    else if (t == "transformer") c.model_type = ModelType::transformer;
    else throw InputError(source + ": field 'model_type' must be \"yoco\" or \"transformer\", got " + shown(j.at("model_type")));
  }
  const bool yoco = c.is_yoco();

  // Fields of the authors' params.json that do not change the maths.
  static const std::vector<std::string> ignored = {"max_batch_size", "max_seq_len", "model_parallel_size",
                                                   "load_checkpoint"};
  std::vector<std::string> known = {"model_type", "dim", "n_layers", "hidden_dim", "vocab_size", "rope_theta", "norm_eps"};
  if (yoco) {
    for (const char* k : {"n_self_heads", "n_attn_heads", "n_attn_kv_heads", "sliding_window", "gret_chunk_size",
                          "gate_logit_normalizer", "self_decoder"})
      known.emplace_back(k);
  } else {
    for (const char* k : {"head_dim", "n_heads", "n_kv_heads"}) known.emplace_back(k);
  }
  for (const auto& [key, value] : j.items()) {
    const bool ok = std::find(known.begin(), known.end(), key) != known.end() ||
                    std::find(ignored.begin(), ignored.end(), key) != ignored.end();
    if (!ok)
      throw InputError(source + ": unknown field '" + cut(key) + "' for a " + (yoco ? "yoco" : "transformer") +
                       " config (a typo would otherwise pass silently)");
  }

  std::vector<std::string> required = {"dim", "n_layers", "hidden_dim", "vocab_size"};
  if (yoco) {
    required.insert(required.end(), {"n_self_heads", "n_attn_heads", "n_attn_kv_heads"});
  } else {
    required.insert(required.end(), {"n_heads", "n_kv_heads"});
  }
  for (const auto& r : required)
    if (!j.contains(r)) throw InputError(source + ": missing required field '" + r + "'");

  c.dim = get_int(j, "dim", source);
  c.n_layers = get_int(j, "n_layers", source);
  c.hidden_dim = get_int(j, "hidden_dim", source);
  c.vocab_size = get_int(j, "vocab_size", source);
  if (j.contains("rope_theta")) c.rope_theta = get_number(j, "rope_theta", source);
  if (j.contains("norm_eps")) c.norm_eps = get_number(j, "norm_eps", source);
  if (yoco) {
    c.n_self_heads = get_int(j, "n_self_heads", source);
    c.n_attn_heads = get_int(j, "n_attn_heads", source);
    c.n_attn_kv_heads = get_int(j, "n_attn_kv_heads", source);
    if (j.contains("sliding_window") && !j["sliding_window"].is_null())
      c.sliding_window = get_int(j, "sliding_window", source);
    if (j.contains("self_decoder")) {
      // Our extra: an explicit self-decoder kind, checked against sliding_window.
      const auto kind = get_string(j, "self_decoder", source);
      if (kind == "gret") {
        if (c.sliding_window) throw InputError(source + ": field 'self_decoder' is \"gret\" but 'sliding_window' is set");
      } else if (kind == "swa") {
        if (!c.sliding_window) throw InputError(source + ": field 'self_decoder' is \"swa\" but 'sliding_window' is not set");
      } else {
        throw InputError(source + ": field 'self_decoder' must be \"gret\" or \"swa\", got " + shown(j.at("self_decoder")));
      }
    }
    if (j.contains("gret_chunk_size")) c.gret_chunk_size = get_int(j, "gret_chunk_size", source);
    if (j.contains("gate_logit_normalizer")) c.gate_logit_normalizer = get_number(j, "gate_logit_normalizer", source);
  } else {
    c.n_attn_heads = get_int(j, "n_heads", source);
    c.n_attn_kv_heads = get_int(j, "n_kv_heads", source);
    if (j.contains("head_dim") && !j["head_dim"].is_null()) c.head_dim = get_int(j, "head_dim", source);
  }
  c.validate();
  return c;
}

ModelConfig load_config_file(const std::string& path) {
  // A config is a few hundred bytes of JSON. A device or a FIFO (/dev/zero,
  // /dev/stdin) may never end, so only a regular file is read, and at most
  // one byte past the cap, so that a huge file is refused without being read.
  constexpr std::streamsize kMaxConfigBytes = std::streamsize{1} << 20;
  std::error_code ec;
  const auto status = std::filesystem::status(path, ec);
  if (ec || !std::filesystem::exists(status)) throw InputError(path + ": cannot open config file");
  if (!std::filesystem::is_regular_file(status))
    throw InputError(path + ": not a regular file (a model config is a small JSON file)");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(path + ": cannot open config file");
  std::string text(static_cast<size_t>(kMaxConfigBytes) + 1, '\0');
  in.read(text.data(), kMaxConfigBytes + 1);
  if (in.bad()) throw InputError(path + ": cannot read config file");
  text.resize(static_cast<size_t>(in.gcount()));
  if (static_cast<std::streamsize>(text.size()) > kMaxConfigBytes)
    throw InputError(path + ": larger than 1 MiB, too large for a model config (a small JSON file)");
  return config_from_json_text(text, path);
}

ModelConfig resolve_model(const std::string& preset_or_file) {
  const bool looks_like_file = preset_or_file.find('/') != std::string::npos ||
                               (preset_or_file.size() > 5 && preset_or_file.ends_with(".json"));
  if (looks_like_file) return load_config_file(preset_or_file);
  return preset_config(preset_or_file);
}

std::string config_to_json_text(const ModelConfig& c) {
  nlohmann::ordered_json j;
  j["model_type"] = c.is_yoco() ? "yoco" : "transformer";
  j["dim"] = c.dim;
  j["n_layers"] = c.n_layers;
  j["hidden_dim"] = c.hidden_dim;
  if (c.is_yoco()) {
    j["n_self_heads"] = c.n_self_heads;
    j["n_attn_heads"] = c.n_attn_heads;
    j["n_attn_kv_heads"] = c.n_attn_kv_heads;
    j["sliding_window"] = c.sliding_window ? nlohmann::ordered_json(*c.sliding_window) : nlohmann::ordered_json(nullptr);
    j["gret_chunk_size"] = c.gret_chunk_size;
    j["gate_logit_normalizer"] = c.gate_logit_normalizer;
  } else {
    j["head_dim"] = c.attn_head_dim();
    j["n_heads"] = c.n_attn_heads;
    j["n_kv_heads"] = c.n_attn_kv_heads;
  }
  j["vocab_size"] = c.vocab_size;
  j["rope_theta"] = c.rope_theta;
  j["norm_eps"] = c.norm_eps;
  return j.dump(2);
}

std::optional<std::string> config_difference(const ModelConfig& a, const ModelConfig& b) {
  const auto ja = nlohmann::ordered_json::parse(config_to_json_text(a));
  const auto jb = nlohmann::ordered_json::parse(config_to_json_text(b));
  auto shown = [](const nlohmann::ordered_json* v) { return v ? v->dump() : std::string("(absent)"); };
  for (const auto* keys : {&ja, &jb}) {
    for (const auto& [key, unused] : keys->items()) {
      if (key == "gret_chunk_size") continue;
      // Only the gRet mixer reads the gate normalizer: two SWA configs differing there compute the same.
      if (key == "gate_logit_normalizer" && a.sliding_window && b.sliding_window) continue;
      const auto* va = ja.contains(key) ? &ja.at(key) : nullptr;
      const auto* vb = jb.contains(key) ? &jb.at(key) : nullptr;
      if (!va || !vb || *va != *vb) return key + " " + shown(va) + " vs " + shown(vb);
    }
  }
  return std::nullopt;
}

void validate_tokens(const ModelConfig& cfg, const std::vector<int64_t>& tokens) {
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i] < 0 || tokens[i] >= cfg.vocab_size)
      throw InputError("token " + std::to_string(i) + " has id " + std::to_string(tokens[i]) +
                       ", outside the vocabulary [0, " + std::to_string(cfg.vocab_size) + ") of " + cfg.name);
  }
}

}  // namespace yoco
