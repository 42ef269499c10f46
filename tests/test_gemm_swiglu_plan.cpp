// The fused W1|W3 GEMM + SwiGLU kernel's integer maths (cuda/ops/gemm_swiglu_plan.hpp) on the CPU,
// before a GPU runs it: the shapes it refuses, the grouped raster order (every tile exactly once,
// concurrent CTAs inside one group), and the fragment map its epilogue writes through (every
// element of a 128 x 128 tile exactly once, by two adjacent slots per 4-byte store).
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "ops/gemm_swiglu_plan.hpp"

namespace {

using namespace yoco::cuda::gemm_swiglu;

TEST(GemmSwigluPlan, ServesTheModelsShapesAndRefusesTheRestWithAReason) {
  EXPECT_EQ(unsupported(Shape{32768, 3072, 8192, 3072, 8192}), nullptr);  // yoco-3b, a 32K chunk
  EXPECT_EQ(unsupported(Shape{4097, 256, 768, 256, 768}), nullptr);       // the small presets, a ragged M
  EXPECT_EQ(unsupported(Shape{1, 64, 128, 64, 128}), nullptr);
  EXPECT_EQ(std::string(unsupported(Shape{0, 64, 128, 64, 128})), "an empty operand");
  EXPECT_EQ(std::string(unsupported(Shape{8, 96, 128, 96, 128})), "K is not a multiple of 64");
  EXPECT_EQ(std::string(unsupported(Shape{8, 64, 1000, 64, 1000})), "F is not a multiple of 128");
  EXPECT_NE(unsupported(Shape{8, 64, 128, 60, 128}), nullptr);
  EXPECT_NE(unsupported(Shape{8, 64, 128, 68, 128}), nullptr);
  EXPECT_NE(unsupported(Shape{8, 64, 128, 64, 100}), nullptr);
  EXPECT_NE(unsupported(Shape{(int64_t{1} << 31) - 100, 64, 128, 64, 128}), nullptr);
  EXPECT_NE(unsupported(Shape{8, 64, int64_t{1} << 30, 64, int64_t{1} << 30}), nullptr);
  EXPECT_EQ(std::string(unsupported(Shape{int64_t{1} << 30, 1024, 128, 1024, 128})), "an operand reaches 2^40 bytes");
  // Every block of a step, the last one too, fuses or the step keeps its W1|W3 buffer.
  EXPECT_TRUE(fused_on_every_block(32768, 0, 3072, 8192));
  EXPECT_TRUE(fused_on_every_block(32768 + 1024, 8192, 3072, 8192));
  EXPECT_FALSE(fused_on_every_block(32768 + 100, 8192, 3072, 8192));
  EXPECT_FALSE(fused_on_every_block(kMinRowsToFuse - 1, 0, 3072, 8192));
  EXPECT_FALSE(fused_on_every_block(0, 0, 3072, 8192));
  EXPECT_FALSE(fused_on_every_block(4096, 0, 3072, 8000));
}

TEST(GemmSwigluPlan, TheRasterVisitsEveryTileOnceInGroupsOfRowTiles) {
  for (int64_t tm : {1, 3, 8, 9, 17, 256})
    for (int64_t tn : {1, 6, 64}) {
      std::set<std::pair<int64_t, int64_t>> seen;
      for (int64_t t = 0; t < tm * tn; ++t) {
        const TileCoord c = tile_coord(t, tm, tn);
        ASSERT_GE(c.m, 0);
        ASSERT_LT(c.m, tm);
        ASSERT_GE(c.n, 0);
        ASSERT_LT(c.n, tn);
        ASSERT_TRUE(seen.insert({c.m, c.n}).second) << tm << "x" << tn << " tile " << t;
        // Inside its group of kGroupRows row tiles.
        ASSERT_EQ(c.m / kGroupRows, t / (kGroupRows * tn)) << t;
      }
      EXPECT_EQ(static_cast<int64_t>(seen.size()), tm * tn);
    }
  EXPECT_EQ(row_tiles(1), 1);
  EXPECT_EQ(row_tiles(128), 1);
  EXPECT_EQ(row_tiles(129), 2);
  EXPECT_EQ(col_tiles(8192), 64);
}

TEST(GemmSwigluPlan, TheFragmentsCoverTheTileOnceWithAdjacentPairs) {
  std::vector<int> hits(kTileRows * kTileCols, 0);
  for (int wg = 0; wg < 2; ++wg)
    for (int warp = 0; warp < 4; ++warp)
      for (int lane = 0; lane < 32; ++lane)
        for (int i = 0; i < 64; ++i) {
          const int r = fragment_row(wg, warp, lane, i), c = fragment_col(lane, i);
          ASSERT_GE(r, 0);
          ASSERT_LT(r, kTileRows);
          ASSERT_GE(c, 0);
          ASSERT_LT(c, kTileCols);
          ++hits[r * kTileCols + c];
          if (i % 2 == 0) {  // the epilogue stores slots i, i + 1 as one bf16x2: same row, next column
            ASSERT_EQ(fragment_row(wg, warp, lane, i + 1), r);
            ASSERT_EQ(fragment_col(lane, i + 1), c + 1);
            ASSERT_EQ(c % 2, 0);
          }
          // The up value of slot i: slot i + 64 of the m64n256 fragment, 128 columns right.
          ASSERT_EQ(fragment_row(wg, warp, lane, i + 64), r);
          ASSERT_EQ(fragment_col(lane, i + 64), c + kTileCols);
          // A warp writes only its own 16 rows (its epilogue staging needs no CTA barrier).
          ASSERT_EQ(r / 16, wg * 4 + warp);
        }
  for (int h : hits) ASSERT_EQ(h, 1);
}

}  // namespace
