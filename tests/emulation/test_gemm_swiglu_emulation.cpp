// The fused W1|W3 GEMM + SwiGLU kernel (cuda/ops/gemm_swiglu_sm90.cu) on the lane emulator,
// before a GPU runs it: its persistent tile loop, the TMA boxes of x, W1 and W3 into the stage
// ring (gemm_swiglu_plan.hpp's layout and tma::bf16_rows_view's maps, the ones the launcher
// encodes), the m64n256k16 SS wgmma that reads the W1 and W3 boxes as one 256-row operand, and
// the epilogue (gate slot i with up slot i + 64, SwiGLU, the swizzled staging tile, 16-byte row
// pieces with rows past M skipped), restated per lane with the kernel's own helpers. Checked
// exactly against a plain product: inputs are multiples of 1/4 in [-1, 1], so every sum is exact,
// and both sides round gate and up to bf16 and apply the same SwiGLU.
//
// The CTA pairs (gemm_swiglu_kernel<2>) too: each CTA's x box and the two weight halves multicast
// into both CTAs' stages (pair_tile_coord, pair_weight_row), a phantom row tile included.
//
// What this cannot see: the barrier ring's waits and arrivals (tests/test_tma_plan.cpp emulates
// its parity arithmetic, tests/test_gemm_swiglu_pairs.cpp the two-CTA ring's), asynchrony, the register budget, and the device's __expf (SwiGLU's
// arithmetic is the element-wise kernel's, ops/swiglu_math.cuh, which the GPU tests compare).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <stdexcept>
#include <vector>

#include "arch/swizzle.hpp"
#include "arch/tma_plan.hpp"
#include "lane_emulator.hpp"
#include "ops/gemm_swiglu_plan.hpp"

namespace {

namespace gs = yoco::cuda::gemm_swiglu;
namespace sm90 = yoco::cuda::sm90;
namespace tma = yoco::cuda::tma;
using namespace yoco::emu;

constexpr int kBM = static_cast<int>(gs::kTileRows), kBN = static_cast<int>(gs::kTileCols),
              kBK = static_cast<int>(gs::kTileK);
constexpr uint16_t kSentinel = 0x4049;  // bf16 3.140625: never a SwiGLU output of these inputs

// One thing broken at a time; each must make the output wrong.
struct Bugs {
  bool up_box_at_gate_rows = false;  // W3's box loaded from W1's rows (n0 instead of F + n0)
  bool warpgroup_rows_halved = false;  // wg's x rows 64 x 64 B in instead of 64 x 128 B
  bool k_step_16_bytes = false;      // the descriptor's start moved 8 columns a step instead of 16
  bool up_slot_32_on = false;        // the gate paired with slot i + 32 instead of i + 64
  bool staging_without_xor = false;  // the staging tile written unswizzled, read swizzled
  bool rows_past_m_stored = false;   // the epilogue's row guard dropped (must throw, not pass)
};

struct Problem {
  int64_t rows, k, ffn_dim, x_stride, out_stride;
  std::vector<uint16_t> x, w13;  // x [rows, x_stride], [W1; W3] [2F, K], bf16 bits
  std::vector<float> xf, wf;     // the same values
};

Problem make_problem(int64_t rows, int64_t k, int64_t ffn_dim, int64_t x_stride, int64_t out_stride) {
  Problem p{rows, k, ffn_dim, x_stride, out_stride, {}, {}, {}, {}};
  std::mt19937 rng(20261127);
  std::uniform_int_distribution<int> d(-4, 4);
  p.x.assign(static_cast<size_t>(rows * x_stride), 0x7FC0);  // NaN in x's padding: a read of it shows
  p.xf.assign(p.x.size(), 0.0f);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < k; ++c) {
      const float v = 0.25f * static_cast<float>(d(rng));
      p.xf[r * x_stride + c] = v;
      p.x[r * x_stride + c] = to_bf16(v);
    }
  p.wf.resize(static_cast<size_t>(2 * ffn_dim * k));
  p.w13.resize(p.wf.size());
  for (size_t i = 0; i < p.wf.size(); ++i) {
    p.wf[i] = 0.25f * static_cast<float>(d(rng));
    p.w13[i] = to_bf16(p.wf[i]);
  }
  return p;
}

