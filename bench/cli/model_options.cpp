#include "model_options.hpp"

#include "tokens.hpp"

namespace yoco::cli {

std::vector<OptionSpec> model_option_specs() {
  return {
      {"--model", "PRESET|FILE.json", "model preset (e.g. yoco-tiny, yoco-swa-tiny, transformer-tiny) or config file; required"},
      {"--weights", "FILE.safetensors", "load the weights from a safetensors file"},
      {"--seed", "N", "counter-based weight init with this seed (default 0; not with --weights)"},
      {"--dtype", "f64|f32", "compute precision (default f32)"},
  };
}

std::vector<OptionSpec> token_option_specs() {
  return {
      {"--tokens", "1,2,3", "token ids, separated by commas and/or spaces"},
      {"--tokens-file", "FILE", "token ids from a file, separated by commas and/or whitespace"},
  };
}

ModelChoice model_choice(const ParsedArgs& a) {
  ModelChoice m;
  a.exclusive({"--weights", "--seed"}, false);
  m.precision = parse_precision("--dtype", a.get_or("--dtype", "f32"));
  m.seed = a.get_u64("--seed", 0);
  m.cfg = resolve_model(a.require("--model"));
  m.weights = a.has("--weights") ? WeightSource::from_file(*a.get("--weights")) : WeightSource::from_seed(m.seed);
  return m;
}

std::vector<int64_t> tokens_from_args(const ParsedArgs& a, const ModelConfig& cfg) {
  std::string source;
  std::vector<int64_t> ids;
  if (const auto t = a.get("--tokens")) {
    source = "--tokens";
    ids = parse_token_list(*t, source);
  } else {
    source = a.require("--tokens-file");
    ids = read_token_file(source);
  }
  check_token_range(ids, cfg.vocab_size, source, cfg.name);
  return ids;
}

}  // namespace yoco::cli
