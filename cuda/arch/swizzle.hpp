#pragma once
// The XOR swizzle of a [rows][D] bf16 shared-memory tile that the mma.sync
// kernels (prefill v1, flash decode, gRet chunk v2-v5) use: the 16-byte chunk
// ch of row r sits at chunk ch ^ (r % 8) of that row, so the 8 row addresses
// of an ldmatrix fall in 8 distinct bank groups (rows 128, 256 or 512 B apart
// would otherwise all collide). One definition, in the three units the kernels
// index by; __host__ __device__ so the CPU tests check them. The wgmma
// kernels' 128-byte-swizzle layout of 64-column halves and its matrix
// descriptor (sm90::sw128_offset, sm90::sw128_desc) live here too, out of
// arch/wgmma_sm90.cuh, so that the lane emulator (tests/emulation) runs the
// kernels' own index maths under g++.
#include <cstdint>

#include "arch/hd.hpp"

namespace yoco::cuda::dev {

// Byte offset of 16-byte chunk ch (columns [8 ch, 8 ch + 8)) of row r.
template <int D>
YOCO_HD constexpr uint32_t swz_chunk(int r, int ch) {
  return static_cast<uint32_t>(r * (D * 2) + ((ch ^ (r & 7)) << 4));
}
// Byte offset of the chunk that holds column c (a multiple of 8) of row r.
template <int D>
YOCO_HD constexpr uint32_t swz(int r, int c) {
  return static_cast<uint32_t>(r * (D * 2) + ((((c >> 3) ^ (r & 7))) << 4));
}
// Byte offset of column c of row r (c even: a bf16 pair).
template <int D>
YOCO_HD constexpr uint32_t swz_elem(int r, int c) {
  return swz<D>(r, c) + static_cast<uint32_t>((c & 7) * 2);
}
// Element index of column c of row r.
template <int D>
YOCO_HD constexpr int swz_index(int r, int c) {
  return r * D + ((((c >> 3) ^ (r & 7))) << 3) + (c & 7);
}

}  // namespace yoco::cuda::dev

namespace yoco::cuda::sm90 {

// Shared-memory matrix descriptor with 128-byte swizzle (PTX ISA "Matrix Descriptor Format"):
// bits 0-13 start >> 4, 16-29 LBO >> 4, 32-45 SBO >> 4, 49-51 base offset (0: atoms 1024-aligned),
// 62-63 swizzle mode (1 = 128B).
YOCO_HD constexpr uint64_t sw128_desc(uint32_t smem_addr, uint32_t lbo_bytes, uint32_t sbo_bytes) {
  uint64_t d = static_cast<uint64_t>((smem_addr & 0x3FFFFu) >> 4);
  d |= static_cast<uint64_t>((lbo_bytes & 0x3FFFFu) >> 4) << 16;
  d |= static_cast<uint64_t>((sbo_bytes & 0x3FFFFu) >> 4) << 32;
  d |= uint64_t{1} << 62;
  return d;
}

// Byte offset of (row, col) in a [cols/64][ROWS][64] 128B-swizzled bf16 tile.
template <int ROWS>
YOCO_HD constexpr uint32_t sw128_offset(int row, int col) {
  return static_cast<uint32_t>((col >> 6) * (ROWS * 128) + row * 128 + ((((col >> 3) & 7) ^ (row & 7)) << 4) +
                               (col & 7) * 2);
}

}  // namespace yoco::cuda::sm90
