// The lane emulator (lane_emulator.hpp) run over the index maths of our
// tensor-core kernels: every address below is computed with the helpers the
// kernels call (dev::swz*, sm90::sw128_offset, sm90::sw128_desc from
// arch/swizzle.hpp) in the kernels' own expressions, restated per lane; each
// result is compared with a plain triple loop. Inputs are multiples of 1/4 in
// [-1, 1], so every sum is exact in fp32 and the comparisons are exact.
//
// The PlantedBug tests break one thing at a time and require a WRONG result:
// they prove the emulator would have caught that bug in a new kernel.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <random>
#include <utility>
#include <vector>

#include "arch/swizzle.hpp"
#include "lane_emulator.hpp"

namespace {

namespace dev = yoco::cuda::dev;
namespace sm90 = yoco::cuda::sm90;
using namespace yoco::emu;

// ------------------------------------------------------------- plumbing --

using Mat = std::vector<float>;  // row-major

Mat random_matrix(int rows, int cols, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> d(-4, 4);
  Mat m(static_cast<size_t>(rows) * cols);
  for (float& x : m) x = 0.25f * static_cast<float>(d(rng));
  return m;
}

// C [m][n] = A [m][k] * B, B given [k][n] (b_is_nk false) or [n][k] (true: A B^T).
Mat matmul(const Mat& A, const Mat& B, int m, int k, int n, bool b_is_nk) {
  Mat C(static_cast<size_t>(m) * n);
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j) {
      double s = 0;
      for (int x = 0; x < k; ++x) s += static_cast<double>(A[i * k + x]) * (b_is_nk ? B[j * k + x] : B[x * n + j]);
      C[i * n + j] = static_cast<float>(s);
    }
  return C;
}

Mat rows_of(const Mat& M, int cols, int r0, int nrows) {
  return Mat(M.begin() + static_cast<ptrdiff_t>(r0) * cols, M.begin() + static_cast<ptrdiff_t>(r0 + nrows) * cols);
}
Mat zero_rows_from(Mat M, int cols, int valid_rows) {
  std::fill(M.begin() + static_cast<ptrdiff_t>(valid_rows) * cols, M.end(), 0.0f);
  return M;
}

// Exact comparison; a NaN counts as a mismatch.
int mismatches(const Mat& got, const Mat& want) {
  if (got.size() != want.size()) return static_cast<int>(std::max(got.size(), want.size()));
  int bad = 0;
  for (size_t i = 0; i < got.size(); ++i) bad += !(got[i] == want[i]);
  return bad;
}

std::vector<uint16_t> to_bf16_bits(const Mat& m) {
  std::vector<uint16_t> b(m.size());
  for (size_t i = 0; i < m.size(); ++i) b[i] = to_bf16(m[i]);
  return b;
}

// Whatever a previous chunk left behind: finite, mostly non-zero, so a tile
// that is not (re)written, or not zero-filled, changes the product.
void fill_stale(SharedMemory& smem, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> d(-8, 8);
  for (uint32_t a = 0; a < smem.size(); a += 2) smem.store16(a, to_bf16(0.25f * static_cast<float>(d(rng))));
}

struct Bugs {
  bool drop_xor = false;       // the swizzle XOR left out of one side (write or read)
  bool wrong_trans_b = false;  // imm-trans-b flipped
  int lbo_delta = 0;           // bytes added to an N-major B operand's LBO
  bool swap_a1_a2 = false;     // A fragment registers 1 and 2 exchanged
  int lane_off_by_one = -1;    // this lane's ldmatrix row address one row further
  enum class Copy { ok, skip_invalid, ignore_valid } copy = Copy::ok;
};

// The 128B-swizzled tile offset with the XOR dropped (a planted bug).
template <int ROWS>
uint32_t sw128_offset_no_xor(int row, int col) {
  return static_cast<uint32_t>((col >> 6) * (ROWS * 128) + row * 128 + (col & 63) * 2);
}

// sm90::load_tile_sw128 (arch/wgmma_sm90.cuh) restated for the NT threads:
// same thread -> (row, chunk) map, same two branches, valid ? src : safe.
template <int ROWS, int D, int NT>
void load_tile_sw128(SharedMemory& smem, uint32_t sm, const uint16_t* g, const uint16_t* safe, int64_t stride,
                     int64_t row0, int64_t lo, int64_t hi, const Bugs& bug) {
  constexpr int C = D / 8;
  static_assert(NT % C == 0 && ROWS % (NT / C) == 0, "whole rows per pass");
  constexpr int RS = NT / C;
  auto off = [&](int r, int col) {
    return bug.drop_xor ? sw128_offset_no_xor<ROWS>(r, col) : sm90::sw128_offset<ROWS>(r, col);
  };
  auto copy = [&](uint32_t dst, const uint16_t* src, bool valid) {
    switch (bug.copy) {
      case Bugs::Copy::ok: cp_async16(smem, dst, valid ? src : safe, valid); break;
      case Bugs::Copy::skip_invalid: if (valid) cp_async16(smem, dst, src, true); break;
      case Bugs::Copy::ignore_valid: cp_async16(smem, dst, valid ? src : safe, true); break;
    }
  };
  for (int tid = 0; tid < NT; ++tid) {
    const int c = tid % C, r0 = tid / C;
    const uint16_t* src = g + static_cast<int64_t>(r0) * stride + c * 8;
    const int64_t step = static_cast<int64_t>(RS) * stride;
    if constexpr (RS % 8 == 0) {
      const uint32_t dst0 = sm + off(r0, c * 8);
      for (int i = 0; i < ROWS / RS; ++i) {
        const int64_t gr = row0 + r0 + i * RS;
        const bool valid = gr >= lo && gr < hi;
        const uint32_t dst = dst0 + static_cast<uint32_t>(i * RS * 128);
        // The branch's premise: one swizzle phase for all passes.
        EXPECT_EQ(dst, sm + off(r0 + i * RS, c * 8)) << "tid " << tid << " pass " << i;
        copy(dst, src, valid);
        if (i + 1 < ROWS / RS) src += step;  // never form a pointer past the array
      }
    } else {
      for (int i = 0; i < ROWS / RS; ++i) {
        const int r = r0 + i * RS;
        const int64_t gr = row0 + r;
        const bool valid = gr >= lo && gr < hi;
        copy(sm + off(r, c * 8), src, valid);
        if (i + 1 < ROWS / RS) src += step;
      }
    }
  }
}

