#pragma once
// `yoco check … --generate`: seeded input files of any shape for a user to run
// their kernel on. Element (b, t, h, d) of a tensor is a pure function of
// (seed, tensor name, its row-major position in [B, T, H, D]) (reference/
// counter_rng), so files of either layout, any dtype and any block size hold
// the same problem (another shape is another one: the position depends on T,
// H and D), and a file larger than memory streams out block by block.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "dtype.hpp"

namespace yoco::check {

// Told the name of each tensor before it is written (a file of gigabytes takes
// a while): the caller's progress, or nothing.
using TensorStarted = std::function<void(const std::string& name)>;

enum class TokenLayout;  // gret_check.hpp

// Gated retention: q, k, v [B, T, H, D] (or [B, H, T, D]) in `dtype`, uniform
// with unit variance; g [B, T, H] f32 = gate_scale * logsigmoid(x) / 16 with
// x uniform of unit variance (the models' gate; a larger scale decays harder)
// or, with g_gamma, [H] f32 = gate_scale * log(1 - 2^(-5 - h)) (RetNet's);
// initial_state [N, H, D, D] f32 (as [K, V], or [V, K]) when asked; cu_seqlens [N + 1]
// i64 when given (batch 1).
struct GretGenerateOptions {
  int64_t B = 1, T = 0, H = 0, D = 0;
  uint64_t seed = 0;
  double gate_scale = 1.0;
  DType dtype = DType::bf16;
  bool bhtd = false;
  bool g_gamma = false;
  bool initial_state = false;
  bool state_vk = false;  // initial_state as [V, K] (--state-layout vk): the same values, transposed
  std::vector<int64_t> cu_seqlens;
  TensorStarted on_tensor;
};
// Returns the bytes written. InputError for sizes that cannot be (zero, a
// cu_seqlens that does not rise from 0 to T, batch > 1 with cu_seqlens).
uint64_t generate_gret_inputs(const std::string& path, const GretGenerateOptions& opt);

// Softmax attention: q [B, Sq, Hq, D], k and v [B, Sk, Hkv, D] (or [B, H, S, D])
// in `dtype`, uniform with unit variance (`q_scale` times that for q: larger
// logits, peakier softmax).
struct AttentionGenerateOptions {
  int64_t B = 1, Sq = 0, Sk = 0, Hq = 0, Hkv = 0, D = 0;
  uint64_t seed = 0;
  double q_scale = 1.0;
  DType dtype = DType::bf16;
  bool bhsd = false;
  TensorStarted on_tensor;
};
uint64_t generate_attention_inputs(const std::string& path, const AttentionGenerateOptions& opt);

}  // namespace yoco::check
