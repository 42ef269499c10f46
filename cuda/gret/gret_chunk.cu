#include "gret/gret_chunk.hpp"
#include "gret/gret_chunk_device.cuh"
#include "gret/gret_gate.hpp"

#include <algorithm>
#include <cstdint>

namespace yoco::cuda {

namespace {

using namespace gret_detail;

// Phase 2: per element of the [B, H, D, D] state, in place over the workspace
// slots: slot 0 <- carried state; slot p <- exp(Gamma_{p-1}) slot(p-1) + S_loc(p-1)
// (slot p held S_loc(p-1) from phase 1), p < slots. Gamma of (b, h) at
// gamma[bh * gamma_stride + p]. fp32; the exponent is clamped <= 0.
__global__ void __launch_bounds__(256) gret_segment_scan_kernel(const float* __restrict__ state, float* ws,
                                                                 const float* __restrict__ gamma, int64_t elems,
                                                                 int64_t dd, int64_t slots, int64_t gamma_stride) {
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < elems;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t bh = e / dd;
    float x = state[e];
    ws[e] = x;
    for (int64_t p = 1; p < slots; ++p) {
      const float f = __expf(fminf(gamma[bh * gamma_stride + p - 1], 0.0f));
      x = fmaf(f, x, ws[p * elems + e]);
      ws[p * elems + e] = x;
    }
  }
}

// The launch of every kernel version. P = 1: one fused pass, the state read
// and written in place (each thread its own elements). P > 1: phase 1
// (segments 0..P-2 from zero; S_loc(p) -> slot p+1, Gamma_p -> gamma), phase 2
// (the scan over segments), phase 3 (every segment from S_in(p) = slot p; the
// last writes the final state). pass(a, state_only) launches one pass of the
// plan's kernel over a's grid. `phases` (kGretAllPhases for a real launch)
// picks which of the three run: launch_gret_chunk_phases times them apart.
template <class Pass>
cudaError_t launch_phases(const __nv_bfloat16* q, const __nv_bfloat16* k, const __nv_bfloat16* v, const float* lg,
                          float* state, __nv_bfloat16* o, const GretChunkShape& s, const GretChunkPlan& p, float* ws,
                          cudaStream_t stream, Pass pass, unsigned phases, const GretNormGate* norm_gate) {
  GretPass a{q, k, v, lg, nullptr, 0, nullptr, 0, 0, nullptr, o, s.heads, s.seq_len, s.row_stride, p.slices,
             p.segments, p.segments};
  if (norm_gate) {  // the fused pass's epilogue (kernel 6); the state-only pass writes no o
    a.g = norm_gate->g;
    a.g_stride = norm_gate->g_stride;
    a.eps = norm_gate->eps;
  }
  if (p.segments == 1) {
    a.s_in = state;
    a.s_out = state;
    return (phases & kGretPhaseFused) ? pass(a, false) : cudaSuccess;
  }
  // Phase 1 and the scan on the Q P finer segments (Q = phase1_split), phase 3
  // on the P: segment p starts from slot Q p (gret_ws_slots).
  const int64_t D = s.head_dim, Q = p.phase1_split, slots = gret_ws_slots(p.segments, Q);
  const int64_t elems = gret_ws_state_elems(s.batch, s.heads, D);
  float* gamma = ws + gret_ws_gamma_offset(s.batch, s.heads, D, slots);
  GretPass a1 = a;
  a1.o = nullptr;
  a1.g = nullptr;
  a1.s_in = nullptr;
  a1.s_out = ws + elems;
  a1.s_out_seg = elems;
  a1.write_from = 0;
  a1.gamma = gamma;
  a1.segments = slots;
  a1.grid_segments = Q * (p.segments - 1);
  cudaError_t e = (phases & kGretPhaseStateOnly) ? pass(a1, true) : cudaSuccess;
  if (e != cudaSuccess) return e;
  if (phases & kGretPhaseScan) {
    const int64_t blocks = std::min<int64_t>((elems + 255) / 256, 4096);
    gret_segment_scan_kernel<<<static_cast<unsigned>(blocks), 256, 0, stream>>>(state, ws, gamma, elems, D * D,
                                                                                Q * (p.segments - 1) + 1, slots);
    e = cudaGetLastError();
    if (e != cudaSuccess) return e;
  }
  GretPass a3 = a;
  a3.s_in = ws;
  a3.s_in_seg = Q * elems;
  a3.s_out = state;
  a3.s_out_seg = 0;
  a3.write_from = p.segments - 1;
  return (phases & kGretPhaseFused) ? pass(a3, false) : cudaSuccess;
}

bool misaligned(const void* p, uintptr_t a) { return (reinterpret_cast<uintptr_t>(p) % a) != 0; }

// The chunk kernels of a launch (launch_gret_chunk_phases without a norm and
// gate after them); norm_gate only where kernel 6 fuses it.
cudaError_t launch_chunk_passes(unsigned phases, const __nv_bfloat16* q, const __nv_bfloat16* k,
                                const __nv_bfloat16* v, const float* log_gamma, float* state, __nv_bfloat16* o,
                                const GretChunkShape& s, const GretChunkPlan& p, void* workspace,
                                size_t workspace_bytes, cudaStream_t stream, const GretNormGate* norm_gate) {
  if (phases == 0 || (phases & ~kGretAllPhases) != 0) return cudaErrorInvalidValue;
  if (!q || !k || !v || !log_gamma || !state || !o) return cudaErrorInvalidValue;
  if (s.batch < 1 || s.heads < 1 || s.seq_len < 0 || s.row_stride < s.heads * s.head_dim || s.row_stride % 8 != 0)
    return cudaErrorInvalidValue;
  if (!gret_plan_valid(s, p)) return cudaErrorInvalidValue;
  if (misaligned(q, 16) || misaligned(k, 16) || misaligned(v, 16) || misaligned(state, 8) || misaligned(o, 4) ||
      misaligned(log_gamma, 4))
    return cudaErrorInvalidValue;
  if ((p.kernel == 6 || p.kernel == 7) && misaligned(o, 16)) return cudaErrorInvalidValue;  // 16-byte pieces of o
  if (p.segments > 1 &&
      (!workspace || misaligned(workspace, 16) || workspace_bytes < static_cast<size_t>(gret_chunk_workspace_bytes(s, p))))
    return cudaErrorInvalidValue;
  if (gret_num_seg_ctas(s.batch, s.heads, p.segments, p.slices) > 0x7fffffffLL) return cudaErrorInvalidValue;
  if (s.seq_len == 0) return cudaSuccess;  // no tokens: o is empty and the state unchanged
  float* ws = static_cast<float*>(workspace);
  auto run = [&](auto pass) {
    return launch_phases(q, k, v, log_gamma, state, o, s, p, ws, stream, pass, phases, norm_gate);
  };
  if (p.kernel == 5)
    return run([=](const GretPass& a, bool state_only) {
      return launch_gret_chunk_v5_pass(a, s.batch, p.chunk, state_only, stream);
    });
  if (p.kernel == 6 || p.kernel == 7) {
    if (s.head_dim != 128) return cudaErrorInvalidValue;
    return run([=](const GretPass& a, bool state_only) {
      // v6 and v7 have no state-only form: phase 1 runs v3's.
      if (state_only) return launch_gret_chunk_v3_pass(a, s.batch, true, stream);
      return p.kernel == 6 ? launch_gret_chunk_v6_pass(a, s.batch, stream)
                           : launch_gret_chunk_v7_pass(a, s.batch, stream);
    });
  }
  if (p.kernel == 3) {
    if (s.head_dim != 128) return cudaErrorInvalidValue;
    return run([=](const GretPass& a, bool state_only) {
      return launch_gret_chunk_v3_pass(a, s.batch, state_only, stream);
    });
  }
  return run([=](const GretPass& a, bool state_only) {
    return launch_gret_chunk_v2_pass(a, s.batch, s.head_dim, p.slice_cols, state_only, stream);
  });
}



}  // namespace