// Warpgroup thread tid's coordinates in the accumulator layout.
struct Lane {
  int warp, lane, g, t;
  explicit Lane(int tid) : warp(tid / 32), lane(tid % 32), g((tid % 32) / 4), t(tid % 4) {}
};

// ---------------------------------------------------- primitive semantics --

TEST(LaneEmulator, Bf16RoundingAndPacking) {
  EXPECT_EQ(to_bf16(1.0f), 0x3F80);
  EXPECT_EQ(round_bf16(1.0f + 1.0f / 256.0f), 1.0f);                 // tie: to even
  EXPECT_EQ(round_bf16(1.0f + 3.0f / 256.0f), 1.0f + 4.0f / 256.0f);  // tie: to even (up)
  const uint32_t p = pack_bf16x2(0.5f, -2.0f);
  EXPECT_EQ(p & 0xFFFFu, 0x3F00u);  // lo = the lower column, as __floats2bfloat162_rn
  EXPECT_EQ(bf16x2_lo(p), 0.5f);
  EXPECT_EQ(bf16x2_hi(p), -2.0f);
}

// A plain 16x16 tile (row stride 32 B), element (r, c) = 16 r + c, loaded with
// the A-operand lane pattern of prefill v1: matrices (rows 0-7 | 8-15) x (cols 0-7 | 8-15).
struct PlainTile16 {
  SharedMemory smem{512};
  WarpAddrs addr{};
  PlainTile16() {
    for (int r = 0; r < 16; ++r)
      for (int c = 0; c < 16; ++c)
        smem.store_bf16(static_cast<uint32_t>(r * 32 + c * 2), static_cast<float>(16 * r + c));
    for (int l = 0; l < 32; ++l) addr[l] = static_cast<uint32_t>(((l & 7) + ((l >> 3) & 1) * 8) * 32 + (l >> 4) * 16);
  }
};

TEST(LaneEmulator, LdmatrixX4FragmentLayout) {
  PlainTile16 tile;
  const WarpFrag4 f = ldmatrix_x4(tile.smem, tile.addr);
  for (int l = 0; l < 32; ++l)
    for (int j = 0; j < 4; ++j) {  // a0..a3: (g | g+8) x (2t | 2t+8)
      const int r = l / 4 + 8 * (j & 1), c = 2 * (l % 4) + 8 * (j >> 1);
      EXPECT_EQ(bf16x2_lo(f[l][j]), 16 * r + c) << "lane " << l << " reg " << j;
      EXPECT_EQ(bf16x2_hi(f[l][j]), 16 * r + c + 1) << "lane " << l << " reg " << j;
    }
}

TEST(LaneEmulator, LdmatrixX4TransFragmentLayout) {
  PlainTile16 tile;
  const WarpFrag4 f = ldmatrix_x4_trans(tile.smem, tile.addr);
  for (int l = 0; l < 32; ++l)
    for (int j = 0; j < 4; ++j) {  // matrix j transposed: rows 2t, 2t+1 of column g
      const int r0 = 8 * (j & 1), c0 = 8 * (j >> 1);
      EXPECT_EQ(bf16x2_lo(f[l][j]), 16 * (r0 + 2 * (l % 4)) + c0 + l / 4) << "lane " << l << " reg " << j;
      EXPECT_EQ(bf16x2_hi(f[l][j]), 16 * (r0 + 2 * (l % 4) + 1) + c0 + l / 4) << "lane " << l << " reg " << j;
    }
}

// The reason dev::swz exists: rows 128 B apart put an unswizzled ldmatrix's 8
// rows in the same 4 banks (8 wavefronts a matrix); swizzled, 1 each.
TEST(LaneEmulator, LdmatrixWavefrontsSwizzledVsPlain) {
  constexpr int D = 64;
  WarpAddrs swizzled{}, plain{};
  for (int l = 0; l < 32; ++l) {
    const int row = (l & 7) + ((l >> 3) & 1) * 8, col = (l >> 4) * 8;
    swizzled[l] = 2 * static_cast<uint32_t>(dev::swz_index<D>(row, col));
    plain[l] = static_cast<uint32_t>(2 * (row * D + col));
  }
  EXPECT_EQ(ldmatrix_x4_wavefronts(swizzled), 4);
  EXPECT_EQ(ldmatrix_x4_wavefronts(plain), 32);
}

TEST(LaneEmulator, DescriptorRoundTripsSw128Desc) {
  const uint64_t d = sm90::sw128_desc(0x1A2B0u, 16384, 1024);
  const MatrixDescriptor m = decode_descriptor(d);
  EXPECT_EQ(m.start, 0x1A2B0u);
  EXPECT_EQ(m.lbo, 16384u);
  EXPECT_EQ(m.sbo, 1024u);
  EXPECT_EQ(m.base_offset, 0);
  EXPECT_EQ(m.swizzle, 1);
  static_assert(sm90::sw128_desc(0, 16, 1024) == ((uint64_t{1} << 62) | (uint64_t{64} << 32) | (uint64_t{1} << 16)),
                "constexpr on the host");
  // The emulator's swizzle and the kernels' tile offset agree inside an atom.
  for (int r = 0; r < 64; ++r)
    for (int c = 0; c < 64; c += 8)
      ASSERT_EQ(swizzle128(static_cast<uint32_t>(r * 128 + c * 2)), sm90::sw128_offset<64>(r, c));
  // Other swizzle modes are outside the model: refused, never guessed.
  EXPECT_THROW(operand_address(decode_descriptor(d & ~(uint64_t{3} << 62)), 0, 0, false), std::invalid_argument);
}