// silu(gate) * up on the bf16-rounded accumulators, rounded once (swiglu_math.cuh's arithmetic,
// with the host's exp for the device's __expf).
uint16_t swiglu_bits(float gate, float up) {
  const float a = round_bf16(gate), b = round_bf16(up);
  return to_bf16(a / (1.0f + std::exp(-a)) * b);
}

std::vector<uint16_t> want_output(const Problem& p) {
  std::vector<uint16_t> out(static_cast<size_t>(p.rows * p.out_stride), kSentinel);
  for (int64_t m = 0; m < p.rows; ++m)
    for (int64_t n = 0; n < p.ffn_dim; ++n) {
      double g = 0, u = 0;
      for (int64_t c = 0; c < p.k; ++c) {
        g += static_cast<double>(p.xf[m * p.x_stride + c]) * p.wf[n * p.k + c];
        u += static_cast<double>(p.xf[m * p.x_stride + c]) * p.wf[(p.ffn_dim + n) * p.k + c];
      }
      out[m * p.out_stride + n] = swiglu_bits(static_cast<float>(g), static_cast<float>(u));
    }
  return out;
}

uint32_t staging_offset(int r, int col, const Bugs& bug) {
  if (bug.staging_without_xor) return static_cast<uint32_t>((col >> 6) * (kBM * 128) + r * 128 + (col & 63) * 2);
  return sm90::sw128_offset<kBM>(r, col);
}

struct Maps {
  tma::Bf16RowsView tx, tw;  // the launcher's maps: encode_bf16_rows(x, 1, M, x_stride, 128), (w13, 1, 2F, K, 128)
};

Maps maps_of(const Problem& p) {
  const gs::Shape shape{p.rows, p.k, p.ffn_dim, p.x_stride, p.out_stride};
  if (gs::unsupported(shape) != nullptr) throw std::invalid_argument(gs::unsupported(shape));
  Maps m;
  if (tma::bf16_rows_view(reinterpret_cast<uint64_t>(p.x.data()), 1, p.rows, p.x_stride, kBM, &m.tx) ||
      tma::bf16_rows_view(reinterpret_cast<uint64_t>(p.w13.data()), 1, 2 * p.ffn_dim, p.k, kBN, &m.tw))
    throw std::invalid_argument("no tensor map for these buffers");
  return m;
}

// A CTA's shared memory as the kernel finds it: address 0 is its 1024-aligned base, the rest garbage.
SharedMemory cta_smem(uint32_t seed) {
  SharedMemory smem(gs::kSmemBytes - 1024);
  std::mt19937 rng(seed);
  for (uint32_t a = 0; a < smem.size(); a += 2) smem.store16(a, to_bf16(0.25f * static_cast<float>(rng() % 17) - 2));
  return smem;
}

// One k block of a tile on one CTA: each consumer warpgroup's four m64n256k16 wgmma over stage s.
void mma_block(SharedMemory& smem, int s, int64_t kb, WgAcc<256> (&acc)[2], const Bugs& bug) {
  for (int wg = 0; wg < 2; ++wg) {
    const uint32_t a_off = bug.warpgroup_rows_halved ? static_cast<uint32_t>(wg * 64 * 64) : gs::x_rows_of_warpgroup(wg);
    for (int kk = 0; kk < kBK / 16; ++kk) {
      const uint32_t step = bug.k_step_16_bytes ? static_cast<uint32_t>(kk * 16) : gs::k_step_bytes(kk);
      wgmma_ss<256>(acc[wg], smem, sm90::sw128_desc(gs::stage_x(s) + a_off + step, 16, 1024),
                    sm90::sw128_desc(gs::stage_w1(s) + step, 16, 1024), kb > 0 || kk > 0, /*trans_b=*/0);
    }
  }
}