// Kernel 6 writes the norm and gate itself where its plan asks and g allows its 16-byte pieces.
bool gret_chunk_fuses_norm_gate(const GretChunkPlan& plan, const GretNormGate& ng) {
  return gret_chunk_fuses_norm_gate(plan) && !misaligned(ng.g, 16) && ng.g_stride % 8 == 0;
}

size_t gret_chunk_smem_bytes(int64_t head_dim, int64_t slice_cols) {
  if (!gret_slice_supported(head_dim, slice_cols)) return 0;
  return static_cast<size_t>(gret_smem_bytes(head_dim, slice_cols, 64));
}

cudaError_t launch_gret_chunk(const __nv_bfloat16* q, const __nv_bfloat16* k, const __nv_bfloat16* v,
                              const float* log_gamma, float* state, __nv_bfloat16* o, const GretChunkShape& s,
                              const GretChunkPlan& p, void* workspace, size_t workspace_bytes, cudaStream_t stream,
                              const GretNormGate* norm_gate) {
  return launch_gret_chunk_phases(kGretAllPhases, q, k, v, log_gamma, state, o, s, p, workspace, workspace_bytes,
                                  stream, norm_gate);
}

cudaError_t launch_gret_chunk_phases(unsigned phases, const __nv_bfloat16* q, const __nv_bfloat16* k,
                                     const __nv_bfloat16* v, const float* log_gamma, float* state, __nv_bfloat16* o,
                                     const GretChunkShape& s, const GretChunkPlan& p, void* workspace,
                                     size_t workspace_bytes, cudaStream_t stream, const GretNormGate* norm_gate) {
  if (norm_gate && (!norm_gate->g || norm_gate->g_stride < s.heads * s.head_dim)) return cudaErrorInvalidValue;
  const bool fused_ng = norm_gate && gret_chunk_fuses_norm_gate(p, *norm_gate);
  const cudaError_t e = launch_chunk_passes(phases, q, k, v, log_gamma, state, o, s, p, workspace, workspace_bytes,
                                            stream, fused_ng ? norm_gate : nullptr);
  if (e != cudaSuccess || !norm_gate || fused_ng || !(phases & kGretPhaseFused) || s.seq_len == 0) return e;
  return launch_gret_norm_gate(o, norm_gate->g, norm_gate->g_stride, s.batch * s.seq_len, s.heads, s.head_dim,
                               norm_gate->eps, o, stream);
}

cudaError_t launch_gret_chunk(const __nv_bfloat16* q, const __nv_bfloat16* k, const __nv_bfloat16* v,
                              const float* log_gamma, float* state, __nv_bfloat16* o, const GretChunkShape& s,
                              const GretChunkPlan& p, cudaStream_t stream) {
  return launch_gret_chunk(q, k, v, log_gamma, state, o, s, p, nullptr, 0, stream);
}

}  // namespace yoco::cuda