TEST(LaneEmulator, CpAsyncZeroFillAndChecks) {
  SharedMemory smem(64);
  fill_stale(smem, 1);
  alignas(16) const uint16_t src[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  cp_async16(smem, 16, src, true);
  cp_async16(smem, 32, src, false);
  for (int i = 0; i < 8; ++i) {
    EXPECT_EQ(smem.load16(16 + 2 * i), src[i]);
    EXPECT_EQ(smem.load16(32 + 2 * i), 0) << "not valid: zeros";
  }
  EXPECT_THROW(cp_async16(smem, 8, src, true), std::invalid_argument);   // dst misaligned
  EXPECT_THROW(cp_async16(smem, 64, src, false), std::out_of_range);     // past the end
  WarpAddrs bad{};
  bad[7] = 8;
  EXPECT_THROW(ldmatrix_x4(smem, bad), std::invalid_argument);  // ldmatrix rows are 16-byte aligned
}

// ------------------------------------------------ mma.sync (prefill v1) --
// One warp, 16 query rows, D = 64, 32 keys, tiles in the dev::swz layout;
// the lane addresses are prefill v1's (flash_prefill_v1.cu), which indexes in
// elements (swz_index); the tiles are written in bytes (swz_elem), as gRet's
// mma.sync kernels do, so the two helpers are checked against each other too.
constexpr int kMmaD = 64, kMmaRows = 16, kMmaKeys = 32;

void write_swz_tile(SharedMemory& smem, uint32_t base, const Mat& M, int rows) {
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < kMmaD; c += 2)
      smem.store32(base + dev::swz_elem<kMmaD>(r, c), pack_bf16x2(M[r * kMmaD + c], M[r * kMmaD + c + 1]));
}
uint32_t mma_addr(const Bugs& bug, uint32_t base, int row, int col) {
  return base + static_cast<uint32_t>(2 * (bug.drop_xor ? row * kMmaD + col : dev::swz_index<kMmaD>(row, col)));
}

// S = Q K^T (A B^T): ldmatrix of Q (A) and K (B, non-transposed), mma per n8 tile.
int run_mma_qkt(const Bugs& bug) {
  const Mat Q = random_matrix(kMmaRows, kMmaD, 11), K = random_matrix(kMmaKeys, kMmaD, 12);
  SharedMemory smem(2048 + 4096);
  const uint32_t sQ = 0, sK = 2048;
  write_swz_tile(smem, sQ, Q, kMmaRows);
  write_swz_tile(smem, sK, K, kMmaKeys);
  WarpAcc4 s[kMmaKeys / 8] = {};
  for (int kk = 0; kk < kMmaD / 16; ++kk) {
    WarpAddrs qa{};
    for (int lane = 0; lane < 32; ++lane)
      qa[lane] = mma_addr(bug, sQ, (lane & 7) + ((lane >> 3) & 1) * 8 + (lane == bug.lane_off_by_one),
                          kk * 16 + (lane >> 4) * 8);
    WarpFrag4 a = ldmatrix_x4(smem, qa);
    if (bug.swap_a1_a2)
      for (auto& r : a) std::swap(r[1], r[2]);
    for (int nt2 = 0; nt2 < kMmaKeys / 16; ++nt2) {
      WarpAddrs ka{};
      for (int lane = 0; lane < 32; ++lane)
        ka[lane] = mma_addr(bug, sK, nt2 * 16 + (lane & 7) + (lane >> 4) * 8, kk * 16 + ((lane >> 3) & 1) * 8);
      const WarpFrag4 kb = ldmatrix_x4(smem, ka);  // b0, b1 of key tile 2 nt2, then of 2 nt2 + 1
      mma_m16n8k16(s[2 * nt2], a, pick2(kb, 0, 1));
      mma_m16n8k16(s[2 * nt2 + 1], a, pick2(kb, 2, 3));
    }
  }
  Mat got(kMmaRows * kMmaKeys);
  for (int nt = 0; nt < kMmaKeys / 8; ++nt)
    for (int lane = 0; lane < 32; ++lane)
      for (int e = 0; e < 4; ++e)
        got[(lane / 4 + 8 * (e >> 1)) * kMmaKeys + nt * 8 + 2 * (lane % 4) + (e & 1)] = s[nt][lane][e];
  return mismatches(got, matmul(Q, K, kMmaRows, kMmaD, kMmaKeys, true));
}

// O = P V (A B): P packed from the accumulator layout as v1 does, V through ldmatrix.trans.
int run_mma_pv(const Bugs& bug) {
  const Mat P = random_matrix(kMmaRows, kMmaKeys, 21), V = random_matrix(kMmaKeys, kMmaD, 22);
  SharedMemory smem(4096 + 2048);  // V, then stale bytes a stray row address may reach
  fill_stale(smem, 23);
  const uint32_t sV = 0;
  write_swz_tile(smem, sV, V, kMmaKeys);
  float s[kMmaKeys / 8][32][4];  // P where Q K^T's accumulators would be
  for (int nt = 0; nt < kMmaKeys / 8; ++nt)
    for (int lane = 0; lane < 32; ++lane)
      for (int e = 0; e < 4; ++e)
        s[nt][lane][e] = P[(lane / 4 + 8 * (e >> 1)) * kMmaKeys + nt * 8 + 2 * (lane % 4) + (e & 1)];
  WarpAcc4 o[kMmaD / 8] = {};
  for (int kk = 0; kk < kMmaKeys / 16; ++kk) {
    WarpFrag4 a{};
    for (int lane = 0; lane < 32; ++lane) {
      a[lane][0] = pack_bf16x2(s[2 * kk][lane][0], s[2 * kk][lane][1]);
      a[lane][1] = pack_bf16x2(s[2 * kk][lane][2], s[2 * kk][lane][3]);
      a[lane][2] = pack_bf16x2(s[2 * kk + 1][lane][0], s[2 * kk + 1][lane][1]);
      a[lane][3] = pack_bf16x2(s[2 * kk + 1][lane][2], s[2 * kk + 1][lane][3]);
      if (bug.swap_a1_a2) std::swap(a[lane][1], a[lane][2]);
    }
    for (int dt2 = 0; dt2 < kMmaD / 16; ++dt2) {
      WarpAddrs va{};
      for (int lane = 0; lane < 32; ++lane)
        va[lane] = mma_addr(bug, sV, kk * 16 + (lane & 7) + ((lane >> 3) & 1) * 8 + (lane == bug.lane_off_by_one),
                            dt2 * 16 + (lane >> 4) * 8);
      const WarpFrag4 vb = ldmatrix_x4_trans(smem, va);
      mma_m16n8k16(o[2 * dt2], a, pick2(vb, 0, 1));
      mma_m16n8k16(o[2 * dt2 + 1], a, pick2(vb, 2, 3));
    }
  }
  Mat got(kMmaRows * kMmaD);
  for (int dt = 0; dt < kMmaD / 8; ++dt)
    for (int lane = 0; lane < 32; ++lane)
      for (int e = 0; e < 4; ++e)
        got[(lane / 4 + 8 * (e >> 1)) * kMmaD + dt * 8 + 2 * (lane % 4) + (e & 1)] = o[dt][lane][e];
  return mismatches(got, matmul(P, V, kMmaRows, kMmaKeys, kMmaD, false));
}