// The tile's epilogue: SwiGLU of slot i with slot i + 64 into the swizzled staging tile, then 16-byte
// row pieces into `out`, rows past M skipped.
void store_tile(SharedMemory& smem, const WgAcc<256> (&acc)[2], gs::TileCoord c, const Problem& p,
                std::vector<uint16_t>& out, const Bugs& bug) {
  const int up = bug.up_slot_32_on ? 32 : 64;
  for (int wg = 0; wg < 2; ++wg)
    for (int tid = 0; tid < 128; ++tid) {
      const int warp = tid / 32, lane = tid % 32;
      const float* a = acc[wg][tid];
      for (int i = 0; i < 64; i += 2) {
        const int r = gs::fragment_row(wg, warp, lane, i), col = gs::fragment_col(lane, i);
        const uint32_t packed = static_cast<uint32_t>(swiglu_bits(a[i], a[(i + up) % 128])) |
                                (static_cast<uint32_t>(swiglu_bits(a[i + 1], a[(i + 1 + up) % 128])) << 16);
        smem.store32(gs::kOffEpilogue + staging_offset(r, col, bug), packed);
      }
    }
  constexpr int kChunks = kBN / 8;
  for (int wg = 0; wg < 2; ++wg)
    for (int warp = 0; warp < 4; ++warp)
      for (int lane = 0; lane < 32; ++lane)
        for (int idx = lane; idx < 16 * kChunks; idx += 32) {
          const int r = wg * 64 + warp * 16 + idx / kChunks, ch = idx % kChunks;
          const int64_t grow = c.m * kBM + r;
          if (grow >= p.rows && !bug.rows_past_m_stored) continue;
          const int64_t at = grow * p.out_stride + c.n * kBN + ch * 8;
          if (at < 0 || at + 8 > static_cast<int64_t>(out.size()))
            throw std::out_of_range("a 16-byte store past the output");
          const uint32_t src = gs::kOffEpilogue + sm90::sw128_offset<kBM>(r, ch * 8);
          smem.check(src, 16, 16, "epilogue staging read");
          for (int e = 0; e < 8; ++e) out[static_cast<size_t>(at + e)] = smem.load16(src + 2 * e);
        }
}

// The kernel's grid of `ctas` persistent CTAs, one after another (their tiles are disjoint).
std::vector<uint16_t> run_kernel(const Problem& p, int ctas, const Bugs& bug) {
  const Maps mp = maps_of(p);
  std::vector<uint16_t> out(static_cast<size_t>(p.rows * p.out_stride), kSentinel);
  const int64_t tiles_m = gs::row_tiles(p.rows), tiles_n = gs::col_tiles(p.ffn_dim), k_blocks = p.k / kBK;

  for (int cta = 0; cta < ctas; ++cta) {
    SharedMemory smem = cta_smem(static_cast<uint32_t>(cta));
    int64_t use = 0;
    for (int64_t t = cta; t < tiles_m * tiles_n; t += ctas) {
      const gs::TileCoord c = gs::tile_coord(t, tiles_m, tiles_n);
      const auto row = static_cast<int32_t>(c.m * kBM), n1 = static_cast<int32_t>(c.n * kBN),
                 n3 = static_cast<int32_t>(bug.up_box_at_gate_rows ? n1 : p.ffn_dim + c.n * kBN);
      WgAcc<256> acc[2];
      for (int64_t kb = 0; kb < k_blocks; ++kb, ++use) {
        const int s = tma::ring_stage(use, gs::kStages);
        const auto k0 = static_cast<int32_t>(kb * kBK);
        tma_load_box_sw128(smem, gs::stage_x(s), p.x.data(), mp.tx, k0, row, 0);
        tma_load_box_sw128(smem, gs::stage_w1(s), p.w13.data(), mp.tw, k0, n1, 0);
        tma_load_box_sw128(smem, gs::stage_w3(s), p.w13.data(), mp.tw, k0, n3, 0);
        mma_block(smem, s, kb, acc, bug);
      }
      store_tile(smem, acc, c, p, out, bug);
    }
  }
  return out;
}

