// The CUDA runners' memory formula (cuda/runner/generation_bytes.hpp) for
// the YOCO runner's FFN row block (YOCO_FFN_ROWS, issue 34): the W1|W3 output
// and SwiGLU buffers (6F bytes a row in bf16) are sized for a block of rows
// instead of the whole prefill step, and nothing else moves.
#include <gtest/gtest.h>

#include "config.hpp"
#include "runner/generation_bytes.hpp"

namespace yoco::cuda {
namespace {

GenerationBytes bytes(const ModelConfig& c, double batch, double prompt, double chunk, double ffn_rows) {
  return yoco_generation_bytes(c, batch, prompt, 1024, chunk, 0.0, 0.0, false, ffn_rows);
}

TEST(GenerationBytes, TheFfnRowBlockTakesItsBuffersDownToTheBlock) {
  const ModelConfig c = preset_config("yoco-3b");
  const double F = static_cast<double>(c.hidden_dim);
  // yoco-3b at 1M in steps of 32,768 rows: blocks of 8,192 rows keep 24,576
  // rows' worth of 6F bytes off, 1.21 GB of the step's 3.4 GB.
  const GenerationBytes whole = bytes(c, 1, 1 << 20, 32768, 0), block = bytes(c, 1, 1 << 20, 32768, 8192);
  EXPECT_DOUBLE_EQ(whole.activations - block.activations, (32768.0 - 8192.0) * 6 * F);
  EXPECT_NEAR(whole.activations - block.activations, 1.208e9, 1e6);
  EXPECT_EQ(whole.weights, block.weights);
  EXPECT_EQ(whole.caches, block.caches);
  EXPECT_EQ(whole.state, block.state);
}

TEST(GenerationBytes, ABlockAsLargeAsTheStepOrZeroChangesNothing) {
  for (const char* name : {"yoco-3b", "yoco-swa-small", "yoco-small"}) {
    const ModelConfig c = preset_config(name);
    const double whole = bytes(c, 3, 4096, 2048, 0).total();
    EXPECT_EQ(bytes(c, 3, 4096, 2048, 3 * 682).total(), whole) << name;  // 682 rows a sequence a step
    EXPECT_EQ(bytes(c, 3, 4096, 2048, 1e9).total(), whole) << name;
    EXPECT_LT(bytes(c, 3, 4096, 2048, 100).total(), whole) << name;
  }
}

// The prefill's delta in the normed rows (kDeltaInNormedRows): 2d bytes a row
// of the step off the activations, nothing else; the Transformer untouched.
TEST(GenerationBytes, TheDeltaInTheNormedRowsSavesTwoBytesAColumnARow) {
  const ModelConfig c = preset_config("yoco-3b");
  const double d = static_cast<double>(c.dim);
  const GenerationBytes apart = yoco_generation_bytes(c, 1, 1 << 20, 1024, 32768, 0.0, 0.0, true, 0.0, false);
  const GenerationBytes shared = yoco_generation_bytes(c, 1, 1 << 20, 1024, 32768, 0.0, 0.0, true, 0.0, true);
  EXPECT_DOUBLE_EQ(apart.activations - shared.activations, 32768.0 * 2 * d);
  EXPECT_EQ(apart.caches, shared.caches);
  EXPECT_EQ(yoco_generation_bytes(c, 1, 1 << 20, 1024, 32768, 0.0, 0.0).total(), shared.total())
      << "the runner's layout by default";
}

// The FFN's up half fused (ops/ffn_up.hpp): the generation keeps the W1|W3
// output (4F bytes a row) only for the calls that take the pair -- none at
// yoco-3b's 32K steps; the ragged last step's rows where it is too short to
// fuse; the Transformer's decode step's B rows, since it shares the prefill's
// buffers -- and the runners ask the same (ffn_w13_rows).
TEST(GenerationBytes, TheFusedUpHalfKeepsTheW13BufferOnlyForThePairsCalls) {
  const ModelConfig y = preset_config("yoco-3b"), t = preset_config("transformer-3b");
  const double F = static_cast<double>(y.hidden_dim);
  const GenerationBytes pair = yoco_generation_bytes(y, 1, 1 << 20, 1024, 32768, 0.0, 0.0);
  const GenerationBytes fused = yoco_generation_bytes(y, 1, 1 << 20, 1024, 32768, 0.0, 0.0, true, 0.0, true, true);
  EXPECT_DOUBLE_EQ(pair.activations - fused.activations, 32768.0 * 4 * F);  // 1.07 GB at a 32K step
  const GenerationBytes in_blocks = yoco_generation_bytes(y, 1, 1 << 20, 1024, 32768, 0.0, 0.0, true, 8192, true, true);
  EXPECT_DOUBLE_EQ(pair.activations - in_blocks.activations, 32768.0 * 6 * F - 8192.0 * 2 * F);
  // 33,000 tokens: a fused step of 32,768, then 232 rows that take the pair.
  EXPECT_DOUBLE_EQ(ffn_w13_rows(y, 1, 33000, 32768, 0, true, false), 232);
  EXPECT_DOUBLE_EQ(ffn_w13_rows(y, 1, 33000, 32768, 0, false, false), 32768);
  EXPECT_DOUBLE_EQ(ffn_w13_rows(y, 1, 33000 + 1024, 32768, 0, true, false), 0);  // a last step of 1,256 fuses
  // The Transformer: its decode step's one row stays.
  EXPECT_DOUBLE_EQ(transformer_generation_bytes(t, 1, 65536, 1024, 32768).activations -
                       transformer_generation_bytes(t, 1, 65536, 1024, 32768, true).activations,
                   (32768.0 - 1) * 4 * static_cast<double>(t.hidden_dim));
  EXPECT_DOUBLE_EQ(ffn_w13_rows(t, 2048, 65536, 2048 * 16, 0, true, true), 0);  // decode of 2,048 rows fuses too
}

}  // namespace
}  // namespace yoco::cuda