TEST(MmaSync, SwizzledQKtEqualsPlainProduct) { EXPECT_EQ(run_mma_qkt({}), 0); }
TEST(MmaSync, SwizzledPVEqualsPlainProduct) { EXPECT_EQ(run_mma_pv({}), 0); }

// ------------------------------------------------------ wgmma: gRet v6 --
// gret_chunk_v6.cu, head dim 128, chunk 64: Q, K, V [64][128] tiles and the
// state copy S^ [128][128], all [2 halves][rows][64] 128B-swizzled.
constexpr int kD = 128, kC = 64;
constexpr uint32_t kHalf64 = 64 * 128, kHalf128 = 128 * 128;

struct V6World {
  static constexpr uint32_t sQ = 0, sK = 16384, sV = 32768, sS = 49152, sO2 = 81920;  // sO2: v7's O tile
  static constexpr uint32_t kBytes = 81920 + 16384 + 4096;                                // + stale slack
  SharedMemory smem{kBytes};
  Mat Q, K, V, S;  // what the tiles should hold (rows past seq_len zero)
  int seq_len;

  V6World(int seq_len_, const Bugs& bug) : seq_len(seq_len_) {
    fill_stale(smem, 99);
    // Global rows past seq_len exist (they belong to whatever follows) and must not reach the tiles.
    const Mat q = random_matrix(kC, kD, 31), k = random_matrix(kC, kD, 32), v = random_matrix(kC, kD, 33);
    S = random_matrix(kD, kD, 34);
    const auto gq = to_bf16_bits(q), gk = to_bf16_bits(k), gv = to_bf16_bits(v);
    load_tile_sw128<kC, kD, 256>(smem, sQ, gq.data(), gq.data(), kD, 0, 0, seq_len, bug);
    load_tile_sw128<kC, kD, 256>(smem, sK, gk.data(), gk.data(), kD, 0, 0, seq_len, bug);
    load_tile_sw128<kC, kD, 256>(smem, sV, gv.data(), gv.data(), kD, 0, 0, seq_len, bug);
    Q = zero_rows_from(q, kD, seq_len);
    K = zero_rows_from(k, kD, seq_len);
    V = zero_rows_from(v, kD, seq_len);
    // The incoming state into S^ buffer 0, by the state warpgroups' threads.
    for (int tid = 0; tid < 256; ++tid) {
      const Lane L(tid % 128);
      const int R0 = 64 * (tid / 128) + 16 * L.warp + L.g;
      for (int n = 0; n < 16; ++n)
        for (int hr = 0; hr < 2; ++hr) {
          const int r = R0 + 8 * hr, col = 8 * n + 2 * L.t;
          const uint32_t off = bug.drop_xor ? sw128_offset_no_xor<128>(r, col) : sm90::sw128_offset<128>(r, col);
          smem.store32(sS + off, pack_bf16x2(S[r * kD + col], S[r * kD + col + 1]));
        }
    }
  }

  // acc_s = Q K^T, as the outputs warpgroup issues it.
  WgAcc<64> qkt() const {
    WgAcc<64> acc_s;
    for (int kk = 0; kk < kD / 16; ++kk) {
      const uint32_t off = (kk >> 2) * kHalf64 + (kk & 3) * 32;
      wgmma_ss<64>(acc_s, smem, sm90::sw128_desc(sQ + off, 16, 1024), sm90::sw128_desc(sK + off, 16, 1024), kk > 0, 0);
    }
    return acc_s;
  }
  // acc_o = Q S^ (S^ N-major: imm-trans-b 1, LBO the 128-row half).
  WgAcc<128> q_state(const Bugs& bug) const {
    WgAcc<128> acc_o;
    for (int kk = 0; kk < kD / 16; ++kk) {
      const uint32_t off = (kk >> 2) * kHalf64 + (kk & 3) * 32;
      wgmma_ss<128>(acc_o, smem, sm90::sw128_desc(sQ + off, 16, 1024),
                    sm90::sw128_desc(sS + kk * 2048, kHalf128 + bug.lbo_delta, 1024), kk > 0,
                    bug.wrong_trans_b ? 0 : 1);
    }
    return acc_o;
  }
  // wgmma_times_v: acc += A V over the 64 keys, A as 16 registers a thread.
  void times_v(WgAcc<128>& acc, const std::array<std::array<uint32_t, 16>, 128>& a, const Bugs& bug) const {
    for (int kk = 0; kk < kC / 16; ++kk) {
      WgFragA frag{};
      for (int tid = 0; tid < 128; ++tid)
        frag[tid] = {a[tid][4 * kk], a[tid][4 * kk + 1], a[tid][4 * kk + 2], a[tid][4 * kk + 3]};
      wgmma_rs<128>(acc, frag, smem, sm90::sw128_desc(sV + kk * 2048, kHalf64 + bug.lbo_delta, 1024), true,
                    bug.wrong_trans_b ? 0 : 1);
    }
  }
};

int run_v6_qkt(const Bugs& bug, int seq_len = kC) {
  const V6World w(seq_len, bug);
  return mismatches(wg_acc_matrix<64>(w.qkt()), matmul(w.Q, w.K, kC, kD, kC, true));
}

int run_v6_q_state(const Bugs& bug) {
  const V6World w(kC, bug);
  return mismatches(wg_acc_matrix<128>(w.q_state(bug)), matmul(w.Q, w.S, kC, kD, kD, false));
}