// The kernel in CTA pairs (gemm_swiglu_kernel<2>): `clusters` clusters, one after another, each of two
// CTAs walking the same pair tiles. At every k block each CTA loads its own x box and its weight half
// (pair_weight_row: rank 0 W1's rows, rank 1 W3's) into both CTAs' stage at the one-CTA kernel's offset
// (the multicast), then each runs its wgmma. A phantom row tile (rank 1 past the last, where the row tiles
// are odd) loads its peer's x box and stores nothing. `swap_halves` plants a bug: each rank
// multicasts into the other's half of the stage.
std::vector<uint16_t> run_pairs(const Problem& p, int clusters, bool swap_halves = false) {
  const Maps mp = maps_of(p);
  const Bugs none{};
  std::vector<uint16_t> out(static_cast<size_t>(p.rows * p.out_stride), kSentinel);
  const int64_t tiles_m = gs::row_tiles(p.rows), tiles_n = gs::col_tiles(p.ffn_dim), k_blocks = p.k / kBK;
  for (int cl = 0; cl < clusters; ++cl) {
    SharedMemory smem[gs::kPairCtas] = {cta_smem(static_cast<uint32_t>(2 * cl)), cta_smem(static_cast<uint32_t>(2 * cl + 1))};
    int64_t use = 0;
    for (int64_t u = cl; u < gs::pair_tiles(tiles_m, tiles_n); u += clusters) {
      gs::TileCoord c[gs::kPairCtas];
      WgAcc<256> acc[gs::kPairCtas][2];
      for (int r = 0; r < gs::kPairCtas; ++r) c[r] = gs::pair_tile_coord(u, tiles_m, tiles_n, r);
      for (int64_t kb = 0; kb < k_blocks; ++kb, ++use) {
        const int s = tma::ring_stage(use, gs::kStages);
        const auto k0 = static_cast<int32_t>(kb * kBK);
        for (int r = 0; r < gs::kPairCtas; ++r) {
          tma_load_box_sw128(smem[r], gs::stage_x(s), p.x.data(), mp.tx, k0,
                             static_cast<int32_t>(gs::x_row_tile(c[r].m, tiles_m) * kBM), 0);
          const uint32_t dst = (r == 0) != swap_halves ? gs::stage_w1(s) : gs::stage_w3(s);
          for (int q = 0; q < gs::kPairCtas; ++q)
            if (gs::kPairMask & (1u << q))
              tma_load_box_sw128(smem[q], dst, p.w13.data(), mp.tw, k0,
                                 static_cast<int32_t>(gs::pair_weight_row(c[r].n, p.ffn_dim, r)), 0);
        }
        for (int r = 0; r < gs::kPairCtas; ++r) mma_block(smem[r], s, kb, acc[r], none);
      }
      for (int r = 0; r < gs::kPairCtas; ++r) store_tile(smem[r], acc[r], c[r], p, out, none);
    }
  }
  return out;
}

int mismatches(const std::vector<uint16_t>& got, const std::vector<uint16_t>& want) {
  int bad = 0;
  for (size_t i = 0; i < got.size(); ++i) bad += got[i] != want[i];
  return bad;
}

// M ragged (the second row tile is 72 rows, the TMA zero-fills the rest), three k blocks (the
// ring wraps within a CTA's tiles), x's rows padded with NaNs past K, out's rows padded past F
// (left untouched), two column tiles, three persistent CTAs over four tiles.
Problem small_problem() { return make_problem(200, 192, 256, 200, 264); }

TEST(GemmSwigluEmulation, EveryTileEqualsThePlainProductThroughSwiglu) {
  const Problem p = small_problem();
  const std::vector<uint16_t> want = want_output(p);
  EXPECT_EQ(mismatches(run_kernel(p, 3, {}), want), 0);
  EXPECT_EQ(mismatches(run_kernel(p, 1, {}), want), 0) << "one CTA walking every tile";
}

