#pragma once
// Index maths and the launch plan of the gated-retention chunkwise prefill
// kernel (cuda/gret/gret_chunk.cu; reference/gret.hpp: gret_chunkwise), shared by
// the kernel (device) and the CPU tests (host). Everything that can pass 2^31
// is int64_t (KERNELS.md §5 row 1: q/o wrap from about token 699,050 at
// 24 heads x 128).
//
// Work decomposition: one CTA per (batch, head, segment, V-slice). A V-slice
// is a block of `slice_cols` columns of v, of o and of the state (S[:, slice]);
// Q K^T and the decay mask are recomputed per slice. A segment is a run of
// whole chunks of one head (KERNELS.md §3 "Parallelism beyond B*H"): with
// P > 1 segments a launch runs three phases,
//   1. every segment but the last computes its local end state S_loc(p) from
//      zero and its total log-decay Gamma_p (state-only pass: k, v, log-gamma);
//   2. a per-(b, h) fp32 scan S_in(0) = carried state,
//      S_in(p) = exp(Gamma_{p-1}) S_in(p-1) + S_loc(p-1);
//   3. the fused pass per segment from S_in(p); the last writes the final state.
// The CTA index puts a head's slices next to each other, so they run together
// and L2 serves the repeated q/k reads.
//
// The host mirror of the kernels' arithmetic is gret_chunk_emulation.hpp.
#include <cstdint>

#include "arch/hd.hpp"