// The outputs' A operand of A V: bf16(mask(Q K^T)) with all decays 1, as 16
// registers a thread in the m64k16 A-fragment layout (v6 and both of v7's
// output warpgroups form the same); swap_a1_a2 plants the register swap.
std::array<std::array<uint32_t, 16>, 128> masked_a_fragments(const WgAcc<64>& acc_s, const Bugs& bug) {
  std::array<std::array<uint32_t, 16>, 128> af{};
  for (int tid = 0; tid < 128; ++tid) {
    const Lane L(tid);
    const int r0 = 16 * L.warp + L.g;
    for (int n = 0; n < 8; ++n) {
      const int j0 = 8 * n + 2 * L.t, j1 = j0 + 1;
      const float p00 = j0 <= r0 ? acc_s[tid][4 * n] : 0.0f, p01 = j1 <= r0 ? acc_s[tid][4 * n + 1] : 0.0f;
      const float p10 = j0 <= r0 + 8 ? acc_s[tid][4 * n + 2] : 0.0f, p11 = j1 <= r0 + 8 ? acc_s[tid][4 * n + 3] : 0.0f;
      af[tid][4 * (n >> 1) + 2 * (n & 1)] = pack_bf16x2(p00, p01);
      af[tid][4 * (n >> 1) + 2 * (n & 1) + 1] = pack_bf16x2(p10, p11);
    }
    if (bug.swap_a1_a2)
      for (int kk = 0; kk < 4; ++kk) std::swap(af[tid][4 * kk + 1], af[tid][4 * kk + 2]);
  }
  return af;
}

// What one chunk's outputs must be with all decays 1: bf16(Q S + bf16(mask(Q K^T)) V), rows past seq_len 0.
Mat expected_outputs(const V6World& w, int seq_len) {
  Mat P = matmul(w.Q, w.K, kC, kD, kC, true);
  for (int i = 0; i < kC; ++i)
    for (int j = 0; j < kC; ++j) P[i * kC + j] = j <= i ? round_bf16(P[i * kC + j]) : 0.0f;
  const Mat qs = matmul(w.Q, w.S, kC, kD, kD, false), pv = matmul(P, w.V, kC, kC, kD, false);
  Mat want(kC * kD, 0.0f);
  for (int r = 0; r < seq_len; ++r)
    for (int c = 0; c < kD; ++c) want[r * kD + c] = round_bf16(qs[r * kD + c] + pv[r * kD + c]);
  return want;
}

// The whole outputs path of one chunk with all decays 1: A = bf16(mask(Q K^T))
// into registers, acc_o = Q S^ + A V, then O staged through the Q tile and read
// back in 16-byte pieces, as the kernel writes it out.
int run_v6_outputs(const Bugs& bug, int seq_len = kC) {
  V6World w(seq_len, {});
  const WgAcc<64> acc_s = w.qkt();
  const std::array<std::array<uint32_t, 16>, 128> af = masked_a_fragments(acc_s, bug);
  WgAcc<128> acc_o = w.q_state({});
  w.times_v(acc_o, af, bug);

  for (int tid = 0; tid < 128; ++tid) {  // stage O through the warp's own rows of the Q tile
    const Lane L(tid);
    const int r0 = 16 * L.warp + L.g;
    for (int n = 0; n < 16; ++n) {
      const int col = 8 * n + 2 * L.t;
      w.smem.store32(V6World::sQ + sm90::sw128_offset<kC>(r0, col),
                     pack_bf16x2(acc_o[tid][4 * n], acc_o[tid][4 * n + 1]));
      w.smem.store32(V6World::sQ + sm90::sw128_offset<kC>(r0 + 8, col),
                     pack_bf16x2(acc_o[tid][4 * n + 2], acc_o[tid][4 * n + 3]));
    }
  }
  Mat out(kC * kD, 0.0f);
  for (int warp = 0; warp < 4; ++warp)
    for (int lane = 0; lane < 32; ++lane)
      for (int k = 0; k < 8; ++k) {
        const int idx = lane + 32 * k, r = 16 * warp + (idx >> 4), piece = idx & 15;
        if (r < seq_len)
          for (int e = 0; e < 8; ++e)
            out[r * kD + piece * 8 + e] = w.smem.load_bf16(V6World::sQ + sm90::sw128_offset<kC>(r, piece * 8) + 2 * e);
      }

  return mismatches(out, expected_outputs(w, seq_len));
}

// v7 (gret_chunk_v6.cu's body with two output warpgroups): warpgroup j forms
// output columns [64 j, +64) -- the same Q K^T and mask, Q S^ from S^'s half j
// (m64n64, N-major, the half's 128-row block), A V from V's half j -- and
// stages and reads back only its half's 16-byte pieces. The planted bugs:
// ignore_half drops the half's offset from the B operands (both warpgroups
// would compute columns 0..63); the others as v6's.
int run_v7_outputs(const Bugs& bug, int seq_len = kC, bool ignore_half = false) {
  V6World w(seq_len, {});
  const WgAcc<64> acc_s = w.qkt();
  const std::array<std::array<uint32_t, 16>, 128> af = masked_a_fragments(acc_s, bug);  // the same in both warpgroups
  for (int half = 0; half < 2; ++half) {
    const uint32_t h = ignore_half ? 0 : static_cast<uint32_t>(half);
    WgAcc<64> acc_o;
    for (int kk = 0; kk < kD / 16; ++kk) {  // Q S^, S^'s half: the 64-column block at half * kHalf128
      const uint32_t off = (kk >> 2) * kHalf64 + (kk & 3) * 32;
      wgmma_ss<64>(acc_o, w.smem, sm90::sw128_desc(V6World::sQ + off, 16, 1024),
                   sm90::sw128_desc(V6World::sS + h * kHalf128 + kk * 2048, kHalf128 + bug.lbo_delta, 1024), kk > 0,
                   bug.wrong_trans_b ? 0 : 1);
    }
    for (int kk = 0; kk < kC / 16; ++kk) {  // + A V, V's half
      WgFragA frag{};
      for (int tid = 0; tid < 128; ++tid) frag[tid] = {af[tid][4 * kk], af[tid][4 * kk + 1], af[tid][4 * kk + 2], af[tid][4 * kk + 3]};
      wgmma_rs<64>(acc_o, frag, w.smem, sm90::sw128_desc(V6World::sV + h * kHalf64 + kk * 2048, kHalf64 + bug.lbo_delta, 1024),
                   true, bug.wrong_trans_b ? 0 : 1);
    }
    for (int tid = 0; tid < 128; ++tid) {  // stage the half: columns 64 half + 8 n + 2 t, n < 8
      const Lane L(tid);
      const int r0 = 16 * L.warp + L.g;
      for (int n = 0; n < 8; ++n) {
        const int col = 64 * half + 8 * n + 2 * L.t;
        w.smem.store32(V6World::sO2 + sm90::sw128_offset<kC>(r0, col), pack_bf16x2(acc_o[tid][4 * n], acc_o[tid][4 * n + 1]));
        w.smem.store32(V6World::sO2 + sm90::sw128_offset<kC>(r0 + 8, col),
                       pack_bf16x2(acc_o[tid][4 * n + 2], acc_o[tid][4 * n + 3]));
      }
    }
  }
  Mat out(kC * kD, 0.0f);
  for (int half = 0; half < 2; ++half)  // each warpgroup reads back only its half's pieces
    for (int warp = 0; warp < 4; ++warp)
      for (int lane = 0; lane < 32; ++lane)
        for (int k = 0; k < 4; ++k) {
          const int idx = lane + 32 * k, r = 16 * warp + (idx >> 3), piece = 8 * half + (idx & 7);
          if (r < seq_len)
            for (int e = 0; e < 8; ++e)
              out[r * kD + piece * 8 + e] =
                  w.smem.load_bf16(V6World::sO2 + sm90::sw128_offset<kC>(r, piece * 8) + 2 * e);
        }
  return mismatches(out, expected_outputs(w, seq_len));
}

