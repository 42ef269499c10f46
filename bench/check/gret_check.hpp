#pragma once
// `yoco check gret`: judges anyone's gated-retention outputs against the fp64
// reference (reference/gret.hpp), streamed over the sequence so that a million
// tokens fit in a few GB, in the conventions users of flash-linear-attention's
// chunk_simple_gla have: o = (q * scale) S, S_t = exp(g_t) S_{t-1} + k_t^T v_t.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "gret.hpp"
#include "tensor_file.hpp"
#include "verdict.hpp"

namespace yoco::check {

enum class TokenLayout { bthd, bhtd };  // [B, T, H, D] (fla, FlashAttention) or [B, H, T, D]
enum class StateLayout { kv, vk };      // the state as [K, V] (S[i][j] sums k_i v_j) or transposed

struct GretCheckOptions {
  TokenLayout layout = TokenLayout::bthd;
  StateLayout state_layout = StateLayout::kv;
  std::optional<double> scale;  // applied to q; nullopt: D^-1/2 (fla's default); 1: none
  // Tensor names: chunk_simple_gla's arguments and results by default.
  std::string q = "q", k = "k", v = "v", g = "g", g_gamma = "g_gamma", initial_state = "initial_state",
              cu_seqlens = "cu_seqlens", o = "o", final_state = "final_state";
  GretParadigm paradigm = GretParadigm::chunkwise;
  std::optional<double> tolerance;  // nullopt: derived (gret_check.cpp, derive_tolerance)
  int64_t block_tokens = 0;         // tokens read at once per sequence; 0: about 2 M values per tensor
  // Told before each block: tokens judged so far of B x T (a million tokens take minutes).
  std::function<void(int64_t done, int64_t total)> on_progress;
};

using GretCheckReport = CheckReport;

// Reads inputs and outputs, runs the reference and judges. InputError (exit 2)
// naming the file and tensor for a missing tensor, shapes that disagree or an
// unsupported dtype.
GretCheckReport check_gret(const TensorFile& inputs, const TensorFile& outputs, const GretCheckOptions& opt);

}  // namespace yoco::check
