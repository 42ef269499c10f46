// FlashAttention-3-style prefill attention on Hopper wgmma (issue 13, v2).
//
// Same contract as v1 (cuda/flash_prefill.hpp): causal / sliding-window GQA
// prefill, queries bottom-right aligned at q_start[b] + i, bf16 in and out,
// fp32 scores / softmax / accumulators, optional fp32 LSE. Head dim 128 only;
// launch_flash_prefill sends other head dims to v1.
//
// CTA = 2 consumer warpgroups (256 threads), 128 query rows (64 per
// warpgroup), key blocks of 128. No producer warpgroup: every thread issues
// cp.async (16 B, zero-fill outside the visible key range) into 128-byte-
// swizzled tiles, then `fence.proxy.async` + barrier before wgmma reads them.
//
// Shared tiles: [D/64 halves][rows][64 bf16] with 128-byte rows; 16-byte chunk
// c of row r sits at chunk c ^ (r & 7) inside its 1024-byte atom (the hardware
// 128B swizzle, Swizzle<3,4,3>: address bits [4:6] ^= bits [7:9]; every atom is
// 1024-byte aligned).
//   S = Q K^T  : wgmma m64n128k16, A = Q (smem, K-major), B = K (smem, K-major);
//                descriptor SBO = 1024 B (8-row groups), LBO unused (1); the
//                k16 step kk starts at half kk/4, byte (kk%4)*32 of the row.
//   O += P V   : wgmma m64n128k16, A = P (registers: the S accumulators of key
//                columns 16kk..16kk+15 are exactly A's fragment for step kk),
//                B = V (smem, N-major, imm-trans-b 1): LBO = half stride
//                (128 keys * 128 B), SBO = 1024 B (8-key groups); step kk starts
//                at key 16kk = byte 2048*kk.
//
// Pipeline (per warpgroup, FA3's intra-warpgroup overlap): iteration t issues
// S_t = Q K_t^T and O += P_{t-1} V_{t-1} back to back, waits for S_t only
// (wait_group 1), runs the masked online softmax of S_t while the P V GEMM is
// still on the tensor cores, then waits for it, rescales O and converts P_t to
// bf16. Ping-pong (default, kPingPong): warpgroup 1 issues its GEMMs only after
// warpgroup 0's S_t has finished (named barrier 1), so warpgroup 0's softmax runs under
// warpgroup 1's GEMMs; lockstep (kPingPong false) is kept for comparison. Loads: at the
// top of iteration t (after the barrier) K_{t+1} goes into
// the K stage that held K_{t-1} and V_t into the V stage that held V_{t-2}; both
// were last read by wgmmas that every thread waited for before the barrier.
//
// Accumulator layout (m64nNk16, per warp w of the warpgroup, g = lane/4,
// t = lane%4): d[4i + e] is row 16w + g + 8*(e>>1), column 8i + 2t + (e&1).
#include <cmath>
#include <cstdint>

#include "attention_tiles.hpp"
#include "flash_prefill.hpp"