namespace yoco::cuda {

struct GretChunkShape {
  int64_t batch = 1, heads = 0, head_dim = 0;  // head_dim: 64, 128, 256
  int64_t seq_len = 0;                         // tokens in this launch (a prefill chunk of the sequence)
  int64_t row_stride = 0;                      // elements between consecutive tokens in q/k/v
};

struct GretChunkPlan {
  int chunk = 64;        // tokens per chunk (the kernel's C): 64 (kernels 2-4), 128 or 256 (kernel 5)
  int slice_cols = 32;   // V columns per CTA: 16, 32 or 64 (head_dim 256: 16 or 32)
  int slices = 4;        // head_dim / slice_cols
  int segments = 1;      // sequence segments per head, 1..kGretMaxSegments (> 1 needs a workspace)
  int phase1_split = 1;  // phase 1 cuts each of segments 0..P-2 into this many (more CTAs for the state-only
                         //    pass than the fused pass has; gret_ws_slots); segments * phase1_split <= kGretMaxSegments
  int kernel = 2;        // 2: V-sliced CTAs of 4 warps (v2); 3: full-width CTAs of 8 warps (v3, head_dim 128,
                         //    slice_cols = head_dim, slices = 1), see plan_gret_chunk_v3 (4 was v3w16,
                         //    retired); 5: chunks of 128 or 256 tokens, full-width CTAs of
                         //    8 warps, one an SM (head_dim 128), see plan_gret_chunk_v5; 6: wgmma, three
                         //    warpgroups, one CTA an SM (head_dim 128, chunk 64), see plan_gret_chunk_v6;
                         //    7: kernel 6 with two output warpgroups (v7), see plan_gret_chunk_v7
  bool fuse_norm_gate = false;  // kernel 6 only: the per-head norm and gate in its epilogue. Off in every
                                //    planner: run-17 (H100, 32K x 24 x 128, library plan v6 P5) measured the chunk
                                //    then the norm + gate kernel at 0.772 ms and the fused launch at 1.108 ms.
};
constexpr int kGretMaxSegments = 64;

// Whether the plan's fused pass writes the per-head norm and gate itself
// (kernel 6's epilogue where the plan asks for it; the launch also needs a
// 16-byte-aligned g: gret_chunk.hpp, gret_chunk_fuses_norm_gate(plan, ng)), or
// the launch runs the norm + gate kernel after it (one launch more:
// launch_count.hpp counts it).
YOCO_HD constexpr bool gret_chunk_fuses_norm_gate(const GretChunkPlan& p) { return p.kernel == 6 && p.fuse_norm_gate; }

// ---- index maths (all int64) ----
YOCO_HD constexpr int64_t gret_num_chunks(int64_t seq_len, int64_t chunk) { return (seq_len + chunk - 1) / chunk; }
YOCO_HD constexpr int64_t gret_chunk_begin(int64_t c, int64_t chunk) { return c * chunk; }
// Valid tokens of chunk c (the last one may be ragged).
YOCO_HD constexpr int64_t gret_chunk_valid(int64_t c, int64_t chunk, int64_t seq_len) {
  const int64_t r = seq_len - c * chunk;
  return r < chunk ? (r < 0 ? 0 : r) : chunk;
}
// q, k, v: [batch, seq_len, row_stride], head h at columns [h*D, (h+1)*D).
YOCO_HD constexpr int64_t gret_qkv_offset(int64_t b, int64_t t, int64_t h, int64_t d, int64_t seq_len,
                                          int64_t row_stride, int64_t head_dim) {
  return (b * seq_len + t) * row_stride + h * head_dim + d;
}
// log_gamma: [batch, seq_len, heads].
YOCO_HD constexpr int64_t gret_gate_offset(int64_t b, int64_t t, int64_t h, int64_t seq_len, int64_t heads) {
  return (b * seq_len + t) * heads + h;
}
// o: [batch, seq_len, heads * D].
YOCO_HD constexpr int64_t gret_out_offset(int64_t b, int64_t t, int64_t h, int64_t d, int64_t seq_len, int64_t heads,
                                          int64_t head_dim) {
  return ((b * seq_len + t) * heads + h) * head_dim + d;
}
// state: [batch, heads, D, D], S[i][j] sums k_i v_j.
YOCO_HD constexpr int64_t gret_state_offset(int64_t b, int64_t h, int64_t i, int64_t j, int64_t heads,
                                            int64_t head_dim) {
  return ((b * heads + h) * head_dim + i) * head_dim + j;
}

struct GretCta {
  int64_t batch, head, slice;
};
YOCO_HD constexpr int64_t gret_num_ctas(int64_t batch, int64_t heads, int64_t slices) { return batch * heads * slices; }
YOCO_HD constexpr GretCta gret_cta(int64_t cta, int64_t heads, int64_t slices) {
  return GretCta{cta / (heads * slices), (cta / slices) % heads, cta % slices};
}
// First V column of a slice.
YOCO_HD constexpr int64_t gret_slice_begin(int64_t slice, int64_t slice_cols) { return slice * slice_cols; }

// ---- segments ----
// Segment p of P covers chunks [gret_segment_begin(p), gret_segment_begin(p+1)):
// P balanced runs of whole chunks (a segment may be empty when P > chunks:
// then its local state is zero and its log-decay 0, which the scan handles).
YOCO_HD constexpr int64_t gret_segment_begin(int64_t p, int64_t nchunks, int64_t segments) {
  return p * nchunks / segments;
}
struct GretSegCta {
  int64_t batch, head, segment, slice;
};
// A grid of batch*heads*grid_segments*slices CTAs (phase 1 runs segments
// 0..P-2, so grid_segments = P-1; phase 3 runs all P).
YOCO_HD constexpr int64_t gret_num_seg_ctas(int64_t batch, int64_t heads, int64_t grid_segments, int64_t slices) {
  return batch * heads * grid_segments * slices;
}
YOCO_HD constexpr GretSegCta gret_seg_cta(int64_t cta, int64_t heads, int64_t grid_segments, int64_t slices) {
  const int64_t slice = cta % slices;
  const int64_t r = cta / slices;
  const int64_t seg = r % grid_segments;
  const int64_t bh = r / grid_segments;
  return GretSegCta{bh / heads, bh % heads, seg, slice};
}
// Workspace (segments > 1): P fp32 states per (b, h), [P][batch][heads][D][D]
// (slot 0: the carried state, slot p: S_loc(p-1), then S_in(p) after the
// scan), then Gamma [batch][heads][P] fp32. With phase1_split Q > 1, phase 1
// and the scan work on the Q P finer segments (their boundaries include every
// one of the P: floor(Q p n / (Q P)) = floor(p n / P)), so the workspace holds
// Q P slots and phase 3's segment p starts from slot Q p.
YOCO_HD constexpr int64_t gret_ws_slots(int64_t segments, int64_t phase1_split) { return segments * phase1_split; }
YOCO_HD constexpr int64_t gret_ws_state_elems(int64_t batch, int64_t heads, int64_t head_dim) {
  return batch * heads * head_dim * head_dim;
}
YOCO_HD constexpr int64_t gret_ws_gamma_offset(int64_t batch, int64_t heads, int64_t head_dim, int64_t segments) {
  return segments * gret_ws_state_elems(batch, heads, head_dim);  // in floats
}
// Bytes of workspace a plan needs: 0 for one segment, else
// 4 * (S*B*H*D*D + B*H*S), S = gret_ws_slots(P, phase1_split). Here, not in
// the launcher, so the cost model sizes memory as the runner allocates it.
inline int64_t gret_chunk_workspace_bytes(const GretChunkShape& s, const GretChunkPlan& p) {
  if (p.segments <= 1 || s.batch < 1 || s.heads < 1 || s.head_dim < 1) return 0;
  const int64_t slots = gret_ws_slots(p.segments, p.phase1_split);
  return 4 * (gret_ws_gamma_offset(s.batch, s.heads, s.head_dim, slots) + s.batch * s.heads * slots);
}

// ---- shared memory and occupancy of the compiled tile (kept here so the
// host planner and the kernel agree). Per CTA, rows padded by 8 bf16:
//   Q (one buffer), K (two), V slice (two), S^ (one) in bf16;
//   log-gamma (two x C), then per warp G and exp(G_C - G) (4 warps x 2 x C) in fp32.
YOCO_HD constexpr int64_t gret_smem_bytes(int64_t head_dim, int64_t slice_cols, int64_t chunk) {
  const int64_t qs = head_dim + 8, vs = slice_cols + 8;
  return chunk * qs * 2 * 3 + chunk * vs * 2 * 2 + head_dim * vs * 2 + 2 * chunk * 4 + 8 * chunk * 4;
}
// Resident CTAs per SM by shared memory (228 KB an SM, 1 KB reserved per CTA),
// capped at 3 (the kernel's __launch_bounds__ register budget: 168 a thread).
YOCO_HD constexpr int gret_ctas_per_sm(int64_t head_dim, int64_t slice_cols) {
  const int64_t b = (228 * 1024) / (gret_smem_bytes(head_dim, slice_cols, 64) + 1024);
  return b < 1 ? 1 : (b > 3 ? 3 : static_cast<int>(b));
}

// Whether the compiled kernel supports this (head_dim, slice_cols) pair: the
// state slice is head_dim x slice_cols fp32 over 128 threads, at most 64
// registers a thread.
YOCO_HD constexpr bool gret_slice_supported(int64_t head_dim, int64_t slice_cols) {
  const bool d_ok = head_dim == 64 || head_dim == 128 || head_dim == 256;
  const bool s_ok = slice_cols == 16 || slice_cols == 32 || slice_cols == 64;
  return d_ok && s_ok && slice_cols <= head_dim && head_dim * slice_cols <= 8192;
}

// ---- v3: one CTA of 8 warps per (batch, head, segment) covering all D = 128
// V columns. Swizzled unpadded bf16 tiles (16-byte piece c of row r sits at
// piece c ^ (r & 7)): Q (one buffer), K (two), V (two), S^ (one), then
// log-gamma (two x C fp32): 115,200 B at D 128, so 2 CTAs an SM
// (2 x (115,200 + 1,024) <= 228 KB) and __launch_bounds__(256, 2).
YOCO_HD constexpr bool gret_v3_supported(int64_t head_dim) { return head_dim == 128; }
YOCO_HD constexpr int64_t gret_v3_smem_bytes(int64_t head_dim, int64_t chunk) {
  return chunk * head_dim * 2 * 5 + head_dim * head_dim * 2 + 2 * chunk * 4;
}
constexpr int kGretV3CtasPerSm = 2;

// ---- v5: chunks of C = 128 or 256 tokens (head_dim 128). One CTA of 8 warps
// per (batch, head, segment), one CTA an SM (__launch_bounds__(256, 1): up to
// 255 registers, so the whole 64-column output block of a row block and its
// Q fragments stay in registers). Swizzled tiles as v3: Q (one buffer), K and
// V (two at C 128, one at C 256), S^ (one), log-gamma (as K): 197,632 B at
// C 128, 230,400 B at C 256 (the 227 KB a block may have).
YOCO_HD constexpr bool gret_v5_supported(int64_t head_dim, int64_t chunk) {
  return head_dim == 128 && (chunk == 128 || chunk == 256);
}
YOCO_HD constexpr int gret_v5_buffers(int64_t chunk) { return chunk == 128 ? 2 : 1; }
YOCO_HD constexpr int64_t gret_v5_smem_bytes(int64_t head_dim, int64_t chunk) {
  return chunk * head_dim * 2 * (1 + 2 * gret_v5_buffers(chunk)) + head_dim * head_dim * 2 +
         gret_v5_buffers(chunk) * chunk * 4;
}
// Row blocks (16 rows of the chunk) of warp w's unit u: warp w writes output
// columns [64 (w & 1), +64) of C / 64 row blocks, u = 0 .. C/64 - 1; with
// p = w >> 1 they are 8 (u >> 1) + (p or 7 - p), so every warp has the same
// causal work (sum of rb + 1) and the 16 warps-halves cover every row block
// once per column half.
YOCO_HD constexpr int gret_v5_row_block(int warp, int unit) {
  const int p = warp >> 1;
  return 8 * (unit >> 1) + ((unit & 1) ? 7 - p : p);
}

// ---- v6: wgmma (Hopper warpgroup MMA), head_dim 128, chunk 64. One CTA of 3
// warpgroups per (batch, head, segment), one CTA an SM: warpgroup 0 forms the
// outputs (Q K^T and Q S^ from shared memory, A V with A in registers),
// warpgroups 1 and 2 hold state rows [0, 64) / [64, 128) x all 128 columns
// (64 fp32 accumulators a thread) and run the state update K'^T V (K' from
// registers). Tiles are 128-byte swizzled [2 halves][rows][64 bf16], every
// tile 1024-byte aligned: S^ (two buffers: warpgroup 0 reads the chunk's, the
// state warpgroups write the next one's), then kGretV6Stages stages of
// Q, K, V (64 x 128 each), then the O staging tile (warpgroup 0's alone: the
// Q tile it once reused is the state warpgroups' cp.async target, which
// racecheck flagged in run-11/13), then the stages' log-gammas (64 fp32 each).
constexpr int kGretV6Stages = 3;  // chunks c+1 and c+2 load while c is computed
YOCO_HD constexpr bool gret_v6_supported(int64_t head_dim) { return head_dim == 128; }
YOCO_HD constexpr int64_t gret_v6_tile_bytes() { return 64 * 128 * 2; }          // one Q, K or V tile
YOCO_HD constexpr int64_t gret_v6_s_tile_bytes() { return 128 * 128 * 2; }       // one S^ buffer
YOCO_HD constexpr int64_t gret_v6_off_s(int buffer) { return buffer * gret_v6_s_tile_bytes(); }
YOCO_HD constexpr int64_t gret_v6_off_stage(int stage) {
  return 2 * gret_v6_s_tile_bytes() + stage * 3 * gret_v6_tile_bytes();
}
YOCO_HD constexpr int64_t gret_v6_off_q(int stage) { return gret_v6_off_stage(stage); }
YOCO_HD constexpr int64_t gret_v6_off_k(int stage) { return gret_v6_off_stage(stage) + gret_v6_tile_bytes(); }
YOCO_HD constexpr int64_t gret_v6_off_v(int stage) { return gret_v6_off_stage(stage) + 2 * gret_v6_tile_bytes(); }
YOCO_HD constexpr int64_t gret_v6_off_o() { return gret_v6_off_stage(kGretV6Stages); }
YOCO_HD constexpr int64_t gret_v6_off_lg(int stage) { return gret_v6_off_o() + gret_v6_tile_bytes() + stage * 64 * 4; }
// Bytes the layout uses, and the dynamic shared memory a CTA asks for (+ 1 KB
// to align the base to the 1024-byte swizzle atom): 230,144 / 231,168 B.
YOCO_HD constexpr int64_t gret_v6_smem_used() { return gret_v6_off_lg(kGretV6Stages); }
YOCO_HD constexpr int64_t gret_v6_smem_bytes() { return gret_v6_smem_used() + 1024; }
// The stage of the i-th chunk of a CTA's segment (the ring the loads walk).
YOCO_HD constexpr int gret_v6_stage(int64_t i) { return static_cast<int>(i % kGretV6Stages); }

inline bool gret_plan_valid(const GretChunkShape& s, const GretChunkPlan& p) {
  const bool seg_ok = p.segments >= 1 && p.phase1_split >= 1 &&
                      gret_ws_slots(p.segments, p.phase1_split) <= kGretMaxSegments;
  if (p.kernel == 6 || p.kernel == 7)  // v7 has no fused norm and gate: an output warpgroup holds half a row
    return p.chunk == 64 && seg_ok && gret_v6_supported(s.head_dim) && p.slice_cols == s.head_dim && p.slices == 1 &&
           !(p.kernel == 7 && p.fuse_norm_gate);
  if (p.kernel == 5)
    return seg_ok && gret_v5_supported(s.head_dim, p.chunk) && p.slice_cols == s.head_dim && p.slices == 1;
  if (p.kernel == 3)
    return p.chunk == 64 && seg_ok && gret_v3_supported(s.head_dim) && p.slice_cols == s.head_dim && p.slices == 1;
  return p.kernel == 2 && p.chunk == 64 && seg_ok && gret_slice_supported(s.head_dim, p.slice_cols) &&
         p.slices * static_cast<int64_t>(p.slice_cols) == s.head_dim;
}

// The planners' segment count: the P a planner wants, cut so that every
// segment keeps >= 8 chunks of `chunk` tokens, at most kGretMaxSegments, >= 1.
inline int gret_clamp_segments(int64_t P, int64_t seq_len, int64_t chunk) {
  const int64_t by_len = gret_num_chunks(seq_len, chunk) / 8;
  if (P > by_len) P = by_len;
  if (P > kGretMaxSegments) P = kGretMaxSegments;
  if (P < 1) P = 1;
  return static_cast<int>(P);
}

// Host planner. Slices: the widest slice whose grid covers at least half the
// SMs; each halving of the slice re-reads q and k once more from L2 and
// repeats Q K^T, but doubles the CTAs walking the chain (v1 measured on H100:
// at (1, 32K-512K, 24, 128) v4 beats v2 by 10 % and v8 by 11 %).
// Segments: one CTA per SM sub-partition leaves no latency hiding (v1 ran at
// 13 % of copy bandwidth with 96 CTAs of 4 warps), so cut each head into P
// segments until the grid fills one whole wave of resident CTAs
// (SMs x gret_ctas_per_sm), keeping every segment >= 8 chunks. The phase-1
// pass re-reads k and v of segments 0..P-2 (x(1 + 0.5 (P-1)/P) bytes).
inline GretChunkPlan plan_gret_chunk_v2(const GretChunkShape& s, int sm_count) {
  GretChunkPlan p;
  p.chunk = 64;
  p.segments = 1;
  const int64_t bh = s.batch * s.heads;
  int cols = 64;
  while (cols > 16 && !gret_slice_supported(s.head_dim, cols)) cols /= 2;
  while (cols > 16 && 2 * bh * (s.head_dim / cols) < sm_count && gret_slice_supported(s.head_dim, cols / 2)) cols /= 2;
  p.slice_cols = cols;
  p.slices = static_cast<int>(s.head_dim / cols);
  if (p.slices < 1) p.slices = 1;
  if (gret_slice_supported(s.head_dim, cols) && sm_count > 0) {
    const int64_t base = bh * p.slices;
    const int64_t slots = static_cast<int64_t>(sm_count) * gret_ctas_per_sm(s.head_dim, cols);
    int64_t P = base > 0 ? slots / base : 1;
    p.segments = gret_clamp_segments(P, s.seq_len, 64);
  }
  return p;
}

// v3 planner (full-width CTAs; only head_dim 128, else returns the v2 plan):
// segments P = floor(SMs x 2 / (B x H)) so one wave of 2 CTAs an SM is busy
// (P 11 at batch 1 x 24 heads on 132 SMs), >= 8 chunks a segment, <= 64.
inline GretChunkPlan plan_gret_chunk_v3(const GretChunkShape& s, int sm_count) {
  if (!gret_v3_supported(s.head_dim)) return plan_gret_chunk_v2(s, sm_count);
  GretChunkPlan p;
  p.chunk = 64;
  p.kernel = 3;
  p.slice_cols = static_cast<int>(s.head_dim);
  p.slices = 1;
  const int64_t bh = s.batch * s.heads;
  int64_t P = (bh > 0 && sm_count > 0) ? (static_cast<int64_t>(sm_count) * kGretV3CtasPerSm) / bh : 1;
  P = gret_clamp_segments(P, s.seq_len, 64);
  p.segments = static_cast<int>(P);
  return p;
}

// v5 planner (chunk 128 or 256 at head_dim 128; anything else returns the
// chunk-64 plan of plan_gret_chunk, the same function): one CTA an SM, so
// P = floor(SMs / (B x H)) segments (5 at batch 1 x 24 heads on 132 SMs),
// >= 8 chunks a segment, <= 64.
inline GretChunkPlan plan_gret_chunk_v5(const GretChunkShape& s, int sm_count, int chunk);

// v6 planner (wgmma, head_dim 128; anything else returns plan_gret_chunk's
// plan): one CTA an SM, so P = floor(SMs / (B x H)) segments (5 at batch 1 x
// 24 heads on 132 SMs, 120 CTAs), >= 8 chunks a segment, <= 64. Phase 1 (the
// state-only pass of segments 0..P-2) runs v3's state-only kernel (2 CTAs an
// SM): phase1_split Q = floor(2 SMs / (B H (P-1))) finer segments each, so it
// fills one wave (Q 2 at batch 1 x 24 heads: 192 CTAs instead of 96), each
// >= 4 chunks, Q P <= 64.
inline GretChunkPlan plan_gret_chunk_v6(const GretChunkShape& s, int sm_count);

// v7 planner: v6's plan (one CTA an SM: the same shared memory, 512 threads)
// run by kernel 7, whose two output warpgroups split the O columns (a
// candidate, not the library's: cuda/gret/NOTES-gret_chunk.md, v7). Anything
// v6 does not serve returns plan_gret_chunk's plan.
inline GretChunkPlan plan_gret_chunk_v7(const GretChunkShape& s, int sm_count);

// The planner the library uses: v6 (wgmma, head_dim 128, chunk 64), v2
// elsewhere; a chunk of 128 or 256 tokens (the authors' training value; the
// function does not depend on it, DESIGN §3) asks for kernel 5 where it is
// compiled (head_dim 128); elsewhere the plan keeps chunk 64 (plan.chunk says
// which ran). Chosen by measurement at batch 1 x 24 heads x 128 on the H100
// (reports/results/nvidia-h100/logs/run-12, the same call as fla): v6 P 5 x2
// took 0.477 / 1.74 / 6.91 / 13.8 ms at 32K / 128K / 512K / 1M (57-63 % of
// copy) against v3 P 11's 0.595 / 2.22 / 8.80 / 18.3 ms (45-49 %) and fla's
// chunk_simple_gla 1.19 / 3.71 / 13.7 ms; earlier (run-04) v3 had beaten v2 P 4
// (1.00 / 3.85 / 15.4 / 30.9 ms) and v3w16 P 5 (since retired).
inline GretChunkPlan plan_gret_chunk(const GretChunkShape& s, int sm_count, int chunk = 64) {
  if (chunk != 64 && gret_v5_supported(s.head_dim, chunk)) return plan_gret_chunk_v5(s, sm_count, chunk);
  if (gret_v6_supported(s.head_dim)) return plan_gret_chunk_v6(s, sm_count);
  return gret_v3_supported(s.head_dim) ? plan_gret_chunk_v3(s, sm_count) : plan_gret_chunk_v2(s, sm_count);
}

inline GretChunkPlan plan_gret_chunk_v6(const GretChunkShape& s, int sm_count) {
  if (!gret_v6_supported(s.head_dim)) return plan_gret_chunk(s, sm_count);
  GretChunkPlan p;
  p.chunk = 64;
  p.kernel = 6;
  p.slice_cols = static_cast<int>(s.head_dim);
  p.slices = 1;
  const int64_t bh = s.batch * s.heads;
  int64_t P = (bh > 0 && sm_count > 0) ? static_cast<int64_t>(sm_count) / bh : 1;
  P = gret_clamp_segments(P, s.seq_len, 64);
  p.segments = static_cast<int>(P);
  if (P > 1) {
    int64_t Q = (2 * static_cast<int64_t>(sm_count)) / (bh * (P - 1));
    const int64_t by_len_q = gret_num_chunks(s.seq_len, 64) / (4 * P);
    if (Q > by_len_q) Q = by_len_q;
    if (Q > kGretMaxSegments / P) Q = kGretMaxSegments / P;
    if (Q < 1) Q = 1;
    p.phase1_split = static_cast<int>(Q);
  }
  return p;
}

inline GretChunkPlan plan_gret_chunk_v7(const GretChunkShape& s, int sm_count) {
  GretChunkPlan p = plan_gret_chunk_v6(s, sm_count);
  if (p.kernel == 6) p.kernel = 7;
  return p;
}

inline GretChunkPlan plan_gret_chunk_v5(const GretChunkShape& s, int sm_count, int chunk) {
  if (!gret_v5_supported(s.head_dim, chunk)) return plan_gret_chunk(s, sm_count);
  GretChunkPlan p;
  p.chunk = chunk;
  p.kernel = 5;
  p.slice_cols = static_cast<int>(s.head_dim);
  p.slices = 1;
  const int64_t bh = s.batch * s.heads;
  int64_t P = (bh > 0 && sm_count > 0) ? static_cast<int64_t>(sm_count) / bh : 1;
  P = gret_clamp_segments(P, s.seq_len, chunk);
  p.segments = static_cast<int>(P);
  return p;
}

}  // namespace yoco::cuda
