// Ring attention's pieces on the GPU (baselines/transformer_ring.cpp's
// context-parallel prefill): flash prefill v1 over a block of keys that wholly
// precedes its queries (q_start + q_len past the buffer's rows: positions at
// or past `capacity` hold no key), the merge of partials
// (cuda/attention/attention_merge.cu), and the two together: a query chunk's
// attention assembled block by block in ring order equals one-shot prefill
// attention over the whole prefix, against the fp64 CPU reference
// (reference/ops.hpp attention) within the DESIGN.md §6 bound.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "attention/attention_merge.hpp"
#include "attention/flash_prefill.hpp"
#include "attention/ring_plan.hpp"
#include "device_test_data.hpp"
#include "gpu_test_support.hpp"
#include "ops.hpp"

namespace yoco::cuda {
namespace {

using namespace yoco::cuda_test;
using bf16 = __nv_bfloat16;

struct Geometry {
  int64_t B, H, Hkv, D;
};

PrefillAttentionShape shape(const Geometry& g, int64_t q_rows, int64_t capacity) {
  PrefillAttentionShape s;
  s.batch = g.B;
  s.n_heads = g.H;
  s.n_kv_heads = g.Hkv;
  s.head_dim = g.D;
  s.q_rows = q_rows;
  s.capacity = capacity;
  s.q_stride = g.H * g.D;
  s.kv_stride = g.Hkv * g.D;
  s.scale = 1.0f / std::sqrt(static_cast<float>(g.D));
  return s;
}

// Rows [r0, r0 + n) of every sequence of a [B, rows, width] host tensor, as [B, n, width].
std::vector<float> rows_of(const std::vector<float>& t, int64_t B, int64_t rows, int64_t width, int64_t r0,
                           int64_t n) {
  std::vector<float> out;
  for (int64_t b = 0; b < B; ++b)
    out.insert(out.end(), t.begin() + (b * rows + r0) * width, t.begin() + (b * rows + r0 + n) * width);
  return out;
}

Mat<double> dense(const std::vector<float>& t, int64_t row0, int64_t rows, int64_t width) {
  Mat<double> m(rows, width);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t x = 0; x < width; ++x) m(r, x) = t[static_cast<size_t>((row0 + r) * width + x)];
  return m;
}

// The fp64 reference of queries [B, n] at positions q0.. over keys [B, m] at positions k0..
std::vector<double> reference(const Geometry& g, const std::vector<float>& q, const std::vector<float>& k,
                              const std::vector<float>& v, int64_t n, int64_t m, int64_t q0, int64_t k0) {
  std::vector<double> want;
  const double scale = static_cast<double>(1.0f / std::sqrt(static_cast<float>(g.D)));
  for (int64_t b = 0; b < g.B; ++b) {
    const Mat<double> o = attention<double>(dense(q, b * n, n, g.H * g.D), dense(k, b * m, m, g.Hkv * g.D),
                                            dense(v, b * m, m, g.Hkv * g.D), g.H, g.Hkv, g.D, q0, k0, 0, scale);
    for (int64_t i = 0; i < n; ++i)
      for (int64_t x = 0; x < g.H * g.D; ++x) want.push_back(o(i, x));
  }
  return want;
}

// v1 with every query after the block: each sees all `cap` keys, nothing past them (the
// buffer holds exactly cap rows a sequence, so a read past them takes the next sequence's
// rows, or leaves the allocation: compute-sanitizer's memcheck).
TEST(RingAttention, V1SeesEveryKeyOfABlockBeforeItsQueries) {
  YOCO_REQUIRE_GPU();
  for (const Geometry g : {Geometry{2, 4, 2, 64}, Geometry{2, 8, 2, 128}, Geometry{1, 2, 1, 256}})
    for (int64_t cap : {1, 63, 64, 200})
      for (int64_t n : {1, 130})
        for (int64_t gap : {0, 5, 1000}) {
          const int64_t q0 = cap + gap;  // the queries' position relative to the block's first key
          const std::vector<float> q = random_bf16_values(static_cast<size_t>(g.B * n * g.H * g.D), 11 + cap);
          const std::vector<float> k = random_bf16_values(static_cast<size_t>(g.B * cap * g.Hkv * g.D), 12 + n);
          const std::vector<float> v = random_bf16_values(static_cast<size_t>(g.B * cap * g.Hkv * g.D), 13 + gap);
          DeviceArray<bf16> dq(q.size()), dk(k.size()), dv(v.size()), dout(static_cast<size_t>(g.B * n * g.H * g.D));
          DeviceArray<float> dlse(static_cast<size_t>(g.B * g.H * n));
          DeviceArray<int64_t> dstart(static_cast<size_t>(g.B)), dlen(static_cast<size_t>(g.B));
          upload_bf16(dq, q);
          upload_bf16(dk, k);
          upload_bf16(dv, v);
          upload(dstart, std::vector<int64_t>(static_cast<size_t>(g.B), q0));
          upload(dlen, std::vector<int64_t>(static_cast<size_t>(g.B), n));
          ASSERT_EQ(launch_flash_prefill_v1(dq.ptr, dk.ptr, dv.ptr, dstart.ptr, dlen.ptr, shape(g, n, cap), dout.ptr,
                                            dlse.ptr, nullptr),
                    cudaSuccess);
          ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
          const std::vector<double> want = reference(g, q, k, v, n, cap, q0, 0);
          const std::vector<float> got = download_bf16(dout);
          EXPECT_LE(rms_error(got, want), bf16_output_bound(want))
              << "D " << g.D << " cap " << cap << " n " << n << " q_start " << q0;
          for (float x : download(dlse)) EXPECT_TRUE(std::isfinite(x)) << "D " << g.D << " cap " << cap;
        }
}

// The merge against the host formula on random partials: first overwrites,
// the next merges, out is the merged output rounded once.
TEST(RingAttention, MergeEqualsTheLogSumExpCombine) {
  YOCO_REQUIRE_GPU();
  const int64_t B = 2, n = 37, H = 3, D = 128, W = H * D, rows = B * n;
  const std::vector<float> oa = random_bf16_values(static_cast<size_t>(rows * W), 1);
  const std::vector<float> ob = random_bf16_values(static_cast<size_t>(rows * W), 2);
  std::vector<float> la = random_bf16_values(static_cast<size_t>(B * H * n), 3, 5.0f);
  std::vector<float> lb = random_bf16_values(static_cast<size_t>(B * H * n), 4, 5.0f);
  la[0] = -INFINITY;  // a side without keys
  DeviceArray<bf16> da(oa.size()), db(ob.size()), dout(oa.size());
  DeviceArray<float> dla(la.size()), dlb(lb.size()), acc(oa.size()), acc_lse(la.size());
  upload_bf16(da, oa);
  upload_bf16(db, ob);
  upload(dla, la);
  upload(dlb, lb);
  ASSERT_EQ(launch_attention_merge(da.ptr, dla.ptr, B, n, H, D, true, acc.ptr, acc_lse.ptr, nullptr, nullptr),
            cudaSuccess);
  ASSERT_EQ(launch_attention_merge(db.ptr, dlb.ptr, B, n, H, D, false, acc.ptr, acc_lse.ptr, dout.ptr, nullptr),
            cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const std::vector<float> got = download(acc), got_lse = download(acc_lse), got_out = download_bf16(dout);
  double worst = 0, worst_lse = 0;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t h = 0; h < H; ++h) {
      const int64_t b = r / n, i = r % n, li = (b * H + h) * n + i;
      const double a = la[li], c = lb[li], m = std::max(a, c);
      const double wa = std::exp(a - m), wb = std::exp(c - m), lse = m + std::log(wa + wb);
      worst_lse = std::max(worst_lse, std::abs(got_lse[li] - lse));
      for (int64_t e = 0; e < D; ++e) {
        const size_t x = static_cast<size_t>(r * W + h * D + e);
        const double want = (wa * oa[x] + wb * ob[x]) / (wa + wb);
        worst = std::max(worst, std::abs(got[x] - want));
        EXPECT_EQ(got_out[x], round_to_bf16(got[x]));
      }
    }
  EXPECT_LE(worst, 1e-5);
  EXPECT_LE(worst_lse, 1e-5);
  EXPECT_EQ(launch_attention_merge(da.ptr, dla.ptr, B, n, H, 6, true, acc.ptr, acc_lse.ptr, nullptr, nullptr),
            cudaErrorInvalidValue);  // head_dim not a multiple of 4
  EXPECT_EQ(launch_attention_merge(da.ptr, dla.ptr, B, n, H, D, true, acc.ptr + 1, acc_lse.ptr, nullptr, nullptr),
            cudaErrorInvalidValue);  // a running output off its 16-byte alignment
}

// A query chunk's attention built as the ring builds it -- its own chunk on
// the diagonal (the dispatcher: v3 where it serves), every earlier chunk
// wholly visible (v1, its keys in a buffer of their own), merged in ring
// order -- equals the fp64 attention over the whole prefix.
TEST(RingAttention, BlocksMergedInRingOrderEqualOneShotAttention) {
  YOCO_REQUIRE_GPU();
  for (const Geometry g : {Geometry{2, 8, 2, 128}, Geometry{1, 4, 4, 64}}) {
    const std::vector<int64_t> bounds = {0, 90, 200, 333, 400, 517};  // 5 uneven chunks
    const int64_t N = bounds.back(), kw = g.Hkv * g.D, qw = g.H * g.D;
    const std::vector<float> q = random_bf16_values(static_cast<size_t>(g.B * N * qw), 21);
    const std::vector<float> k = random_bf16_values(static_cast<size_t>(g.B * N * kw), 22);
    const std::vector<float> v = random_bf16_values(static_cast<size_t>(g.B * N * kw), 23);
    for (int qc : {0, 2, 4}) {
      const int64_t bq = bounds[qc], nq = bounds[qc + 1] - bq;
      const std::vector<float> qs = rows_of(q, g.B, N, qw, bq, nq);
      DeviceArray<bf16> dq(qs.size()), part(qs.size()), out(qs.size());
      DeviceArray<float> lse(static_cast<size_t>(g.B * g.H * nq)), acc(qs.size()), acc_lse(lse.n);
      DeviceArray<int64_t> dstart(static_cast<size_t>(g.B)), dlen(static_cast<size_t>(g.B));
      upload_bf16(dq, qs);
      upload(dlen, std::vector<int64_t>(static_cast<size_t>(g.B), nq));
      // Ring order as rank 0 meets it: its own chunk first, then the others from the highest.
      std::vector<int> order = {qc};
      for (int c = qc - 1; c >= 0; --c) order.push_back(c);
      bool first = true;
      for (int c : order) {
        const int64_t bc = bounds[c], nc = bounds[c + 1] - bc;
        const std::vector<float> kc = rows_of(k, g.B, N, kw, bc, nc), vc = rows_of(v, g.B, N, kw, bc, nc);
        DeviceArray<bf16> dk(kc.size()), dv(vc.size());
        upload_bf16(dk, kc);
        upload_bf16(dv, vc);
        const ring::Block kind = ring::block_kind(qc, c);
        upload(dstart, std::vector<int64_t>(static_cast<size_t>(g.B), ring::relative_q_start(bq, bc)));
        const PrefillAttentionShape s = shape(g, nq, nc);
        const cudaError_t err =
            kind == ring::Block::diagonal
                ? launch_flash_prefill(dq.ptr, dk.ptr, dv.ptr, dstart.ptr, dlen.ptr, s, part.ptr, lse.ptr, nullptr)
                : launch_flash_prefill_v1(dq.ptr, dk.ptr, dv.ptr, dstart.ptr, dlen.ptr, s, part.ptr, lse.ptr, nullptr);
        ASSERT_EQ(err, cudaSuccess);
        ASSERT_EQ(launch_attention_merge(part.ptr, lse.ptr, g.B, nq, g.H, g.D, first, acc.ptr, acc_lse.ptr, out.ptr,
                                         nullptr),
                  cudaSuccess);
        ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);  // the block's buffers go out of scope
        first = false;
      }
      const std::vector<double> want =
          reference(g, qs, rows_of(k, g.B, N, kw, 0, bq + nq), rows_of(v, g.B, N, kw, 0, bq + nq), nq, bq + nq, bq, 0);
      EXPECT_LE(rms_error(download_bf16(out), want), bf16_output_bound(want)) << "D " << g.D << " chunk " << qc;
    }
  }
}

}  // namespace
}  // namespace yoco::cuda