// In CTA pairs: the same output, with an even and an odd number of row tiles (a phantom), more pair
// tiles than clusters, and one cluster walking them all; the halves multicast the wrong way round must show.
// (A phantom loads its peer's x box, x_row_tile; its rows are never stored.)
TEST(GemmSwigluEmulation, CtaPairsGiveTheSameOutput) {
  const Problem even = small_problem();  // 2 row tiles x 2 column tiles: one pair row
  EXPECT_EQ(mismatches(run_pairs(even, 1), want_output(even)), 0);
  EXPECT_EQ(mismatches(run_pairs(even, 2), want_output(even)), 0);
  const Problem three = make_problem(300, 128, 256, 128, 256);  // 3 row tiles: rank 1 of the second pair row is a phantom
  const std::vector<uint16_t> want = want_output(three);
  EXPECT_EQ(mismatches(run_pairs(three, 1), want), 0);
  EXPECT_EQ(mismatches(run_pairs(three, 3), want), 0);
  EXPECT_EQ(mismatches(run_kernel(three, 2, {}), want), 0);
  EXPECT_GT(mismatches(run_pairs(three, 2, /*swap_halves=*/true), want), 0);
}

TEST(GemmSwigluEmulation, TheStagesAndTheirBarriersFitTheBlocksSharedMemory) {
  EXPECT_LE(gs::kSmemBytes, 227u * 1024);
  for (int s = 0; s < gs::kStages; ++s) {
    EXPECT_EQ(gs::stage_x(s) % 1024, 0u);
    EXPECT_EQ(gs::stage_w1(s) % 1024, 0u);
    EXPECT_EQ(gs::stage_w3(s), gs::stage_w1(s) + kBN * 128) << "W3's 128 rows continue W1's as one operand";
    EXPECT_LE(gs::stage_w3(s) + gs::kBHalfBytes, gs::kOffEpilogue);
    EXPECT_EQ(gs::full_bar(s) % 8, 0u);
    EXPECT_GE(gs::full_bar(s), gs::kOffEpilogue + gs::kEpilogueBytes);
    EXPECT_LE(gs::empty_bar(s) + 8, gs::kSmemBytes - 1024);
  }
}

TEST(GemmSwigluEmulation, PlantedBugsChangeTheOutput) {
  const Problem p = small_problem();
  const std::vector<uint16_t> want = want_output(p);
  auto broken = [&](Bugs b) { return mismatches(run_kernel(p, 3, b), want); };
  Bugs b;
  b.up_box_at_gate_rows = true;
  EXPECT_GT(broken(b), 0);
  b = {};
  b.warpgroup_rows_halved = true;
  EXPECT_GT(broken(b), 0);
  b = {};
  b.k_step_16_bytes = true;
  EXPECT_GT(broken(b), 0);
  b = {};
  b.up_slot_32_on = true;
  EXPECT_GT(broken(b), 0);
  b = {};
  b.staging_without_xor = true;
  EXPECT_GT(broken(b), 0);
  b = {};
  b.rows_past_m_stored = true;
  EXPECT_THROW(run_kernel(p, 3, b), std::out_of_range) << "rows past M would be stored past the output";
}

TEST(GemmSwigluEmulation, TmaBoxesZeroFillPastTheMapAndSwizzleByRow) {
  std::vector<uint16_t> g(static_cast<size_t>(3 * 64));
  for (size_t i = 0; i < g.size(); ++i) g[i] = static_cast<uint16_t>(i + 1);
  tma::Bf16RowsView v;
  ASSERT_EQ(tma::bf16_rows_view(reinterpret_cast<uint64_t>(g.data()), 1, 3, 64, 8, &v), nullptr);
  SharedMemory smem(2048);
  for (uint32_t a = 0; a < smem.size(); a += 2) smem.store16(a, 0xABCD);
  tma_load_box_sw128(smem, 1024, g.data(), v, 0, 1, 0);  // rows 1, 2 of the map, then 6 rows past it
  for (uint32_t r = 0; r < 8; ++r)
    for (uint32_t i = 0; i < 64; ++i) {
      const uint32_t at = 1024 + r * 128 + ((((i / 8) ^ (r % 8)) * 16) + (i % 8) * 2);
      EXPECT_EQ(smem.load16(at), r < 2 ? g[(r + 1) * 64 + i] : 0) << r << " " << i;
    }
  EXPECT_THROW(tma_load_box_sw128(smem, 512, g.data(), v, 0, 0, 0), std::invalid_argument);
}

}  // namespace
