#include <cooperative_groups.h>

#include <climits>
#include <cstdint>

#include "gret_recurrent.hpp"

namespace yoco::cuda {

namespace {

namespace cg = cooperative_groups;
using bf16 = __nv_bfloat16;

// γ·S + k·v. Near γ = 1 the product γ·S is formed as S − δ·S with
// δ = 1 − γ = −expm1(log γ) in fp32: fp32 γ itself carries a rounding of up to
// 3e-8 that repeats every step and that the horizon 1/(1 − γ) amplifies (≈ 2e-5
// relative in the state after 4096 steps at γ = 0.999, ≈ 1e-4 at γ = 0.99994),
// while δ's rounding moves γ by ≤ 3e-8·δ. One rounding for γ·S (fma), one for
// the sum (fma with the exact product k·v).
struct Decay {
  bool near_one;  // uniform over the block: log γ > −0.5
  float d;        // δ when near_one, else γ
};

__device__ __forceinline__ Decay make_decay(float log_gamma) {
  const bool near_one = log_gamma > -0.5f;
  return {near_one, near_one ? -expm1f(log_gamma) : expf(log_gamma)};
}

__device__ __forceinline__ float decay_add(const Decay& g, float s, float k, float v) {
  return g.near_one ? fmaf(k, v, fmaf(-g.d, s, s)) : fmaf(g.d, s, k * v);
}

// The general path (any head_dim ≤ 1024, any alignment): one block per
// (sequence, head); thread j owns column j of the state, so each row of S is
// read and written by consecutive threads (coalesced). Slow: one serial
// load→fma→store chain per column, but it needs nothing of the shape.
__global__ void gret_step_generic_kernel(const bf16* q, const bf16* k, const bf16* v, int64_t row_stride,
                                         const float* log_gamma, float* state, bf16* o, int64_t heads, int64_t D) {
  extern __shared__ float qk[];  // q then k, D each
  const int64_t bh = blockIdx.x, b = bh / heads, h = bh % heads;
  const int64_t in = b * row_stride + h * D;
  for (int64_t i = threadIdx.x; i < D; i += blockDim.x) {
    qk[i] = __bfloat162float(q[in + i]);
    qk[D + i] = __bfloat162float(k[in + i]);
  }
  __syncthreads();
  const Decay gamma = make_decay(log_gamma[bh]);
  float* S = state + bh * D * D;
  for (int64_t j = threadIdx.x; j < D; j += blockDim.x) {
    const float vj = __bfloat162float(v[in + j]);
    float acc = 0.0f;
    for (int64_t i = 0; i < D; ++i) {
      const float s = decay_add(gamma, S[i * D + j], qk[D + i], vj);
      S[i * D + j] = s;
      acc = fmaf(qk[i], s, acc);
    }
    o[bh * D + j] = __float2bfloat16(acc);
  }
}

// The sliced path. Block = (sequence·heads + head)·slices + slice, a V-slice
// of kW columns of one head's [D, D] state. Thread t owns the 4 columns
// col = slice·kW + 4·(t % kQuads) .. +3 on rows t / kQuads + i·kRowsPerPass,
// i < kNR (kNR·kRowsPerPass ≥ D; rows ≥ D are skipped). A warp's loads cover
// 32 / kQuads whole 4·kW-byte row segments: every 32-byte sector is used whole.
//
// kFused: the slices of one head form one cluster (cluster rank = slice); the
// sum of squares of the head's D fp32 outputs is added across the cluster
// through distributed shared memory, then out = silu(g) ⊙ o / sqrt(mean(o²) + eps).
template <int kThreads, int kW, int kNR, bool kFused>
__global__ void __launch_bounds__(kThreads)
    gret_step_sliced_kernel(const bf16* __restrict__ q, const bf16* __restrict__ k, const bf16* __restrict__ v,
                            int64_t row_stride, const float* __restrict__ log_gamma, float* __restrict__ state,
                            bf16* __restrict__ out, const bf16* __restrict__ g, int64_t g_stride, float eps,
                            int64_t heads, int D) {
  constexpr int kQuads = kW / 4;  // 16-byte column groups in a slice row
  constexpr int kRowsPerPass = kThreads / kQuads;
  constexpr int kWarps = kThreads / 32;
  static_assert(kW % 4 == 0 && kQuads <= 32 && 32 % kQuads == 0, "a quad group must tile a warp");
  static_assert(kThreads % 32 == 0 && kW <= 32, "the final kW outputs live in warp 0");

  const int slices = D / kW;
  const int64_t bh = blockIdx.x / slices;
  const int slice = static_cast<int>(blockIdx.x % slices);
  const int64_t b = bh / heads, h = bh % heads;
  const int t = threadIdx.x, lane = t % 32, warp = t / 32;
  const int quad = t % kQuads, row0 = t / kQuads;
  const int col = slice * kW + quad * 4;
  const int64_t in = b * row_stride + h * D;
  float* S = state + bh * static_cast<int64_t>(D) * D + col;

  // 1. Every load is issued before any arithmetic or store: the whole tile
  //    (kNR 16-byte loads per thread), q and k on the thread's rows, v on its
  //    columns, and the decay.
  //    The state first: it does not depend on the previous kernel, so under a
  //    programmatic dependent launch these loads overlap that kernel's tail;
  //    griddepcontrol.wait (a no-op otherwise) then orders the reads of q, k,
  //    v and the decay after its completion. launch_dependents, after the
  //    wait, lets the next step start its own state loads early while no
  //    kernel but this one is still running: so only the kernel just before a
  //    step can overlap its state loads (the contract in the header).
  float4 s[kNR];
  float kr[kNR], qr[kNR];
#pragma unroll
  for (int i = 0; i < kNR; ++i) {
    const int r = row0 + i * kRowsPerPass;
    s[i] = r < D ? *reinterpret_cast<const float4*>(S + static_cast<int64_t>(r) * D) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  }
  asm volatile("griddepcontrol.wait;" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#pragma unroll
  for (int i = 0; i < kNR; ++i) {
    const int r = row0 + i * kRowsPerPass;
    kr[i] = r < D ? __bfloat162float(k[in + r]) : 0.0f;
    qr[i] = r < D ? __bfloat162float(q[in + r]) : 0.0f;
  }
  float vc[4];
#pragma unroll
  for (int j = 0; j < 4; ++j) vc[j] = __bfloat162float(v[in + col + j]);
  const Decay gamma = make_decay(log_gamma[bh]);

  // 2. S ← γ S + kᵀ v, stored back; this thread's share of o = q S (the
  //    current token counts with weight 1).
  float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
  for (int i = 0; i < kNR; ++i) {
    const int r = row0 + i * kRowsPerPass;
    float4 n;
    n.x = decay_add(gamma, s[i].x, kr[i], vc[0]);
    n.y = decay_add(gamma, s[i].y, kr[i], vc[1]);
    n.z = decay_add(gamma, s[i].z, kr[i], vc[2]);
    n.w = decay_add(gamma, s[i].w, kr[i], vc[3]);
    if (r < D) *reinterpret_cast<float4*>(S + static_cast<int64_t>(r) * D) = n;
    acc[0] = fmaf(qr[i], n.x, acc[0]);  // qr = 0 on rows ≥ D
    acc[1] = fmaf(qr[i], n.y, acc[1]);
    acc[2] = fmaf(qr[i], n.z, acc[2]);
    acc[3] = fmaf(qr[i], n.w, acc[3]);
  }

  // 3. Sum over the rows: lanes with the same quad differ by multiples of
  //    kQuads inside a warp, then the warps meet in shared memory.
#pragma unroll
  for (int off = kQuads; off < 32; off <<= 1)
#pragma unroll
    for (int j = 0; j < 4; ++j) acc[j] += __shfl_xor_sync(0xffffffffu, acc[j], off);
  __shared__ float part[kWarps][kW];
  if (lane < kQuads)
#pragma unroll
    for (int j = 0; j < 4; ++j) part[warp][lane * 4 + j] = acc[j];
  __syncthreads();
  float ov = 0.0f;  // o at column slice·kW + t, for t < kW (warp 0)
  if (t < kW) {
#pragma unroll
    for (int w = 0; w < kWarps; ++w) ov += part[w][t];
  }
  const int64_t oc = bh * D + slice * kW + t;  // out index of column t of the slice

  if constexpr (!kFused) {
    if (t < kW) out[oc] = __float2bfloat16(ov);
  } else {
    // 4. Per-head RMSNorm across the cluster, then the gate.
    __shared__ float ss_local;
    if (warp == 0) {
      float sq = ov * ov;  // 0 for lanes ≥ kW
#pragma unroll
      for (int off = 16; off > 0; off >>= 1) sq += __shfl_xor_sync(0xffffffffu, sq, off);
      if (lane == 0) ss_local = sq;
    }
    cg::cluster_group cluster = cg::this_cluster();
    cluster.sync();  // every slice's ss_local written and visible
    if (t < kW) {
      float ss = 0.0f;
      for (int r = 0; r < slices; ++r) ss += *cluster.map_shared_rank(&ss_local, r);  // same order in every CTA
      const float inv = 1.0f / sqrtf(ss / static_cast<float>(D) + eps);
      const float gg = __bfloat162float(g[b * g_stride + h * D + slice * kW + t]);
      const float gate = gg / (1.0f + expf(-gg));
      out[oc] = __float2bfloat16(gate * (ov * inv));
    }
    cluster.sync();  // no CTA leaves while another still reads its ss_local
  }
}

bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

template <int kThreads, int kW, int kNR, bool kFused>
cudaError_t launch_sliced(const bf16* q, const bf16* k, const bf16* v, int64_t row_stride, const float* log_gamma,
                          float* state, bf16* out, const bf16* g, int64_t g_stride, float eps, int64_t batch,
                          int64_t heads, int D, cudaStream_t stream, bool overlap_previous = false) {
  const int slices = D / kW;
  const int64_t blocks = batch * heads * slices;
  if (blocks > INT_MAX) return cudaErrorInvalidValue;
  auto kernel = gret_step_sliced_kernel<kThreads, kW, kNR, kFused>;
  if constexpr (!kFused) {
    if (!overlap_previous) {
      kernel<<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(q, k, v, row_stride, log_gamma, state, out, g,
                                                                     g_stride, eps, heads, D);
      return cudaGetLastError();
    }
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3(static_cast<unsigned>(blocks), 1, 1);
    cfg.blockDim = dim3(kThreads, 1, 1);
    cfg.stream = stream;
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[0].val.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = attr;
    cfg.numAttrs = 1;
    return cudaLaunchKernelEx(&cfg, kernel, q, k, v, row_stride, log_gamma, state, out, g, g_stride, eps, heads, D);
  } else {
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3(static_cast<unsigned>(blocks), 1, 1);
    cfg.blockDim = dim3(kThreads, 1, 1);
    cfg.dynamicSmemBytes = 0;
    cfg.stream = stream;
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeClusterDimension;
    attr[0].val.clusterDim.x = static_cast<unsigned>(slices);
    attr[0].val.clusterDim.y = 1;
    attr[0].val.clusterDim.z = 1;
    cfg.attrs = attr;
    cfg.numAttrs = 1;
    return cudaLaunchKernelEx(&cfg, kernel, q, k, v, row_stride, log_gamma, state, out, g, g_stride, eps, heads, D);
  }
}

}  // namespace

cudaError_t launch_gret_recurrent_step(const __nv_bfloat16* q, const __nv_bfloat16* k, const __nv_bfloat16* v,
                                       int64_t row_stride, const float* log_gamma, float* state, __nv_bfloat16* o,
                                       int64_t batch, int64_t heads, int64_t head_dim, cudaStream_t stream,
                                       bool overlap_previous) {
  if (batch < 1 || heads < 1 || head_dim < 1 || head_dim > 1024 || batch * heads > 0x7fffffff)
    return cudaErrorInvalidValue;
  const int D = static_cast<int>(head_dim);
  if (D % 16 == 0 && D <= 256 && aligned16(state)) {
    if (D <= 64)
      return launch_sliced<128, 16, 2, false>(q, k, v, row_stride, log_gamma, state, o, nullptr, 0, 0.0f, batch,
                                              heads, D, stream, overlap_previous);
    if (D <= 128)
      return launch_sliced<128, 16, 4, false>(q, k, v, row_stride, log_gamma, state, o, nullptr, 0, 0.0f, batch,
                                              heads, D, stream, overlap_previous);
    return launch_sliced<128, 16, 8, false>(q, k, v, row_stride, log_gamma, state, o, nullptr, 0, 0.0f, batch, heads,
                                            D, stream, overlap_previous);
  }
  const int threads = head_dim >= 128 ? 128 : static_cast<int>((head_dim + 31) / 32 * 32);
  const size_t smem = 2 * static_cast<size_t>(head_dim) * sizeof(float);
  gret_step_generic_kernel<<<static_cast<unsigned>(batch * heads), threads, smem, stream>>>(
      q, k, v, row_stride, log_gamma, state, o, heads, head_dim);
  return cudaGetLastError();
}

bool gret_fused_step_supported(int64_t head_dim) {
  return head_dim >= 16 && ((head_dim % 16 == 0 && head_dim <= 128) || (head_dim % 32 == 0 && head_dim <= 256));
}

cudaError_t launch_gret_recurrent_step_norm_gate(const __nv_bfloat16* q, const __nv_bfloat16* k,
                                                 const __nv_bfloat16* v, int64_t row_stride, const float* log_gamma,
                                                 float* state, const __nv_bfloat16* g, int64_t g_stride, float eps,
                                                 __nv_bfloat16* out, int64_t batch, int64_t heads, int64_t head_dim,
                                                 cudaStream_t stream) {
  if (batch < 1 || heads < 1 || !gret_fused_step_supported(head_dim) || batch * heads > 0x7fffffff ||
      !aligned16(state))
    return cudaErrorInvalidValue;
  const int D = static_cast<int>(head_dim);
  if (D <= 64)
    return launch_sliced<128, 16, 2, true>(q, k, v, row_stride, log_gamma, state, out, g, g_stride, eps, batch, heads,
                                           D, stream);
  if (D <= 128)
    return launch_sliced<128, 16, 4, true>(q, k, v, row_stride, log_gamma, state, out, g, g_stride, eps, batch, heads,
                                           D, stream);
  return launch_sliced<256, 32, 8, true>(q, k, v, row_stride, log_gamma, state, out, g, g_stride, eps, batch, heads,
                                         D, stream);
}

}  // namespace yoco::cuda
