#pragma once
// `yoco check attention`: judges anyone's softmax-attention outputs against the
// fp64 reference (reference/ops.hpp, attention): causal or not, an optional
// sliding window, GQA, a block of queries at an offset inside a longer cache
// (chunked prefill; decode is one query), in FlashAttention's [B, S, H, D] or
// PyTorch SDPA's [B, H, S, D].
#include <cstdint>
#include <optional>
#include <string>

#include "tensor_file.hpp"
#include "verdict.hpp"

namespace yoco::check {

struct AttentionCheckOptions {
  bool bhsd = false;    // [B, H, S, D] (SDPA) instead of [B, S, H, D] (FlashAttention)
  bool causal = true;   // query at position p sees keys at positions <= p
  int64_t window = 0;   // > 0: and only the `window` latest of them (p - window < key position)
  // Position of query 0 in the key sequence; nullopt: Sk - Sq (the queries are
  // the last Sq positions, FlashAttention's bottom-right alignment).
  std::optional<int64_t> q_offset;
  std::optional<double> scale;  // on q k^T; nullopt: D^-1/2 (both libraries' default)
  std::string q = "q", k = "k", v = "v", o = "o";
  std::optional<double> tolerance;
};

// InputError (exit 2) naming the file and tensor for a missing tensor, shapes
// that disagree, an unsupported dtype or options that contradict each other.
CheckReport check_attention(const TensorFile& inputs, const TensorFile& outputs, const AttentionCheckOptions& opt);

}  // namespace yoco::check
