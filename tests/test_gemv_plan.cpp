// The decode GEMV's integer maths (cuda/ops/gemv_plan.hpp) on the CPU, before a GPU runs it: the calls
// it serves and refuses, and the kernel's walk (ops/gemv.cu) replayed here: every block and warp of
// the grid, every round and slot of every lane, so that each piece of the weight is read exactly once,
// by one warp, and each output column written once.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include <cmath>
#include <random>

#include "cuda/gemv_emulation.hpp"
#include "dtype.hpp"
#include "ops/gemv_plan.hpp"

namespace {

using namespace yoco::cuda::gemv;

TEST(GemvPlan, ServesTheDecodeStepsShapesAndRefusesTheRestWithAReason) {
  // The 3B presets' decode projections (yoco-3b: q|k|v|g, out_proj, W1|W3, W2, the global K|V; transformer-3b:
  // q|k|v, o_proj), at batch 1 and 4.
  for (const auto& [n, k] : std::vector<std::pair<int64_t, int64_t>>{
           {12288, 3072}, {3072, 3072}, {16384, 3072}, {3072, 8192}, {2048, 3072}, {5120, 3072}})
    for (int64_t m : {1, 4}) EXPECT_EQ(unsupported(m, k, n, 256, 4096), nullptr) << m << " x " << n << " x " << k;
  EXPECT_EQ(std::string(unsupported(0, 3072, 3072, 0, 0)), "an empty operand");
  EXPECT_EQ(std::string(unsupported(5, 3072, 3072, 0, 0)), "more rows than the GEMV serves (4)");
  EXPECT_EQ(std::string(unsupported(1, 3070, 3072, 0, 0)), "K is not a multiple of 8");
  EXPECT_EQ(std::string(unsupported(1, 3072, 3072, 8, 0)), "x or w is not 16-byte aligned");
  EXPECT_EQ(std::string(unsupported(1, 3072, 3072, 0, 24)), "x or w is not 16-byte aligned");
  // The LM head (100288 x 3072): cuBLAS streams it at the copy rate already.
  EXPECT_NE(unsupported(1, 3072, 100288, 0, 0), nullptr);
  EXPECT_EQ(unsupported(1, 8, kMaxWeightElems / 8, 0, 0), nullptr) << "exactly the largest weight";
  EXPECT_NE(unsupported(1, 8, kMaxWeightElems / 8 + 1, 0, 0), nullptr);
  // A product near 2^63 is refused, not overflowed.
  EXPECT_NE(unsupported(1, int64_t{1} << 40, int64_t{1} << 40, 0, 0), nullptr);
}

// The kernel's loops, as written in ops/gemv.cu, over a whole grid: reads[j * pieces + p] counts the
// loads of piece p of row j, writes[j] the stores of column j.
void walk(int64_t k, int64_t n) {
  SCOPED_TRACE("k " + std::to_string(k) + " n " + std::to_string(n));
  const int64_t P = pieces(k), blocks = grid_blocks(n), stride = blocks * kWarpsPerBlock;
  ASSERT_GE(blocks, 1);
  ASSERT_LE(blocks, kMaxBlocks);
  std::vector<uint8_t> reads(static_cast<size_t>(n * P), 0);
  std::vector<uint8_t> writes(static_cast<size_t>(n), 0);
  for (int64_t b = 0; b < blocks; ++b)
    for (int warp = 0; warp < kWarpsPerBlock; ++warp)
      for (int64_t j = first_row(b, warp); j < n; j += stride) {
        for (int64_t p0 = 0; p0 < P; p0 += round_pieces())
          for (int u = 0; u < kUnroll; ++u)
            for (int lane = 0; lane < 32; ++lane) {
              const int64_t p = piece_of(p0, u, lane);
              if (p < P) ++reads[static_cast<size_t>(j * P + p)];
            }
        ++writes[static_cast<size_t>(j)];
      }
  for (int64_t i = 0; i < n * P; ++i)
    if (reads[static_cast<size_t>(i)] != 1) FAIL() << "piece " << i % P << " of row " << i / P << " read "
                                                    << int{reads[static_cast<size_t>(i)]} << " times";
  for (int64_t j = 0; j < n; ++j)
    if (writes[static_cast<size_t>(j)] != 1) FAIL() << "column " << j << " written " << int{writes[static_cast<size_t>(j)]} << " times";
}

TEST(GemvPlan, EveryWeightPieceIsReadOnceAndEveryColumnWrittenOnce) {
  walk(8, 1);                     // one piece, one row: one lane of one warp
  walk(3072, 3072);               // out_proj: 384 pieces, 3 rounds of 128
  walk(8192, 3072);               // W2
  walk(200, 13);                  // a round cut short, rows not a multiple of the block's warps
  walk(1024 + 8, 9);              // one piece past whole rounds
  walk(8, kMaxBlocks * kWarpsPerBlock + 77);  // more rows than the capped grid's warps: they stride
}

TEST(GemvPlan, AWarpsSlotIsOneContiguousStretch) {
  // Lanes 0..31 of one slot read 32 consecutive pieces (512 bytes), so a warp's load is coalesced.
  for (int u = 0; u < kUnroll; ++u)
    for (int lane = 1; lane < 32; ++lane) EXPECT_EQ(piece_of(0, u, lane), piece_of(0, u, lane - 1) + 1);
  EXPECT_EQ(piece_of(0, 1, 0), 32);
  EXPECT_EQ(round_pieces(), 32 * kUnroll);
  EXPECT_EQ(grid_blocks(1), 1);
  EXPECT_EQ(grid_blocks(kWarpsPerBlock + 1), 2);
  EXPECT_EQ(grid_blocks(int64_t{1} << 40), kMaxBlocks);
}

// The kernel's order of sums (tests/cuda/gemv_emulation.hpp, which the GPU test holds the kernel's fp32
// bits to) computes the product: within fp32 rounding of the fp64 one, at m 1..4 and odd shapes.
TEST(GemvPlan, TheKernelsOrderOfSumsComputesTheProduct) {
  std::mt19937_64 rng(5);
  std::normal_distribution<float> d(0.0f, 1.0f);
  for (const auto& [m, k, n] : std::vector<std::array<int64_t, 3>>{{1, 3072, 64}, {4, 1032, 9}, {3, 200, 13}, {2, 8, 1}}) {
    SCOPED_TRACE("m " + std::to_string(m) + " k " + std::to_string(k) + " n " + std::to_string(n));
    std::vector<float> x(static_cast<size_t>(m * k)), w(static_cast<size_t>(n * k));
    for (auto& v : x) v = yoco::round_to_bf16(d(rng));
    for (auto& v : w) v = yoco::round_to_bf16(d(rng) / 27);
    const std::vector<float> got = yoco::cuda_test::gemv_emulate(x, m, k, w, n);
    double num = 0, den = 0;
    for (int64_t r = 0; r < m; ++r)
      for (int64_t j = 0; j < n; ++j) {
        double exact = 0;
        for (int64_t c = 0; c < k; ++c)
          exact += static_cast<double>(x[static_cast<size_t>(r * k + c)]) * w[static_cast<size_t>(j * k + c)];
        const double e = got[static_cast<size_t>(r * n + j)] - exact;
        num += e * e;
        den += exact * exact;
      }
    EXPECT_LE(std::sqrt(num / den), 1e-6);
  }
}

}  // namespace
