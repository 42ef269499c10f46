// The argument checks every model shares (reference/inference_checks.hpp): one wording for a bad
// call, whichever model refuses it.
#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <string>

#include "errors.hpp"
#include "inference_checks.hpp"

namespace yoco {
namespace {

std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

TEST(InferenceChecks, ATokenCountMustBeBatchTimesLength) {
  EXPECT_EQ(message_of([] { check_token_count("prefill", 12, 3, 4); }), "");
  EXPECT_EQ(message_of([] { check_token_count("prefill", 11, 3, 4); }), "prefill: 11 tokens for batch 3 x length 4");
  EXPECT_EQ(message_of([] { check_token_count("forward", 0, 1, 1); }), "forward: 0 tokens for batch 1 x length 1");
  // batch x length past int64: refused, not wrapped around to a match.
  EXPECT_EQ(message_of([] { check_token_count("prefill", 0, int64_t{1} << 32, int64_t{1} << 32); }),
            "prefill: 0 tokens for batch 4294967296 x length 4294967296");
}

TEST(InferenceChecks, DecodeNeedsOneTokenASequenceAndRoom) {
  EXPECT_EQ(message_of([] { check_decode_args({1, 2}, 3, 0, 8); }),
            "decode step needs one token per sequence: got 2 for batch 3");
  EXPECT_NE(message_of([] { check_decode_args({1, 2, 3}, 3, 8, 8); }).find("cache is full"), std::string::npos);
  EXPECT_EQ(check_decode_args({1, 2, 3}, 3, 7, 8).length, 1);
}

}  // namespace
}  // namespace yoco
