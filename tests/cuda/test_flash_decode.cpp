// FlashDecoding against the reference attention with one query per sequence
// (KERNELS.md §2, §5 rows 5, 6, 7, 9):
// - any split count (1, 2, 3, 7, 33, 128: more splits than KV tiles included)
//   equals the fp64 reference: N = 1, lengths at and around tile edges, GQA
//   groups 1, 2, 3, 8 (24/8, 8/1, 4/2), head dims 64, 128, 256, batch 8 with
//   eight different lengths, a trailing window of a linear cache;
// - rows inside a wider buffer (kv_stride), with the gaps holding other data;
// - ring mode over 3W steps against the sliding-window reference at every step
//   (t = W-1, W, 2W-1, 2W among them), two sequences at different lengths;
// - 128K keys (batch 1, 8 KV heads, 24 heads, D 128) against the fp64 reference
//   on that one query, for the chosen split count, 1 split and 128;
// - large scores (q scaled so that scores reach about +-100): without the max
//   subtraction exp overflows and the test fails;
// - a cache of more than 2^31 elements (batch 2 x 1,048,580 keys x 8 x 128),
//   the second sequence wholly past the 2^31 mark, against the GPU oracle;
// - the split choice on 132 SMs and the launcher's argument checks (no GPU needed).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "attention/attention_oracle.hpp"
#include "device/device_fill.hpp"
#include "device_test_data.hpp"
#include "dtype.hpp"
#include "attention/flash_decode.hpp"
#include "gpu_test_support.hpp"
#include "ops.hpp"