namespace yoco::cuda {

namespace {

using bf16 = __nv_bfloat16;

constexpr int kD = 128;                  // head dim
constexpr int kBr = 128;                 // query rows per CTA
constexpr int kBc = 128;                 // keys per block
constexpr int kThreads = 256;            // 2 warpgroups
constexpr int kTileBytes = 128 * kD * 2; // Q, K or V tile: 32 KiB
constexpr int kHalfBytes = 128 * 128;    // one 64-column half of a 128-row tile
constexpr int kOffQ = 0, kOffK = kTileBytes, kOffV = 3 * kTileBytes;  // K, V: 2 stages each
constexpr int kSmemUsed = 5 * kTileBytes;
constexpr int kSmemBytes = kSmemUsed + 1024;  // + slack to align the base to 1024 B
static_assert(kSmemBytes <= 227 * 1024, "shared memory per block");
static_assert(kBr == 2 * 64 && kThreads == 2 * 128, "one warpgroup per 64 query rows");
static_assert(kBc % 16 == 0 && kBc <= 256 && kD % 16 == 0 && kD <= 256, "wgmma shapes");
static_assert(kHalfBytes / 16 < (1 << 14), "LBO fits the descriptor");

struct Params {
  const bf16* q;
  const bf16* k;
  const bf16* v;
  const int64_t* q_start;
  const int64_t* q_len;
  bf16* o;
  float* lse;
  int64_t H, group, q_rows, capacity, q_stride, kv_stride, window;
  float scale_log2;
};

__device__ __forceinline__ void cp_async16(uint32_t dst, const bf16* gmem, bool valid) {
  const int bytes = valid ? 16 : 0;  // 0: zero-fill, nothing read
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(gmem), "r"(bytes) : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
__device__ __forceinline__ void cp_async_wait_all() { asm volatile("cp.async.wait_group 0;\n" ::: "memory"); }
// Makes this thread's generic-proxy shared-memory writes (cp.async included) visible to the async proxy (wgmma).
__device__ __forceinline__ void fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }

// Named barrier 1 over both warpgroups, predicated (no branch near the wgmmas): threads with
// `wait` true sync on it (and count), the others only arrive (count).
__device__ __forceinline__ void wg_order_sync_if(bool wait) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.u32 p, %0, 0;\n@p bar.sync 1, 256;\n}\n" ::"r"(static_cast<unsigned>(wait))
               : "memory");
}
__device__ __forceinline__ void wg_order_arrive_if(bool arrive) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.u32 p, %0, 0;\n@p bar.arrive 1, 256;\n}\n" ::"r"(static_cast<unsigned>(arrive))
               : "memory");
}
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
// Pins a register around asynchronous wgmma issue / wait points, so the compiler
// neither reads it early nor moves its use across the wait.
__device__ __forceinline__ void reg_fence(float& r) { asm volatile("" : "+f"(r)::"memory"); }
__device__ __forceinline__ void reg_fence(uint32_t& r) { asm volatile("" : "+r"(r)::"memory"); }
template <int N>
__device__ __forceinline__ void reg_fence(float (&r)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) reg_fence(r[i]);
}
template <int N>
__device__ __forceinline__ void reg_fence(uint32_t (&r)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) reg_fence(r[i]);
}

// Shared-memory matrix descriptor with 128-byte swizzle (PTX ISA "Matrix Descriptor Format"):
// bits 0-13 start >> 4, 16-29 LBO >> 4, 32-45 SBO >> 4, 49-51 base offset (0: atoms 1024-aligned),
// 62-63 swizzle mode (1 = 128B).
__device__ __forceinline__ uint64_t sw128_desc(uint32_t smem_addr, uint32_t lbo_bytes, uint32_t sbo_bytes) {
  uint64_t d = static_cast<uint64_t>((smem_addr & 0x3FFFFu) >> 4);
  d |= static_cast<uint64_t>((lbo_bytes & 0x3FFFFu) >> 4) << 16;
  d |= static_cast<uint64_t>((sbo_bytes & 0x3FFFFu) >> 4) << 32;
  d |= uint64_t{1} << 62;
  return d;
}

// D[64x128] (+)= A[64x16] (smem desc) * B[16x128] (smem desc), bf16 in, fp32 accumulate.
__device__ __forceinline__ void wgmma_ss_m64n128k16(float (&d)[64], uint64_t desc_a, uint64_t desc_b, int accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, "
      "%64, %65, p, 1, 1, 0, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
      : "l"(desc_a), "l"(desc_b), "r"(accumulate)
      : "memory");
}

// D[64x128] += A[64x16] (registers, bf16x2) * B[16x128] (smem desc, N-major: imm-trans-b 1).
__device__ __forceinline__ void wgmma_rs_m64n128k16_tb(float (&d)[64], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3,
                                                  uint64_t desc_b) {
  asm volatile(
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, "
      "{%64, %65, %66, %67}, %68, 1, 1, 1, 1;\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "l"(desc_b)
      : "memory");
}


__device__ __forceinline__ float fast_exp2(float x) {  // ex2(-inf) = +0
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);  // .x (low half) = lo
  return *reinterpret_cast<const uint32_t*>(&v);
}

// Byte offset of (row, col) in a [D/64][ROWS][64] 128B-swizzled bf16 tile.
template <int ROWS>
__device__ __forceinline__ uint32_t sw128_offset(int row, int col) {
  return static_cast<uint32_t>((col >> 6) * (ROWS * 128) + row * 128 + ((((col >> 3) & 7) ^ (row & 7)) << 4) +
                               (col & 7) * 2);
}

