#include <array>
#include <atomic>
#include <cstdint>

#include "gret/gret_gate.hpp"
#include "gret/gret_norm_gate.cuh"

namespace yoco::cuda {

namespace {

using bf16 = __nv_bfloat16;

constexpr int kThreads = 256;
constexpr int kWarpsPerBlock = kThreads / 32;
constexpr int64_t kMaxBlocks = 1 << 20;

template <int E>
struct VecOf;
template <>
struct VecOf<2> {
  using type = unsigned int;
};
template <>
struct VecOf<4> {
  using type = uint2;
};
template <>
struct VecOf<8> {
  using type = uint4;
};

template <int E>
__device__ __forceinline__ void load_bf16(const bf16* p, float (&f)[E]) {
  using V = typename VecOf<E>::type;
  V raw = *reinterpret_cast<const V*>(p);
  const __nv_bfloat162* h2 = reinterpret_cast<const __nv_bfloat162*>(&raw);
#pragma unroll
  for (int i = 0; i < E / 2; ++i) {
    const float2 x = __bfloat1622float2(h2[i]);
    f[2 * i] = x.x;
    f[2 * i + 1] = x.y;
  }
}

template <int E>
__device__ __forceinline__ void store_bf16(bf16* p, const float (&f)[E]) {
  using V = typename VecOf<E>::type;
  V raw;
  __nv_bfloat162* h2 = reinterpret_cast<__nv_bfloat162*>(&raw);
#pragma unroll
  for (int i = 0; i < E / 2; ++i) h2[i] = __floats2bfloat162_rn(f[2 * i], f[2 * i + 1]);
  *reinterpret_cast<V*>(p) = raw;
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
  return v;
}

using gret_ng::gated;
using gret_ng::inv_rms;

// One warp per (row, head), D = 32·E: lane l holds elements [l·E, l·E + E).
template <int E>
__global__ void __launch_bounds__(kThreads)
    norm_gate_vec_kernel(const bf16* o, const bf16* __restrict__ g, int64_t g_stride, int64_t rows, int64_t heads,
                         float eps, bf16* out) {
  constexpr int D = 32 * E;
  const int lane = threadIdx.x % 32;
  const int64_t items = rows * heads;
  const int64_t step = static_cast<int64_t>(gridDim.x) * kWarpsPerBlock;
  for (int64_t it = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32; it < items; it += step) {
    const int64_t r = it / heads, h = it % heads;
    const int64_t oi = it * D + lane * E;  // o and out are [rows, heads·D]: (r·heads + h)·D
    float x[E], gv[E];
    load_bf16<E>(o + oi, x);
    load_bf16<E>(g + r * g_stride + h * D + lane * E, gv);
    float ss = 0.0f;
#pragma unroll
    for (int i = 0; i < E; ++i) ss = fmaf(x[i], x[i], ss);
    ss = warp_sum(ss);
    const float inv = inv_rms(ss, D, eps);
    float y[E];
#pragma unroll
    for (int i = 0; i < E; ++i) y[i] = gated(gv[i], x[i], inv);
    store_bf16<E>(out + oi, y);
  }
}

// The half-warp kernel, D = 128 only (NOTES-gret_chunk.md, "The norm + gate
// pass at head_dim 128"): 16 lanes a head, lane p of a half-warp holding
// elements [8p, 8p + 8) of o and of g in one 16-byte access each. A warp takes
// items in pairs (pair q: item 2q on lanes 0-15, item 2q + 1 on lanes 16-31)
// and kPairsInFlight consecutive pairs an iteration, all their loads issued
// before any arithmetic; the grid is persistent (at most SMs x resident
// blocks, norm_gate_d128_grid_cap) and strides over the pairs.
//
// kPairsInFlight = 2: each warp then has 2 KB of loads in flight (2 pairs x 32
// lanes x 16 B of o and of g; norm_gate_vec_kernel<4> has 512 B), i.e. ~80 KB
// an SM at its 40 resident warps (46 registers: 5 blocks), several times the
// ~16-20 KB an SM that Little's law asks of HBM3 (3.35 TB/s x ~0.7 us over
// 132 SMs). 4 pairs took 63 registers (4 blocks an SM) for bytes that the SM
// already has in flight.
//
// Bits: unpack8 is exact, head128_sum_sq adds in norm_gate_vec_kernel<4>'s
// order, and inv_rms, gated and pack8's __floats2bfloat162_rn are the
// per-warp kernel's formulas, so every output equals that kernel's bit for
// bit. Partial work (items odd, or a warp's later pairs past the end): the
// loop condition is warp-uniform and every lane runs the shuffles; only the
// loads and stores are guarded, an invalid lane holding zeros (finite). o and
// out may alias: each lane stores only the 16 bytes it loaded, after loading
// them, and the next pairs' loads touch other items.
constexpr int kPairsInFlight = 2;

__global__ void __launch_bounds__(kThreads)
    norm_gate_d128_kernel(const bf16* o, const bf16* __restrict__ g, int64_t g_stride, int64_t rows, int64_t heads,
                          float eps, bf16* out) {
  constexpr int D = 128;
  const int lane = threadIdx.x % 32;
  const int half = lane / 16;             // which item of the pair
  const int64_t piece = (lane % 16) * 8;  // the lane's first element inside its head
  const int64_t items = rows * heads;
  const int64_t pairs = (items + 1) / 2;
  const int64_t warp = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32;
  const int64_t step = static_cast<int64_t>(gridDim.x) * kWarpsPerBlock * kPairsInFlight;
  for (int64_t first = warp * kPairsInFlight; first < pairs; first += step) {  // warp-uniform
    uint4 xr[kPairsInFlight], gr[kPairsInFlight];
    int64_t oi[kPairsInFlight];
    bool valid[kPairsInFlight];
#pragma unroll
    for (int u = 0; u < kPairsInFlight; ++u) {
      const int64_t it = 2 * (first + u) + half;
      valid[u] = it < items;
      oi[u] = it * D + piece;  // o and out are [rows, heads·D]: (r·heads + h)·D
      xr[u] = make_uint4(0u, 0u, 0u, 0u);
      gr[u] = make_uint4(0u, 0u, 0u, 0u);
      if (valid[u]) {
        const int64_t r = it / heads, h = it - r * heads;
        xr[u] = *reinterpret_cast<const uint4*>(o + oi[u]);
        gr[u] = *reinterpret_cast<const uint4*>(g + r * g_stride + h * D + piece);
      }
    }
#pragma unroll
    for (int u = 0; u < kPairsInFlight; ++u) {
      float x[8], gv[8];
      gret_ng::unpack8(xr[u], x);
      gret_ng::unpack8(gr[u], gv);
      const float inv = inv_rms(gret_ng::head128_sum_sq(x), D, eps);  // all 32 lanes: the shuffles
      float y[8];
#pragma unroll
      for (int i = 0; i < 8; ++i) y[i] = gated(gv[i], x[i], inv);
      // __stwb: st.global.wb.v4 is a plain store (wb is the default cache operator); a plain uint4
      // assignment here compiled to four st.global.u32 in PTX (nvcc 13.0), as in the per-warp kernels.
      if (valid[u]) __stwb(reinterpret_cast<uint4*>(out + oi[u]), gret_ng::pack8(y));
    }
  }
}

// Any D: one warp per (row, head), two passes over the head (the second reads
// o again; out[c] is written by the lane that read o[c], so aliasing is safe).
__global__ void __launch_bounds__(kThreads)
    norm_gate_generic_kernel(const bf16* o, const bf16* g, int64_t g_stride, int64_t rows, int64_t heads, int64_t D,
                             float eps, bf16* out) {
  const int lane = threadIdx.x % 32;
  const int64_t items = rows * heads;
  const int64_t step = static_cast<int64_t>(gridDim.x) * kWarpsPerBlock;
  for (int64_t it = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32; it < items; it += step) {
    const int64_t r = it / heads, h = it % heads;
    const bf16* x = o + it * D;
    const bf16* gr = g + r * g_stride + h * D;
    float ss = 0.0f;
    for (int64_t c = lane; c < D; c += 32) {
      const float xv = __bfloat162float(x[c]);
      ss = fmaf(xv, xv, ss);
    }
    ss = warp_sum(ss);
    const float inv = inv_rms(ss, static_cast<int>(D), eps);
    for (int64_t c = lane; c < D; c += 32)
      out[it * D + c] = __float2bfloat16(gated(__bfloat162float(gr[c]), __bfloat162float(x[c]), inv));
  }
}

__device__ __forceinline__ float to_float(float x) { return x; }
__device__ __forceinline__ float to_float(bf16 x) { return __bfloat162float(x); }

template <class Z>
__global__ void __launch_bounds__(kThreads)
    log_decay_kernel(const Z* __restrict__ z, int64_t z_stride, int64_t rows, int64_t heads, float inv_norm,
                     float* __restrict__ out) {
  const int64_t n = rows * heads;
  const int64_t step = static_cast<int64_t>(gridDim.x) * kThreads;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x; i < n; i += step) {
    const int64_t r = i / heads, h = i % heads;
    const float x = to_float(z[r * z_stride + h]);
    // logsigmoid(x) = min(x, 0) - log1p(exp(-|x|)): both terms ≤ 0.
    out[i] = (fminf(x, 0.0f) - log1pf(expf(-fabsf(x)))) * inv_norm;
  }
}

unsigned blocks_for(int64_t work_items, int64_t per_block) {
  const int64_t b = (work_items + per_block - 1) / per_block;
  return static_cast<unsigned>(b < kMaxBlocks ? b : kMaxBlocks);
}

bool aligned(const void* p, unsigned bytes) { return (reinterpret_cast<uintptr_t>(p) % bytes) == 0; }

// The half-warp kernel's persistent grid: SMs x resident blocks an SM on the
// current device, queried once per device (two driver queries) and cached;
// a launch then costs one cudaGetDevice. A failed query (no device: the launch
// fails anyway) gives H100's 132 x 8, not cached, and its error stands.
unsigned norm_gate_d128_grid_cap() {
  constexpr int kDevices = 64;
  constexpr unsigned kFallback = 132u * 8u;
  static std::array<std::atomic<unsigned>, kDevices> cached{};  // 0: not yet queried
  // A failed query's error is left standing: the launch's cudaGetLastError then reports it (a query
  // fails only where the launch would too), rather than a cleared state that says nothing.
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess) return kFallback;
  const bool cacheable = dev >= 0 && dev < kDevices;
  if (cacheable) {
    const unsigned c = cached[static_cast<size_t>(dev)].load(std::memory_order_relaxed);
    if (c != 0) return c;
  }
  int sms = 0, per_sm = 0;
  if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess ||
      cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, norm_gate_d128_kernel, kThreads, 0) != cudaSuccess ||
      sms < 1 || per_sm < 1)
    return kFallback;
  const unsigned c = static_cast<unsigned>(sms) * static_cast<unsigned>(per_sm);
  if (cacheable) cached[static_cast<size_t>(dev)].store(c, std::memory_order_relaxed);
  return c;
}

