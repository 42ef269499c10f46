#pragma once
// Argument checks shared by every model's prefill and decode step, so that the
// CPU models (and later the CUDA runners) reject bad calls with one wording.
#include <climits>
#include <cstdint>
#include <string>
#include <vector>

#include "errors.hpp"
#include "token_batch.hpp"

namespace yoco {

inline void check_prefill_args(const TokenBatch& prompt, int64_t max_new_tokens, int64_t prefill_chunk) {
  if (prefill_chunk < 1) throw InputError("prefill chunk must be >= 1, got " + std::to_string(prefill_chunk));
  if (max_new_tokens < 0) throw InputError("number of tokens to generate must be >= 0");
  if (prompt.length < 1) throw InputError("prefill needs at least one prompt token");
}

// Whether a prefill of this shape passes the runners' checks of its shape (check_prefill_args,
// check_token_count's product, the generation's length within 64 bits): what a runner may allocate
// for ahead of the prefill, which still checks it and says what is wrong.
inline bool prefill_shape_valid(int64_t batch, int64_t length, int64_t max_new_tokens, int64_t prefill_chunk) {
  return batch >= 1 && length >= 1 && prefill_chunk >= 1 && max_new_tokens >= 0 && length <= INT64_MAX / batch &&
         max_new_tokens <= INT64_MAX - length;
}

// `count` token ids are `batch` sequences of `length` (the CUDA runners' flat prompts; batch >= 1,
// checked before); `what` names the call ("prefill", "forward"). The product may not overflow.
inline void check_token_count(const char* what, size_t count, int64_t batch, int64_t length) {
  if (length > INT64_MAX / batch || static_cast<int64_t>(count) != batch * length)
    throw InputError(std::string(what) + ": " + std::to_string(count) + " tokens for batch " + std::to_string(batch) +
                     " x length " + std::to_string(length));
}

// Returns the step's tokens as a [batch, 1] TokenBatch.
inline TokenBatch check_decode_args(const std::vector<int64_t>& tokens, int64_t batch, int64_t position,
                                    int64_t capacity) {
  if (static_cast<int64_t>(tokens.size()) != batch)
    throw InputError("decode step needs one token per sequence: got " + std::to_string(tokens.size()) + " for batch " +
                     std::to_string(batch));
  if (position >= capacity)
    throw InputError("cache is full: it holds " + std::to_string(capacity) +
                     " tokens (prompt + max_new_tokens given at prefill)");
  TokenBatch tb;
  tb.batch = batch;
  tb.length = 1;
  tb.ids = tokens;
  return tb;
}

}  // namespace yoco
