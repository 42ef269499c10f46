#pragma once
// The FFN's up half in one Hopper kernel (ops/gemm_swiglu_sm90.cu): its tile shape, the order its
// persistent CTAs take tiles in, and the shapes it serves. Integer maths only, callable from host
// and device, so tests/test_gemm_swiglu_plan.cpp proves it on the CPU before a GPU runs it.
//
// out[M, F] = silu(x W1ᵀ) ⊙ (x W3ᵀ), x [M, K], the fused weight [W1; W3] [2F, K] (W1's rows
// first, as the runners lay it out). A CTA computes a tile of kTileRows rows by kTileCols output
// columns: the GEMM of kTileRows x K by K x 2 kTileCols (W1's rows n0.. and W3's rows F + n0..),
// read by one wgmma m64n256k16 per warpgroup and 16 columns, so each thread holds a gate in slot
// i < 64 of its fragment and the gate's up value in slot i + 64.
#include <cstdint>

#include "arch/hd.hpp"

namespace yoco::cuda::gemm_swiglu {

inline constexpr int64_t kTileRows = 128;  // two consumer warpgroups of 64 rows
inline constexpr int64_t kTileCols = 128;  // output columns: B holds 128 W1 rows and 128 W3 rows
inline constexpr int64_t kTileK = 64;      // one 128-byte swizzled TMA box per operand and stage
inline constexpr int64_t kGroupRows = 8;   // row tiles a raster group sweeps together (L2 reuse)
// The runners fuse from this many rows of a step up: below it (a decode step's few sequences) the
// row tiles are mostly padding and a handful of CTAs would stream the weights, where cuBLAS's
// GEMV-like kernels and the element-wise pass cost little.
inline constexpr int64_t kMinRowsToFuse = 1024;

struct Shape {
  int64_t rows = 0;        // M
  int64_t k = 0;           // K (the model dim)
  int64_t ffn_dim = 0;     // F
  int64_t x_stride = 0;    // elements between x's rows (>= k)
  int64_t out_stride = 0;  // elements between out's rows (>= F)
};

// nullptr when the kernel serves the shape, else the rule it breaks (the caller falls back to the
// GEMM and the element-wise kernel).
YOCO_HD constexpr const char* unsupported(const Shape& s) {
  constexpr int64_t kInt32 = (int64_t{1} << 31) - 1;
  if (s.rows < 1 || s.k < 1 || s.ffn_dim < 1) return "an empty operand";
  if (s.k % kTileK != 0) return "K is not a multiple of 64";
  if (s.ffn_dim % kTileCols != 0) return "F is not a multiple of 128";
  if (s.x_stride < s.k || s.x_stride % 8 != 0) return "x's row stride is below K or not a multiple of 8";
  if (s.out_stride < s.ffn_dim || s.out_stride % 8 != 0) return "out's row stride is below F or not a multiple of 8";
  // TMA coordinates are int32 and a box may overhang the last row tile.
  if (s.rows > kInt32 - kTileRows || 2 * s.ffn_dim > kInt32 || s.x_stride > kInt32) return "a dimension reaches 2^31";
  // A tensor map's strides stay under 2^40 bytes (arch/tma_plan.hpp): x's rows and the weight's.
  constexpr int64_t kStrideBytes = int64_t{1} << 40;
  if (s.rows > (kStrideBytes - 1) / (2 * s.x_stride) || 2 * s.ffn_dim > (kStrideBytes - 1) / (2 * s.k))
    return "an operand reaches 2^40 bytes";
  return nullptr;
}

// Whether every FFN call of a step of `rows` rows, run in blocks of `block` rows (0: the whole
// step), takes the fused kernel by shape: every block, the last one too, has kMinRowsToFuse rows
// or more and the shape is served. Then the step needs no [rows, 2F] buffer for the pair
// (the runners' allocation and the memory formula, runner/generation_bytes.hpp, both ask this).
YOCO_HD constexpr bool fused_on_every_block(int64_t rows, int64_t block, int64_t dim, int64_t ffn_dim) {
  if (rows < 1) return false;
  const int64_t b = block > 0 && block < rows ? block : rows;
  const int64_t last = rows % b == 0 ? b : rows % b;
  return last >= kMinRowsToFuse && unsupported(Shape{b, dim, ffn_dim, dim, ffn_dim}) == nullptr;
}

YOCO_HD constexpr int64_t row_tiles(int64_t rows) { return (rows + kTileRows - 1) / kTileRows; }
YOCO_HD constexpr int64_t col_tiles(int64_t ffn_dim) { return ffn_dim / kTileCols; }

struct TileCoord {
  int64_t m = 0, n = 0;  // row tile, output column tile
};
// Tile t of tiles_m x tiles_n in grouped raster order: groups of kGroupRows row tiles (the last
// one may be short); inside a group the row tile moves fastest, then the column tile. Concurrent
// CTAs (consecutive t) then share a few row tiles of x and a band of weight rows in L2.
YOCO_HD constexpr TileCoord tile_coord(int64_t t, int64_t tiles_m, int64_t tiles_n) {
  const int64_t per_group = kGroupRows * tiles_n;
  const int64_t group = t / per_group, first_m = group * kGroupRows;
  const int64_t rows_in_group = tiles_m - first_m < kGroupRows ? tiles_m - first_m : kGroupRows;
  const int64_t local = t - group * per_group;
  return TileCoord{first_m + local % rows_in_group, local / rows_in_group};
}

// Where accumulator slot i (0..63) of an m64n256 wgmma fragment lands in the CTA tile (slot
// i + 64: the same row, 128 columns right, the up half), for
// thread `lane` of warp `warp` (0..3) of consumer warpgroup `wg` (0, 1): the PTX ISA's layout of
// a wgmma D fragment (a warp owns 16 rows; per 8-column group j, slots 4j, 4j+1 are row lane/4 at
// columns 8j + 2 (lane % 4) + {0, 1}, slots 4j+2, 4j+3 the row 8 below).
YOCO_HD constexpr int fragment_row(int wg, int warp, int lane, int i) {
  return wg * 64 + warp * 16 + (lane >> 2) + ((i >> 1) & 1) * 8;
}
YOCO_HD constexpr int fragment_col(int lane, int i) { return (i >> 2) * 8 + (lane & 3) * 2 + (i & 1); }

// ---- CTA pairs: the weight tile loaded once for two row tiles ------------------------------
// Why: the one-CTA kernel reads 48 KiB from L2 a k block (x 16, W1 16, W3 16) for 4.2 MFLOP, 87
// FLOP a byte: at cuBLAS's 780 TFLOP/s that is about 9 TB/s out of the L2, more than it gives, and
// the kernel runs at 85% of cuBLAS's pace (run-21). cuBLAS's own kernel for these shapes
// (`..._2x1_..._coopB`) runs its tiles in 2-CTA clusters. In a cluster of kPairCtas CTAs, the two
// take row tiles 2 p and 2 p + 1 of one column tile, load their own x box, and each loads one half
// of the shared weight tile (rank 0 W1's box, rank 1 W3's) multicast into both CTAs' stages: 32 KiB
// a CTA and k block, 131 FLOP a byte, cuBLAS's ratio.
inline constexpr int kPairCtas = 2;
inline constexpr uint16_t kPairMask = (1u << kPairCtas) - 1;  // multicast to both CTAs of the cluster
// Pair tiles: ceil(tiles_m / 2) pair rows x tiles_n, in tile_coord's grouped raster (groups of kGroupRows
// pair rows).
YOCO_HD constexpr int64_t pair_row_tiles(int64_t tiles_m) { return (tiles_m + 1) / 2; }
YOCO_HD constexpr int64_t pair_tiles(int64_t tiles_m, int64_t tiles_n) { return pair_row_tiles(tiles_m) * tiles_n; }
// The tile of cluster rank `rank` (0, 1) at pair tile pt. Where tiles_m is odd, rank 1 of the last
// pair row gets m = tiles_m, a phantom past the last row tile: it loads and multicasts its weight
// half like any other (its peer needs it), loads its peer's x box (x_row_tile: an in-bounds box, so
// nothing rests on how the TMA counts a box wholly out of bounds), and stores nothing (its rows are
// all >= M).
YOCO_HD constexpr TileCoord pair_tile_coord(int64_t pt, int64_t tiles_m, int64_t tiles_n, int rank) {
  const TileCoord p = tile_coord(pt, pair_row_tiles(tiles_m), tiles_n);
  return TileCoord{2 * p.m + rank, p.n};
}
// The row tile whose x box the CTA of tile m loads: its own, or for a phantom its peer's.
YOCO_HD constexpr int64_t x_row_tile(int64_t m, int64_t tiles_m) { return m < tiles_m ? m : tiles_m - 1; }
// The weight rows rank `rank` loads for column tile n: W1's rows n 128.. (rank 0) or W3's F + n 128..
// (rank 1); the box lands at the same place of the stage as the one-CTA kernel's (stage_w1 / stage_w3).
YOCO_HD constexpr int64_t pair_weight_row(int64_t n_tile, int64_t ffn_dim, int rank) {
  return (rank == 0 ? 0 : ffn_dim) + n_tile * kTileCols;
}
// Consumer warps a CTA: two warpgroups of four.
inline constexpr int kConsumerWarps = 8;
// Arrivals that free a stage: every consumer warp of every CTA that reads it (with pairs, a stage's
// weight half is written by the peer's multicast, so neither producer may refill it before both CTAs'
// consumers are done with it).
YOCO_HD constexpr int empty_arrivals(int ctas) { return kConsumerWarps * ctas; }

// ---- The CTA's shared memory, in bytes from its 1024-aligned base ----------------------------
// kStages stages of [x's box | W1's box | W3's box], each a 128-row x 64-column bf16 box in the
// TMA's 128-byte swizzle (row r at 128 r, its 16-byte chunks XORed with r % 8), then the
// epilogue's staging tile and the ring's mbarriers. The wgmma B operand of a stage is its W1 box
// and the W3 box right after it read as one 256-row K-major operand (8-row atoms 1024 B apart all
// the way), so the W3 box must start where the W1 box's 128 rows end.
inline constexpr int kStages = 4;
inline constexpr uint32_t kABytes = kTileRows * kTileK * 2;      // 16 KiB
inline constexpr uint32_t kBHalfBytes = kTileCols * kTileK * 2;  // 16 KiB: 128 rows of W1 (or W3)
inline constexpr uint32_t kStageBytes = kABytes + 2 * kBHalfBytes;
inline constexpr uint32_t kEpilogueBytes = kTileRows * kTileCols * 2;  // [2 halves][128 rows][64]
inline constexpr uint32_t kOffEpilogue = kStages * kStageBytes;
inline constexpr uint32_t kOffBars = kOffEpilogue + kEpilogueBytes;
inline constexpr uint32_t kSmemBytes = kOffBars + 2 * kStages * 8 + 1024;  // + slack to align the base
static_assert(kABytes % 1024 == 0 && kBHalfBytes == kTileCols * 128, "boxes start on swizzle atoms, W3 after W1");
YOCO_HD constexpr uint32_t stage_x(int s) { return static_cast<uint32_t>(s) * kStageBytes; }
YOCO_HD constexpr uint32_t stage_w1(int s) { return stage_x(s) + kABytes; }
YOCO_HD constexpr uint32_t stage_w3(int s) { return stage_w1(s) + kBHalfBytes; }
YOCO_HD constexpr uint32_t full_bar(int s) { return kOffBars + 8 * static_cast<uint32_t>(s); }
YOCO_HD constexpr uint32_t empty_bar(int s) { return kOffBars + 8 * static_cast<uint32_t>(kStages + s); }
// Consumer warpgroup wg's 64 rows of the x box, and wgmma step kk's 16 columns of a 128-byte
// swizzled row (the descriptor's start moves 32 bytes; the hardware swizzles the address).
YOCO_HD constexpr uint32_t x_rows_of_warpgroup(int wg) { return static_cast<uint32_t>(wg) * 64 * 128; }
YOCO_HD constexpr uint32_t k_step_bytes(int kk) { return static_cast<uint32_t>(kk) * 32; }

}  // namespace yoco::cuda::gemm_swiglu