namespace yoco::cuda {
namespace {

using namespace yoco::cuda_test;

// Runs the kernel on host data (already bf16 values) and returns [batch, H·Da] as floats.
std::vector<float> run(const DecodeAttentionShape& s, const std::vector<int64_t>& lengths,
                       const std::vector<float>& q, const std::vector<float>& k, const std::vector<float>& v,
                       int splits) {
  DeviceArray<__nv_bfloat16> dq(q.size()), dk(k.size()), dv(v.size()), out(static_cast<size_t>(s.batch * s.n_heads * s.head_dim));
  DeviceArray<int64_t> dl(lengths.size());
  DeviceArray<float> ws(static_cast<size_t>(decode_workspace_floats(s, splits)));
  upload_bf16(dq, q);
  upload_bf16(dk, k);
  upload_bf16(dv, v);
  upload(dl, lengths);
  EXPECT_EQ(launch_flash_decode(dq.ptr, dk.ptr, dv.ptr, dl.ptr, s, splits, ws.ptr, out.ptr, nullptr), cudaSuccess);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  return download_bf16(out);
}

// The fp64 reference for sequence b of a dense [B, cap, Hkv·Da] cache: the query at
// position len - 1 over rows [0, len) (window: the last `window` of them).
std::vector<double> reference(const std::vector<float>& q, const std::vector<float>& k, const std::vector<float>& v,
                              int64_t H, int64_t Hkv, int64_t Da, int64_t cap, int64_t b, int64_t len,
                              int64_t window) {
  const int64_t qw = H * Da, kvw = Hkv * Da;
  const Mat<double> qb = to_mat(std::vector<float>(q.begin() + b * qw, q.begin() + (b + 1) * qw), 1, qw);
  const Mat<double> kb =
      to_mat(std::vector<float>(k.begin() + b * cap * kvw, k.begin() + (b * cap + len) * kvw), len, kvw);
  const Mat<double> vb =
      to_mat(std::vector<float>(v.begin() + b * cap * kvw, v.begin() + (b * cap + len) * kvw), len, kvw);
  const Mat<double> o = attention<double>(qb, kb, vb, H, Hkv, Da, len - 1, 0, window, 1.0 / std::sqrt(double(Da)));
  std::vector<double> out(static_cast<size_t>(qw));
  for (int64_t i = 0; i < qw; ++i) out[static_cast<size_t>(i)] = o(0, i);
  return out;
}

struct Case {
  int64_t H, Hkv, Da, window;
  std::vector<int64_t> lengths;
};

TEST(FlashDecode, AnySplitCountEqualsTheReference) {
  YOCO_REQUIRE_GPU();
  const std::vector<Case> cases = {
      {4, 4, 64, 0, {1}},                                       // N = 1
      {24, 8, 128, 0, {255, 256, 257}},                         // around tile edges
      {8, 1, 128, 0, {1000}},                                   // GQA 8/1
      {16, 2, 256, 0, {300, 7}},                                // D 256
      {6, 2, 128, 64, {500, 63, 64}},                           // trailing window
      {24, 8, 128, 0, {4096}},                                  // 24/8
      {8, 1, 64, 0, {777}},                                     // GQA 8, D 64
      {4, 2, 64, 0, {130, 1}},                                  // the tiny config: h -> h / 2
      {24, 8, 128, 0, {1, 63, 64, 65, 700, 1025, 2048, 3001}},  // batch 8, different lengths
  };
  uint64_t seed = 11;
  for (const Case& c : cases) {
    const int64_t B = static_cast<int64_t>(c.lengths.size());
    const int64_t cap = *std::max_element(c.lengths.begin(), c.lengths.end()) + 3;
    const int64_t qw = c.H * c.Da, kvw = c.Hkv * c.Da;
    const auto q = random_bf16_values(static_cast<size_t>(B * qw), seed++),
               k = random_bf16_values(static_cast<size_t>(B * cap * kvw), seed++),
               v = random_bf16_values(static_cast<size_t>(B * cap * kvw), seed++);
    std::vector<double> want;
    for (int64_t b = 0; b < B; ++b) {
      const auto o = reference(q, k, v, c.H, c.Hkv, c.Da, cap, b, c.lengths[static_cast<size_t>(b)], c.window);
      want.insert(want.end(), o.begin(), o.end());
    }
    DecodeAttentionShape s{B, c.H, c.Hkv, c.Da, cap, c.window, 1.0f / std::sqrt(static_cast<float>(c.Da))};
    const int chosen = choose_decode_splits(s, cap, 132);
    for (int splits : {1, 2, 3, 7, 33, 128, chosen}) {
      const auto got = run(s, c.lengths, q, k, v, splits);
      EXPECT_LE(rms_error(got, want), bf16_output_bound(want))
          << "H " << c.H << " Hkv " << c.Hkv << " Da " << c.Da << " window " << c.window << " B " << B
          << " splits " << splits;
    }
  }
}

TEST(FlashDecode, StridedRowsReadOnlyTheirHeads) {
  YOCO_REQUIRE_GPU();
  const int64_t H = 6, Hkv = 2, Da = 128, B = 2, cap = 300, stride = Hkv * Da + 64;  // rows 640 B apart, gaps random
  const std::vector<int64_t> lengths = {300, 129};
  const auto q = random_bf16_values(static_cast<size_t>(B * H * Da), 21);
  const auto k = random_bf16_values(static_cast<size_t>(B * cap * stride), 22);
  const auto v = random_bf16_values(static_cast<size_t>(B * cap * stride), 23);
  // The same cache packed densely, for the reference.
  std::vector<float> kd(static_cast<size_t>(B * cap * Hkv * Da)), vd(kd.size());
  for (int64_t r = 0; r < B * cap; ++r)
    for (int64_t i = 0; i < Hkv * Da; ++i) {
      kd[static_cast<size_t>(r * Hkv * Da + i)] = k[static_cast<size_t>(r * stride + i)];
      vd[static_cast<size_t>(r * Hkv * Da + i)] = v[static_cast<size_t>(r * stride + i)];
    }
  std::vector<double> want;
  for (int64_t b = 0; b < B; ++b) {
    const auto o = reference(q, kd, vd, H, Hkv, Da, cap, b, lengths[static_cast<size_t>(b)], 0);
    want.insert(want.end(), o.begin(), o.end());
  }
  DecodeAttentionShape s{B, H, Hkv, Da, cap, 0, 1.0f / std::sqrt(static_cast<float>(Da))};
  s.kv_stride = stride;
  for (int splits : {1, 3}) {
    const auto got = run(s, lengths, q, k, v, splits);
    EXPECT_LE(rms_error(got, want), bf16_output_bound(want)) << "splits " << splits;
  }
}

// Ring mode (SWA decode): two sequences, the second 37 tokens ahead; at step t
// sequence b has seen len = t + 1 + 37·b tokens, the ring holds position p in
// slot p mod W, and the query must equal sliding-window attention over the
// last W positions of the linear sequence.
void ring_every_step(int64_t H, int64_t Hkv, int64_t Da, int64_t W) {
  const int64_t B = 2, ahead = 37, steps = 3 * W, total = steps + ahead;
  const int64_t qw = H * Da, kvw = Hkv * Da;
  const auto kseq = random_bf16_values(static_cast<size_t>(B * total * kvw), 31 + W);  // [B, total, kvw] linear
  const auto vseq = random_bf16_values(static_cast<size_t>(B * total * kvw), 32 + W);
  const auto qall = random_bf16_values(static_cast<size_t>(steps * B * qw), 33 + W);  // a fresh query per step
  DecodeAttentionShape s{B, H, Hkv, Da, W, W, 1.0f / std::sqrt(static_cast<float>(Da))};
  s.ring = true;
  DeviceArray<__nv_bfloat16> dq(static_cast<size_t>(B * qw)), dk(static_cast<size_t>(B * W * kvw)),
      dv(static_cast<size_t>(B * W * kvw)), out(static_cast<size_t>(B * qw));
  DeviceArray<int64_t> dl(B);
  DeviceArray<float> ws(static_cast<size_t>(decode_workspace_floats(s, 8)));
  std::vector<float> kring(static_cast<size_t>(B * W * kvw), 0.0f), vring(kring.size(), 0.0f);
  const std::vector<int64_t> must_pass = {W - 1, W, 2 * W - 1, 2 * W};
  int failures = 0;
  for (int64_t t = 0; t < steps; ++t) {
    std::vector<int64_t> lengths(B);
    std::vector<double> want;
    for (int64_t b = 0; b < B; ++b) {
      const int64_t len = t + 1 + ahead * b;
      lengths[static_cast<size_t>(b)] = len;
      // Step t writes the newest token into its slot (for the second sequence, the ring
      // is rebuilt from its last W positions; slots of older tokens are simply overwritten).
      for (int64_t p = std::max<int64_t>(0, len - W); p < len; ++p)
        for (int64_t i = 0; i < kvw; ++i) {
          kring[static_cast<size_t>((b * W + p % W) * kvw + i)] = kseq[static_cast<size_t>((b * total + p) * kvw + i)];
          vring[static_cast<size_t>((b * W + p % W) * kvw + i)] = vseq[static_cast<size_t>((b * total + p) * kvw + i)];
        }
      const std::vector<float> qb(qall.begin() + (t * B + b) * qw, qall.begin() + (t * B + b + 1) * qw);
      const auto o = reference(qb, std::vector<float>(kseq.begin() + b * total * kvw, kseq.begin() + (b + 1) * total * kvw),
                               std::vector<float>(vseq.begin() + b * total * kvw, vseq.begin() + (b + 1) * total * kvw),
                               H, Hkv, Da, total, 0, len, W);
      want.insert(want.end(), o.begin(), o.end());
    }
    upload_bf16(dq, std::vector<float>(qall.begin() + t * B * qw, qall.begin() + (t + 1) * B * qw));
    upload_bf16(dk, kring);
    upload_bf16(dv, vring);
    upload(dl, lengths);
    ASSERT_EQ(cudaMemset(out.ptr, 0xff, out.n * 2), cudaSuccess);  // re-poison every step
    const int splits = 1 + static_cast<int>(t % 8);                 // 1 .. 8, more than the tiles at short t
    ASSERT_EQ(launch_flash_decode(dq.ptr, dk.ptr, dv.ptr, dl.ptr, s, splits, ws.ptr, out.ptr, nullptr), cudaSuccess);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    const auto got = download_bf16(out);
    const double err = rms_error(got, want), bound = bf16_output_bound(want);
    const bool key_step = std::find(must_pass.begin(), must_pass.end(), t) != must_pass.end();
    if (!(err <= bound)) {
      ++failures;
      ADD_FAILURE() << "ring W " << W << " H " << H << " Hkv " << Hkv << " Da " << Da << " step t " << t
                    << (key_step ? " (edge step)" : "") << " splits " << splits << ": error " << err << " bound "
                    << bound;
      if (failures > 5) return;
    }
  }
}

TEST(FlashDecode, RingModeEqualsSlidingWindowAtEveryStep) {
  YOCO_REQUIRE_GPU();
  ring_every_step(4, 4, 128, 100);  // no GQA, W not a tile multiple
  ring_every_step(6, 2, 64, 64);    // GQA 3, W one tile
}

// 128K keys, one query: the chosen split count, 1 split and 128 against fp64.
TEST(FlashDecode, LongCacheAgainstTheReference) {
  YOCO_REQUIRE_GPU();
  const int64_t H = 24, Hkv = 8, Da = 128, N = 131072;
  const int64_t kvw = Hkv * Da;
  // Fast random bf16 bits (splitmix64), values in [-2, 2): 2 x 268 MB, never all zeros.
  auto fill = [](std::vector<uint16_t>& bits, uint64_t seed) {
    uint64_t x = seed;
    for (size_t i = 0; i < bits.size(); i += 4) {
      x += 0x9e3779b97f4a7c15ull;
      uint64_t z = x;
      z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
      z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
      z ^= z >> 31;
      for (size_t j = 0; j < 4 && i + j < bits.size(); ++j)
        bits[i + j] = float_to_bf16_bits(static_cast<float>(static_cast<int16_t>(z >> (16 * j))) / 16384.0f);
    }
  };
  std::vector<uint16_t> kb(static_cast<size_t>(N * kvw)), vb(kb.size());
  fill(kb, 41);
  fill(vb, 42);
  const auto q = random_bf16_values(static_cast<size_t>(H * Da), 43);
  // fp64 reference, head by head.
  const double scale = 1.0 / std::sqrt(double(Da));
  std::vector<double> want(static_cast<size_t>(H * Da), 0.0), sc(static_cast<size_t>(N));
  for (int64_t h = 0; h < H; ++h) {
    const int64_t kvh = h / (H / Hkv);
    double mx = -INFINITY;
    for (int64_t j = 0; j < N; ++j) {
      double dot = 0;
      for (int64_t d = 0; d < Da; ++d)
        dot += double(q[static_cast<size_t>(h * Da + d)]) * bf16_bits_to_float(kb[static_cast<size_t>(j * kvw + kvh * Da + d)]);
      sc[static_cast<size_t>(j)] = dot * scale;
      mx = std::max(mx, sc[static_cast<size_t>(j)]);
    }
    double den = 0;
    for (int64_t j = 0; j < N; ++j) {
      const double p = std::exp(sc[static_cast<size_t>(j)] - mx);
      den += p;
      for (int64_t d = 0; d < Da; ++d)
        want[static_cast<size_t>(h * Da + d)] += p * bf16_bits_to_float(vb[static_cast<size_t>(j * kvw + kvh * Da + d)]);
    }
    for (int64_t d = 0; d < Da; ++d) want[static_cast<size_t>(h * Da + d)] /= den;
  }
  DecodeAttentionShape s{1, H, Hkv, Da, N, 0, static_cast<float>(scale)};
  DeviceArray<__nv_bfloat16> dq(static_cast<size_t>(H * Da)), dk(kb.size()), dv(vb.size()), out(static_cast<size_t>(H * Da));
  DeviceArray<int64_t> dl(1);
  upload_bf16(dq, q);
  ASSERT_EQ(cudaMemcpy(dk.ptr, kb.data(), kb.size() * 2, cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(dv.ptr, vb.data(), vb.size() * 2, cudaMemcpyHostToDevice), cudaSuccess);
  upload(dl, std::vector<int64_t>{N});
  const int chosen = choose_decode_splits(s, N, 132);
  for (int splits : {chosen, 1, 128}) {
    DeviceArray<float> ws(static_cast<size_t>(decode_workspace_floats(s, splits)));
    ASSERT_EQ(cudaMemset(out.ptr, 0xff, out.n * 2), cudaSuccess);
    ASSERT_EQ(launch_flash_decode(dq.ptr, dk.ptr, dv.ptr, dl.ptr, s, splits, ws.ptr, out.ptr, nullptr), cudaSuccess);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    const auto got = download_bf16(out);
    EXPECT_LE(rms_error(got, want), bf16_output_bound(want)) << "N 128K splits " << splits;
  }
}

TEST(FlashDecode, LargeScoresNeedTheMaxSubtraction) {
  YOCO_REQUIRE_GPU();
  const int64_t H = 24, Hkv = 8, Da = 128, B = 2;
  const std::vector<int64_t> lengths = {3001, 700};
  const int64_t cap = 3001, kvw = Hkv * Da;
  // q, k ~ N(0, 9): scores q.k / sqrt(D) have a spread of ~9, and three keys per
  // sequence set to 1.2 q give head 0 scores of ~120: exp(120) overflows fp32,
  // so only a kernel that subtracts the running max gets this right.
  auto q = random_bf16_values(static_cast<size_t>(B * H * Da), 71, 3.0f);
  auto k = random_bf16_values(static_cast<size_t>(B * cap * kvw), 72, 3.0f);
  const auto v = random_bf16_values(static_cast<size_t>(B * cap * kvw), 73);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t j : {int64_t{5}, int64_t{333}, lengths[b] - 1})
      for (int64_t d = 0; d < Da; ++d)  // key j of KV head 0 = 1.2 x query head 0
        k[static_cast<size_t>((b * cap + j) * kvw + d)] = round_to_bf16(1.2f * q[static_cast<size_t>(b * H * Da + d)]);
  DecodeAttentionShape s{B, H, Hkv, Da, cap, 0, static_cast<float>(1.0 / std::sqrt(double(Da)))};
  std::vector<double> want;
  for (int64_t b = 0; b < B; ++b) {
    const auto r = reference(q, k, v, H, Hkv, Da, cap, b, lengths[b], 0);
    want.insert(want.end(), r.begin(), r.end());
  }
  // The scores really are large: the largest of head 0, sequence 0.
  double top = 0;
  for (int64_t d = 0; d < Da; ++d) top += 1.2 * double(q[static_cast<size_t>(d)]) * q[static_cast<size_t>(d)];
  EXPECT_GT(top / std::sqrt(double(Da)), 90.0) << "test inputs do not produce large scores";
  for (int splits : {1, 7, choose_decode_splits(s, cap, 132)}) {
    const auto got = run(s, lengths, q, k, v, splits);
    EXPECT_LE(rms_error(got, want), bf16_output_bound(want)) << "splits " << splits;
  }
}

TEST(FlashDecode, CacheOfMoreThan2To31ElementsAgainstTheOracle) {
  YOCO_REQUIRE_GPU();
  // B * cap * Hkv * Da = 2 * 1,048,580 * 1024 = 2,147,491,840 > 2^31 elements per K
  // (4.3 GB); sequence 1 starts at element 1,073,745,920 and ends past 2^31.
  const int64_t H = 24, Hkv = 8, Da = 128, B = 2, cap = 1048580;
  const int64_t kv_elems = B * cap * Hkv * Da;
  ASSERT_GT(kv_elems, int64_t{1} << 31);
  size_t free_b = 0, total_b = 0;
  ASSERT_EQ(cudaMemGetInfo(&free_b, &total_b), cudaSuccess);
  if (free_b < static_cast<size_t>(kv_elems) * 4 + (size_t{3} << 30)) GTEST_SKIP() << "device cannot hold 8.6 GB of K/V";
  const std::vector<int64_t> lengths = {777, cap};
  DeviceArray<__nv_bfloat16> dq(static_cast<size_t>(B * H * Da)), dk(static_cast<size_t>(kv_elems)),
      dv(static_cast<size_t>(kv_elems)), out(static_cast<size_t>(B * H * Da));
  ASSERT_EQ(launch_fill_normal_bf16(dq.ptr, B * H * Da, 81, 1.0f, nullptr), cudaSuccess);
  ASSERT_EQ(launch_fill_normal_bf16(dk.ptr, kv_elems, 82, 1.0f, nullptr), cudaSuccess);
  ASSERT_EQ(launch_fill_normal_bf16(dv.ptr, kv_elems, 83, 1.0f, nullptr), cudaSuccess);
  DeviceArray<int64_t> dl(2);
  upload(dl, lengths);
  // The oracle: each sequence's query row 0 at absolute position len - 1 (q rows: 1 per sequence).
  AttentionOracle oracle;
  ASSERT_TRUE(oracle.ok()) << oracle.error();
  OracleShape os;
  os.batch = B;
  os.n_heads = H;
  os.n_kv_heads = Hkv;
  os.head_dim = Da;
  os.q_rows = 1;
  os.capacity = cap;
  os.q_stride = H * Da;
  os.kv_stride = Hkv * Da;
  os.scale = 1.0 / std::sqrt(double(Da));
  std::vector<float> want_f;
  ASSERT_EQ(oracle.run(dq.ptr, dk.ptr, dv.ptr, os, {lengths[0] - 1, lengths[1] - 1}, {{0, 0}, {1, 0}}, &want_f,
                       nullptr, nullptr),
            "");
  const std::vector<double> want(want_f.begin(), want_f.end());
  DecodeAttentionShape s{B, H, Hkv, Da, cap, 0, static_cast<float>(os.scale)};
  for (int splits : {choose_decode_splits(s, cap, 132), 1}) {
    DeviceArray<float> ws(static_cast<size_t>(decode_workspace_floats(s, splits)));
    ASSERT_EQ(cudaMemset(out.ptr, 0xff, out.n * 2), cudaSuccess);
    ASSERT_EQ(launch_flash_decode(dq.ptr, dk.ptr, dv.ptr, dl.ptr, s, splits, ws.ptr, out.ptr, nullptr), cudaSuccess);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    const auto got = download_bf16(out);
    EXPECT_LE(rms_error(got, want), bf16_output_bound(want)) << "splits " << splits;
    // Sequence 1 alone: the part whose offsets pass 2^31.
    const std::vector<float> got1(got.begin() + H * Da, got.end());
    const std::vector<double> want1(want.begin() + H * Da, want.end());
    EXPECT_LE(rms_error(got1, want1), bf16_output_bound(want1)) << "sequence past 2^31, splits " << splits;
  }
}

TEST(FlashDecode, SplitChoiceFillsTheDevice) {
  // KERNELS.md §2 on 132 SMs, D 128 (2 blocks per SM, 64-key tiles): the smallest
  // count whose wave efficiency is >= 85 % of the best.
  DecodeAttentionShape s{1, 24, 8, 128, 1 << 20, 0, 0.088f};
  EXPECT_EQ(decode_tile_keys(), 64);
  EXPECT_EQ(decode_blocks_per_sm(128), 2);
  EXPECT_EQ(choose_decode_splits(s, 1 << 20, 132), 29);  // 8 x 29 = 232 of 264 slots
  EXPECT_EQ(choose_decode_splits(s, 1 << 17, 132), 29);
  EXPECT_EQ(choose_decode_splits(s, 300, 132), 2);       // 5 tiles: at least 2 per split
  EXPECT_EQ(choose_decode_splits(s, 64, 132), 1);        // one tile: never split
  s.batch = 8;
  EXPECT_EQ(choose_decode_splits(s, 1 << 17, 132), 4);   // 256 blocks, 97 %
  s.batch = 64;
  EXPECT_EQ(choose_decode_splits(s, 1 << 20, 132), 1);   // the batch fills the device already
  // yoco-swa ring decode: 24 heads, no GQA, W 1024: at most 1024 keys visible.
  DecodeAttentionShape r{1, 24, 24, 128, 1024, 1024, 0.088f};
  r.ring = true;
  EXPECT_EQ(choose_decode_splits(r, 1 << 20, 132), 7);
}

TEST(FlashDecode, LauncherRejectsBadArguments) {
  // Checked before any CUDA call, so this runs without a device.
  auto* p = reinterpret_cast<__nv_bfloat16*>(uintptr_t{1} << 20);
  auto* lens = reinterpret_cast<int64_t*>(uintptr_t{1} << 20);
  auto* ws = reinterpret_cast<float*>(uintptr_t{1} << 20);
  DecodeAttentionShape s{1, 24, 8, 128, 1024, 0, 0.088f};
  DecodeAttentionShape bad = s;
  bad.head_dim = 96;
  EXPECT_EQ(launch_flash_decode(p, p, p, lens, bad, 2, ws, p, nullptr), cudaErrorInvalidValue);
  bad = s;
  bad.n_heads = 72;  // group of 9
  EXPECT_EQ(launch_flash_decode(p, p, p, lens, bad, 2, ws, p, nullptr), cudaErrorInvalidValue);
  bad = s;
  bad.ring = true;  // ring needs window >= 1
  EXPECT_EQ(launch_flash_decode(p, p, p, lens, bad, 2, ws, p, nullptr), cudaErrorInvalidValue);
  bad.window = 2048;  // more slots than rows
  EXPECT_EQ(launch_flash_decode(p, p, p, lens, bad, 2, ws, p, nullptr), cudaErrorInvalidValue);
  bad = s;
  bad.kv_stride = 8 * 128 + 4;  // rows not 16-byte aligned
  EXPECT_EQ(launch_flash_decode(p, p, p, lens, bad, 2, ws, p, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(launch_flash_decode(p, p + 1, p, lens, s, 2, ws, p, nullptr), cudaErrorInvalidValue);  // misaligned K
  EXPECT_EQ(launch_flash_decode(p, p, p, lens, s, 0, ws, p, nullptr), cudaErrorInvalidValue);      // no split
  EXPECT_EQ(launch_flash_decode(p, p, p, lens, s, 2, nullptr, p, nullptr), cudaErrorInvalidValue); // no workspace
}

}  // namespace
}  // namespace yoco::cuda