// cp.async of a [ROWS][kD] tile whose row r is global row row0 + r at g + r * stride (g points at
// row row0's head columns; never dereferenced for invalid rows). Rows outside [lo, hi) are
// zero-filled, so masked keys and padding rows hold finite values (P = 0 times NaN is NaN).
template <int ROWS>
__device__ __forceinline__ void load_tile(uint32_t sm, const bf16* g, const bf16* safe, int64_t stride, int64_t row0,
                                          int64_t lo, int64_t hi, int tid) {
  constexpr int C = kD / 8, RS = kThreads / C;  // 16 chunks per row; a thread keeps its chunk column
  static_assert(kThreads % C == 0 && RS % 8 == 0 && ROWS % RS == 0, "fixed swizzle phase per thread");
  const int c = tid % C, r0 = tid / C;
  const uint32_t dst0 = sm + sw128_offset<ROWS>(r0, c * 8);  // (r0 + i*RS) & 7 == r0 & 7
  const bf16* src = g + static_cast<int64_t>(r0) * stride + c * 8;
  const int64_t step = static_cast<int64_t>(RS) * stride;
#pragma unroll
  for (int i = 0; i < ROWS / RS; ++i) {
    const int64_t gr = row0 + r0 + i * RS;
    const bool valid = gr >= lo && gr < hi;
    cp_async16(dst0 + static_cast<uint32_t>(i * RS * 128), valid ? src : safe, valid);
    src += step;
  }
}

