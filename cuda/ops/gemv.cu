// The decode step's projections as a GEMV: ops/gemv_plan.hpp says why and how, ops/gemv.hpp what.
#include "ops/gemv.hpp"
#include "ops/gemv_plan.hpp"

namespace yoco::cuda {

namespace {

using bf16 = __nv_bfloat16;

// A bf16 is the high half of the fp32 of the same value: a word's two elements (element 0 in the low
// half, as memory is little-endian) widen exactly by a shift and a mask, with no cast of a local.
__device__ __forceinline__ float low_bf16(unsigned int v) { return __uint_as_float(v << 16); }
__device__ __forceinline__ float high_bf16(unsigned int v) { return __uint_as_float(v & 0xffff0000u); }

__device__ __forceinline__ float dot2(unsigned int a, unsigned int b, float s) {
  s = fmaf(low_bf16(a), low_bf16(b), s);
  return fmaf(high_bf16(a), high_bf16(b), s);
}

// Sum of the products of two 16-byte pieces of 8 bf16, in fp32, in element order.
__device__ __forceinline__ float dot8(const uint4& a, const uint4& b) {
  float s = dot2(a.x, b.x, 0.0f);
  s = dot2(a.y, b.y, s);
  s = dot2(a.z, b.z, s);
  return dot2(a.w, b.w, s);
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

template <GemvOut kOut>
__device__ __forceinline__ void store(void* y, int64_t i, float v) {
  if constexpr (kOut == GemvOut::bf16) {
    static_cast<bf16*>(y)[i] = __float2bfloat16_rn(v);
  } else if constexpr (kOut == GemvOut::f32) {
    static_cast<float*>(y)[i] = v;
  } else {
    static_cast<float*>(y)[i] += v;
  }
}

// One warp a weight row j at a time (j strides by every warp of the grid). A lane loads kUnroll pieces of
// the row (streamed: each is read once, evict-first) before multiplying any, each against the same piece
// of the M rows of x (read-only path: x is a few KB every warp reads). Every lane of a warp has the same
// j, so the whole warp takes part in every shuffle.
template <int M, GemvOut kOut>
__global__ void __launch_bounds__(gemv::kThreads) gemv_kernel(const bf16* __restrict__ x, int64_t k,
                                                              const bf16* __restrict__ w, int64_t n, void* y) {
  const int lane = static_cast<int>(threadIdx.x % 32);
  const int64_t pieces = gemv::pieces(k);
  const int64_t stride = static_cast<int64_t>(gridDim.x) * gemv::kWarpsPerBlock;
  const uint4* xv = reinterpret_cast<const uint4*>(x);
  for (int64_t j = gemv::first_row(blockIdx.x, static_cast<int>(threadIdx.x / 32)); j < n; j += stride) {
    const uint4* wr = reinterpret_cast<const uint4*>(w) + j * pieces;
    float acc[M];
#pragma unroll
    for (int r = 0; r < M; ++r) acc[r] = 0.0f;
    for (int64_t p0 = 0; p0 < pieces; p0 += gemv::round_pieces()) {
      uint4 wv[gemv::kUnroll];
#pragma unroll
      for (int u = 0; u < gemv::kUnroll; ++u) {
        const int64_t p = gemv::piece_of(p0, u, lane);
        wv[u] = p < pieces ? __ldcs(wr + p) : make_uint4(0u, 0u, 0u, 0u);
      }
#pragma unroll
      for (int u = 0; u < gemv::kUnroll; ++u) {
        const int64_t p = gemv::piece_of(p0, u, lane);
        if (p < pieces) {
#pragma unroll
          for (int r = 0; r < M; ++r) acc[r] += dot8(wv[u], __ldg(xv + r * pieces + p));
        }
      }
    }
#pragma unroll
    for (int r = 0; r < M; ++r) acc[r] = warp_sum(acc[r]);
    if (lane == 0) {
#pragma unroll
      for (int r = 0; r < M; ++r) store<kOut>(y, r * n + j, acc[r]);
    }
  }
}

template <GemvOut kOut>
cudaError_t launch_rows(const bf16* x, int64_t m, int64_t k, const bf16* w, int64_t n, void* y, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned int>(gemv::grid_blocks(n)));
  switch (m) {
    case 1: gemv_kernel<1, kOut><<<grid, gemv::kThreads, 0, stream>>>(x, k, w, n, y); break;
    case 2: gemv_kernel<2, kOut><<<grid, gemv::kThreads, 0, stream>>>(x, k, w, n, y); break;
    case 3: gemv_kernel<3, kOut><<<grid, gemv::kThreads, 0, stream>>>(x, k, w, n, y); break;
    case 4: gemv_kernel<4, kOut><<<grid, gemv::kThreads, 0, stream>>>(x, k, w, n, y); break;
    default: return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

}  // namespace

cudaError_t launch_gemv(const bf16* x, int64_t m, int64_t k, const bf16* w, int64_t n, void* y, GemvOut out,
                        cudaStream_t stream) {
  if (x == nullptr || w == nullptr || y == nullptr ||
      gemv::unsupported(m, k, n, reinterpret_cast<uintptr_t>(x), reinterpret_cast<uintptr_t>(w)) != nullptr)
    return cudaErrorInvalidValue;
  switch (out) {
    case GemvOut::bf16: return launch_rows<GemvOut::bf16>(x, m, k, w, n, y, stream);
    case GemvOut::f32: return launch_rows<GemvOut::f32>(x, m, k, w, n, y, stream);
    case GemvOut::f32_accumulate: return launch_rows<GemvOut::f32_accumulate>(x, m, k, w, n, y, stream);
  }
  return cudaErrorInvalidValue;
}

}  // namespace yoco::cuda
