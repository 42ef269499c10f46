#pragma once
// The options that forward and generate share: which model, which weights,
// which precision, which tokens.
#include <cstdint>
#include <string>
#include <vector>

#include "args.hpp"
#include "config.hpp"
#include "model_runner.hpp"

namespace yoco::cli {

// --model, --weights, --seed, --dtype (f64|f32, default f32).
std::vector<OptionSpec> model_option_specs();
// --tokens, --tokens-file.
std::vector<OptionSpec> token_option_specs();

struct ModelChoice {
  ModelConfig cfg;
  Precision precision = Precision::f32;
  WeightSource weights;
  uint64_t seed = 0;  // --seed (default 0), also when --weights is given
};

// --model is required; --weights and --seed exclude each other.
ModelChoice model_choice(const ParsedArgs& a);

// The ids of --tokens or --tokens-file (the caller has checked that exactly one
// is present), checked against the vocabulary.
std::vector<int64_t> tokens_from_args(const ParsedArgs& a, const ModelConfig& cfg);

}  // namespace yoco::cli
