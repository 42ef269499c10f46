#pragma once
// A lane-level CPU model of the tensor-core data movement our Hopper and
// Ampere-style kernels rely on: ldmatrix .x4 (.trans), mma.sync m16n8k16 bf16,
// wgmma m64nNk16 (SS and RS, 128-byte swizzle) and the 16-byte cp.async with
// zero-fill. It exists so that a kernel's per-lane index maths (the same
// arch/swizzle.hpp helpers the kernel calls) can be run against a plain
// product on the CPU before a GPU run: a wrong swizzle, descriptor or fragment
// assignment shows up as a wrong product here instead of as a NaN on the card.
//
// Shared memory is a byte array; address 0 stands for a 1024-byte-aligned
// shared address (the kernels align their base to 1024, and the 128-byte
// swizzle acts on absolute address bits). Every access is bounds- and
// alignment-checked, so an address that would fault or misbehave on the
// device throws here. What is NOT modelled: timing, asynchrony and ordering
// (every operation completes when called), the hardware's fp32 summation order
// (sums are taken in double and rounded once), imm-scale-a/b, swizzle modes
// other than 128B. tests/emulation/README.md has the how-to.
#include <array>
#include <cstdint>
#include <cstring>
#include <vector>

#include "arch/tma_plan.hpp"

namespace yoco::emu {

constexpr int kWarpSize = 32;
constexpr int kWarpgroupSize = 128;

// bf16 as the device rounds it (__float2bfloat16_rn: nearest, ties to even).
uint16_t to_bf16(float x);
float from_bf16(uint16_t h);
// x rounded to bf16 and back: the value a bf16 operand really carries.
inline float round_bf16(float x) { return from_bf16(to_bf16(x)); }
// pack_bf16 of arch/device_math.cuh: lo in bits 0-15 (the lower column), hi in 16-31.
uint32_t pack_bf16x2(float lo, float hi);
float bf16x2_lo(uint32_t r);
float bf16x2_hi(uint32_t r);

class SharedMemory {
 public:
  explicit SharedMemory(uint32_t bytes) : bytes_(bytes, 0) {}
  uint32_t size() const { return static_cast<uint32_t>(bytes_.size()); }

  uint16_t load16(uint32_t addr) const;
  uint32_t load32(uint32_t addr) const;
  void store16(uint32_t addr, uint16_t v);
  void store32(uint32_t addr, uint32_t v);
  void store_bf16(uint32_t addr, float x) { store16(addr, to_bf16(x)); }
  float load_bf16(uint32_t addr) const { return from_bf16(load16(addr)); }
  // Raw access for tests that plant stale contents.
  unsigned char* data() { return bytes_.data(); }
  const unsigned char* data() const { return bytes_.data(); }

  // Throws std::out_of_range (outside the array) or std::invalid_argument
  // (misaligned): the device would fault or silently round the address.
  void check(uint32_t addr, uint32_t len, uint32_t align, const char* what) const;

