#include <cooperative_groups.h>

#include <climits>
#include <cstdint>

#include "gret/gret_decay.hpp"
#include "gret/gret_norm_gate.cuh"
#include "gret/gret_pending.hpp"
#include "gret/gret_recurrent.hpp"

namespace yoco::cuda {

namespace {

namespace cg = cooperative_groups;
using bf16 = __nv_bfloat16;

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
  const GretDecay gamma = make_gret_decay(log_gamma[bh]);
  float* S = state + bh * D * D;
  for (int64_t j = threadIdx.x; j < D; j += blockDim.x) {
    const float vj = __bfloat162float(v[in + j]);
    float acc = 0.0f;
    for (int64_t i = 0; i < D; ++i) {
      const float s = gret_decay_add(gamma, S[i * D + j], qk[D + i], vj);
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
template <int kThreads, int kW>
struct SliceThread {
  static constexpr int kQuads = kW / 4;  // 16-byte column groups in a slice row
  static constexpr int kRowsPerPass = kThreads / kQuads;
  static_assert(kW % 4 == 0 && kQuads <= 32 && 32 % kQuads == 0, "a quad group must tile a warp");
  static_assert(kThreads % 32 == 0 && kW <= 32, "the final kW outputs live in warp 0");

  int slices, slice, t, quad, row0, col;
  int64_t bh;
  __device__ explicit SliceThread(int D)
      : slices(D / kW),
        slice(static_cast<int>(blockIdx.x % (D / kW))),
        t(static_cast<int>(threadIdx.x)),
        quad(static_cast<int>(threadIdx.x) % kQuads),
        row0(static_cast<int>(threadIdx.x) / kQuads),
        col(static_cast<int>(blockIdx.x % (D / kW)) * kW + (static_cast<int>(threadIdx.x) % kQuads) * 4),
        bh(blockIdx.x / (D / kW)) {}
  __device__ int row(int i) const { return row0 + i * kRowsPerPass; }
};

// The thread's whole part of the tile, 16-byte loads, all issued before any use.
template <int kNR, class Th>
__device__ __forceinline__ void load_state_part(const float* S, const Th& th, int D, float4 (&s)[kNR]) {
#pragma unroll
  for (int i = 0; i < kNR; ++i) {
    const int r = th.row(i);
    s[i] = r < D ? *reinterpret_cast<const float4*>(S + static_cast<int64_t>(r) * D) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  }
}

__device__ __forceinline__ float4 decay_add4(const GretDecay& g, float4 s, float k, const float (&v)[4]) {
  return make_float4(gret_decay_add(g, s.x, k, v[0]), gret_decay_add(g, s.y, k, v[1]), gret_decay_add(g, s.z, k, v[2]),
                     gret_decay_add(g, s.w, k, v[3]));
}

// This thread's k on its rows (0 on rows ≥ D) and v on its 4 columns, from a
// head's k and from v at the thread's first column.
template <int kNR, class Th>
__device__ __forceinline__ void load_kv_part(const bf16* k, const bf16* v, const Th& th, int D, float (&kr)[kNR],
                                             float (&vc)[4]) {
#pragma unroll
  for (int i = 0; i < kNR; ++i) kr[i] = th.row(i) < D ? __bfloat162float(k[th.row(i)]) : 0.0f;
#pragma unroll
  for (int j = 0; j < 4; ++j) vc[j] = __bfloat162float(v[j]);
}

// S ← γ S + kᵀ v on this thread's part of the tile, stored; s keeps the result.
template <int kNR, class Th>
__device__ __forceinline__ void update_state_part(float* S, const Th& th, int D, const GretDecay& g,
                                                  const float (&kr)[kNR], const float (&vc)[4], float4 (&s)[kNR]) {
#pragma unroll
  for (int i = 0; i < kNR; ++i) {
    s[i] = decay_add4(g, s[i], kr[i], vc);
    if (th.row(i) < D) *reinterpret_cast<float4*>(S + static_cast<int64_t>(th.row(i)) * D) = s[i];
  }
}

// The deferred step's first half (and the flush): S ← γ_p S + k_pᵀ v_p from
// this CTA's pending record, stored, and kept in s; nothing where the record
// holds no update. Called before the wait.
template <int kNR, class Th>
__device__ __forceinline__ void apply_pending(float* S, const unsigned char* rec, const GretPendingLayout& L,
                                              const Th& th, int D, float4 (&s)[kNR]) {
  if (*reinterpret_cast<const uint32_t*>(rec + L.flag_offset()) == 0u) return;  // uniform over the CTA
  float kp[kNR], vp[4];
  load_kv_part(reinterpret_cast<const bf16*>(rec + L.k_offset()),
               reinterpret_cast<const bf16*>(rec + L.v_offset()) + th.quad * 4, th, D, kp, vp);
  update_state_part(S, th, D, make_gret_decay(*reinterpret_cast<const float*>(rec + L.log_gamma_offset())), kp, vp,
                    s);
}

// What a step kernel does with the state.
//   eager:    S ← γ S + kᵀ v stored, o = q S;
//   deferred: the state is one step behind; `pending` holds the step it lacks
//             (gret_pending.hpp); kW must be gret_deferred_slice_width(D);
//   output:   o = q (γ S + kᵀ v) only, the state left as it was (the split
//             step's dependent half; gret_state_update_kernel is the other).
enum class StepKind { eager, deferred, output };

// kFused: the slices of one head form one cluster (cluster rank = slice); the
// sum of squares of the head's D fp32 outputs is added across the cluster
// through distributed shared memory, then out = silu(g) ⊙ o / sqrt(mean(o²) + eps).
template <int kThreads, int kW, int kNR, bool kFused, StepKind kKind>
__global__ void __launch_bounds__(kThreads)
    gret_step_sliced_kernel(const bf16* __restrict__ q, const bf16* __restrict__ k, const bf16* __restrict__ v,
                            int64_t row_stride, const float* __restrict__ log_gamma, float* __restrict__ state,
                            unsigned char* __restrict__ pending, bf16* __restrict__ out, const bf16* __restrict__ g,
                            int64_t g_stride, float eps, int64_t heads, int D) {
  using Th = SliceThread<kThreads, kW>;
  constexpr int kWarps = kThreads / 32;
  const Th th(D);
  const int64_t bh = th.bh, b = bh / heads, h = bh % heads;
  const int t = th.t, lane = t % 32, warp = t / 32;
  const int64_t in = b * row_stride + h * D;
  float* S = state + bh * static_cast<int64_t>(D) * D + th.col;

  // 1. Every load is issued before any arithmetic or store: the whole tile
  //    (kNR 16-byte loads per thread), q and k on the thread's rows, v on its
  //    columns, and the decay.
  //    The state first: it does not depend on the previous kernel, so under a
  //    programmatic dependent launch these loads overlap that kernel's tail;
  //    griddepcontrol.wait (a no-op otherwise) then orders the reads of q, k,
  //    v and the decay after its completion. launch_dependents, after the
  //    wait, lets the next step start its own state loads early while no
  //    kernel of this stream but this one is still running: so only the kernel
  //    just before a step can overlap its state loads (the contract in the
  //    header; a split step's state update runs on a side stream, and its
  //    join must not sit right before a programmatic launch).
  //    Deferred: the last step's update is applied and stored here too.
  float4 s[kNR];
  float kr[kNR], qr[kNR];
  load_state_part(S, th, D, s);
  [[maybe_unused]] GretPendingLayout L;
  [[maybe_unused]] unsigned char* rec = nullptr;
  if constexpr (kKind == StepKind::deferred) {
    L = gret_pending_layout(D);
    rec = pending + L.record_offset(bh, th.slice);
    apply_pending(S, rec, L, th, D, s);
  }
  asm volatile("griddepcontrol.wait;" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#pragma unroll
  for (int i = 0; i < kNR; ++i) {
    const int r = th.row(i);
    kr[i] = r < D ? __bfloat162float(k[in + r]) : 0.0f;
    qr[i] = r < D ? __bfloat162float(q[in + r]) : 0.0f;
  }
  float vc[4];
#pragma unroll
  for (int j = 0; j < 4; ++j) vc[j] = __bfloat162float(v[in + th.col + j]);
  const float lg_now = log_gamma[bh];
  const GretDecay gamma = make_gret_decay(lg_now);

  // 2. S ← γ S + kᵀ v (stored back by the eager step; kept in registers only
  //    by the deferred and output steps); this thread's share of o = q S (the
  //    current token counts with weight 1).
  float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
  for (int i = 0; i < kNR; ++i) {
    const float4 n = decay_add4(gamma, s[i], kr[i], vc);
    if (kKind == StepKind::eager && th.row(i) < D)
      *reinterpret_cast<float4*>(S + static_cast<int64_t>(th.row(i)) * D) = n;
    acc[0] = fmaf(qr[i], n.x, acc[0]);  // qr = 0 on rows ≥ D
    acc[1] = fmaf(qr[i], n.y, acc[1]);
    acc[2] = fmaf(qr[i], n.z, acc[2]);
    acc[3] = fmaf(qr[i], n.w, acc[3]);
  }

  // 3. Sum over the rows: lanes with the same quad differ by multiples of
  //    kQuads inside a warp, then the warps meet in shared memory.
#pragma unroll
  for (int off = Th::kQuads; off < 32; off <<= 1)
#pragma unroll
    for (int j = 0; j < 4; ++j) acc[j] += __shfl_xor_sync(0xffffffffu, acc[j], off);
  __shared__ float part[kWarps][kW];
  if (lane < Th::kQuads)
#pragma unroll
    for (int j = 0; j < 4; ++j) part[warp][lane * 4 + j] = acc[j];
  __syncthreads();
  // Deferred: this step's update becomes the record. Every thread of the CTA
  // has read the old record (before the barrier above), and no other CTA
  // reads this one; bf16 → fp32 → bf16 is exact, so k and v are stored as given.
  if constexpr (kKind == StepKind::deferred) {
    auto* pk = reinterpret_cast<bf16*>(rec + L.k_offset());
    auto* pv = reinterpret_cast<bf16*>(rec + L.v_offset());
    if (th.quad == 0)
#pragma unroll
      for (int i = 0; i < kNR; ++i)
        if (th.row(i) < D) pk[th.row(i)] = __float2bfloat16_rn(kr[i]);
    if (th.row0 == 0)
#pragma unroll
      for (int j = 0; j < 4; ++j) pv[th.quad * 4 + j] = __float2bfloat16_rn(vc[j]);
    if (t == 0) {
      *reinterpret_cast<float*>(rec + L.log_gamma_offset()) = lg_now;
      *reinterpret_cast<uint32_t*>(rec + L.flag_offset()) = 1u;
    }
  }
  float ov = 0.0f;  // o at column slice·kW + t, for t < kW (warp 0)
  if (t < kW) {
#pragma unroll
    for (int w = 0; w < kWarps; ++w) ov += part[w][t];
  }
  const int64_t oc = bh * D + th.slice * kW + t;  // out index of column t of the slice

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
      for (int r = 0; r < th.slices; ++r) ss += *cluster.map_shared_rank(&ss_local, r);  // same order in every CTA
      const float inv = gret_ng::inv_rms(ss, D, eps);
      const float gg = __bfloat162float(g[b * g_stride + h * D + th.slice * kW + t]);
      out[oc] = __float2bfloat16(gret_ng::gated(gg, ov, inv));
    }
    cluster.sync();  // no CTA leaves while another still reads its ss_local
  }
}

// Applies every pending update to the state and zeroes the records (no update).
template <int kThreads, int kW, int kNR>
__global__ void __launch_bounds__(kThreads)
    gret_pending_flush_kernel(float* __restrict__ state, unsigned char* __restrict__ pending, int D) {
  using Th = SliceThread<kThreads, kW>;
  const Th th(D);
  float* S = state + th.bh * static_cast<int64_t>(D) * D + th.col;
  const GretPendingLayout L = gret_pending_layout(D);
  unsigned char* rec = pending + L.record_offset(th.bh, th.slice);
  float4 s[kNR];
  load_state_part(S, th, D, s);
  apply_pending(S, rec, L, th, D, s);
  __syncthreads();  // the whole record read before any of it is zeroed
  for (int64_t off = 16 * static_cast<int64_t>(th.t); off < L.record_bytes; off += 16 * kThreads)
    *reinterpret_cast<uint4*>(rec + off) = make_uint4(0u, 0u, 0u, 0u);
}

// The split step's second half: this CTA's slice of S ← γ S + kᵀ v, the eager
// step's arithmetic on the same values (so the state ends bit-identical to
// the eager step's), without o. It overwrites the state the output step
// reads, so it runs after that step has completed (the launcher's contract).
template <int kThreads, int kW, int kNR>
__global__ void __launch_bounds__(kThreads)
    gret_state_update_kernel(const bf16* __restrict__ k, const bf16* __restrict__ v, int64_t row_stride,
                             const float* __restrict__ log_gamma, float* __restrict__ state, int64_t heads, int D) {
  using Th = SliceThread<kThreads, kW>;
  const Th th(D);
  const int64_t bh = th.bh, in = (bh / heads) * row_stride + (bh % heads) * D;
  float* S = state + bh * static_cast<int64_t>(D) * D + th.col;
  float4 s[kNR];
  load_state_part(S, th, D, s);
  float kr[kNR], vc[4];
  load_kv_part(k + in, v + in + th.col, th, D, kr, vc);
  update_state_part(S, th, D, make_gret_decay(log_gamma[bh]), kr, vc, s);
}

bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

// A launch with the optional attributes: a cluster of a head's slices
// (kFused) and a programmatic dependent launch (overlap_previous).
template <class Kernel, class... Args>
cudaError_t launch_ex(Kernel kernel, int64_t blocks, int threads, int cluster, bool overlap_previous,
                      cudaStream_t stream, Args... args) {
  if (blocks > INT_MAX) return cudaErrorInvalidValue;
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(static_cast<unsigned>(blocks), 1, 1);
  cfg.blockDim = dim3(static_cast<unsigned>(threads), 1, 1);
  cfg.dynamicSmemBytes = 0;
  cfg.stream = stream;
  cudaLaunchAttribute attr[2];
  unsigned n = 0;
  if (cluster > 1) {
    attr[n].id = cudaLaunchAttributeClusterDimension;
    attr[n].val.clusterDim.x = static_cast<unsigned>(cluster);
    attr[n].val.clusterDim.y = 1;
    attr[n].val.clusterDim.z = 1;
    ++n;
  }
  if (overlap_previous) {
    attr[n].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[n].val.programmaticStreamSerializationAllowed = 1;
    ++n;
  }
  cfg.attrs = n ? attr : nullptr;
  cfg.numAttrs = n;
  return cudaLaunchKernelEx(&cfg, kernel, args...);
}

template <int T, int W, int NR>
struct SliceShape {
  static constexpr int kThreads = T, kW = W, kNR = NR;
};

// The CTA shape per head dim of the fused and deferred steps, and of the
// eager step wherever they run (gret_deferred_slice_width(D) columns): one
// shape, so all of them sum o in one order. f(SliceShape<...>{}).
template <class F>
cudaError_t with_slice_shape(int D, F&& f) {
  if (D <= 64) return f(SliceShape<128, 16, 2>{});
  if (D <= 128) return f(SliceShape<128, 16, 4>{});
  return f(SliceShape<256, 32, 8>{});
}

template <class Shape, bool kFused, StepKind kKind = StepKind::eager>
cudaError_t launch_sliced(const bf16* q, const bf16* k, const bf16* v, int64_t row_stride, const float* log_gamma,
                          float* state, unsigned char* pending, bf16* out, const bf16* g, int64_t g_stride, float eps,
                          int64_t batch, int64_t heads, int D, cudaStream_t stream, bool overlap_previous = false) {
  const int slices = D / Shape::kW;
  return launch_ex(gret_step_sliced_kernel<Shape::kThreads, Shape::kW, Shape::kNR, kFused, kKind>,
                   batch * heads * slices, Shape::kThreads, kFused ? slices : 1, overlap_previous, stream, q, k, v,
                   row_stride, log_gamma, state, pending, out, g, g_stride, eps, heads, D);
}

// What every step at the shared shape needs: a supported head dim, a
// 16-byte-aligned state (and pending buffer, when there is one).
bool shape_args_ok(int64_t batch, int64_t heads, int64_t head_dim, const void* state, const void* pending) {
  return batch >= 1 && heads >= 1 && gret_deferred_slice_width(head_dim) != 0 && batch * heads <= 0x7fffffff &&
         aligned16(state) && aligned16(pending);
}

// The step at the shared shape: eager, deferred or output, plain or fused.
template <bool kFused, StepKind kKind>
cudaError_t launch_shaped(const bf16* q, const bf16* k, const bf16* v, int64_t row_stride, const float* log_gamma,
                          float* state, void* pending, bf16* out, const bf16* g, int64_t g_stride, float eps,
                          int64_t batch, int64_t heads, int64_t head_dim, cudaStream_t stream,
                          bool overlap_previous) {
  if (!shape_args_ok(batch, heads, head_dim, state, pending)) return cudaErrorInvalidValue;
  auto* p = static_cast<unsigned char*>(pending);
  const int D = static_cast<int>(head_dim);
  return with_slice_shape(D, [&](auto shape) {
    return launch_sliced<decltype(shape), kFused, kKind>(q, k, v, row_stride, log_gamma, state, p, out, g,
                                                            g_stride, eps, batch, heads, D, stream, overlap_previous);
  });
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
    if (gret_deferred_slice_width(D) != 0)
      return launch_shaped<false, StepKind::eager>(q, k, v, row_stride, log_gamma, state, nullptr, o, nullptr, 0,
                                                   0.0f, batch, heads, head_dim, stream, overlap_previous);
    // 144, 176, 208, 240: 16 columns a CTA (no fused or deferred step there).
    return launch_sliced<SliceShape<128, 16, 8>, false>(q, k, v, row_stride, log_gamma, state, nullptr, o, nullptr, 0,
                                                        0.0f, batch, heads, D, stream, overlap_previous);
  }
  const int threads = head_dim >= 128 ? 128 : static_cast<int>((head_dim + 31) / 32 * 32);
  const size_t smem = 2 * static_cast<size_t>(head_dim) * sizeof(float);
  gret_step_generic_kernel<<<static_cast<unsigned>(batch * heads), threads, smem, stream>>>(
      q, k, v, row_stride, log_gamma, state, o, heads, head_dim);
  return cudaGetLastError();
}

bool gret_step_supported(int64_t head_dim) { return head_dim >= 1 && head_dim <= 1024; }

bool gret_fused_step_supported(int64_t head_dim) { return gret_deferred_slice_width(head_dim) != 0; }

cudaError_t launch_gret_recurrent_step_norm_gate(const __nv_bfloat16* q, const __nv_bfloat16* k,
                                                 const __nv_bfloat16* v, int64_t row_stride, const float* log_gamma,
                                                 float* state, const __nv_bfloat16* g, int64_t g_stride, float eps,
                                                 __nv_bfloat16* out, int64_t batch, int64_t heads, int64_t head_dim,
                                                 cudaStream_t stream) {
  return launch_shaped<true, StepKind::eager>(q, k, v, row_stride, log_gamma, state, nullptr, out, g, g_stride, eps,
                                              batch, heads, head_dim, stream, false);
}

cudaError_t launch_gret_deferred_step(const __nv_bfloat16* q, const __nv_bfloat16* k, const __nv_bfloat16* v,
                                      int64_t row_stride, const float* log_gamma, float* state, void* pending,
                                      __nv_bfloat16* o, int64_t batch, int64_t heads, int64_t head_dim,
                                      cudaStream_t stream, bool overlap_previous) {
  if (pending == nullptr) return cudaErrorInvalidValue;
  return launch_shaped<false, StepKind::deferred>(q, k, v, row_stride, log_gamma, state, pending, o, nullptr, 0, 0.0f,
                                                  batch, heads, head_dim, stream, overlap_previous);
}

cudaError_t launch_gret_deferred_step_norm_gate(const __nv_bfloat16* q, const __nv_bfloat16* k,
                                                const __nv_bfloat16* v, int64_t row_stride, const float* log_gamma,
                                                float* state, void* pending, const __nv_bfloat16* g,
                                                int64_t g_stride, float eps, __nv_bfloat16* out, int64_t batch,
                                                int64_t heads, int64_t head_dim, cudaStream_t stream,
                                                bool overlap_previous) {
  if (pending == nullptr) return cudaErrorInvalidValue;
  return launch_shaped<true, StepKind::deferred>(q, k, v, row_stride, log_gamma, state, pending, out, g, g_stride,
                                                 eps, batch, heads, head_dim, stream, overlap_previous);
}

cudaError_t launch_gret_pending_flush(float* state, void* pending, int64_t batch, int64_t heads, int64_t head_dim,
                                      cudaStream_t stream) {
  if (pending == nullptr || !shape_args_ok(batch, heads, head_dim, state, pending)) return cudaErrorInvalidValue;
  auto* p = static_cast<unsigned char*>(pending);
  const int D = static_cast<int>(head_dim);
  return with_slice_shape(D, [&](auto shape) {
    using S = decltype(shape);
    return launch_ex(gret_pending_flush_kernel<S::kThreads, S::kW, S::kNR>, batch * heads * (D / S::kW), S::kThreads,
                     1, false, stream, state, p, D);
  });
}

cudaError_t launch_gret_output_step(const __nv_bfloat16* q, const __nv_bfloat16* k, const __nv_bfloat16* v,
                                    int64_t row_stride, const float* log_gamma, const float* state,
                                    __nv_bfloat16* o, int64_t batch, int64_t heads, int64_t head_dim,
                                    cudaStream_t stream, bool overlap_previous) {
  // The kernel never writes the state in this kind; its parameter is shared with the other kinds.
  return launch_shaped<false, StepKind::output>(q, k, v, row_stride, log_gamma, const_cast<float*>(state), nullptr, o,
                                                nullptr, 0, 0.0f, batch, heads, head_dim, stream, overlap_previous);
}

cudaError_t launch_gret_output_step_norm_gate(const __nv_bfloat16* q, const __nv_bfloat16* k,
                                              const __nv_bfloat16* v, int64_t row_stride, const float* log_gamma,
                                              const float* state, const __nv_bfloat16* g, int64_t g_stride,
                                              float eps, __nv_bfloat16* out, int64_t batch, int64_t heads,
                                              int64_t head_dim, cudaStream_t stream, bool overlap_previous) {
  return launch_shaped<true, StepKind::output>(q, k, v, row_stride, log_gamma, const_cast<float*>(state), nullptr,
                                               out, g, g_stride, eps, batch, heads, head_dim, stream,
                                               overlap_previous);
}

cudaError_t launch_gret_state_update(const __nv_bfloat16* k, const __nv_bfloat16* v, int64_t row_stride,
                                     const float* log_gamma, float* state, int64_t batch, int64_t heads,
                                     int64_t head_dim, cudaStream_t stream) {
  if (!shape_args_ok(batch, heads, head_dim, state, nullptr)) return cudaErrorInvalidValue;
  const int D = static_cast<int>(head_dim);
  return with_slice_shape(D, [&](auto shape) {
    using S = decltype(shape);
    return launch_ex(gret_state_update_kernel<S::kThreads, S::kW, S::kNR>, batch * heads * (D / S::kW), S::kThreads,
                     1, false, stream, k, v, row_stride, log_gamma, state, heads, D);
  });
}

}  // namespace yoco::cuda
