// The CUDA runners' memory formula (cuda/runner/generation_bytes.hpp) for
// the YOCO runner's FFN row block (YOCO_FFN_ROWS, issue 34): the W1|W3 output
// and SwiGLU buffers (6F bytes a row in bf16) are sized for a block of rows
// instead of the whole prefill step, and nothing else moves.
#include <gtest/gtest.h>

#include "config.hpp"
#include "ops/gemm_swiglu_plan.hpp"
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

// The FFN's up half fused on every block (ops/gemm_swiglu.hpp): the step
// keeps no W1|W3 output (4F bytes a row of the block), both runners; the
// blocks' question asked as the runners ask it (every block, the last too,
// >= kMinRowsToFuse rows of a served shape).
TEST(GenerationBytes, TheFusedUpHalfDropsTheW13Buffer) {
  const ModelConfig y = preset_config("yoco-3b"), t = preset_config("transformer-3b");
  const double F = static_cast<double>(y.hidden_dim);
  const GenerationBytes pair = yoco_generation_bytes(y, 1, 1 << 20, 1024, 32768, 0.0, 0.0);
  const GenerationBytes fused = yoco_generation_bytes(y, 1, 1 << 20, 1024, 32768, 0.0, 0.0, true, 0.0, true, true);
  EXPECT_DOUBLE_EQ(pair.activations - fused.activations, 32768.0 * 4 * F);  // 1.07 GB at a 32K step
  const GenerationBytes in_blocks = yoco_generation_bytes(y, 1, 1 << 20, 1024, 32768, 0.0, 0.0, true, 8192, true, true);
  EXPECT_DOUBLE_EQ(pair.activations - in_blocks.activations, 32768.0 * 6 * F - 8192.0 * 2 * F);
  EXPECT_DOUBLE_EQ(transformer_generation_bytes(t, 1, 65536, 1024, 32768).activations -
                       transformer_generation_bytes(t, 1, 65536, 1024, 32768, true).activations,
                   32768.0 * 4 * static_cast<double>(t.hidden_dim));
  // Which steps fuse on every block.
  EXPECT_TRUE(gemm_swiglu::fused_on_every_block(32768, 0, 3072, 8192));
  EXPECT_TRUE(gemm_swiglu::fused_on_every_block(32768, 8192, 3072, 8192));
  EXPECT_FALSE(gemm_swiglu::fused_on_every_block(32768 + 100, 8192, 3072, 8192));  // a last block of 100 rows
  EXPECT_TRUE(gemm_swiglu::fused_on_every_block(32768 + 1024, 8192, 3072, 8192));
  EXPECT_FALSE(gemm_swiglu::fused_on_every_block(1000, 0, 3072, 8192));  // a decode-sized step
  EXPECT_FALSE(gemm_swiglu::fused_on_every_block(4096, 0, 3072, 8000));  // F not a multiple of 128
}

}  // namespace
}  // namespace yoco::cuda