template <bool kPingPong>
__global__ void __launch_bounds__(kThreads, 1) flash_prefill_sm90_kernel(const Params p) {
  const int tid = threadIdx.x, wg = tid / 128, warp = (tid % 128) / 32, lane = tid % 32;
  const int64_t tile = static_cast<int64_t>(gridDim.y) - 1 - blockIdx.y;  // longest tiles first
  const int64_t h = blockIdx.x, b = blockIdx.z;
  const int64_t len = p.q_len[b];
  const int64_t i0 = tile * kBr;
  if (i0 >= len) return;  // uniform over the CTA: before any barrier
  const int64_t qs = p.q_start[b];
  const int64_t rows_valid = len - i0 < kBr ? len - i0 : kBr;
  const int64_t p_first = qs + i0, p_last = qs + i0 + rows_valid - 1;
  const int64_t window = p.window;
  const attn::KeyBlockRange range = attn::key_block_range(p_first, p_last, window, kBc);
  const int64_t kv_lo = window > 0 && p_first - window + 1 > 0 ? p_first - window + 1 : 0;
  const int64_t kv_hi = p_last + 1 < p.capacity ? p_last + 1 : p.capacity;
  const int64_t kvh = h / p.group;
  const int window32 = static_cast<int>(window);  // window < capacity < 2^30 (the launcher clamps)

  const bf16* qg = p.q + (b * p.q_rows + i0) * p.q_stride + h * kD;
  const bf16* kg = p.k + b * p.capacity * p.kv_stride + kvh * kD;
  const bf16* vg = p.v + b * p.capacity * p.kv_stride + kvh * kD;

  extern __shared__ __align__(1024) unsigned char smem_raw[];
  const uint32_t raw_addr = static_cast<uint32_t>(__cvta_generic_to_shared(smem_raw));
  const uint32_t base = (raw_addr + 1023u) & ~1023u;  // swizzle atoms on 1024-byte boundaries
  unsigned char* smem = smem_raw + (base - raw_addr);
  const uint32_t sQ = base + kOffQ, sK = base + kOffK, sV = base + kOffV;

  const int64_t nb = range.last - range.first;  // >= 1
  // Prologue: Q and K of the first block.
  load_tile<kBr>(sQ, qg, p.q, p.q_stride, 0, 0, rows_valid, tid);
  load_tile<kBc>(sK, kg + range.first * kBc * p.kv_stride, kg, p.kv_stride, range.first * kBc, kv_lo, kv_hi, tid);
  cp_async_commit();

  float o_acc[64];
  float s_acc[64];
  uint32_t p_frag[32];
#pragma unroll
  for (int i = 0; i < 64; ++i) o_acc[i] = 0.0f;
#pragma unroll
  for (int i = 0; i < 32; ++i) p_frag[i] = 0u;
  float m_row[2] = {-INFINITY, -INFINITY}, l_row[2] = {0.0f, 0.0f};

  const int row_wg0 = wg * 64 + warp * 16;  // this warp's first row in the CTA tile
  const uint32_t q_desc_base = sQ + static_cast<uint32_t>(wg * 64 * 128);
  const float sl2 = p.scale_log2;

  // Issues S_t = Q K_t^T and, for t > 0, O += P_{t-1} V_{t-1}: two commit groups (one when t == 0).
  auto issue_gemms = [&](int64_t t) {
    const uint32_t k_cur = sK + static_cast<uint32_t>((t & 1) * kTileBytes);
    const uint32_t v_prev = sV + static_cast<uint32_t>(((t + 1) & 1) * kTileBytes);  // V_{t-1}
    reg_fence(s_acc);
    reg_fence(o_acc);
    reg_fence(p_frag);
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < kD / 16; ++kk) {
      const uint32_t off = static_cast<uint32_t>((kk >> 2) * kHalfBytes + (kk & 3) * 32);
      wgmma_ss_m64n128k16(s_acc, sw128_desc(q_desc_base + off, 16, 1024), sw128_desc(k_cur + off, 16, 1024), kk > 0);
    }
    wgmma_commit();
    if (t > 0) {
#pragma unroll
      for (int kk = 0; kk < kBc / 16; ++kk)
        wgmma_rs_m64n128k16_tb(o_acc, p_frag[4 * kk], p_frag[4 * kk + 1], p_frag[4 * kk + 2], p_frag[4 * kk + 3],
                               sw128_desc(v_prev + static_cast<uint32_t>(kk * 2048), kHalfBytes, 1024));
      wgmma_commit();
    }
  };
  // O += P V of the last block (V_{nb-1}), waited for.
  auto last_pv = [&]() {
    const uint32_t v_last = sV + static_cast<uint32_t>(((nb - 1) & 1) * kTileBytes);
    reg_fence(o_acc);
    reg_fence(p_frag);
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < kBc / 16; ++kk)
      wgmma_rs_m64n128k16_tb(o_acc, p_frag[4 * kk], p_frag[4 * kk + 1], p_frag[4 * kk + 2], p_frag[4 * kk + 3],
                             sw128_desc(v_last + static_cast<uint32_t>(kk * 2048), kHalfBytes, 1024));
    wgmma_commit();
    wgmma_wait<0>();
    reg_fence(o_acc);
  };
  // Masked online softmax of the finished S of key block n, in place (s_acc -> unnormalised P in
  // fp32); returns the row rescale factors through corr and updates m, l.
  auto softmax = [&](int64_t n, float (&corr)[2]) {
    if (attn::key_block_needs_mask(n, kBc, p_first, p_last, window)) {  // raw scores; scale in the exponent
      const int delta0 = static_cast<int>(n * kBc - (p_first + row_wg0));  // |.| < 2^30
#pragma unroll
      for (int i = 0; i < 16; ++i)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int delta = delta0 + i * 8 + (lane & 3) * 2 + (e & 1) - ((lane >> 2) + (e >> 1) * 8);
          if (!attn::key_visible_delta(delta, window32)) s_acc[4 * i + e] = -INFINITY;
        }
    }
    // Log2 domain: m = running max of scale*log2(e)*s (scale > 0).
