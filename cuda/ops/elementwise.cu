#include "ops/elementwise.hpp"
#include "ops/rope_pair.cuh"
#include "ops/swiglu_math.cuh"

#include <cstddef>
#include <cstdint>

namespace yoco::cuda {

namespace {

constexpr int kThreads = 256;
// The pieces of a row each thread keeps in registers in rms_norm_cached_kernel: rows of up to
// kCachedPieces * kThreads pieces (4096 columns in pieces of 4, both 3B presets' 3072 among them).
constexpr int kCachedPieces = 4;
// The most rows RmsNormKernel::automatic gives the cached kernel (launch_norm).
constexpr int64_t kCachedNormMaxRows = 256;

// Sum over the block; every thread gets the result.
__device__ float block_sum(float v) {
  __shared__ float warp_sums[32];
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  if (lane == 0) warp_sums[warp] = v;
  __syncthreads();
  const int warps = (blockDim.x + 31) / 32;
  v = threadIdx.x < warps ? warp_sums[threadIdx.x] : 0.0f;
  if (warp == 0)
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  __shared__ float total;
  if (threadIdx.x == 0) total = v;
  __syncthreads();
  return total;
}

__global__ void embedding_kernel(const int64_t* tokens, const bf16* table, int64_t dim, float scale, float* out) {
  const int64_t r = blockIdx.x;
  const bf16* src = table + tokens[r] * dim;
  float* dst = out + r * dim;
  for (int64_t c = threadIdx.x; c < dim; c += blockDim.x) dst[c] = scale * __bfloat162float(src[c]);
}

// Piece g of a row: kVec 4 = one float4 / one 8-byte load of 4 bf16 (the
// caller checked alignment), kVec 1 = one element. Loaded through registers
// (never a cast of a local array), stored with the same rounding as a scalar.
template <int kVec>
__device__ __forceinline__ void load_f32(const float* base, int64_t g, float (&v)[kVec]) {
  if constexpr (kVec == 4) {
    const float4 f = reinterpret_cast<const float4*>(base)[g];
    v[0] = f.x, v[1] = f.y, v[2] = f.z, v[3] = f.w;
  } else {
    v[0] = base[g];
  }
}

template <int kVec>
__device__ __forceinline__ void store_f32(float* base, int64_t g, const float (&v)[kVec]) {
  if constexpr (kVec == 4) reinterpret_cast<float4*>(base)[g] = make_float4(v[0], v[1], v[2], v[3]);
  else base[g] = v[0];
}

template <int kVec>
__device__ __forceinline__ void load_bf16(const bf16* base, int64_t g, float (&v)[kVec]) {
  if constexpr (kVec == 4) {
    const uint2 raw = reinterpret_cast<const uint2*>(base)[g];
    const __nv_bfloat162 lo = *reinterpret_cast<const __nv_bfloat162*>(&raw.x);
    const __nv_bfloat162 hi = *reinterpret_cast<const __nv_bfloat162*>(&raw.y);
    v[0] = __low2float(lo), v[1] = __high2float(lo), v[2] = __low2float(hi), v[3] = __high2float(hi);
  } else {
    v[0] = __bfloat162float(base[g]);
  }
}

template <int kVec>
__device__ __forceinline__ void store_bf16(bf16* base, int64_t g, const float (&v)[kVec]) {
  if constexpr (kVec == 4) {
    const __nv_bfloat162 lo = __floats2bfloat162_rn(v[0], v[1]), hi = __floats2bfloat162_rn(v[2], v[3]);
    uint2 raw;
    raw.x = *reinterpret_cast<const unsigned*>(&lo);
    raw.y = *reinterpret_cast<const unsigned*>(&hi);
    reinterpret_cast<uint2*>(base)[g] = raw;
  } else {
    base[g] = __float2bfloat16(v[0]);
  }
}

// What a norm's first pass adds to its residual row, and whether the sum is stored (issue 34: a layer's
// two sublayer outputs joined with one store of the residual, elementwise.hpp). The sums run in the
// order two add + RMSNorm passes run them, fp32((x + first) + second), so every mode gives their bits.
enum class RowSum {
  store_first,  // x, or x + first stored back where first is set: RMSNorm, add + RMSNorm
  peek_first,   // x + first, the residual left as it was: the norm between a layer's sublayers
  store_both    // (x + first) + second, stored back: the norm after the layer's second sublayer
};

// Piece g of row r's sum into v (a thread's own pieces only: it stores back what it read, so first or
// second may alias the norm's output, which the thread writes after the block barrier).
template <int kVec, RowSum kSum>
__device__ __forceinline__ void row_sum(float* x, const bf16* first, const bf16* second, int64_t r, int64_t dim,
                                        int64_t g, float (&v)[kVec]) {
  load_f32<kVec>(x, g, v);
  if (kSum == RowSum::store_first && !first) return;
  float d[kVec];
  load_bf16<kVec>(first + r * dim, g, d);
#pragma unroll
  for (int k = 0; k < kVec; ++k) v[k] += d[k];
  if constexpr (kSum == RowSum::store_both) {
    load_bf16<kVec>(second + r * dim, g, d);
#pragma unroll
    for (int k = 0; k < kVec; ++k) v[k] += d[k];
  }
  if constexpr (kSum != RowSum::peek_first) store_f32<kVec>(x, g, v);
}

// One block per row; the row's fp32 values pass through registers twice.
// kVec 4: pieces of 4 (dim % 4 == 0, aligned rows); 1: scalar. Each thread
// reads back in the second loop only what it wrote (or, peeking, read) in the first.
template <int kVec, RowSum kSum>
__global__ void rms_norm_kernel(float* residual, const bf16* first, const bf16* second, const bf16* w, int64_t dim,
                                float eps, bf16* out) {
  const int64_t r = blockIdx.x, groups = dim / kVec;
  float* x = residual + r * dim;
  float ss = 0.0f;
  for (int64_t g = threadIdx.x; g < groups; g += blockDim.x) {
    float v[kVec];
    row_sum<kVec, kSum>(x, first, second, r, dim, g, v);
#pragma unroll
    for (int k = 0; k < kVec; ++k) ss += v[k] * v[k];
  }
  const float inv = rsqrtf(block_sum(ss) / static_cast<float>(dim) + eps);
  for (int64_t g = threadIdx.x; g < groups; g += blockDim.x) {
    float v[kVec], wt[kVec];
    // Stored: the sum is the residual now. Peeked: the same sum formed again, the same bits.
    if constexpr (kSum == RowSum::peek_first) row_sum<kVec, kSum>(x, first, second, r, dim, g, v);
    else load_f32<kVec>(x, g, v);
    if (w) {
      load_bf16<kVec>(w, g, wt);
    } else {
#pragma unroll
      for (int k = 0; k < kVec; ++k) wt[k] = 1.0f;
    }
#pragma unroll
    for (int k = 0; k < kVec; ++k) v[k] = v[k] * inv * wt[k];
    store_bf16<kVec>(out + r * dim, g, v);
  }
}

// The same norm with the thread's pieces of the row held in registers between the two passes, and
// its pieces of the weights loaded first, before the row (RmsNormKernel::cached, elementwise.hpp). A
// decode step's one-row norm is a chain of dependent loads: CUPTI timed it at 10.6 us inside yoco-3b's
// step against 2.5 us alone, where its weights sit in the L2; in the step they are cold (the step streams
// every layer's weights through the L2), and the looped kernel meets that latency once per piece, after
// the reduction. Here the weights' loads overlap the first pass and the second pass loads nothing.
// Per thread the pieces g = threadIdx.x + i * blockDim.x, i < kCachedPieces, in the looped kernel's order,
// and the same operations in the same order: the two kernels' outputs are equal bit for bit. first and
// second may alias out (the runners' normed rows): every read of them is done before the block barrier,
// every write of out after it, each by the thread that owns the piece.
template <int kVec, RowSum kSum>
__global__ void rms_norm_cached_kernel(float* residual, const bf16* first, const bf16* second, const bf16* w,
                                       int64_t dim, float eps, bf16* out) {
  const int64_t r = blockIdx.x;
  const int groups = static_cast<int>(dim / kVec);  // at most kCachedPieces * blockDim.x (the launcher checks)
  float* x = residual + r * dim;
  float v[kCachedPieces][kVec], wt[kCachedPieces][kVec];
#pragma unroll
  for (int i = 0; i < kCachedPieces; ++i) {
    const int g = static_cast<int>(threadIdx.x) + i * static_cast<int>(blockDim.x);
    if (g >= groups) continue;
    if (w) {
      load_bf16<kVec>(w, g, wt[i]);
    } else {
#pragma unroll
      for (int k = 0; k < kVec; ++k) wt[i][k] = 1.0f;
    }
  }
#pragma unroll
  for (int i = 0; i < kCachedPieces; ++i) {
    const int g = static_cast<int>(threadIdx.x) + i * static_cast<int>(blockDim.x);
    if (g < groups) load_f32<kVec>(x, g, v[i]);
  }
  if (kSum != RowSum::store_first || first) {
    // Every piece of first (and second) loaded before the first add, as the single delta always was.
    float d[kCachedPieces][kVec], e[kCachedPieces][kVec];
#pragma unroll
    for (int i = 0; i < kCachedPieces; ++i) {
      const int g = static_cast<int>(threadIdx.x) + i * static_cast<int>(blockDim.x);
      if (g >= groups) continue;
      load_bf16<kVec>(first + r * dim, g, d[i]);
      if constexpr (kSum == RowSum::store_both) load_bf16<kVec>(second + r * dim, g, e[i]);
    }
#pragma unroll
    for (int i = 0; i < kCachedPieces; ++i) {
      const int g = static_cast<int>(threadIdx.x) + i * static_cast<int>(blockDim.x);
      if (g >= groups) continue;
#pragma unroll
      for (int k = 0; k < kVec; ++k) v[i][k] += d[i][k];
      if constexpr (kSum == RowSum::store_both) {
#pragma unroll
        for (int k = 0; k < kVec; ++k) v[i][k] += e[i][k];
      }
      if constexpr (kSum != RowSum::peek_first) store_f32<kVec>(x, g, v[i]);
    }
  }
  float ss = 0.0f;
#pragma unroll
  for (int i = 0; i < kCachedPieces; ++i) {
    const int g = static_cast<int>(threadIdx.x) + i * static_cast<int>(blockDim.x);
    if (g >= groups) continue;
#pragma unroll
    for (int k = 0; k < kVec; ++k) ss += v[i][k] * v[i][k];
  }
  const float inv = rsqrtf(block_sum(ss) / static_cast<float>(dim) + eps);
#pragma unroll
  for (int i = 0; i < kCachedPieces; ++i) {
    const int g = static_cast<int>(threadIdx.x) + i * static_cast<int>(blockDim.x);
    if (g >= groups) continue;
#pragma unroll
    for (int k = 0; k < kVec; ++k) v[i][k] = v[i][k] * inv * wt[i][k];
    store_bf16<kVec>(out + r * dim, g, v[i]);
  }
}

using dev::swiglu_one;  // ops/swiglu_math.cuh

// x: groups of kVec columns (8: one 16-byte load of each half; 1: scalar), y:
// rows, grid-strided. No index division: it cost more than the data moved.
template <int kVec>
__global__ void swiglu_kernel(const bf16* h13, int64_t rows, int64_t F, bf16* out) {
  const int64_t g = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (g >= F / kVec) return;
  for (int64_t r = blockIdx.y; r < rows; r += gridDim.y) {
    const bf16* a = h13 + r * 2 * F + g * kVec;
    bf16* dst = out + r * F + g * kVec;
    if constexpr (kVec == 8) {
      const uint4 av = *reinterpret_cast<const uint4*>(a), bv = *reinterpret_cast<const uint4*>(a + F);
      const bf16* ae = reinterpret_cast<const bf16*>(&av);
      const bf16* be = reinterpret_cast<const bf16*>(&bv);
      uint4 ov;
      bf16* oe = reinterpret_cast<bf16*>(&ov);
#pragma unroll
      for (int k = 0; k < 8; ++k) oe[k] = swiglu_one(ae[k], be[k]);
      *reinterpret_cast<uint4*>(dst) = ov;
    } else {
      dst[0] = swiglu_one(a[0], a[F]);
    }
  }
}

// A thread per (row, pair): one angle for all heads of the row. Index is
// uint32_t when rows * half (plus a grid stride) fits, else int64_t: the
// division by `half` is the kernel's only index arithmetic. kPaired: the
// pair's two elements as one 4-byte access (rope_pair.cuh).
template <typename Index, bool kPaired>
__global__ void rope_kernel(bf16* x, Index rows, int64_t row_stride, int64_t n_heads, Index half, int64_t pos0,
                            int64_t rows_per_seq, const double* inv_freq, bool interleaved, double scale,
                            int64_t unscaled_heads) {
  const Index pairs = rows * half;
  for (Index p = blockIdx.x * static_cast<Index>(blockDim.x) + threadIdx.x; p < pairs;
       p += static_cast<Index>(gridDim.x) * blockDim.x) {
    const Index r = p / half, i = p - r * half;
    rope_rotate_row_pair<kPaired>(x + static_cast<int64_t>(r) * row_stride, i, half, n_heads,
                                  pos0 + static_cast<int64_t>(r) % rows_per_seq, inv_freq, interleaved, scale,
                                  unscaled_heads);
  }
}

template <typename Index, bool kPaired>
void launch_rope_kernel(unsigned grid, cudaStream_t stream, bf16* x, Index rows, int64_t row_stride, int64_t n_heads,
                        Index half, int64_t pos0, int64_t rows_per_seq, const double* inv_freq, bool interleaved,
                        double scale, int64_t unscaled_heads) {
  rope_kernel<Index, kPaired><<<grid, kThreads, 0, stream>>>(x, rows, row_stride, n_heads, half, pos0, rows_per_seq,
                                                             inv_freq, interleaved, scale, unscaled_heads);
}

bool aligned(const void* p, size_t bytes) { return reinterpret_cast<uintptr_t>(p) % bytes == 0; }

unsigned grid_for(int64_t n) {
  const int64_t blocks = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(blocks < 65535 * 8 ? (blocks > 0 ? blocks : 1) : 65535 * 8);
}

bool rows_fit_grid(int64_t rows) { return rows > 0 && rows <= 0x7fffffff; }

}  // namespace

cudaError_t launch_embedding(const int64_t* tokens, int64_t rows, const bf16* table, int64_t dim, float scale,
                             float* residual, cudaStream_t stream) {
  if (!rows_fit_grid(rows)) return cudaErrorInvalidValue;
  embedding_kernel<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(tokens, table, dim, scale, residual);
  return cudaGetLastError();
}

namespace {

// float4 residual rows and 4 x bf16 (8-byte) delta / weight / output pieces when every row start allows it.
bool rms_norm_vectorizable(const float* x, const bf16* first, const bf16* second, const bf16* w, int64_t dim,
                           const bf16* out) {
  return dim % 4 == 0 && aligned(x, 16) && aligned(first, 8) && aligned(second, 8) && aligned(w, 8) &&
         aligned(out, 8);
}

template <RowSum kSum>
void launch_norm_kernel(bool cached, bool vec, unsigned grid, cudaStream_t stream, float* residual,
                        const bf16* first, const bf16* second, const bf16* w, int64_t dim, float eps, bf16* out) {
  if (cached) {
    if (vec) rms_norm_cached_kernel<4, kSum><<<grid, kThreads, 0, stream>>>(residual, first, second, w, dim, eps, out);
    else rms_norm_cached_kernel<1, kSum><<<grid, kThreads, 0, stream>>>(residual, first, second, w, dim, eps, out);
  } else {
    if (vec) rms_norm_kernel<4, kSum><<<grid, kThreads, 0, stream>>>(residual, first, second, w, dim, eps, out);
    else rms_norm_kernel<1, kSum><<<grid, kThreads, 0, stream>>>(residual, first, second, w, dim, eps, out);
  }
}

cudaError_t launch_norm(RowSum sum, float* residual, const bf16* first, const bf16* second, const bf16* w,
                        int64_t rows, int64_t dim, float eps, bf16* out, cudaStream_t stream, RmsNormKernel kernel) {
  if (!rows_fit_grid(rows) || dim < 1) return cudaErrorInvalidValue;
  if ((sum != RowSum::store_first && !first) || (sum == RowSum::store_both && !second)) return cudaErrorInvalidValue;
  const bool vec = rms_norm_vectorizable(residual, first, second, w, dim, out);
  const bool fits = rms_norm_cached_fits(dim, vec);
  if (kernel == RmsNormKernel::cached && !fits) return cudaErrorInvalidValue;
  const auto grid = static_cast<unsigned>(rows);
  // automatic: the cached kernel for the few rows of a decode step (latency-bound: one wave of blocks), the
  // looped one for a prefill's rows, where it runs at the copy rate (run-17: 101%) and holds more blocks
  // an SM (30 registers against 70). The two give the same bits, so the switch changes no result.
  const bool cached = kernel == RmsNormKernel::cached || (kernel == RmsNormKernel::automatic && fits &&
                                                          rows <= kCachedNormMaxRows);
  switch (sum) {
    case RowSum::store_first:
      launch_norm_kernel<RowSum::store_first>(cached, vec, grid, stream, residual, first, second, w, dim, eps, out);
      break;
    case RowSum::peek_first:
      launch_norm_kernel<RowSum::peek_first>(cached, vec, grid, stream, residual, first, second, w, dim, eps, out);
      break;
    case RowSum::store_both:
      launch_norm_kernel<RowSum::store_both>(cached, vec, grid, stream, residual, first, second, w, dim, eps, out);
      break;
  }
  return cudaGetLastError();
}

}  // namespace

bool rms_norm_cached_fits(int64_t dim, bool vectorized) {
  const int64_t piece = vectorized ? 4 : 1;
  return dim >= 1 && dim % piece == 0 && dim / piece <= int64_t{kCachedPieces} * kThreads;
}

cudaError_t launch_rms_norm(const float* x, const bf16* w, int64_t rows, int64_t dim, float eps, bf16* out,
                            cudaStream_t stream, RmsNormKernel kernel) {
  // With no delta the kernel only reads the residual.
  return launch_norm(RowSum::store_first, const_cast<float*>(x), nullptr, nullptr, w, rows, dim, eps, out, stream,
                     kernel);
}

cudaError_t launch_add_rms_norm(float* residual, const bf16* delta, const bf16* w, int64_t rows, int64_t dim,
                                float eps, bf16* out, cudaStream_t stream, RmsNormKernel kernel) {
  return launch_norm(RowSum::store_first, residual, delta, nullptr, w, rows, dim, eps, out, stream, kernel);
}

cudaError_t launch_rms_norm_of_sum(const float* residual, const bf16* first, const bf16* w, int64_t rows,
                                   int64_t dim, float eps, bf16* out, cudaStream_t stream, RmsNormKernel kernel) {
  // Peeking, the kernel never stores into the residual.
  return launch_norm(RowSum::peek_first, const_cast<float*>(residual), first, nullptr, w, rows, dim, eps, out,
                     stream, kernel);
}

cudaError_t launch_add2_rms_norm(float* residual, const bf16* first, const bf16* second, const bf16* w, int64_t rows,
                                 int64_t dim, float eps, bf16* out, cudaStream_t stream, RmsNormKernel kernel) {
  return launch_norm(RowSum::store_both, residual, first, second, w, rows, dim, eps, out, stream, kernel);
}

cudaError_t launch_swiglu(const bf16* h13, int64_t rows, int64_t ffn_dim, bf16* out, cudaStream_t stream) {
  if (rows < 0 || ffn_dim < 0) return cudaErrorInvalidValue;
  if (rows == 0 || ffn_dim == 0) return cudaSuccess;
  const bool vec = ffn_dim % 8 == 0 && aligned(h13, 16) && aligned(out, 16);
  const int64_t groups = vec ? ffn_dim / 8 : ffn_dim;
  const int64_t gx = (groups + kThreads - 1) / kThreads;
  if (gx > 0x7fffffff) return cudaErrorInvalidValue;
  const dim3 grid(static_cast<unsigned>(gx), static_cast<unsigned>(rows < 65535 ? rows : 65535));
  if (vec) swiglu_kernel<8><<<grid, kThreads, 0, stream>>>(h13, rows, ffn_dim, out);
  else swiglu_kernel<1><<<grid, kThreads, 0, stream>>>(h13, rows, ffn_dim, out);
  return cudaGetLastError();
}

cudaError_t launch_rope(bf16* x, int64_t rows, int64_t row_stride, int64_t n_heads, int64_t head_dim, int64_t pos0,
                        int64_t rows_per_seq, const double* inv_freq, RopeLayout layout, cudaStream_t stream,
                        double scale, int64_t unscaled_heads) {
  // launch_rope_at's checks: a negative even head_dim would wrap the 32-bit indices.
  if (rows < 0 || n_heads < 0 || head_dim < 0 || head_dim % 2 != 0 || rows_per_seq < 1 ||
      row_stride < n_heads * head_dim || unscaled_heads < 0 || unscaled_heads > n_heads)
    return cudaErrorInvalidValue;
  if (rows == 0 || n_heads == 0 || head_dim == 0) return cudaSuccess;
  if (!x || !inv_freq) return cudaErrorInvalidValue;
  const int64_t half = head_dim / 2, pairs = rows * half;
  const unsigned grid = grid_for(pairs);
  const bool interleaved = layout == RopeLayout::interleaved;
  // Interleaved pairs (2i, 2i + 1) sit at 4-byte-aligned addresses when the buffer and every row start do.
  const bool paired = interleaved && aligned(x, 4) && row_stride % 2 == 0;
  // 32-bit indices while p + one grid stride stays below 2^32.
  if (pairs + static_cast<int64_t>(grid) * kThreads <= 0xffffffffLL) {
    const auto r32 = static_cast<uint32_t>(rows), h32 = static_cast<uint32_t>(half);
    if (paired)
      launch_rope_kernel<uint32_t, true>(grid, stream, x, r32, row_stride, n_heads, h32, pos0, rows_per_seq, inv_freq,
                                         interleaved, scale, unscaled_heads);
    else
      launch_rope_kernel<uint32_t, false>(grid, stream, x, r32, row_stride, n_heads, h32, pos0, rows_per_seq,
                                          inv_freq, interleaved, scale, unscaled_heads);
  } else if (paired) {
    launch_rope_kernel<int64_t, true>(grid, stream, x, rows, row_stride, n_heads, half, pos0, rows_per_seq, inv_freq,
                                      interleaved, scale, unscaled_heads);
  } else {
    launch_rope_kernel<int64_t, false>(grid, stream, x, rows, row_stride, n_heads, half, pos0, rows_per_seq, inv_freq,
                                       interleaved, scale, unscaled_heads);
  }
  return cudaGetLastError();
}

}  // namespace yoco::cuda