// The O tile's ownership in gret_chunk_wgmma_body<G> (G output warpgroups, its
// staging and readback index maths as written there): the emulated runs above
// stage every warp before any reads back, so they cannot see a warp reading a
// byte another warp (or the other output warpgroup) wrote -- on the GPU only
// __syncwarp orders them. Returns the violations: a byte written twice, a byte
// read that this warp did not write, a (row, piece) read other than once.
int o_tile_ownership_violations(int G) {
  constexpr int kBytesO = kC * kD * 2;
  std::vector<int> writer(kBytesO, -1);  // wg * 4 + warp
  int bad = 0;
  for (int wg = 0; wg < G; ++wg) {
    const int half = G == 1 ? 0 : wg, c0 = 64 * half;
    for (int tid = 0; tid < 128; ++tid) {
      const Lane L(tid);
      const int r0 = 16 * L.warp + L.g;
      for (int n = 0; n < 16 / G; ++n)
        for (int hr = 0; hr < 2; ++hr) {
          const uint32_t off = sm90::sw128_offset<kC>(r0 + 8 * hr, c0 + 8 * n + 2 * L.t);
          for (uint32_t b = off; b < off + 4; ++b) {
            bad += writer[b] != -1;
            writer[b] = wg * 4 + L.warp;
          }
        }
    }
  }
  std::vector<int> reads(kC * 16, 0);  // (row, piece)
  for (int wg = 0; wg < G; ++wg) {
    const int half = G == 1 ? 0 : wg;
    for (int warp = 0; warp < 4; ++warp)
      for (int lane = 0; lane < 32; ++lane)
        for (int k = 0; k < 8 / G; ++k) {
          const int idx = lane + 32 * k, r = 16 * warp + (idx >> (4 - (G - 1))), piece = 8 * half + (idx & (16 / G - 1));
          ++reads[r * 16 + piece];
          const uint32_t off = sm90::sw128_offset<kC>(r, piece * 8);
          for (uint32_t b = off; b < off + 16; ++b) bad += writer[b] != wg * 4 + warp;
        }
  }
  for (int x : reads) bad += x != 1;
  return bad;
}

TEST(Wgmma, V6AndV7OTileEachWarpReadsOnlyItsOwnBytesAndEveryPieceOnce) {
  EXPECT_EQ(o_tile_ownership_violations(1), 0);
  EXPECT_EQ(o_tile_ownership_violations(2), 0);
}

// The state warpgroups: S = S + K^T V (decays 1), A = K^T per warp through
// ldmatrix.trans of the K tile, then S^ = bf16(S) written back for the next
// chunk. Both halves (warpgroups 1 and 2); counts mismatches of S and of S^.
int run_v6_state(const Bugs& bug) {
  V6World w(kC, {});
  const Mat want = [&] {
    Mat kt(kD * kC);  // K^T
    for (int j = 0; j < kC; ++j)
      for (int d = 0; d < kD; ++d) kt[d * kC + j] = w.K[j * kD + d];
    Mat s = matmul(kt, w.V, kD, kC, kD, false);
    for (size_t i = 0; i < s.size(); ++i) s[i] += w.S[i];
    return s;
  }();
  Mat got(kD * kD), got_hat(kD * kD);
  const SharedMemory& smem = w.smem;
  SharedMemory next(kHalf128 * 2);  // the other S^ buffer, for chunk c+1
  for (int s_half = 0; s_half < 2; ++s_half) {
    WgAcc<128> st;
    std::array<std::array<uint32_t, 16>, 128> kf{};
    for (int tid = 0; tid < 128; ++tid) {
      const Lane L(tid);
      const int R0 = 64 * s_half + 16 * L.warp + L.g;
      for (int n = 0; n < 16; ++n)
        for (int hr = 0; hr < 2; ++hr) {
          const int r = R0 + 8 * hr, col = 8 * n + 2 * L.t;
          st[tid][4 * n + 2 * hr] = w.S[r * kD + col];
          st[tid][4 * n + 2 * hr + 1] = w.S[r * kD + col + 1];
        }
    }
    for (int warp = 0; warp < 4; ++warp)
      for (int kk = 0; kk < kC / 16; ++kk) {
        WarpAddrs addr{};
        for (int lane = 0; lane < 32; ++lane) {
          const int key = 16 * kk + (lane & 7) + (lane >> 4) * 8 + (lane == bug.lane_off_by_one);
          const int row = 64 * s_half + 16 * warp + ((lane >> 3) & 1) * 8;
          addr[lane] = V6World::sK + sm90::sw128_offset<kC>(key, row);
        }
        const WarpFrag4 f = ldmatrix_x4_trans(smem, addr);
        for (int lane = 0; lane < 32; ++lane)
          for (int j = 0; j < 4; ++j) kf[32 * warp + lane][4 * kk + j] = f[lane][j];
      }
    if (bug.swap_a1_a2)
      for (auto& r : kf)
        for (int kk = 0; kk < 4; ++kk) std::swap(r[4 * kk + 1], r[4 * kk + 2]);
    w.times_v(st, kf, bug);
    const Mat m = wg_acc_matrix<128>(st);
    std::copy(m.begin(), m.end(), got.begin() + 64 * s_half * kD);
    for (int tid = 0; tid < 128; ++tid) {
      const Lane L(tid);
      const int R0 = 64 * s_half + 16 * L.warp + L.g;
      for (int n = 0; n < 16; ++n) {
        const int col = 8 * n + 2 * L.t;
        next.store32(sm90::sw128_offset<128>(R0, col), pack_bf16x2(st[tid][4 * n], st[tid][4 * n + 1]));
        next.store32(sm90::sw128_offset<128>(R0 + 8, col), pack_bf16x2(st[tid][4 * n + 2], st[tid][4 * n + 3]));
      }
    }
  }
  Mat want_hat(kD * kD);
  for (int r = 0; r < kD; ++r)
    for (int c = 0; c < kD; ++c) {
      got_hat[r * kD + c] = next.load_bf16(sm90::sw128_offset<128>(r, c));
      want_hat[r * kD + c] = round_bf16(want[r * kD + c]);
    }
  return mismatches(got, want) + mismatches(got_hat, want_hat);
}

