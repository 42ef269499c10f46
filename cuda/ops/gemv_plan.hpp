#pragma once
// The decode step's projections as a GEMV (ops/gemv.cu): y[m, n] = x[m, k] · w[n, k]ᵀ for a few rows
// m (the decode batch), where the work is streaming the weight once. cublasGemmEx runs these shapes at
// 27-68% of the copy rate (bench gemm_shapes, m 1, H200 run-04) and splits K with a reduce kernel
// after it (CUPTI: 79 splitKreduce launches a yoco-3b step at 32K). Here one warp takes one weight
// row at a time: its lanes read the row in 16-byte pieces, kUnroll loads in flight a lane before any
// multiply, the m rows of x (a few KB, hot in L1) beside them, fp32 sums reduced by shuffles.
//
// Integer maths only, callable from host and device: tests/test_gemv_plan.cpp walks the kernel's
// indices on the CPU (every weight piece read once, by one lane of one warp).
#include <cstdint>

#include "arch/hd.hpp"

namespace yoco::cuda::gemv {

inline constexpr int64_t kMaxRows = 4;     // the kernel's instantiations: m = 1..4
inline constexpr int kWarpsPerBlock = 8;   // one weight row a warp at a time
inline constexpr int kThreads = 32 * kWarpsPerBlock;
inline constexpr int64_t kPieceElems = 8;  // 16 bytes of bf16: one uint4 load
inline constexpr int kUnroll = 4;          // loads in flight a lane before the first multiply
// Past this many weight elements (128 MB of bf16) cuBLAS already streams at the copy rate: the LM
// head (100288 x 3072, 616 MB) ran at 4.3 TB/s inside the H200's decode step (run-07's CUPTI).
inline constexpr int64_t kMaxWeightElems = int64_t{64} << 20;
// Blocks are capped (the warps then stride over the rows): a launch's grid stays far below 2^31.
inline constexpr int64_t kMaxBlocks = int64_t{1} << 16;

// nullptr when the kernel serves the call, else the rule it breaks (the caller takes cuBLAS).
// x_addr, w_addr: the operands' addresses (16-byte loads need 16-byte alignment).
YOCO_HD constexpr const char* unsupported(int64_t m, int64_t k, int64_t n, uint64_t x_addr, uint64_t w_addr) {
  if (m < 1 || k < 1 || n < 1) return "an empty operand";
  if (m > kMaxRows) return "more rows than the GEMV serves (4)";
  if (k % kPieceElems != 0) return "K is not a multiple of 8";
  if (x_addr % 16 != 0 || w_addr % 16 != 0) return "x or w is not 16-byte aligned";
  if (n > kMaxWeightElems / k) return "a weight past 64M elements (cuBLAS streams those at the copy rate)";
  return nullptr;
}

YOCO_HD constexpr int64_t pieces(int64_t k) { return k / kPieceElems; }

// One block a kWarpsPerBlock rows, at most kMaxBlocks.
YOCO_HD constexpr int64_t grid_blocks(int64_t n) {
  const int64_t b = (n + kWarpsPerBlock - 1) / kWarpsPerBlock;
  return b < kMaxBlocks ? b : kMaxBlocks;
}

// The weight rows warp `w` of `warps` takes: first_row, then every `warps` rows.
YOCO_HD constexpr int64_t first_row(int64_t block, int warp_in_block) { return block * kWarpsPerBlock + warp_in_block; }

// The piece a lane loads in slot u of the round that starts at piece p0 (rounds step by 32 kUnroll):
// consecutive lanes read consecutive 16-byte pieces, so a warp's slot is one 512-byte stretch.
YOCO_HD constexpr int64_t piece_of(int64_t p0, int u, int lane) { return p0 + int64_t{u} * 32 + lane; }
YOCO_HD constexpr int64_t round_pieces() { return int64_t{32} * kUnroll; }

}  // namespace yoco::cuda::gemv
