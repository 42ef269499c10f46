#include "lane_emulator.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <stdexcept>
#include <string>

namespace yoco::emu {

uint16_t to_bf16(float x) {
  const uint32_t u = std::bit_cast<uint32_t>(x);
  if (std::isnan(x)) return static_cast<uint16_t>((u >> 16) | 0x40u);  // stays a NaN after truncation
  return static_cast<uint16_t>((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}
float from_bf16(uint16_t h) { return std::bit_cast<float>(static_cast<uint32_t>(h) << 16); }
uint32_t pack_bf16x2(float lo, float hi) {
  return static_cast<uint32_t>(to_bf16(lo)) | (static_cast<uint32_t>(to_bf16(hi)) << 16);
}
float bf16x2_lo(uint32_t r) { return from_bf16(static_cast<uint16_t>(r & 0xFFFFu)); }
float bf16x2_hi(uint32_t r) { return from_bf16(static_cast<uint16_t>(r >> 16)); }

void SharedMemory::check(uint32_t addr, uint32_t len, uint32_t align, const char* what) const {
  if (static_cast<uint64_t>(addr) + len > bytes_.size())
    throw std::out_of_range(std::string(what) + ": shared address " + std::to_string(addr) + " + " +
                            std::to_string(len) + " past " + std::to_string(bytes_.size()) + " bytes");
  if (addr % align != 0)
    throw std::invalid_argument(std::string(what) + ": shared address " + std::to_string(addr) + " not " +
                                std::to_string(align) + "-byte aligned");
}
uint16_t SharedMemory::load16(uint32_t addr) const {
  check(addr, 2, 2, "load16");
  uint16_t v;
  std::memcpy(&v, bytes_.data() + addr, 2);
  return v;
}
uint32_t SharedMemory::load32(uint32_t addr) const {
  check(addr, 4, 4, "load32");
  uint32_t v;
  std::memcpy(&v, bytes_.data() + addr, 4);
  return v;
}
void SharedMemory::store16(uint32_t addr, uint16_t v) {
  check(addr, 2, 2, "store16");
  std::memcpy(bytes_.data() + addr, &v, 2);
}
void SharedMemory::store32(uint32_t addr, uint32_t v) {
  check(addr, 4, 4, "store32");
  std::memcpy(bytes_.data() + addr, &v, 4);
}

namespace {

// Element (r, c) of matrix i of an ldmatrix: 8 b16 per 16-byte row.
uint16_t ldm_elem(const SharedMemory& smem, const WarpAddrs& row_addr, int i, int r, int c) {
  return smem.load16(row_addr[8 * i + r] + 2 * c);
}

WarpFrag4 ldmatrix_impl(const SharedMemory& smem, const WarpAddrs& row_addr, bool trans) {
  for (int l = 0; l < kWarpSize; ++l) smem.check(row_addr[l], 16, 16, "ldmatrix row");
  WarpFrag4 out{};
  for (int l = 0; l < kWarpSize; ++l)
    for (int i = 0; i < 4; ++i) {
      const int a = l / 4, b = 2 * (l % 4);
      const uint16_t lo = trans ? ldm_elem(smem, row_addr, i, b, a) : ldm_elem(smem, row_addr, i, a, b);
      const uint16_t hi = trans ? ldm_elem(smem, row_addr, i, b + 1, a) : ldm_elem(smem, row_addr, i, a, b + 1);
      out[l][i] = static_cast<uint32_t>(lo) | (static_cast<uint32_t>(hi) << 16);
    }
  return out;
}

}  // namespace

WarpFrag4 ldmatrix_x4(const SharedMemory& smem, const WarpAddrs& row_addr) {
  return ldmatrix_impl(smem, row_addr, false);
}
WarpFrag4 ldmatrix_x4_trans(const SharedMemory& smem, const WarpAddrs& row_addr) {
  return ldmatrix_impl(smem, row_addr, true);
}

int ldmatrix_x4_wavefronts(const WarpAddrs& row_addr) {
  // Each matrix is one 128-byte request: a bank serves one 4-byte word per
  // wavefront, so the count is the most distinct words any bank is asked for.
  int total = 0;
  for (int i = 0; i < 4; ++i) {
    std::array<std::vector<uint32_t>, 32> words;
    for (int r = 0; r < 8; ++r)
      for (int w = 0; w < 4; ++w) {
        const uint32_t word = row_addr[8 * i + r] / 4 + static_cast<uint32_t>(w);
        auto& bank = words[word % 32];
        bool seen = false;
        for (uint32_t x : bank) seen = seen || x == word;
        if (!seen) bank.push_back(word);
      }
    size_t worst = 0;
    for (const auto& bank : words) worst = std::max(worst, bank.size());
    total += static_cast<int>(worst);
  }
  return total;
}

WarpFrag2 pick2(const WarpFrag4& f, int i0, int i1) {
  WarpFrag2 out{};
  for (int l = 0; l < kWarpSize; ++l) out[l] = {f[l][i0], f[l][i1]};
  return out;
}

void mma_m16n8k16(WarpAcc4& c, const WarpFrag4& a, const WarpFrag2& b) {
  // Reassemble the operands from the fragments (every element sits in exactly
  // one lane's register), then one plain product.
  float A[16][16], B[16][8];
  for (int l = 0; l < kWarpSize; ++l) {
    const int g = l / 4, t = l % 4;
    for (int j = 0; j < 4; ++j) {
      const int row = g + 8 * (j & 1), col = 2 * t + 8 * (j >> 1);
      A[row][col] = bf16x2_lo(a[l][j]);
      A[row][col + 1] = bf16x2_hi(a[l][j]);
    }
    for (int j = 0; j < 2; ++j) {
      B[2 * t + 8 * j][g] = bf16x2_lo(b[l][j]);
      B[2 * t + 8 * j + 1][g] = bf16x2_hi(b[l][j]);
    }
  }
  for (int l = 0; l < kWarpSize; ++l) {
    const int g = l / 4, t = l % 4;
    for (int e = 0; e < 4; ++e) {
      const int row = g + 8 * (e >> 1), col = 2 * t + (e & 1);
      double s = c[l][e];
      for (int k = 0; k < 16; ++k) s += static_cast<double>(A[row][k]) * B[k][col];
      c[l][e] = static_cast<float>(s);
    }
  }
}

MatrixDescriptor decode_descriptor(uint64_t desc) {
  MatrixDescriptor d;
  d.start = static_cast<uint32_t>(desc & 0x3FFFu) << 4;
  d.lbo = static_cast<uint32_t>((desc >> 16) & 0x3FFFu) << 4;
  d.sbo = static_cast<uint32_t>((desc >> 32) & 0x3FFFu) << 4;
  d.base_offset = static_cast<int>((desc >> 49) & 7u);
  d.swizzle = static_cast<int>((desc >> 62) & 3u);
  return d;
}

uint32_t operand_address(const MatrixDescriptor& d, int mn, int k, bool mn_major) {
  if (d.swizzle != 1) throw std::invalid_argument("wgmma operand: only the 128-byte swizzle is modelled");
  if (d.base_offset != 0) throw std::invalid_argument("wgmma operand: base offset != 0 is not modelled");
  uint32_t linear;
  if (mn_major)
    linear = d.start + static_cast<uint32_t>(mn / 64) * d.lbo + static_cast<uint32_t>(k / 8) * d.sbo +
             static_cast<uint32_t>(k % 8) * 128 + static_cast<uint32_t>(mn % 64) * 2;
  else
    linear = d.start + static_cast<uint32_t>(mn / 8) * d.sbo + static_cast<uint32_t>(mn % 8) * 128 +
             static_cast<uint32_t>(k) * 2;
  return swizzle128(linear);
}

void wg_acc_to_matrix(int n, const float* acc, float* out) {
  for (int tid = 0; tid < kWarpgroupSize; ++tid) {
    const int w = tid / 32, g = (tid % 32) / 4, t = tid % 4;
    for (int j = 0; j < n / 2; ++j) {
      const int i = j / 4, e = j % 4;
      out[(16 * w + g + 8 * (e >> 1)) * n + 8 * i + 2 * t + (e & 1)] = acc[tid * (n / 2) + j];
    }
  }
}

namespace {

// D = (accumulate ? D : 0) + A B with A [64][16] row-major, B [16][n] row-major.
void wgmma_apply(int n, float* acc, const float* A, const std::vector<float>& B, bool accumulate) {
  for (int tid = 0; tid < kWarpgroupSize; ++tid) {
    const int w = tid / 32, g = (tid % 32) / 4, t = tid % 4;
    for (int j = 0; j < n / 2; ++j) {
      const int i = j / 4, e = j % 4;
      const int row = 16 * w + g + 8 * (e >> 1), col = 8 * i + 2 * t + (e & 1);
      double s = accumulate ? acc[tid * (n / 2) + j] : 0.0;
      for (int k = 0; k < 16; ++k) s += static_cast<double>(A[row * 16 + k]) * B[k * n + col];
      acc[tid * (n / 2) + j] = static_cast<float>(s);
    }
  }
}

std::vector<float> read_b(int n, const SharedMemory& smem, uint64_t desc_b, int trans_b) {
  if (trans_b != 0 && trans_b != 1) throw std::invalid_argument("wgmma: imm-trans-b is 0 or 1");
  const MatrixDescriptor d = decode_descriptor(desc_b);
  std::vector<float> B(16 * n);
  for (int k = 0; k < 16; ++k)
    for (int c = 0; c < n; ++c) B[k * n + c] = smem.load_bf16(operand_address(d, c, k, trans_b == 1));
  return B;
}

void check_n(int n) {
  if (n % 8 != 0 || n < 8 || n > 256) throw std::invalid_argument("wgmma: N is a multiple of 8 in [8, 256]");
}

}  // namespace

void wgmma_ss_core(int n, float* acc, const SharedMemory& smem, uint64_t desc_a, uint64_t desc_b, bool accumulate,
                   int trans_a, int trans_b) {
  check_n(n);
  if (trans_a != 0 && trans_a != 1) throw std::invalid_argument("wgmma: imm-trans-a is 0 or 1");
  const MatrixDescriptor da = decode_descriptor(desc_a);
  float A[64 * 16];
  for (int m = 0; m < 64; ++m)
    for (int k = 0; k < 16; ++k) A[m * 16 + k] = smem.load_bf16(operand_address(da, m, k, trans_a == 1));
  wgmma_apply(n, acc, A, read_b(n, smem, desc_b, trans_b), accumulate);
}

void wgmma_rs_core(int n, float* acc, const WgFragA& a, const SharedMemory& smem, uint64_t desc_b, bool accumulate,
                   int trans_b) {
  check_n(n);
  float A[64 * 16];
  for (int tid = 0; tid < kWarpgroupSize; ++tid) {
    const int w = tid / 32, g = (tid % 32) / 4, t = tid % 4;
    for (int j = 0; j < 4; ++j) {
      const int row = 16 * w + g + 8 * (j & 1), col = 2 * t + 8 * (j >> 1);
      A[row * 16 + col] = bf16x2_lo(a[tid][j]);
      A[row * 16 + col + 1] = bf16x2_hi(a[tid][j]);
    }
  }
  wgmma_apply(n, acc, A, read_b(n, smem, desc_b, trans_b), accumulate);
}

void cp_async16(SharedMemory& smem, uint32_t dst, const void* src, bool valid) {
  smem.check(dst, 16, 16, "cp.async dst");
  if (valid && reinterpret_cast<uintptr_t>(src) % 16 != 0)
    throw std::invalid_argument("cp.async: global source not 16-byte aligned");
  if (valid)
    std::memcpy(smem.data() + dst, src, 16);
  else
    std::memset(smem.data() + dst, 0, 16);
}

void tma_load_box_sw128(SharedMemory& smem, uint32_t dst, const void* global, const cuda::tma::Bf16RowsView& view,
                        int32_t c0, int32_t c1, int32_t c2) {
  if (view.box[0] * 2 != 128) throw std::invalid_argument("TMA 128B swizzle: the inner box is 128 bytes");
  if (dst % 1024 != 0) throw std::invalid_argument("TMA 128B swizzle: destination not 1024-byte aligned");
  const uint32_t rows = view.box[1] * view.box[2];
  smem.check(dst, rows * 128, 1024, "TMA box");
  const auto* g = static_cast<const unsigned char*>(global);
  for (uint32_t z = 0; z < view.box[2]; ++z)
    for (uint32_t r = 0; r < view.box[1]; ++r)
      for (uint32_t i = 0; i < view.box[0]; ++i) {
        const int64_t col = int64_t{c0} + i, row = int64_t{c1} + r, seq = int64_t{c2} + z;
        const bool inside = col >= 0 && row >= 0 && seq >= 0 && static_cast<uint64_t>(col) < view.dims[0] &&
                            static_cast<uint64_t>(row) < view.dims[1] && static_cast<uint64_t>(seq) < view.dims[2];
        uint16_t v = 0;
        if (inside)
          std::memcpy(&v,
                      g + static_cast<uint64_t>(seq) * view.strides_bytes[1] +
                          static_cast<uint64_t>(row) * view.strides_bytes[0] + static_cast<uint64_t>(col) * 2,
                      2);
        smem.store16(swizzle128(dst + (z * view.box[1] + r) * 128 + i * 2), v);
      }
}

}  // namespace yoco::emu
