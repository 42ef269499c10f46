// The gRet chunk kernel's plan and index maths (cuda/gret/gret_plan.hpp), and a
// host emulation of the kernel's exact arithmetic (chunk 64/128/256, bf16 rounding at
// the kernel's points, the kernel's fp32 scan) against the fp64 reference
// paradigms: the algorithm is right before a GPU sees it, and its error is the
// "bf16-rounded CPU computation" of DESIGN §6 that the GPU test's bound uses.
#include <gtest/gtest.h>

#include <cmath>
#include <algorithm>
#include <iostream>
#include <random>
#include <set>
#include <tuple>
#include <vector>

#include "dtype.hpp"
#include "gret.hpp"
#include "gret/gret_chunk_emulation.hpp"
#include "gret/gret_plan.hpp"
#include "ops.hpp"

namespace yoco::cuda {
namespace {

TEST(GretPlan, EveryChunkHeadAndSliceOnce) {
  for (int64_t B : {1, 2, 3, 8})
    for (int64_t H : {1, 5, 16, 24})
      for (int64_t D : {64, 128, 256})
        for (int sms : {1, 16, 132, 264}) {
          GretChunkShape s{B, H, D, 1000, H * D};
          const GretChunkPlan p = plan_gret_chunk_v2(s, sms);
          ASSERT_TRUE(gret_plan_valid(s, p)) << B << " " << H << " " << D << " " << sms;
          std::set<std::tuple<int64_t, int64_t, int64_t>> seen;
          std::vector<int> col_cover(static_cast<size_t>(B * H * D), 0);
          const int64_t n = gret_num_ctas(B, H, p.slices);
          for (int64_t c = 0; c < n; ++c) {
            const GretCta t = gret_cta(c, H, p.slices);
            ASSERT_GE(t.batch, 0);
            ASSERT_LT(t.batch, B);
            ASSERT_LT(t.head, H);
            ASSERT_LT(t.slice, p.slices);
            ASSERT_TRUE(seen.insert({t.batch, t.head, t.slice}).second);
            for (int64_t j = 0; j < p.slice_cols; ++j)
              ++col_cover[static_cast<size_t>((t.batch * H + t.head) * D + gret_slice_begin(t.slice, p.slice_cols) + j)];
            // a head's slices are adjacent CTAs (co-scheduled; L2 serves the repeated q/k)
            if (t.slice > 0) {
              const GretCta prev = gret_cta(c - 1, H, p.slices);
              EXPECT_EQ(prev.head, t.head);
              EXPECT_EQ(prev.slice, t.slice - 1);
            }
          }
          for (int x : col_cover) ASSERT_EQ(x, 1);
        }
}

TEST(GretPlan, SegmentsCoverEveryChunkOnce) {
  for (int64_t B : {1, 3})
    for (int64_t H : {1, 24})
      for (int64_t slices : {1, 4})
        for (int64_t P : {1, 2, 3, 7, 64})
          for (int64_t N : {1, 63, 64, 65, 1000, 4097, 32768 + 1}) {
            const int64_t nc = gret_num_chunks(N, 64);
            std::vector<int> cover(static_cast<size_t>(B * H * slices * nc), 0);
            const int64_t n = gret_num_seg_ctas(B, H, P, slices);
            for (int64_t c = 0; c < n; ++c) {
              const GretSegCta t = gret_seg_cta(c, H, P, slices);
              ASSERT_LT(t.batch, B);
              ASSERT_LT(t.head, H);
              ASSERT_LT(t.segment, P);
              ASSERT_LT(t.slice, slices);
              const int64_t cb = gret_segment_begin(t.segment, nc, P), ce = gret_segment_begin(t.segment + 1, nc, P);
              ASSERT_LE(cb, ce);
              ASSERT_LE(ce - cb, (nc + P - 1) / P);
              for (int64_t ch = cb; ch < ce; ++ch)
                ++cover[static_cast<size_t>(((t.batch * H + t.head) * slices + t.slice) * nc + ch)];
            }
            for (int x : cover) ASSERT_EQ(x, 1) << B << " " << H << " " << slices << " " << P << " " << N;
            EXPECT_EQ(gret_segment_begin(0, nc, P), 0);
            EXPECT_EQ(gret_segment_begin(P, nc, P), nc);
          }
  // phase 1's grid (P-1 segment indices) maps onto segments 0..P-2
  const GretSegCta last = gret_seg_cta(gret_num_seg_ctas(1, 24, 3, 4) - 1, 24, 3, 4);
  EXPECT_EQ(last.segment, 2);
  EXPECT_EQ(last.head, 23);
  EXPECT_EQ(gret_ws_gamma_offset(1, 24, 128, 4), 4LL * 24 * 128 * 128);
}

TEST(GretPlan, ChunksCoverTheSequenceOnce) {
  for (int64_t N : {0, 1, 63, 64, 65, 127, 128, 129, 1000, 4097, 32768, 1048576 + 1024}) {
    std::vector<int> cover(static_cast<size_t>(N), 0);
    const int64_t nc = gret_num_chunks(N, 64);
    for (int64_t c = 0; c < nc; ++c) {
      const int64_t b = gret_chunk_begin(c, 64), n = gret_chunk_valid(c, 64, N);
      ASSERT_GE(n, 1);
      ASSERT_LE(n, 64);
      if (c + 1 < nc) {
        ASSERT_EQ(n, 64);  // only the last chunk is ragged
      }
      for (int64_t t = b; t < b + n; ++t) ++cover[static_cast<size_t>(t)];
    }
    for (int x : cover) ASSERT_EQ(x, 1) << N;
    EXPECT_EQ(gret_chunk_valid(nc, 64, N), 0);
  }
}

TEST(GretPlan, OffsetsDoNotWrapAtOneMillionTokens) {
  const int64_t N = 1048576, H = 24, D = 128, W = H * D;
  // KERNELS.md §5 row 1: the last q element at 1M x 24 x 128.
  EXPECT_EQ(gret_qkv_offset(0, N - 1, H - 1, D - 1, N, W, D), 3221225471LL);
  EXPECT_EQ(gret_out_offset(0, N - 1, H - 1, D - 1, N, H, D), 3221225471LL);
  EXPECT_GT(gret_qkv_offset(0, 699051, 0, 0, N, W, D), (int64_t{1} << 31));
  // fused projection (q, k, v, g side by side: row stride 4 W), batch 8, 1M + 1024 tokens
  const int64_t N2 = N + 1024, B = 8;
  EXPECT_EQ(gret_qkv_offset(B - 1, N2 - 1, H - 1, D - 1, N2, 4 * W, D), (B * N2 - 1) * 4 * W + W - 1);
  EXPECT_EQ(gret_gate_offset(B - 1, N2 - 1, H - 1, N2, H), B * N2 * H - 1);
  EXPECT_EQ(gret_state_offset(B - 1, H - 1, D - 1, D - 1, H, D), B * H * D * D - 1);
  EXPECT_EQ(gret_chunk_begin(gret_num_chunks(N2, 64) - 1, 64), N2 - 64);
}

TEST(GretPlan, PlannerFillsTheDevice) {
  // yoco-3b gRet layer at batch 1: 24 heads x 128 -> 4 slices of 32 (96 CTAs, the fastest measured)
  GretChunkPlan p = plan_gret_chunk_v2({1, 24, 128, 32768, 3072}, 132);
  EXPECT_EQ(p.slice_cols * p.slices, 128);
  EXPECT_EQ(p.slices, 4);
  EXPECT_EQ(plan_gret_chunk_v2({2, 16, 128, 16384, 2048}, 132).slices, 4);  // the KERNELS.md anchor
  // a large batch keeps the widest slice
  p = plan_gret_chunk_v2({8, 24, 128, 32768, 3072}, 132);
  EXPECT_EQ(p.slice_cols, 64);
  // head dim 256: never wider than 32 columns (64 fp32 state registers a thread)
  p = plan_gret_chunk_v2({16, 40, 256, 4096, 40 * 256}, 132);
  EXPECT_EQ(p.slice_cols, 32);
  EXPECT_FALSE(gret_slice_supported(256, 64));
  EXPECT_FALSE(gret_slice_supported(96, 32));
  // segments: one whole wave of resident CTAs (3 an SM at D 128 / 32 columns), >= 8 chunks each
  EXPECT_EQ(gret_ctas_per_sm(128, 32), 3);
  EXPECT_EQ(gret_smem_bytes(128, 32, 64), 75264);
  for (int64_t N : {32768, 131072, 524288, 1048576}) {
    const GretChunkPlan q = plan_gret_chunk_v2({1, 24, 128, N, 3072}, 132);
    EXPECT_EQ(q.slices, 4);
    EXPECT_EQ(q.segments, 4) << N;  // 384 CTAs of 396 slots
  }
  EXPECT_EQ(plan_gret_chunk_v2({2, 16, 128, 16384, 2048}, 132).segments, 3);  // 384 CTAs
  EXPECT_EQ(plan_gret_chunk_v2({1, 24, 128, 900, 3072}, 132).segments, 1);    // 15 chunks: too short to cut
  EXPECT_EQ(plan_gret_chunk_v2({8, 24, 128, 32768, 3072}, 132).segments, 1);  // the batch fills the device
  for (int64_t B : {1, 2, 3, 8})
    for (int64_t N : {1, 64, 4096, 1 << 20})
      for (int sms : {1, 16, 132}) {
        const GretChunkPlan q = plan_gret_chunk_v2({B, 24, 128, N, 3072}, sms);
        EXPECT_GE(q.segments, 1);
        EXPECT_LE(q.segments, kGretMaxSegments);
        EXPECT_LE(static_cast<int64_t>(q.segments) * 8, std::max<int64_t>(8, gret_num_chunks(N, 64)));
      }
  GretChunkShape s{1, 24, 128, 100, 3072};
  EXPECT_FALSE(gret_plan_valid(s, GretChunkPlan{128, 32, 4, 1}));  // v2 compiles chunk 64 only
  EXPECT_FALSE(gret_plan_valid(s, GretChunkPlan{64, 32, 2, 1}));   // slices do not cover D
}

// v3: full-width CTAs (one per batch, head, segment), head_dim 128 only.
TEST(GretPlan, V3PlanFillsTwoCtasAnSm) {
  EXPECT_EQ(gret_v3_smem_bytes(128, 64), 115200);
  EXPECT_LE(2 * (gret_v3_smem_bytes(128, 64) + 1024), 228 * 1024);  // 2 CTAs an SM
  EXPECT_GT(3 * (gret_v3_smem_bytes(128, 64) + 1024), 228 * 1024);
  for (int64_t N : {32768, 131072, 524288, 1048576}) {
    const GretChunkShape s{1, 24, 128, N, 3072};
    const GretChunkPlan p = plan_gret_chunk_v3(s, 132);
    EXPECT_EQ(p.kernel, 3);
    EXPECT_EQ(p.slices, 1);
    EXPECT_EQ(p.slice_cols, 128);
    EXPECT_EQ(p.segments, 11) << N;  // 264 CTAs = 2 an SM on 132 SMs
    EXPECT_TRUE(gret_plan_valid(s, p));
    EXPECT_EQ(gret_num_seg_ctas(1, 24, p.segments, 1), 264);
  }
  EXPECT_EQ(plan_gret_chunk_v3({2, 16, 128, 16384, 2048}, 132).segments, 8);  // 256 CTAs
  EXPECT_EQ(plan_gret_chunk_v3({1, 24, 128, 900, 3072}, 132).segments, 1);    // 15 chunks: too short to cut
  EXPECT_EQ(plan_gret_chunk_v3({8, 24, 128, 32768, 3072}, 132).segments, 1);  // 192 CTAs already
  // other head dims fall back to the v2 plan; a v3 plan is invalid for them
  EXPECT_EQ(plan_gret_chunk_v3({1, 24, 64, 32768, 1536}, 132).kernel, 2);
  EXPECT_EQ(plan_gret_chunk_v3({1, 24, 256, 32768, 6144}, 132).kernel, 2);
  GretChunkPlan bad = plan_gret_chunk_v3({1, 24, 128, 32768, 3072}, 132);
  EXPECT_FALSE(gret_plan_valid({1, 24, 64, 32768, 1536}, bad));
  bad.slices = 4;
  bad.slice_cols = 32;
  EXPECT_FALSE(gret_plan_valid({1, 24, 128, 32768, 3072}, bad));  // v3 is full width
  GretChunkPlan v2 = plan_gret_chunk_v2({1, 24, 128, 32768, 3072}, 132);
  EXPECT_EQ(v2.kernel, 2);  // the default stays v2
  v2.kernel = 4;
  EXPECT_FALSE(gret_plan_valid({1, 24, 128, 32768, 3072}, v2));
  for (int64_t B : {1, 2, 3, 8})
    for (int64_t N : {1, 64, 4096, 1 << 20})
      for (int sms : {1, 16, 132}) {
        const GretChunkPlan q = plan_gret_chunk_v3({B, 24, 128, N, 3072}, sms);
        EXPECT_TRUE(gret_plan_valid({B, 24, 128, N, 3072}, q));
        EXPECT_LE(static_cast<int64_t>(q.segments) * 8, std::max<int64_t>(8, gret_num_chunks(N, 64)));
      }
  // Plan 4 (v3w16) is retired: no plan is valid with it.
  GretChunkPlan retired = plan_gret_chunk_v3({1, 24, 128, 32768, 3072}, 132);
  retired.kernel = 4;
  EXPECT_FALSE(gret_plan_valid({1, 24, 128, 32768, 3072}, retired));
  // coverage: every (batch, head, chunk) exactly once over the v3 grid (slices = 1)
  for (int64_t B : {1, 3})
    for (int64_t N : {1, 65, 4097, 32768 + 1}) {
      const int64_t H = 24, nc = gret_num_chunks(N, 64);
      const GretChunkPlan p = plan_gret_chunk_v3({B, H, 128, N, 3072}, 132);
      std::vector<int> cover(static_cast<size_t>(B * H * nc), 0);
      for (int64_t c = 0; c < gret_num_seg_ctas(B, H, p.segments, 1); ++c) {
        const GretSegCta t = gret_seg_cta(c, H, p.segments, 1);
        ASSERT_EQ(t.slice, 0);
        for (int64_t ch = gret_segment_begin(t.segment, nc, p.segments);
             ch < gret_segment_begin(t.segment + 1, nc, p.segments); ++ch)
          ++cover[static_cast<size_t>((t.batch * H + t.head) * nc + ch)];
      }
      for (int x : cover) ASSERT_EQ(x, 1) << B << " " << N;
    }
}

// v5: chunks of 128 / 256 tokens at head_dim 128, one CTA an SM.
TEST(GretPlan, V5PlanRunsOneCtaAnSmAtChunks128And256) {
  EXPECT_EQ(gret_v5_smem_bytes(128, 128), 197632);
  EXPECT_EQ(gret_v5_smem_bytes(128, 256), 230400);
  for (int C : {128, 256}) {
    EXPECT_LE(gret_v5_smem_bytes(128, C), 227 * 1024) << C;  // a block's limit
    EXPECT_GT(2 * (gret_v5_smem_bytes(128, C) + 1024), 228 * 1024) << C;  // so one CTA an SM
    for (int64_t N : {32768, 1048576}) {
      const GretChunkShape s{1, 24, 128, N, 3072};
      const GretChunkPlan p = plan_gret_chunk(s, 132, C), p5 = plan_gret_chunk_v5(s, 132, C);
      EXPECT_EQ(p.kernel, 5);
      EXPECT_EQ(p.chunk, C);
      EXPECT_EQ(p.slices, 1);
      EXPECT_EQ(p.slice_cols, 128);
      EXPECT_EQ(p.segments, 5) << C << " " << N;  // 120 CTAs on 132 SMs
      EXPECT_EQ(p.segments, p5.segments);
      EXPECT_TRUE(gret_plan_valid(s, p));
    }
    EXPECT_EQ(plan_gret_chunk({1, 24, 128, 900, 3072}, 132, C).segments, 1) << C;  // too short to cut
    EXPECT_EQ(plan_gret_chunk({8, 24, 128, 32768, 3072}, 132, C).segments, 1) << C;  // 192 CTAs already
    EXPECT_EQ(plan_gret_chunk({2, 16, 128, 16384, 2048}, 132, C).segments, 4) << C;
    for (int64_t B : {1, 2, 3, 8})
      for (int64_t N : {1, 64, 4096, 1 << 20})
        for (int sms : {1, 16, 132}) {
          const GretChunkPlan q = plan_gret_chunk({B, 24, 128, N, 3072}, sms, C);
          EXPECT_TRUE(gret_plan_valid({B, 24, 128, N, 3072}, q));
          EXPECT_LE(static_cast<int64_t>(q.segments) * 8, std::max<int64_t>(8, gret_num_chunks(N, C)));
        }
    // other head dims keep chunk 64 (the same function): v2's plan
    for (int64_t D : {64, 256}) {
      const GretChunkPlan q = plan_gret_chunk({1, 24, D, 32768, 24 * D}, 132, C);
      EXPECT_EQ(q.kernel, 2) << D;
      EXPECT_EQ(q.chunk, 64) << D;
    }
    GretChunkPlan bad = plan_gret_chunk({1, 24, 128, 32768, 3072}, 132, C);
    EXPECT_FALSE(gret_plan_valid({1, 24, 64, 32768, 1536}, bad));  // v5 is head_dim 128
    bad.slices = 4;
    bad.slice_cols = 32;
    EXPECT_FALSE(gret_plan_valid({1, 24, 128, 32768, 3072}, bad));  // and full width
  }
  GretChunkPlan odd = plan_gret_chunk({1, 24, 128, 32768, 3072}, 132, 128);
  odd.chunk = 64;  // chunk 64 is v2/v3's
  EXPECT_FALSE(gret_plan_valid({1, 24, 128, 32768, 3072}, odd));
  odd.chunk = 512;
  EXPECT_FALSE(gret_plan_valid({1, 24, 128, 32768, 3072}, odd));
  EXPECT_EQ(plan_gret_chunk({1, 24, 128, 32768, 3072}, 132, 512).chunk, 64);  // not compiled: chunk 64
}

// v6 (wgmma, head_dim 128, chunk 64): the shared-memory layout the kernel and
// the host agree on, the ring of stages, and the planner (one CTA an SM).
TEST(GretPlan, V6LayoutTilesAreAlignedDisjointAndFitOneCtaAnSm) {
  struct Region {
    int64_t begin, bytes;
  };
  std::vector<Region> regions = {{gret_v6_off_s(0), gret_v6_s_tile_bytes()}, {gret_v6_off_s(1), gret_v6_s_tile_bytes()}};
  for (int st = 0; st < kGretV6Stages; ++st) {
    for (int64_t off : {gret_v6_off_q(st), gret_v6_off_k(st), gret_v6_off_v(st)}) {
      EXPECT_EQ(off % 1024, 0) << "stage " << st;  // 128-byte swizzle atoms (and wgmma descriptors) need it
      regions.push_back({off, gret_v6_tile_bytes()});
    }
    EXPECT_EQ(gret_v6_off_lg(st) % 16, 0);
    regions.push_back({gret_v6_off_lg(st), 64 * 4});
  }
  EXPECT_EQ(gret_v6_off_o() % 1024, 0);
  regions.push_back({gret_v6_off_o(), gret_v6_tile_bytes()});
  EXPECT_EQ(gret_v6_off_s(0) % 1024, 0);
  EXPECT_EQ(gret_v6_off_s(1) % 1024, 0);
  std::sort(regions.begin(), regions.end(), [](const Region& x, const Region& y) { return x.begin < y.begin; });
  for (size_t i = 0; i + 1 < regions.size(); ++i)
    EXPECT_LE(regions[i].begin + regions[i].bytes, regions[i + 1].begin) << "regions " << i << " and " << i + 1;
  EXPECT_EQ(regions.back().begin + regions.back().bytes, gret_v6_smem_used());
  EXPECT_EQ(gret_v6_smem_used(), 230144);
  EXPECT_EQ(gret_v6_smem_bytes(), gret_v6_smem_used() + 1024);  // the base is rounded up to 1024 B
  EXPECT_LE(gret_v6_smem_bytes(), 227 * 1024);                   // a block's limit
  EXPECT_GT(2 * (gret_v6_smem_bytes() + 1024), 228 * 1024);      // so one CTA an SM
}

// The kernel's ring: at the i-th chunk the loads go to the stage of chunk
// i + kGretV6Stages - 1, which must be the stage chunk i-1 used (every reader
// passed the barrier) and never the one chunk i reads; the outputs read S^
// buffer i & 1 while the state warpgroups write the other, which chunk i+1 reads.
TEST(GretPlan, V6StageRingNeverLoadsIntoAStageInUse) {
  for (int64_t i = 0; i < 1000; ++i) {
    const int reading = gret_v6_stage(i), loading = gret_v6_stage(i + kGretV6Stages - 1);
    EXPECT_NE(loading, reading) << i;
    if (i > 0) {
      EXPECT_EQ(loading, gret_v6_stage(i - 1)) << i;
    }
    for (int64_t j = i + 1; j < i + kGretV6Stages; ++j) EXPECT_NE(gret_v6_stage(j), reading) << i << " " << j;
    EXPECT_NE(i & 1, (i & 1) ^ 1);
    EXPECT_EQ((i + 1) & 1, (i & 1) ^ 1);
  }
}

TEST(GretPlan, V6PlanRunsOneCtaAnSm) {
  for (int64_t N : {32768, 131072, 1048576}) {
    const GretChunkShape s{1, 24, 128, N, 3072};
    const GretChunkPlan p = plan_gret_chunk_v6(s, 132);
    EXPECT_EQ(p.kernel, 6);
    EXPECT_EQ(p.chunk, 64);
    EXPECT_EQ(p.slices, 1);
    EXPECT_EQ(p.slice_cols, 128);
    EXPECT_EQ(p.segments, 5) << N;  // 120 CTAs on 132 SMs
    EXPECT_TRUE(gret_plan_valid(s, p));
  }
  EXPECT_EQ(plan_gret_chunk_v6({1, 24, 128, 900, 3072}, 132).segments, 1);    // too short to cut
  EXPECT_EQ(plan_gret_chunk_v6({8, 24, 128, 32768, 3072}, 132).segments, 1);  // 192 CTAs already
  EXPECT_EQ(plan_gret_chunk_v6({2, 16, 128, 16384, 2048}, 132).segments, 4);
  for (int64_t B : {1, 2, 3, 8})
    for (int64_t N : {1, 64, 4096, 1 << 20})
      for (int sms : {1, 16, 132}) {
        const GretChunkPlan q = plan_gret_chunk_v6({B, 24, 128, N, 3072}, sms);
        EXPECT_TRUE(gret_plan_valid({B, 24, 128, N, 3072}, q));
        EXPECT_LE(static_cast<int64_t>(q.segments) * 8, std::max<int64_t>(8, gret_num_chunks(N, 64)));
      }
  // phase 1 on v3's state-only kernel (2 CTAs an SM) over finer segments: one wave
  for (int64_t N : {32768, 1048576}) {
    const GretChunkPlan p = plan_gret_chunk_v6({1, 24, 128, N, 3072}, 132);
    EXPECT_EQ(p.phase1_split, 2) << N;  // 24 x 4 x 2 = 192 CTAs <= 264 slots (96 without the split)
    EXPECT_LE(24 * (p.segments - 1) * p.phase1_split, 2 * 132);
    EXPECT_GT(24 * (p.segments - 1) * (p.phase1_split + 1), 2 * 132);
  }
  EXPECT_EQ(plan_gret_chunk_v6({1, 24, 128, 900, 3072}, 132).phase1_split, 1);   // one segment: no phase 1
  EXPECT_EQ(plan_gret_chunk_v6({1, 24, 128, 2560, 3072}, 132).phase1_split, 2);   // 40 chunks, P 5: 4 a segment
  EXPECT_EQ(plan_gret_chunk_v6({8, 24, 128, 32768, 3072}, 132).phase1_split, 1);  // one segment: no phase 1
  for (int64_t B : {1, 2, 3, 8})
    for (int64_t N : {64, 4096, 65536, 1 << 20})
      for (int sms : {16, 132, 264}) {
        const GretChunkPlan q = plan_gret_chunk_v6({B, 24, 128, N, 3072}, sms);
        EXPECT_GE(q.phase1_split, 1);
        EXPECT_LE(gret_ws_slots(q.segments, q.phase1_split), kGretMaxSegments);
        if (q.phase1_split > 1) {
          EXPECT_GE(gret_num_chunks(N, 64), 4 * q.segments * q.phase1_split) << B << " " << N;
        }
      }
  GretChunkPlan over = plan_gret_chunk_v6({1, 24, 128, 32768, 3072}, 132);
  over.phase1_split = kGretMaxSegments;  // Q P > 64 slots
  EXPECT_FALSE(gret_plan_valid({1, 24, 128, 32768, 3072}, over));
  over.phase1_split = 0;
  EXPECT_FALSE(gret_plan_valid({1, 24, 128, 32768, 3072}, over));
  // other head dims: the library's plan (v2)
  EXPECT_EQ(plan_gret_chunk_v6({1, 24, 64, 32768, 1536}, 132).kernel, 2);
  GretChunkPlan bad = plan_gret_chunk_v6({1, 24, 128, 32768, 3072}, 132);
  EXPECT_FALSE(gret_plan_valid({1, 24, 64, 32768, 1536}, bad));  // v6 is head_dim 128
  bad.chunk = 128;
  EXPECT_FALSE(gret_plan_valid({1, 24, 128, 32768, 3072}, bad));  // and chunk 64
  bad.chunk = 64;
  bad.slices = 4;
  bad.slice_cols = 32;
  EXPECT_FALSE(gret_plan_valid({1, 24, 128, 32768, 3072}, bad));  // and full width
}

// v7: v6's plan (the same shared memory, one CTA an SM) run by kernel 7, which refuses
// the fused norm and gate (an output warpgroup holds half a row); nothing else changes.
TEST(GretPlan, V7IsTheV6PlanOnKernel7WithoutTheFusedNormGate) {
  for (int64_t B : {1, 2, 8})
    for (int64_t N : {1, 900, 32768, 1 << 20}) {
      const GretChunkShape s{B, 24, 128, N, 3072};
      GretChunkPlan p6 = plan_gret_chunk_v6(s, 132), p7 = plan_gret_chunk_v7(s, 132);
      EXPECT_EQ(p7.kernel, 7) << B << " " << N;
      EXPECT_EQ(p7.segments, p6.segments);
      EXPECT_EQ(p7.phase1_split, p6.phase1_split);
      EXPECT_EQ(p7.chunk, 64);
      EXPECT_TRUE(gret_plan_valid(s, p7));
      p7.fuse_norm_gate = true;
      EXPECT_FALSE(gret_plan_valid(s, p7)) << "v7 cannot write the per-head norm: its output warpgroups split a row";
      EXPECT_FALSE(gret_chunk_fuses_norm_gate(p7));
      p6.fuse_norm_gate = true;
      EXPECT_TRUE(gret_plan_valid(s, p6));
    }
  // Head dims v6 does not serve: the library's plan, as v6's planner gives.
  EXPECT_EQ(plan_gret_chunk_v7({1, 24, 64, 4096, 1536}, 132).kernel, plan_gret_chunk_v6({1, 24, 64, 4096, 1536}, 132).kernel);
  EXPECT_NE(plan_gret_chunk_v7({1, 24, 64, 4096, 1536}, 132).kernel, 7);
  EXPECT_EQ(plan_gret_chunk({1, 24, 128, 32768, 3072}, 132).kernel, 6) << "v7 is a candidate, not the library's plan";
}

// Phase 1 on Q P finer segments: every boundary of the P segments is one of
// the Q P (segment p of P starts where segment Q p of Q P does), so phase 3's
// segment p can start from the scan's slot Q p.
TEST(GretPlan, FinerPhaseOneSegmentsShareEveryBoundary) {
  for (int64_t n : {0, 1, 7, 63, 64, 65, 511, 512, 513, 16384, 16385, 1 << 20})
    for (int64_t P = 1; P <= 16; ++P)
      for (int64_t Q = 1; Q * P <= kGretMaxSegments; ++Q)
        for (int64_t p = 0; p <= P; ++p)
          ASSERT_EQ(gret_segment_begin(Q * p, n, Q * P), gret_segment_begin(p, n, P))
              << "n " << n << " P " << P << " Q " << Q << " p " << p;
}

// The v5 output map: for each column half, the C/64 row blocks of the four
// warps of that half cover the C/16 row blocks once, with equal causal work.
TEST(GretPlan, V5RowBlocksCoverTheChunkWithEqualWork) {
  for (int C : {128, 256}) {
    const int units = C / 64, blocks = C / 16;
    for (int half = 0; half < 2; ++half) {
      std::vector<int> cover(static_cast<size_t>(blocks), 0);
      for (int w = half; w < 8; w += 2) {
        int work = 0;
        for (int u = 0; u < units; ++u) {
          const int rb = gret_v5_row_block(w, u);
          ASSERT_GE(rb, 0);
          ASSERT_LT(rb, blocks);
          ++cover[static_cast<size_t>(rb)];
          work += rb + 1;
        }
        EXPECT_EQ(work, units * (blocks + 1) / 2) << C << " warp " << w;
      }
      for (int x : cover) EXPECT_EQ(x, 1) << C << " half " << half;
    }
  }
}

// ---------------------------------------------------------------------------
// Emulation against the fp64 reference paradigms.

double rms_ratio(const Mat<double>& got, const Mat<double>& want) {
  return std::sqrt((got - want).squaredNorm() / std::max(want.squaredNorm(), 1e-300));
}

Mat<double> rand_bf16(int64_t r, int64_t c, uint64_t seed, double scale) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> nd(0.0, scale);
  Mat<double> m(r, c);
  for (int64_t i = 0; i < m.size(); ++i) m.data()[i] = round_to_bf16(static_cast<float>(nd(rng)));
  return m;
}

// tau <= 0: gamma = 1 exactly (log gamma = 0). Values are fp32, as the kernel reads them.
Vec<double> gates(int64_t n, double tau, uint64_t seed) {
  Vec<double> g(n);
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> nd(0.0, 1.0);
  for (int64_t i = 0; i < n; ++i) g(i) = tau <= 0 ? 0.0 : static_cast<float>(logsigmoid(nd(rng)) / tau);
  return g;
}

struct Inputs {
  Mat<double> q, k, v, s0;
  Vec<double> g;
};
Inputs make_inputs(int64_t n, int64_t D, double tau, uint64_t seed) {
  Inputs in;
  in.q = rand_bf16(n, D, seed, 1.0);
  in.k = rand_bf16(n, D, seed + 1, 1.0 / std::sqrt(double(D)));
  in.v = rand_bf16(n, D, seed + 2, 1.0);
  in.g = gates(n, tau, seed + 3);
  in.s0 = Mat<double>(D, D);
  const Mat<double> s = rand_bf16(D, D, seed + 4, 1.0);  // any fp32 values will do
  in.s0 = s;
  return in;
}

double output_rounding_error(const Mat<double>& exact) {
  Mat<double> r = exact;
  for (int64_t i = 0; i < r.size(); ++i) r.data()[i] = round_to_bf16(static_cast<float>(r.data()[i]));
  return rms_ratio(r, exact);
}

TEST(GretChunkEmulation, MatchesTheReferenceParadigms) {
  for (int64_t D : {64, 128})
    for (double tau : {0.1, 1.0, 16.0, 0.0})
      for (int64_t n : {1, 63, 64, 65, 300, 1000})
        for (bool with_state : {false, true}) {
          const Inputs in = make_inputs(n, D, tau, 1000 + n + D);
          const Mat<double>* s0 = with_state ? &in.s0 : nullptr;
          const GretResult<double> rec = gret_recurrent<double>(in.q, in.k, in.v, in.g, s0);
          const GretEmulation em = gret_chunk_emulate(in.q, in.k, in.v, in.g, s0);
          const double eo = rms_ratio(em.o, rec.o), es = rms_ratio(em.state, rec.state);
          const double round_o = output_rounding_error(rec.o);
          const auto tag = ::testing::Message() << "D " << D << " tau " << tau << " n " << n << " state " << with_state;
          // bf16 operands (A, K', S^) cost a few times the output rounding; the state is fp32 throughout.
          EXPECT_LE(eo, 8.0 * round_o + 1e-6) << tag << " o err " << eo << " output rounding " << round_o;
          EXPECT_LE(es, 1e-2) << tag << " state err " << es;
          EXPECT_TRUE(std::isfinite(eo) && std::isfinite(es)) << tag;
          if (n == 1000 && with_state)
            std::cout << "[emulation] D " << D << " tau " << tau << " n " << n << ": o err " << eo << " (output rounding "
                      << round_o << ", ratio " << eo / round_o << "), state err " << es << "\n";
          if (n <= 300 && D == 64) {  // the other two paradigms agree with the recurrence
            const GretResult<double> par = gret_parallel<double>(in.q, in.k, in.v, in.g, s0);
            const GretResult<double> chk = gret_chunkwise<double>(in.q, in.k, in.v, in.g, s0, 64);
            EXPECT_LE(rms_ratio(par.o, rec.o), 1e-10) << tag;
            EXPECT_LE(rms_ratio(chk.o, rec.o), 1e-10) << tag;
            EXPECT_LE(rms_ratio(em.o, chk.o), 8.0 * round_o + 1e-6) << tag;
          }
        }
}

TEST(GretChunkEmulation, SplitLaunchesCarryTheState) {
  // 1000 + 3097 tokens in two launches equal 4097 in one, within rounding of
  // the bf16 state copy at the split (the state itself is carried in fp32).
  const int64_t D = 64, n1 = 1000, n2 = 3097, n = n1 + n2;
  const Inputs in = make_inputs(n, D, 16.0, 77);
  const GretEmulation whole = gret_chunk_emulate(in.q, in.k, in.v, in.g, &in.s0);
  const GretResult<double> rec = gret_recurrent<double>(in.q, in.k, in.v, in.g, &in.s0);
  const GretEmulation a = gret_chunk_emulate(in.q.topRows(n1), in.k.topRows(n1), in.v.topRows(n1), in.g.head(n1), &in.s0);
  const GretEmulation b = gret_chunk_emulate(in.q.bottomRows(n2), in.k.bottomRows(n2), in.v.bottomRows(n2),
                                             in.g.tail(n2), &a.state);
  Mat<double> split(n, D);
  split << a.o, b.o;
  const double round_o = output_rounding_error(rec.o);
  EXPECT_LE(rms_ratio(split, rec.o), 8.0 * round_o);
  EXPECT_LE(rms_ratio(split, whole.o), 8.0 * round_o);
  // chunk edges move with the split, so the bf16 K' roundings differ: compare both with the exact state
  const double ew = rms_ratio(whole.state, rec.state), es = rms_ratio(b.state, rec.state);
  EXPECT_LE(es, 2.0 * ew + 1e-6) << "split " << es << " whole " << ew;
}

TEST(GretChunkEmulation, SegmentsEqualOneSegment) {
  // the segmented algorithm (phase 1 local states, fp32 scan, phase 3) against
  // the recurrence and the unsegmented emulation, at lengths not a multiple of P*64
  for (double tau : {0.1, 16.0, 0.0})
    for (int64_t n : {65, 1000, 4097})
      for (int P : {2, 3, 7}) {
        const int64_t D = 64;
        const Inputs in = make_inputs(n, D, tau, 500 + n + P);
        const GretResult<double> rec = gret_recurrent<double>(in.q, in.k, in.v, in.g, &in.s0);
        const GretEmulation whole = gret_chunk_emulate(in.q, in.k, in.v, in.g, &in.s0);
        const GretEmulation seg = gret_chunk_emulate_segmented(in.q, in.k, in.v, in.g, &in.s0, P);
        const double round_o = output_rounding_error(rec.o);
        const auto tag = ::testing::Message() << "tau " << tau << " n " << n << " P " << P;
        EXPECT_LE(rms_ratio(seg.o, rec.o), 8.0 * round_o + 1e-6) << tag;
        EXPECT_LE(rms_ratio(seg.o, whole.o), 8.0 * round_o + 1e-6) << tag;
        const double ew = rms_ratio(whole.state, rec.state), es = rms_ratio(seg.state, rec.state);
        EXPECT_LE(es, 2.0 * ew + 1e-6) << tag << " seg " << es << " whole " << ew;
      }
}

// Chunks of 128 / 256 (v5): the same error class as chunk 64 against the
// recurrence, one launch or segments, and equal to the chunk-64 emulation
// within that bound (the function does not depend on the chunk, DESIGN §3).
TEST(GretChunkEmulation, LongChunksMatchTheReference) {
  const int64_t D = 128;
  for (int C : {128, 256})
    for (double tau : {0.1, 16.0, 0.0})
      for (int64_t n : {int64_t{1}, int64_t{63}, int64_t{C - 1}, int64_t{C}, int64_t{C + 1}, int64_t{1000}})
        for (bool with_state : {false, true}) {
          const Inputs in = make_inputs(n, D, tau, 2000 + n + C);
          const Mat<double>* s0 = with_state ? &in.s0 : nullptr;
          const GretResult<double> rec = gret_recurrent<double>(in.q, in.k, in.v, in.g, s0);
          const GretEmulation em = gret_chunk_emulate(in.q, in.k, in.v, in.g, s0, C);
          const GretEmulation em64 = gret_chunk_emulate(in.q, in.k, in.v, in.g, s0, 64);
          const double round_o = output_rounding_error(rec.o);
          const auto tag = ::testing::Message() << "C " << C << " tau " << tau << " n " << n << " state " << with_state;
          EXPECT_LE(rms_ratio(em.o, rec.o), 8.0 * round_o + 1e-6) << tag;
          EXPECT_LE(rms_ratio(em.o, em64.o), 8.0 * round_o + 1e-6) << tag;
          EXPECT_LE(rms_ratio(em.state, rec.state), 1e-2) << tag;
          const GretResult<double> chk = gret_chunkwise<double>(in.q, in.k, in.v, in.g, s0, C);
          EXPECT_LE(rms_ratio(chk.o, rec.o), 1e-10) << tag;
        }
  for (int C : {128, 256})
    for (int P : {2, 3, 7}) {
      const Inputs in = make_inputs(4097, D, 16.0, 700 + P + C);
      const GretResult<double> rec = gret_recurrent<double>(in.q, in.k, in.v, in.g, &in.s0);
      const GretEmulation whole = gret_chunk_emulate(in.q, in.k, in.v, in.g, &in.s0, C);
      const GretEmulation seg = gret_chunk_emulate_segmented(in.q, in.k, in.v, in.g, &in.s0, P, C);
      const double round_o = output_rounding_error(rec.o);
      EXPECT_LE(rms_ratio(seg.o, rec.o), 8.0 * round_o + 1e-6) << C << " P " << P;
      const double ew = rms_ratio(whole.state, rec.state), es = rms_ratio(seg.state, rec.state);
      EXPECT_LE(es, 2.0 * ew + 1e-6) << C << " P " << P;
    }
}

TEST(GretChunkEmulation, ScanMatchesASerialCumsum) {
  std::mt19937_64 rng(5);
  std::normal_distribution<double> nd(0.0, 1.0);
  float lg[64], G[64];
  for (float& x : lg) x = static_cast<float>(logsigmoid(nd(rng)) / 0.1);
  gret_emulate_chunk_scan(lg, G);
  double acc = 0;
  for (int i = 0; i < 64; ++i) {
    acc += lg[i];
    EXPECT_NEAR(G[i], acc, 1e-5 * std::abs(acc) + 1e-6);
  }
}

TEST(GretChunkEmulation, LongChunkScanIsSubTileScansPlusACarry) {
  std::mt19937_64 rng(6);
  std::normal_distribution<double> nd(0.0, 1.0);
  for (int C : {64, 128, 256}) {
    std::vector<float> lg(static_cast<size_t>(C)), G(static_cast<size_t>(C));
    for (float& x : lg) x = static_cast<float>(logsigmoid(nd(rng)) / 0.1);
    gret_emulate_chunk_scan(lg.data(), G.data(), C);
    double acc = 0;
    for (int i = 0; i < C; ++i) {
      acc += lg[static_cast<size_t>(i)];
      EXPECT_NEAR(G[static_cast<size_t>(i)], acc, 1e-5 * std::abs(acc) + 1e-6) << C << " " << i;
    }
    float G64[64];
    gret_emulate_chunk_scan(lg.data(), G64);  // the first sub-tile is the 64-token scan, bit for bit
    for (int i = 0; i < 64; ++i) EXPECT_EQ(G[static_cast<size_t>(i)], G64[i]) << C << " " << i;
  }
}

TEST(GretPlan, TheLibraryPlannerPicksV6AtHeadDim128AndV2Elsewhere) {
  const GretChunkShape d128{1, 24, 128, 32768, 3072}, d64{1, 24, 64, 32768, 1536}, d256{1, 16, 256, 32768, 4096};
  const GretChunkPlan a = plan_gret_chunk(d128, 132), a6 = plan_gret_chunk_v6(d128, 132);
  EXPECT_EQ(a.kernel, 6);
  EXPECT_EQ(a.segments, a6.segments);
  EXPECT_EQ(a.phase1_split, a6.phase1_split);
  EXPECT_EQ(a.slice_cols, 128);
  for (const GretChunkShape& s : {d64, d256}) {
    const GretChunkPlan b = plan_gret_chunk(s, 132), b2 = plan_gret_chunk_v2(s, 132);
    EXPECT_EQ(b.kernel, 2) << s.head_dim;
    EXPECT_EQ(b.slice_cols, b2.slice_cols) << s.head_dim;
    EXPECT_EQ(b.segments, b2.segments) << s.head_dim;
  }
}

}  // namespace
}  // namespace yoco::cuda