 private:
  std::vector<unsigned char> bytes_;
};

// ---------------------------------------------------------------- ldmatrix --
using WarpAddrs = std::array<uint32_t, kWarpSize>;  // one shared address per lane
using Frag4 = std::array<uint32_t, 4>;              // four b16x2 registers
using Frag2 = std::array<uint32_t, 2>;
using WarpFrag4 = std::array<Frag4, kWarpSize>;
using WarpFrag2 = std::array<Frag2, kWarpSize>;
using WarpAcc4 = std::array<std::array<float, 4>, kWarpSize>;

// ldmatrix.sync.aligned.m8n8.x4(.trans).shared.b16: lane l gives the 16-byte
// aligned address of row l % 8 of matrix l / 8; register i of lane l receives
// matrix i's row l / 4, columns 2(l % 4), +1 (.trans: column l / 4, rows 2(l % 4), +1).
WarpFrag4 ldmatrix_x4(const SharedMemory& smem, const WarpAddrs& row_addr);
WarpFrag4 ldmatrix_x4_trans(const SharedMemory& smem, const WarpAddrs& row_addr);

// Shared-memory wavefronts the access takes (1 per matrix when its 8 rows hit
// 32 distinct banks): a static count of bank conflicts, not a timing model.
int ldmatrix_x4_wavefronts(const WarpAddrs& row_addr);

// Registers i0, i1 of every lane, e.g. b0, b1 of one n8 tile out of an x4 load.
WarpFrag2 pick2(const WarpFrag4& f, int i0, int i1);

// ---------------------------------------------------------------- mma.sync --
// mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32, c += A B with
// g = lane / 4, t = lane % 4: a0 (g, 2t..2t+1), a1 (g+8, 2t..), a2 (g, 2t+8..),
// a3 (g+8, 2t+8..); b0 (k 2t..2t+1, n g), b1 (k 2t+8.., n g); c0, c1 (g, 2t..2t+1),
// c2, c3 (g+8, 2t..2t+1).
void mma_m16n8k16(WarpAcc4& c, const WarpFrag4& a, const WarpFrag2& b);

// ------------------------------------------------------------------- wgmma --
struct MatrixDescriptor {
  uint32_t start = 0;  // bytes
  uint32_t lbo = 0;    // leading dimension byte offset
  uint32_t sbo = 0;    // stride dimension byte offset
  int base_offset = 0;
  int swizzle = 0;  // 0 none, 1 128B, 2 64B, 3 32B
};
// PTX ISA "Matrix Descriptor Format": start >> 4 in bits 0-13, LBO >> 4 in
// 16-29, SBO >> 4 in 32-45, base offset in 49-51, swizzle mode in 62-63.
MatrixDescriptor decode_descriptor(uint64_t desc);

// The 128-byte swizzle on an absolute shared address: 16-byte chunk bits
// [4:6] ^= row-in-atom bits [7:9].
constexpr uint32_t swizzle128(uint32_t addr) { return addr ^ (((addr >> 7) & 7u) << 4); }

// Byte address of element (mn, k) of a 128B-swizzled operand, k < 16 (one
// k16 step). K-major: 8-row groups SBO apart, rows 128 B apart, k contiguous
// (LBO unused). MN-major: mn contiguous in 64-element (128-byte) runs, runs
// LBO apart; k rows 128 B apart in 8-row groups SBO apart. Throws unless the
// descriptor says 128B swizzle with base offset 0.
uint32_t operand_address(const MatrixDescriptor& d, int mn, int k, bool mn_major);

// Per thread of the warpgroup (tid = 32 warp + lane): N/2 accumulators, d[4i + e]
// at row 16 warp + g + 8(e >> 1), column 8i + 2t + (e & 1).
// Flat storage, so the untemplated cores below index it without crossing
// array boundaries; acc[tid][j] reads like the kernel's d[j].
template <int N>
struct WgAcc {
  static_assert(N % 8 == 0 && N >= 8 && N <= 256, "wgmma N");
  std::array<float, kWarpgroupSize*(N / 2)> v{};
  float* operator[](int tid) { return v.data() + tid * (N / 2); }
  const float* operator[](int tid) const { return v.data() + tid * (N / 2); }
};
// RS A operand: per thread, the mma A fragment of its warp's 16 rows.
using WgFragA = std::array<Frag4, kWarpgroupSize>;

// Row-major [64][n] copy of an accumulator (for comparisons).
void wg_acc_to_matrix(int n, const float* acc, float* out);

// Untemplated cores: acc is [128][n/2] floats.
void wgmma_ss_core(int n, float* acc, const SharedMemory& smem, uint64_t desc_a, uint64_t desc_b, bool accumulate,
                   int trans_a, int trans_b);
void wgmma_rs_core(int n, float* acc, const WgFragA& a, const SharedMemory& smem, uint64_t desc_b, bool accumulate,
                   int trans_b);

// wgmma.mma_async.sync.aligned.m64nNk16.f32.bf16.bf16, D (accumulate ? D : 0) + A B,
// A and B from shared-memory descriptors. trans (imm-trans-a/b): 0 K-major, 1 MN-major.
template <int N>
void wgmma_ss(WgAcc<N>& d, const SharedMemory& smem, uint64_t desc_a, uint64_t desc_b, bool accumulate, int trans_b,
              int trans_a = 0) {
  wgmma_ss_core(N, d.v.data(), smem, desc_a, desc_b, accumulate, trans_a, trans_b);
}
// The same with A from registers (RS).
template <int N>
void wgmma_rs(WgAcc<N>& d, const WgFragA& a, const SharedMemory& smem, uint64_t desc_b, bool accumulate,
              int trans_b) {
  wgmma_rs_core(N, d.v.data(), a, smem, desc_b, accumulate, trans_b);
}
template <int N>
std::vector<float> wg_acc_matrix(const WgAcc<N>& d) {
  std::vector<float> m(64 * N);
  wg_acc_to_matrix(N, d.v.data(), m.data());
  return m;
}

// ---------------------------------------------------------------- cp.async --
// cp.async.cg.shared.global [dst], [src], 16, valid ? 16 : 0: valid copies 16
// bytes; not valid writes 16 zero bytes and reads nothing (src may be any
// pointer). Completes immediately (no groups, no waits).
void cp_async16(SharedMemory& smem, uint32_t dst, const void* src, bool valid);

// ------------------------------------------------------------------- TMA --
// cp.async.bulk.tensor.3d of one box through a tensor map with the 128-byte
// swizzle over `view` (the tma::Bf16RowsView the host encodes): box element
// (column i, row r) of the box at (c0, c1, c2) lands at byte
// swizzle128(dst + 128 r + 2 i), i.e. row r at 128 r with its 16-byte chunks
// XORed with r % 8; elements outside the view's dims are zero (OOB fill NONE),
// their global bytes never read. dst must be 1024-byte aligned (the swizzle
// pattern's period; the kernels align their stages so). Completes at once:
// the mbarrier's transaction count is not modelled.
void tma_load_box_sw128(SharedMemory& smem, uint32_t dst, const void* global, const cuda::tma::Bf16RowsView& view,
                        int32_t c0, int32_t c1, int32_t c2);

}  // namespace yoco::emu