#pragma unroll
    for (int hr = 0; hr < 2; ++hr) {
      float mx = -INFINITY;
#pragma unroll
      for (int i = 0; i < 16; ++i) mx = fmaxf(mx, fmaxf(s_acc[4 * i + 2 * hr], s_acc[4 * i + 2 * hr + 1]));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
      const float m_new = fmaxf(m_row[hr], mx * sl2);          // -inf * sl2 = -inf
      const float m_use = m_new == -INFINITY ? 0.0f : m_new;   // no visible key yet: never -inf - -inf
      corr[hr] = fast_exp2(m_row[hr] - m_use);
      m_row[hr] = m_new;
      float sum = 0.0f;
#pragma unroll
      for (int i = 0; i < 16; ++i) {
        const float p0 = fast_exp2(fmaf(s_acc[4 * i + 2 * hr], sl2, -m_use));  // masked: -inf -> 0
        const float p1 = fast_exp2(fmaf(s_acc[4 * i + 2 * hr + 1], sl2, -m_use));
        s_acc[4 * i + 2 * hr] = p0;
        s_acc[4 * i + 2 * hr + 1] = p1;
        sum += p0 + p1;
      }
      l_row[hr] = l_row[hr] * corr[hr] + sum;  // this thread's partial; the quad reduces at the end
    }
  };
  // O *= corr (O idle: no P V in flight), then P (bf16 A fragments) from s_acc.
  auto rescale_and_pack = [&](const float (&corr)[2]) {
#pragma unroll
    for (int i = 0; i < 16; ++i) {
      o_acc[4 * i] *= corr[0];
      o_acc[4 * i + 1] *= corr[0];
      o_acc[4 * i + 2] *= corr[1];
      o_acc[4 * i + 3] *= corr[1];
    }
#pragma unroll
    for (int kk = 0; kk < kBc / 16; ++kk) {
      p_frag[4 * kk] = pack_bf16(s_acc[8 * kk], s_acc[8 * kk + 1]);          // row g,   keys 16kk + 2t..
      p_frag[4 * kk + 1] = pack_bf16(s_acc[8 * kk + 2], s_acc[8 * kk + 3]);  // row g+8, keys 16kk + 2t..
      p_frag[4 * kk + 2] = pack_bf16(s_acc[8 * kk + 4], s_acc[8 * kk + 5]);  // row g,   keys 16kk + 8 + 2t..
      p_frag[4 * kk + 3] = pack_bf16(s_acc[8 * kk + 6], s_acc[8 * kk + 7]);  // row g+8, keys 16kk + 8 + 2t..
    }
  };

  // Ping-pong (FA3's warp-scheduler barrier, reduced to one named barrier): in every iteration
  // warpgroup 1 issues its GEMMs only after warpgroup 0 has issued its own, so the tensor cores
  // run S0, P0 V, S1, P1 V in that order; warpgroup 0's softmax then runs under warpgroup 1's
  // GEMMs instead of both softmaxes running at once. Both warpgroups run the same wgmma code (no
  // wgmma in a warpgroup-divergent path); only the barrier call differs. Lockstep: no ordering.
  for (int64_t t = 0; t < nb; ++t) {
    const int64_t n = range.first + t;
    cp_async_wait_all();   // this thread's K_t, V_{t-1} (and Q) have landed
    fence_proxy_async();   // ... and are visible to wgmma
    __syncthreads();       // everyone's; and every wgmma of iteration t-1 is complete
    {
      if (t + 1 < nb) {
        const int64_t j0 = (n + 1) * kBc;
        load_tile<kBc>(sK + static_cast<uint32_t>(((t + 1) & 1) * kTileBytes), kg + j0 * p.kv_stride, kg,
                       p.kv_stride, j0, kv_lo, kv_hi, tid);
      }
      const int64_t j0 = n * kBc;
      load_tile<kBc>(sV + static_cast<uint32_t>((t & 1) * kTileBytes), vg + j0 * p.kv_stride, vg, p.kv_stride, j0,
                     kv_lo, kv_hi, tid);
      cp_async_commit();
    }
    static_assert(kThreads == 256, "the order barrier counts both warpgroups");
    if (kPingPong) wg_order_sync_if(wg == 1);  // warpgroup 1 waits until warpgroup 0 has issued
    issue_gemms(t);
    if (t > 0) {
      wgmma_wait<1>();  // S_t done; P_{t-1} V_{t-1} may still run
    } else {
      wgmma_wait<0>();
    }
    reg_fence(s_acc);
    // After the wait (an arrive between issue and wait makes ptxas serialise the wgmmas): warpgroup
    // 1's GEMMs still queue behind warpgroup 0's P V, which is running.
    if (kPingPong) wg_order_arrive_if(wg == 0);
    float corr[2];
    softmax(n, corr);
    wgmma_wait<0>();  // P_{t-1} V_{t-1} done: O and P are ours again
    reg_fence(o_acc);
    reg_fence(p_frag);
    rescale_and_pack(corr);
  }

  // Tail: O += P V of the last block.
  cp_async_wait_all();
  fence_proxy_async();
  __syncthreads();
  last_pv();

  // Epilogue: reduce l over the quad, normalise, stage O through this warp's own
  // 16 Q rows (only this warp's wgmmas read them, and those are complete), write
  // 16-byte pieces of each row.
  const float kLn2 = 0.69314718055994531f;