template <class Z>
cudaError_t launch_log_decay(const Z* z, int64_t z_stride, int64_t rows, int64_t heads, float normalizer,
                             float* log_gamma, cudaStream_t stream) {
  if (rows < 0 || heads < 1 || z_stride < heads || !(normalizer > 0.0f)) return cudaErrorInvalidValue;
  if (rows == 0) return cudaSuccess;
  log_decay_kernel<Z><<<blocks_for(rows * heads, kThreads), kThreads, 0, stream>>>(z, z_stride, rows, heads,
                                                                                   1.0f / normalizer, log_gamma);
  return cudaGetLastError();
}

}  // namespace

cudaError_t launch_gret_norm_gate(const __nv_bfloat16* o, const __nv_bfloat16* g, int64_t g_stride, int64_t rows,
                                  int64_t heads, int64_t head_dim, float eps, __nv_bfloat16* out,
                                  cudaStream_t stream, NormGateKernel kernel) {
  if (rows < 0 || heads < 1 || head_dim < 1 || g_stride < heads * head_dim) return cudaErrorInvalidValue;
  if (kernel != NormGateKernel::automatic && kernel != NormGateKernel::per_warp &&
      kernel != NormGateKernel::half_warp)
    return cudaErrorInvalidValue;
  const int64_t D = head_dim;
  const bool half_warp_ok = D == 128 && aligned(o, 16) && aligned(out, 16) && aligned(g, 16) && g_stride % 8 == 0;
  if (kernel == NormGateKernel::half_warp && !half_warp_ok) return cudaErrorInvalidValue;
  if (rows == 0) return cudaSuccess;
  if (kernel == NormGateKernel::half_warp ||
      (kernel == NormGateKernel::automatic && kNormGateHalfWarpByDefault && half_warp_ok)) {
    const int64_t pairs = (rows * heads + 1) / 2;
    const int64_t wanted = (pairs + kWarpsPerBlock * kPairsInFlight - 1) / (kWarpsPerBlock * kPairsInFlight);
    // As few iterations a warp as the cap allows, then as few blocks as those need: every warp runs
    // `iters` or `iters` - 1 iterations (the latter in at most `iters` blocks' worth of warps), so
    // there is no last sweep with most warps idle.
    const int64_t cap = norm_gate_d128_grid_cap();
    const int64_t iters = (wanted + cap - 1) / cap;
    const auto blocks = static_cast<unsigned>((wanted + iters - 1) / iters);  // ≤ cap
    norm_gate_d128_kernel<<<blocks, kThreads, 0, stream>>>(o, g, g_stride, rows, heads, eps, out);
    return cudaGetLastError();
  }
  const unsigned blocks = blocks_for(rows * heads, kWarpsPerBlock);
  const int E = D % 32 == 0 ? static_cast<int>(D / 32) : 0;
  const unsigned vec_bytes = static_cast<unsigned>(2 * E);
  const bool vec_ok = (E == 2 || E == 4 || E == 8) && aligned(o, vec_bytes) && aligned(out, vec_bytes) &&
                      aligned(g, vec_bytes) && (g_stride % E) == 0;
  if (vec_ok) {
    if (E == 2)
      norm_gate_vec_kernel<2><<<blocks, kThreads, 0, stream>>>(o, g, g_stride, rows, heads, eps, out);
    else if (E == 4)
      norm_gate_vec_kernel<4><<<blocks, kThreads, 0, stream>>>(o, g, g_stride, rows, heads, eps, out);
    else
      norm_gate_vec_kernel<8><<<blocks, kThreads, 0, stream>>>(o, g, g_stride, rows, heads, eps, out);
  } else {
    norm_gate_generic_kernel<<<blocks, kThreads, 0, stream>>>(o, g, g_stride, rows, heads, D, eps, out);
  }
  return cudaGetLastError();
}

cudaError_t launch_gret_log_decay(const float* z, int64_t z_stride, int64_t rows, int64_t heads, float normalizer,
                                  float* log_gamma, cudaStream_t stream) {
  return launch_log_decay(z, z_stride, rows, heads, normalizer, log_gamma, stream);
}

cudaError_t launch_gret_log_decay(const __nv_bfloat16* z, int64_t z_stride, int64_t rows, int64_t heads,
                                  float normalizer, float* log_gamma, cudaStream_t stream) {
  return launch_log_decay(z, z_stride, rows, heads, normalizer, log_gamma, stream);
}

}  // namespace yoco::cuda