TEST(Wgmma, V6QKtM64n64SS) { EXPECT_EQ(run_v6_qkt({}), 0); }
TEST(Wgmma, V6QKtM64n64SSPartialChunkZeroFilled) { EXPECT_EQ(run_v6_qkt({}, 45), 0); }
TEST(Wgmma, V6QStateCopyM64n128SSTransB) { EXPECT_EQ(run_v6_q_state({}), 0); }
TEST(Wgmma, V6OutputsRSTimesVAndStaging) {
  EXPECT_EQ(run_v6_outputs({}), 0);
  EXPECT_EQ(run_v6_outputs({}, 37), 0);
}
TEST(Wgmma, V6StateLdmatrixTransRSAndStateCopy) { EXPECT_EQ(run_v6_state({}), 0); }
TEST(Wgmma, V7OutputHalvesM64n64SSAndRSAndTheirStaging) {
  EXPECT_EQ(run_v7_outputs({}), 0);
  EXPECT_EQ(run_v7_outputs({}, 37), 0);
}
TEST(Wgmma, V7PlantedBugsShow) {
  EXPECT_GT(run_v7_outputs({}, kC, true), 0) << "both halves on columns 0..63";
  Bugs trans;
  trans.wrong_trans_b = true;
  EXPECT_GT(run_v7_outputs(trans), 0);
  // (An LBO error cannot show here: an N-major n64 operand lies in one 64-column half, so the
  // stride between halves is never used -- the emulator agrees, which is why no case plants it.)
  Bugs lbo;
  lbo.lbo_delta = 1024;
  EXPECT_EQ(run_v7_outputs(lbo), 0);
  Bugs swap;
  swap.swap_a1_a2 = true;
  EXPECT_GT(run_v7_outputs(swap), 0);
}

// ---------------------------------------------- wgmma: prefill v2 / v3 --
// flash_prefill_wgmma_rows.cuh: Q, K, V tiles of 128 rows x head dim 128; a
// consumer warpgroup wg owns Q rows [64 wg, +64). Q arrives through v2's
// 256-thread loader, K and V through v3's one-warp producer (NT = 32: the
// loader's second branch), both rows of key block 1 with the tail masked.
constexpr int kBr = 128, kBc = 128;
constexpr uint32_t kFlashHalfBytes = 128 * 128, kTileBytes = 128 * kD * 2;

struct PrefillWorld {
  static constexpr uint32_t sQ = 0, sK = kTileBytes, sV = 2 * kTileBytes, kBytes = 3 * kTileBytes + 4096;
  static constexpr int kRowsValid = 100, kJ0 = 128, kKvWritten = kJ0 + 90;
  SharedMemory smem{kBytes};
  Mat Q, K, V;  // tile contents: [128][128]

  explicit PrefillWorld(const Bugs& bug) {
    fill_stale(smem, 7);
    const Mat q = random_matrix(kBr, kD, 41), k = random_matrix(2 * kBc, kD, 42), v = random_matrix(2 * kBc, kD, 43);
    const auto gq = to_bf16_bits(q), gk = to_bf16_bits(k), gv = to_bf16_bits(v);
    load_tile_sw128<kBr, kD, 256>(smem, sQ, gq.data(), gq.data(), kD, 0, 0, kRowsValid, bug);
    load_tile_sw128<kBc, kD, 32>(smem, sK, gk.data() + kJ0 * kD, gk.data(), kD, kJ0, 0, kKvWritten, bug);
    load_tile_sw128<kBc, kD, 32>(smem, sV, gv.data() + kJ0 * kD, gv.data(), kD, kJ0, 0, kKvWritten, bug);
    Q = zero_rows_from(q, kD, kRowsValid);
    K = zero_rows_from(rows_of(k, kD, kJ0, kBc), kD, kKvWritten - kJ0);
    V = zero_rows_from(rows_of(v, kD, kJ0, kBc), kD, kKvWritten - kJ0);
  }
};

int run_prefill_qkt(const Bugs& bug, int wg) {
  const PrefillWorld w(bug);
  const uint32_t q_base = PrefillWorld::sQ + static_cast<uint32_t>(wg * 64 * 128);
  WgAcc<128> s_acc;
  for (int kk = 0; kk < kD / 16; ++kk) {
    const uint32_t off = static_cast<uint32_t>((kk >> 2) * kFlashHalfBytes + (kk & 3) * 32);
    wgmma_ss<128>(s_acc, w.smem, sm90::sw128_desc(q_base + off, 16, 1024),
                  sm90::sw128_desc(PrefillWorld::sK + off, 16, 1024), kk > 0, bug.wrong_trans_b ? 1 : 0);
  }
  return mismatches(wg_acc_matrix<128>(s_acc), matmul(rows_of(w.Q, kD, 64 * wg, 64), w.K, 64, kD, kBc, true));
}

