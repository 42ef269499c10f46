// The CUDA runners' memory formula (cuda/runner/generation_bytes.hpp) for
// the YOCO runner's FFN row block (YOCO_FFN_ROWS, issue 34): the W1|W3 output
// and SwiGLU buffers (6F bytes a row in bf16) are sized for a block of rows
// instead of the whole prefill step, and nothing else moves.
#include <gtest/gtest.h>

#include "config.hpp"
#include "gret/gret_plan.hpp"
#include "runner/generation_bytes.hpp"
#include "runner/sublayer_buffers.hpp"

namespace yoco::cuda {
namespace {

// The layout before the sublayers shared a buffer (YOCO_SUBLAYER_BUFFERS=apart), where the FFN's
// buffers are its own and a row block shows whole.
GenerationBytes bytes(const ModelConfig& c, double batch, double prompt, double chunk, double ffn_rows) {
  return yoco_generation_bytes(c, batch, prompt, 1024, chunk, 0.0, 0.0, false, ffn_rows, kDeltaInNormedRows, false,
                               false);
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
  // A buffer each for the sublayers (YOCO_SUBLAYER_BUFFERS=apart): the W1|W3 output shows whole.
  auto apart = [&](double ffn_rows, bool fused) {
    return yoco_generation_bytes(y, 1, 1 << 20, 1024, 32768, 0.0, 0.0, true, ffn_rows, true, fused, false);
  };
  const GenerationBytes pair = apart(0.0, false), fused = apart(0.0, true);
  EXPECT_DOUBLE_EQ(pair.activations - fused.activations, 32768.0 * 4 * F);  // 1.07 GB at a 32K step
  const GenerationBytes in_blocks = apart(8192, true);
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

// One buffer for a prefill step's sublayers (kSharedSublayerBuffers, runner/sublayer_buffers.hpp):
// the largest of the mixer's, the FFN's and the global K/V rows' pieces instead of their sum, at the
// full step or the shorter last one; nothing else moves.
TEST(GenerationBytes, SharedSublayerBuffersHoldTheLargestPiece) {
  const ModelConfig y = preset_config("yoco-3b");
  const double d = static_cast<double>(y.dim), F = static_cast<double>(y.hidden_dim), Hs = y.n_self_heads;
  auto gen = [&](double batch, double prompt, double chunk, double ffn_rows, bool fused, bool shared) {
    return yoco_generation_bytes(y, batch, prompt, 1024, chunk, 0.0, 0.0, true, ffn_rows, true, fused, shared);
  };
  const double mixer_row = 8 * d + 8 * Hs + 2 * d;  // q|k|v|g, z and log-decay, the output: 30,912 bytes
  ASSERT_DOUBLE_EQ(mixer_row, 30912);
  // yoco-3b at 1M, steps of 32,768 rows (every piece a multiple of 256 bytes): the pair's FFN
  // (6F a row) holds the mixer's pieces; fused (2F a row) the mixer's hold the FFN's.
  auto saved = [&](double chunk, bool fused) {
    return gen(1, 1 << 20, chunk, 0, fused, false).activations - gen(1, 1 << 20, chunk, 0, fused, true).activations;
  };
  EXPECT_DOUBLE_EQ(saved(32768, false), 32768 * mixer_row);  // 1.01 GB
  EXPECT_DOUBLE_EQ(saved(32768, true), 32768 * 2 * F);       // 0.54 GB
  const GenerationBytes apart = gen(1, 1 << 20, 16384, 0, true, false), shared = gen(1, 1 << 20, 16384, 0, true, true);
  EXPECT_EQ(apart.weights, shared.weights);
  EXPECT_EQ(apart.caches, shared.caches);
  EXPECT_EQ(apart.state, shared.state);
  EXPECT_LT(shared.total(), 12.1e9) << "chunk 16384, the FFN's up half fused: under the paper's 12.4 GB at 1M";
  // The formula is the runner's carve: the largest piece of the full step and of the last one.
  const double prompt = 33000, n = 32768, rows_last = prompt - n;
  auto step = [&](double rows, bool fused) {
    const int64_t R = static_cast<int64_t>(rows);
    const bool all_fused = fused && gemm_swiglu::fused_on_every_block(R, 0, y.dim, y.hidden_dim);
    return static_cast<double>(sublayer::bytes(sublayer::mixer(true, R, y.dim, y.n_self_heads, 0),
                                               sublayer::ffn(all_fused ? 0 : R, R, y.hidden_dim), 0));
  };
  const double base = gen(1, prompt, n, 0, true, true).activations - step(n, true);
  EXPECT_NEAR(base, gen(1, prompt, n, 0, true, false).activations - (n * mixer_row + n * 2 * F + rows_last * 4 * F),
              1.0)
      << "the rest of the activations as in the layout apart";
  EXPECT_GT(step(n, true), step(rows_last, true));
  // Batch > 1 with the global K/V batched: its rows are one more piece of the same buffer.
  const double with_kv = gen(64, 4096, 32768, 0, false, true).activations;
  const double apart_kv = gen(64, 4096, 32768, 0, false, false).activations;
  EXPECT_DOUBLE_EQ(apart_kv - with_kv, 32768 * mixer_row + 32768.0 * 2 * y.kv_width() * 2);
  // SWA: the window is a piece of the mixer's.
  const ModelConfig s = preset_config("yoco-swa-small");
  EXPECT_LT(yoco_generation_bytes(s, 1, 65536, 1024, 4096, 0.0, 0.0, true, 0, true, false, true).activations,
            yoco_generation_bytes(s, 1, 65536, 1024, 4096, 0.0, 0.0, true, 0, true, false, false).activations);
}

// The carve: pieces aligned, in order, apart; the largest wins.
TEST(GenerationBytes, TheSublayerCarveKeepsItsPiecesApartAndAligned) {
  for (const bool gret : {true, false}) {
    const sublayer::Mixer m = sublayer::mixer(gret, 1001, 256, 4, gret ? 0 : 2 * (63 + 1001));
    const int64_t pieces[] = {m.proj, m.gate_logits, m.log_decay, m.out, m.window};
    for (const int64_t at : pieces) EXPECT_EQ(at % sublayer::kAlign, 0) << gret;
    EXPECT_EQ(m.proj, 0);
    if (gret) {
      EXPECT_GE(m.gate_logits, 1001 * 4 * 256 * 2);
      EXPECT_GE(m.log_decay, m.gate_logits + 1001 * 4 * 4);
      EXPECT_GE(m.out, m.log_decay + 1001 * 4 * 4);
      EXPECT_GE(m.bytes, m.out + 1001 * 256 * 2);
    } else {
      EXPECT_GE(m.out, 1001 * 3 * 256 * 2);
      EXPECT_GE(m.window, m.out + 1001 * 256 * 2);
      EXPECT_GE(m.bytes, m.window + 2 * (63 + 1001) * 2 * 256 * 2);
    }
    EXPECT_LT(m.bytes, m.out + 1001 * 256 * 2 + (gret ? 0 : 2 * (63 + 1001) * 2 * 256 * 2) + 5 * sublayer::kAlign);
  }
  const sublayer::Ffn pair = sublayer::ffn(100, 100, 768), fused = sublayer::ffn(0, 100, 768);
  EXPECT_EQ(pair.hidden, sublayer::aligned(100 * 2 * 768 * 2));
  EXPECT_EQ(pair.bytes, pair.hidden + sublayer::aligned(100 * 768 * 2));
  EXPECT_EQ(fused.hidden, 0);
  EXPECT_EQ(fused.bytes, sublayer::aligned(100 * 768 * 2));
  EXPECT_EQ(sublayer::bytes(sublayer::mixer(true, 10, 64, 1, 0), fused, sublayer::kv_rows_bytes(1000, 128)),
            sublayer::kv_rows_bytes(1000, 128));
}

// The gRet chunk workspace a prefill keeps is its largest step's. At 4 heads of 128 on 132 SMs the
// plan for a ragged last step of 8,641 rows wants more than the full 32,768-row steps' (a formula
// pricing the full step only fell short of the runner's scratch by 262,160 bytes).
TEST(GenerationBytes, APrefillKeepsTheLargestOfItsStepsGretWorkspaces) {
  GretChunkShape s;
  s.batch = 1;
  s.heads = 4;
  s.head_dim = 128;
  s.row_stride = 4 * s.heads * s.head_dim;
  auto workspace_of = [&](double rows) {
    s.seq_len = static_cast<int64_t>(rows);
    return gret_chunk_workspace_bytes(s, plan_gret_chunk(s, 132));
  };
  const double full = static_cast<double>(workspace_of(32768)), ragged = static_cast<double>(workspace_of(8641));
  ASSERT_LT(full, ragged) << "the case this test is about";
  EXPECT_EQ(gret_prefill_workspace_bytes(1, 32768 + 8641, 32768, workspace_of), ragged);
  EXPECT_EQ(gret_prefill_workspace_bytes(1, 3 * 32768 + 8641, 32768, workspace_of), ragged);
  EXPECT_EQ(gret_prefill_workspace_bytes(1, 2 * 32768, 32768, workspace_of), full) << "no ragged step";
  EXPECT_EQ(gret_prefill_workspace_bytes(1, 8641, 32768, workspace_of), ragged) << "one step of the whole prompt";
  // The other way round, the full step's: a 32,768-row step beside a last one of 64.
  EXPECT_EQ(gret_prefill_workspace_bytes(1, 32768 + 64, 32768, workspace_of),
            std::max(full, static_cast<double>(workspace_of(64))));
}

}  // namespace
}  // namespace yoco::cuda
