#pragma once
// The one definition of a model's parameters: names (the authors' module
// names, DESIGN.md §3), shapes, memory and init rule. The CPU reference, the
// safetensors I/O, the CUDA weight generator and the cost model all read it.
#include <cstdint>
#include <string>
#include <vector>

#include "config.hpp"
#include "counter_rng.hpp"

namespace yoco {

struct ParamSpec {
  std::string name;
  std::vector<int64_t> shape;  // [out, in] for linear weights, [n] for norms
  InitRule init;
  int64_t numel() const {
    int64_t n = 1;
    for (auto s : shape) n *= s;
    return n;
  }
};

std::vector<ParamSpec> param_layout(const ModelConfig& cfg);
// "[out, in]": how shapes are written in messages and listings.
std::string shape_string(const std::vector<int64_t>& shape);
int64_t param_count(const ModelConfig& cfg);

}  // namespace yoco