// O = C + P V with P packed by rescale_and_pack, then the store() epilogue's
// staging through the Q tile (corr = inv = 1).
int run_prefill_pv(const Bugs& bug, int wg) {
  PrefillWorld w({});
  const Mat P = random_matrix(64, kBc, 51), C = random_matrix(64, kD, 52);
  WgAcc<128> s_acc, o_acc;
  for (int tid = 0; tid < 128; ++tid) {
    const Lane L(tid);
    for (int j = 0; j < 64; ++j) {
      const int i = j / 4, e = j % 4, row = 16 * L.warp + L.g + 8 * (e >> 1), col = 8 * i + 2 * L.t + (e & 1);
      s_acc[tid][j] = P[row * kBc + col];
      o_acc[tid][j] = C[row * kD + col];
    }
  }
  std::array<Frag4, 8> p_frag_of[128];
  for (int tid = 0; tid < 128; ++tid)
    for (int kk = 0; kk < kBc / 16; ++kk) {
      Frag4& f = p_frag_of[tid][kk];
      f[0] = pack_bf16x2(s_acc[tid][8 * kk], s_acc[tid][8 * kk + 1]);
      f[1] = pack_bf16x2(s_acc[tid][8 * kk + 2], s_acc[tid][8 * kk + 3]);
      f[2] = pack_bf16x2(s_acc[tid][8 * kk + 4], s_acc[tid][8 * kk + 5]);
      f[3] = pack_bf16x2(s_acc[tid][8 * kk + 6], s_acc[tid][8 * kk + 7]);
      if (bug.swap_a1_a2) std::swap(f[1], f[2]);
    }
  for (int kk = 0; kk < kBc / 16; ++kk) {
    WgFragA frag{};
    for (int tid = 0; tid < 128; ++tid) frag[tid] = p_frag_of[tid][kk];
    const uint32_t v_step = PrefillWorld::sV + static_cast<uint32_t>(kk * 2048);
    wgmma_rs<128>(o_acc, frag, w.smem, sm90::sw128_desc(v_step, kFlashHalfBytes + bug.lbo_delta, 1024), true,
                  bug.wrong_trans_b ? 0 : 1);
  }
  const Mat pv = matmul(P, w.V, 64, kBc, kD, false);
  Mat want(64 * kD);
  for (size_t i = 0; i < want.size(); ++i) want[i] = round_bf16(C[i] + pv[i]);

  for (int tid = 0; tid < 128; ++tid) {  // store(): this warp's 16 rows of the Q tile
    const Lane L(tid);
    const int row0 = 64 * wg + 16 * L.warp;
    for (int hr = 0; hr < 2; ++hr) {
      const int r = row0 + (L.lane >> 2) + hr * 8;
      for (int i = 0; i < 16; ++i)
        w.smem.store32(PrefillWorld::sQ + sm90::sw128_offset<kBr>(r, i * 8 + (L.lane & 3) * 2),
                       pack_bf16x2(o_acc[tid][4 * i + 2 * hr], o_acc[tid][4 * i + 2 * hr + 1]));
    }
  }
  Mat out(64 * kD);
  constexpr int C16 = kD / 8;
  for (int warp = 0; warp < 4; ++warp)
    for (int lane = 0; lane < 32; ++lane)
      for (int idx = lane; idx < 16 * C16; idx += 32) {
        const int r = 64 * wg + 16 * warp + idx / C16, c = idx % C16;
        for (int e = 0; e < 8; ++e)
          out[(r - 64 * wg) * kD + c * 8 + e] =
              w.smem.load_bf16(PrefillWorld::sQ + sm90::sw128_offset<kBr>(r, c * 8) + 2 * e);
      }
  return mismatches(out, want);
}

TEST(Wgmma, PrefillQKtM64n128SSBothWarpgroups) {
  EXPECT_EQ(run_prefill_qkt({}, 0), 0);
  EXPECT_EQ(run_prefill_qkt({}, 1), 0);
}
TEST(Wgmma, PrefillPVRSTransBAndEpilogue) {
  EXPECT_EQ(run_prefill_pv({}, 0), 0);
  EXPECT_EQ(run_prefill_pv({}, 1), 0);
}

// ------------------------------------------------------- planted bugs --
// Each must make the product wrong (the bug-free runs above are exact).

TEST(PlantedBug, SwizzleXorDropped) {
  Bugs b;
  b.drop_xor = true;
  EXPECT_GT(run_mma_qkt(b), 0) << "ldmatrix reads without the XOR of a swizzled tile";
  EXPECT_GT(run_mma_pv(b), 0);
  EXPECT_GT(run_v6_qkt(b), 0) << "tiles written without the XOR, read through the 128B swizzle";
  EXPECT_GT(run_v6_q_state(b), 0);
  EXPECT_GT(run_prefill_qkt(b, 1), 0);
}

TEST(PlantedBug, WrongTransB) {
  Bugs b;
  b.wrong_trans_b = true;
  EXPECT_GT(run_v6_q_state(b), 0) << "S^ read K-major";
  EXPECT_GT(run_v6_outputs(b), 0) << "V read K-major";
  EXPECT_GT(run_v6_state(b), 0);
  EXPECT_GT(run_prefill_qkt(b, 0), 0) << "K read N-major";
  EXPECT_GT(run_prefill_pv(b, 0), 0);
}

TEST(PlantedBug, LboOffByOneAtom) {
  for (int delta : {-1024, 1024}) {
    Bugs b;
    b.lbo_delta = delta;
    EXPECT_GT(run_v6_q_state(b), 0) << "LBO " << delta;
    EXPECT_GT(run_v6_outputs(b), 0) << "LBO " << delta;
    EXPECT_GT(run_v6_state(b), 0) << "LBO " << delta;
    EXPECT_GT(run_prefill_pv(b, 1), 0) << "LBO " << delta;
  }
}

TEST(PlantedBug, AFragmentA1A2Swapped) {
  Bugs b;
  b.swap_a1_a2 = true;
  EXPECT_GT(run_mma_qkt(b), 0);
  EXPECT_GT(run_mma_pv(b), 0);
  EXPECT_GT(run_v6_outputs(b), 0);
  EXPECT_GT(run_v6_state(b), 0);
  EXPECT_GT(run_prefill_pv(b, 0), 0);
}

TEST(PlantedBug, LaneRowAddressOffByOne) {
  for (int lane : {0, 5, 13, 31}) {
    Bugs b;
    b.lane_off_by_one = lane;
    EXPECT_GT(run_mma_qkt(b), 0) << "lane " << lane;
    EXPECT_GT(run_mma_pv(b), 0) << "lane " << lane;
    EXPECT_GT(run_v6_state(b), 0) << "lane " << lane;
  }
}

TEST(PlantedBug, CpAsyncValidFlagIgnored) {
  for (auto copy : {Bugs::Copy::skip_invalid, Bugs::Copy::ignore_valid}) {
    Bugs b;
    b.copy = copy;
    EXPECT_GT(run_v6_qkt(b, 45), 0) << "v6 loader (NT 256), rows 45.. of the chunk";
    EXPECT_GT(run_prefill_qkt(b, 1), 0) << "prefill loaders (NT 256 and the NT 32 branch)";
  }
}

}  // namespace