#pragma unroll
  for (int hr = 0; hr < 2; ++hr) {
    float l = l_row[hr];
    l += __shfl_xor_sync(0xffffffffu, l, 1);
    l += __shfl_xor_sync(0xffffffffu, l, 2);
    const float inv = l > 0.0f ? 1.0f / l : 0.0f;
    const int r = row_wg0 + (lane >> 2) + hr * 8;
#pragma unroll
    for (int i = 0; i < 16; ++i) {
      const uint32_t packed = pack_bf16(o_acc[4 * i + 2 * hr] * inv, o_acc[4 * i + 2 * hr + 1] * inv);
      *reinterpret_cast<uint32_t*>(smem + kOffQ + sw128_offset<kBr>(r, i * 8 + (lane & 3) * 2)) = packed;
    }
    if (p.lse != nullptr && (lane & 3) == 0 && r < rows_valid) {
      const float val = l > 0.0f ? (m_row[hr] + __log2f(l)) * kLn2 : -INFINITY;
      p.lse[(b * p.H + h) * p.q_rows + i0 + r] = val;
    }
  }
  __syncwarp();
  constexpr int C = kD / 8;
  bf16* og = p.o + (b * p.q_rows + i0) * (p.H * kD) + h * kD;
#pragma unroll
  for (int idx = lane; idx < 16 * C; idx += 32) {
    const int r = row_wg0 + idx / C, c = idx % C;
    if (r < rows_valid)
      *reinterpret_cast<uint4*>(og + static_cast<int64_t>(r) * (p.H * kD) + c * 8) =
          *reinterpret_cast<const uint4*>(smem + kOffQ + sw128_offset<kBr>(r, c * 8));
  }
}

}  // namespace

bool flash_prefill_v2_supported(int64_t head_dim) { return head_dim == kD; }

// The schedule launch_flash_prefill_v2 runs: warpgroup ping-pong (true) or lockstep (false).
constexpr bool kV2DefaultPingPong = true;

cudaError_t detail::launch_flash_prefill_v2_schedule(bool pingpong, const bf16* q, const bf16* k, const bf16* v,
                                                     const int64_t* q_start, const int64_t* q_len,
                                                     const PrefillAttentionShape& s, bf16* o, float* lse,
                                                     cudaStream_t stream) {
  if (!detail::prefill_args_valid(q, k, v, q_start, q_len, s, o) || s.head_dim != kD) return cudaErrorInvalidValue;
  Params p{};
  p.q = q;
  p.k = k;
  p.v = v;
  p.q_start = q_start;
  p.q_len = q_len;
  p.o = o;
  p.lse = lse;
  p.H = s.n_heads;
  p.group = s.n_heads / s.n_kv_heads;
  p.q_rows = s.q_rows;
  p.capacity = s.capacity;
  p.q_stride = s.q_stride;
  p.kv_stride = s.kv_stride;
  p.window = s.window < s.capacity ? s.window : 0;  // a window covering the whole cache is no window
  p.scale_log2 = static_cast<float>(static_cast<double>(s.scale) * 1.4426950408889634);
  const int64_t tiles = attn::query_tiles(s.q_rows, kBr);
  if (tiles > 65535) return cudaErrorInvalidValue;
  const auto kernel = pingpong ? flash_prefill_sm90_kernel<true> : flash_prefill_sm90_kernel<false>;
  cudaError_t err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes);
  if (err != cudaSuccess) return err;
  const dim3 grid(static_cast<unsigned>(s.n_heads), static_cast<unsigned>(tiles), static_cast<unsigned>(s.batch));
  kernel<<<grid, kThreads, kSmemBytes, stream>>>(p);
  return cudaGetLastError();
}

cudaError_t launch_flash_prefill_v2(const bf16* q, const bf16* k, const bf16* v, const int64_t* q_start,
                                    const int64_t* q_len, const PrefillAttentionShape& s, bf16* o, float* lse,
                                    cudaStream_t stream) {
  return detail::launch_flash_prefill_v2_schedule(kV2DefaultPingPong, q, k, v, q_start, q_len, s, o, lse, stream);
}

}  // namespace yoco::cuda
