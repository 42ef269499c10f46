// The argument checks every model shares (reference/inference_checks.hpp): one wording for a bad
// call, whichever model refuses it.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <string>

#include "decode_check.hpp"
#include "errors.hpp"
#include "greedy.hpp"
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

// A shape is valid ahead of its prefill exactly where the prefill's own checks pass it.
TEST(InferenceChecks, APrefillShapeIsValidWhereThePrefillsChecksPassIt) {
  auto checks_pass = [](int64_t batch, int64_t length, int64_t max_new, int64_t chunk) {
    TokenBatch shape;
    shape.batch = batch;
    shape.length = length;
    return message_of([&] {
             // The runners' order (cuda/runner/yoco_prefill.cpp): the batch, the count of a prompt of
             // this shape (the product as it wraps), the arguments, the generation's length.
             if (batch < 1) throw InputError("prefill needs a batch of at least one sequence");
             check_token_count("prefill", static_cast<size_t>(batch) * static_cast<size_t>(length), batch, length);
             check_prefill_args(shape, max_new, chunk);
             if (max_new > INT64_MAX - length) throw InputError("prompt + tokens to generate overflow");
           }) == "";
  };
  const int64_t big = INT64_MAX;
  for (int64_t batch : {int64_t{-1}, int64_t{0}, int64_t{1}, int64_t{3}, int64_t{1} << 32})
    for (int64_t length : {int64_t{0}, int64_t{1}, int64_t{4096}, int64_t{1} << 32, big})
      for (int64_t max_new : {int64_t{-1}, int64_t{0}, int64_t{64}, big - 4096, big})
        for (int64_t chunk : {int64_t{0}, int64_t{1}, int64_t{32768}}) {
          EXPECT_EQ(prefill_shape_valid(batch, length, max_new, chunk), checks_pass(batch, length, max_new, chunk))
              << batch << " x " << length << " + " << max_new << ", chunk " << chunk;
        }
  EXPECT_TRUE(prefill_shape_valid(1, 4096, 64, 32768));
  EXPECT_FALSE(prefill_shape_valid(int64_t{1} << 32, int64_t{1} << 32, 0, 1));  // the token count overflows
  EXPECT_FALSE(prefill_shape_valid(1, 4096, big - 4095, 1));                    // the generation's length overflows
}

TEST(InferenceChecks, DecodeNeedsOneTokenASequenceAndRoom) {
  EXPECT_EQ(message_of([] { check_decode_args({1, 2}, 3, 0, 8); }),
            "decode step needs one token per sequence: got 2 for batch 3");
  EXPECT_NE(message_of([] { check_decode_args({1, 2, 3}, 3, 8, 8); }).find("cache is full"), std::string::npos);
  EXPECT_EQ(check_decode_args({1, 2, 3}, 3, 7, 8).length, 1);
}

// generate --check and the demo pass on every run of a correct model, so their
// FAIL was never seen: a cached logit off by 1e-3 of its row's RMS, or a NaN,
// must fail the comparison with the full forward.
TEST(InferenceChecks, ACachedLogitThatDisagreesWithTheForwardFails) {
  auto runner = ModelRunner::create(preset_config("yoco-tiny"), Precision::f64, WeightSource::from_seed(0));
  const TokenBatch prompt = TokenBatch::from_sequences({{1, 2, 3, 4, 5}, {6, 7, 8, 9, 10}});
  const cli::GreedyRun run = cli::run_greedy(*runner, prompt, 3, 2, true);
  EXPECT_TRUE(cli::check_decode_against_forward(*runner, prompt, run).pass);
  for (const double bad : {1e-3, static_cast<double>(NAN)}) {
    cli::GreedyRun tampered = run;
    auto row = tampered.logits[2].row(1);  // decode step 1, sequence 1
    row(7) = std::isnan(bad) ? bad : row(7) + bad * std::sqrt(row.squaredNorm() / static_cast<double>(row.size()));
    const cli::DecodeCheck c = cli::check_decode_against_forward(*runner, prompt, tampered);
    EXPECT_FALSE(c.pass) << bad;
    if (!std::isnan(bad)) {
      EXPECT_GT(c.max_rms_ratio, c.tolerance);
    }
  }
}

}  // namespace
}  // namespace yoco
