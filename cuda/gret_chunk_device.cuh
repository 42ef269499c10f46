#pragma once
// Device helpers shared by the gRet chunk kernels (cuda/gret_chunk.cu: v2,
// v3; cuda/gret_chunk_v5.cu: chunks of 128 and 256): cp.async, ldmatrix,
// mma.sync m16n8k16, bf16 packing, the clamped decay, the swizzled tile
// addressing, the 64-token chunk scan, and GretPass, the arguments of one
// pass of the three-phase launch (gret_plan.hpp).
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace yoco::cuda::gret_detail {

__device__ __forceinline__ uint32_t smem_u32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void cp_async16(uint32_t dst, const void* src, bool valid) {
  const int n = valid ? 16 : 0;  // 0: zero-fill, nothing read
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(n) : "memory");
}
__device__ __forceinline__ void cp_async4(uint32_t dst, const void* src, bool valid) {
  const int n = valid ? 4 : 0;
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(dst), "l"(src), "r"(n) : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
__device__ __forceinline__ void cp_async_wait_all() { asm volatile("cp.async.wait_group 0;\n" ::: "memory"); }

__device__ __forceinline__ void ldsm_x4(uint32_t addr, uint32_t& r0, uint32_t& r1, uint32_t& r2, uint32_t& r3) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
               : "r"(addr));
}
__device__ __forceinline__ void ldsm_x4_t(uint32_t addr, uint32_t& r0, uint32_t& r1, uint32_t& r2, uint32_t& r3) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
               : "r"(addr));
}

// c += a * b, m16n8k16, bf16 operands, fp32 accumulators.
__device__ __forceinline__ void mma_bf16(float (&c)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3,
                                         uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {
  const __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);  // .x = lo (lower address / lower column)
  return *reinterpret_cast<const uint32_t*>(&h);
}
// Multiplies both halves of a bf16x2 by fp32 factors and rounds back once.
__device__ __forceinline__ uint32_t scale_bf16x2(uint32_t x, float f_lo, float f_hi) {
  __nv_bfloat162 h = *reinterpret_cast<const __nv_bfloat162*>(&x);
  const float2 f = __bfloat1622float2(h);
  return pack_bf16(f.x * f_lo, f.y * f_hi);
}
__device__ __forceinline__ float decay(float x) { return __expf(fminf(x, 0.0f)); }  // every exponent clamped <= 0


// Arguments of one pass over a grid of (batch, head, segment, slice) CTAs.
struct GretPass {
  const __nv_bfloat16* q;
  const __nv_bfloat16* k;
  const __nv_bfloat16* v;
  const float* log_gamma;
  const float* s_in;       // incoming state slot of segment p: s_in + p*s_in_seg ([B,H,D,D]); nullptr: zero
  int64_t s_in_seg;
  float* s_out;            // state written at the end (segment p: s_out + p*s_out_seg), nullptr: none
  int64_t s_out_seg;
  int64_t write_from;      // only segments >= write_from write s_out
  float* gamma;            // [B, H, P] total log-decay of each segment (slice 0 writes), nullptr: none
  __nv_bfloat16* o;
  int64_t heads, seq_len, row_stride, slices, segments, grid_segments;
};

// Byte offset of the 16-byte piece holding columns [c, c+8) of row r (c a
// multiple of 8) in a swizzled tile of D bf16 columns; + (c & 7) * 2 inside it.
// An opaque copy: addresses derived from it are formed where used, not
// hoisted out of the chunk loop into registers.
__device__ __forceinline__ uint32_t opaque_u32(uint32_t x) {
  asm volatile("mov.b32 %0, %0;\n" : "+r"(x));
  return x;
}
template <int D>
__device__ __forceinline__ uint32_t swz(int r, int c) {
  return static_cast<uint32_t>(r * (D * 2) + ((((c >> 3) ^ (r & 7))) << 4));
}
template <int D>
__device__ __forceinline__ uint32_t swz_elem(int r, int c) {  // c even: a bf16 pair
  return swz<D>(r, c) + static_cast<uint32_t>((c & 7) * 2);
}

// The chunk's inclusive cumsum of log-gamma as 32 lanes do it (the order
// gret_emulate_chunk_scan mirrors): lane l sums the pair (2l, 2l+1), a
// Hillis-Steele scan of the pair sums, G[2l] = exclusive prefix + x0.
__device__ __forceinline__ void chunk_scan(const float* lg, int lane, float& g0, float& g1, float& GC) {
  const float x0 = lg[2 * lane], x1 = lg[2 * lane + 1];
  float sc = x0 + x1;
#pragma unroll
  for (int off = 1; off < 32; off *= 2) {
    const float y = __shfl_up_sync(0xffffffffu, sc, off);
    if (lane >= off) sc += y;
  }
  float ex = __shfl_up_sync(0xffffffffu, sc, 1);
  if (lane == 0) ex = 0.0f;
  GC = __shfl_sync(0xffffffffu, sc, 31);
  g0 = ex + x0;
  g1 = sc;
}

// One pass of the long-chunk kernel (cuda/gret_chunk_v5.cu, plan kernel 5:
// head_dim 128, chunk 128 or 256) over a's grid of batch x heads x
// grid_segments CTAs; the state-only instantiation when state_only.
cudaError_t launch_gret_chunk_v5_pass(const GretPass& a, int64_t batch, int chunk, bool state_only,
                                      cudaStream_t stream);

}  // namespace yoco::cuda::gret_detail
