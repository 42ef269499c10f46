// The split-KV decode plan (cuda/attention/decode_plan.hpp) on the CPU, before any GPU
// runs it (KERNELS.md §2 (e), §6):
// - visible keys: whole cache, trailing window, ring buffer (vs brute force);
// - ring slots: after any number of writes, slots [0, min(len, W)) hold exactly
//   the last min(len, W) positions;
// - split ranges, over a grid of lengths and split counts: every key in exactly
//   one split, edges on tile boundaries, only the last end ragged, no empty
//   effective split, tiles balanced to within one;
// - the split count, over a grid of (B, Hkv, N, SMs, CTAs/SM): within its cap,
//   the smallest count whose wave efficiency is >= 85 % of the best (brute
//   force), and the documented values on 132 SMs;
// - int64 offsets at 1M + 1024 tokens, batch 8;
// - a C++ mirror of the kernel's arithmetic (tiles of 64, 4 warps of 16 keys,
//   online softmax in log2, P as bf16 hi + lo, warp merge, split LSE, combine)
//   for s in {1, 2, 3, 7, 33, 128, more than the tiles} equals the unsplit fp64
//   softmax.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "attention/decode_plan.hpp"

namespace yoco::cuda::decode_plan {
namespace {

TEST(DecodePlan, KeyRangeMatchesBruteForce) {
  for (int64_t len = 0; len <= 40; ++len) {
    for (int64_t window : {0, 1, 2, 7, 16, 39, 40, 41, 100}) {
      for (bool ring : {false, true}) {
        if (ring && window == 0) continue;
        // Brute force: the positions the query at len - 1 sees, mapped to cache rows.
        std::vector<int> seen_rows(static_cast<size_t>(std::max<int64_t>(len, window) + 1), 0);
        for (int64_t p = 0; p < len; ++p) {
          const bool visible = window == 0 || p > (len - 1) - window;
          if (!visible) continue;
          const int64_t row = ring ? p % window : p;
          seen_rows[static_cast<size_t>(row)] += 1;
        }
        const KeyRange r = decode_key_range(len, window, ring);
        for (size_t row = 0; row < seen_rows.size(); ++row) {
          const bool in = static_cast<int64_t>(row) >= r.begin && static_cast<int64_t>(row) < r.begin + r.count;
          EXPECT_EQ(seen_rows[row], in ? 1 : 0) << "len " << len << " window " << window << " ring " << ring
                                                << " row " << row;
        }
      }
    }
  }
}

TEST(DecodePlan, RingSlotsHoldTheLastWPositions) {
  for (int64_t W : {1, 2, 7, 64, 100}) {
    std::vector<int64_t> slot(static_cast<size_t>(W), -1);
    for (int64_t t = 0; t < 3 * W + 5; ++t) {
      slot[static_cast<size_t>(ring_slot(t, W))] = t;  // step t writes position t first
      const int64_t len = t + 1, valid = ring_valid_slots(len, W);
      ASSERT_EQ(valid, std::min(len, W));
      std::vector<int64_t> held(slot.begin(), slot.begin() + valid);
      std::sort(held.begin(), held.end());
      for (int64_t i = 0; i < valid; ++i) EXPECT_EQ(held[static_cast<size_t>(i)], len - valid + i) << "W " << W << " t " << t;
      // Slots past `valid` were never written.
      for (int64_t s = valid; s < W; ++s) EXPECT_EQ(slot[static_cast<size_t>(s)], -1);
    }
  }
  EXPECT_EQ(ring_slot(int64_t{1} << 40, 1024), 0);
  EXPECT_EQ(ring_slot((int64_t{1} << 40) + 1023, 1024), 1023);
}

void check_splits(int64_t n, int64_t tile, int64_t splits) {
  const int64_t tiles = n <= 0 ? 0 : ceil_div(n, tile);
  const int64_t eff = effective_splits(n, tile, splits);
  ASSERT_EQ(eff, std::min(splits, tiles)) << n << " " << splits;
  int64_t next = 0, min_tiles = std::numeric_limits<int64_t>::max(), max_tiles = 0;
  for (int64_t i = 0; i < splits; ++i) {
    const SplitRange r = split_key_range(n, tile, splits, i);
    if (i >= eff) {
      ASSERT_EQ(r.begin, r.end) << "split " << i << " past the effective count must be empty";
      ASSERT_EQ(r.begin, std::max<int64_t>(n, 0));
      continue;
    }
    ASSERT_EQ(r.begin, next) << "n " << n << " splits " << splits << " i " << i;  // contiguous: each key once
    ASSERT_LT(r.begin, r.end) << "empty effective split";
    ASSERT_EQ(r.begin % tile, 0);
    if (i + 1 < eff) {
      ASSERT_EQ(r.end % tile, 0) << "only the last split is ragged";
    }
    const int64_t t = ceil_div(r.end - r.begin, tile);
    min_tiles = std::min(min_tiles, t);
    max_tiles = std::max(max_tiles, t);
    next = r.end;
  }
  if (eff > 0) {
    ASSERT_EQ(next, n) << "the splits cover all keys";
    ASSERT_LE(max_tiles - min_tiles, 1) << "balanced";
  }
}

TEST(DecodePlan, SplitsCoverEveryKeyOnceOnTileEdges) {
  for (int64_t tile : {16, 64}) {
    for (int64_t n = 0; n <= 700; ++n)
      for (int64_t splits : {1, 2, 3, 5, 7, 11, 33, 128, 1000}) check_splits(n, tile, splits);
  }
  for (int64_t n : {int64_t{32768}, int64_t{131072}, int64_t{131073}, int64_t{524288}, int64_t{1048576},
                    int64_t{1048576 + 1024}, int64_t{1048576 + 1023}}) {
    for (int64_t splits : {1, 4, 8, 16, 29, 33, 66, 128, 16385, 20000}) check_splits(n, 64, splits);
  }
}

// Brute-force reference for choose_split_count.
int64_t brute_splits(int64_t B, int64_t Hkv, int64_t N, int64_t sms, int64_t per_sm, int64_t tile) {
  const int64_t tiles = ceil_div(N, tile);
  const int64_t cap = std::max<int64_t>(1, std::min<int64_t>(128, tiles / 2));
  const double slots = static_cast<double>(sms * per_sm);
  std::vector<double> eff(static_cast<size_t>(cap + 1));
  double best = 0;
  for (int64_t s = 1; s <= cap; ++s) {
    const double waves = static_cast<double>(B * Hkv * s) / slots;
    eff[static_cast<size_t>(s)] = waves / std::ceil(waves);
    best = std::max(best, eff[static_cast<size_t>(s)]);
  }
  for (int64_t s = 1; s <= cap; ++s)
    if (eff[static_cast<size_t>(s)] >= 0.85 * best - 1e-12) return s;
  return 1;
}

TEST(DecodePlan, SplitCountFillsWavesWithinItsCap) {
  for (int64_t B : {1, 2, 3, 8, 16, 64}) {
    for (int64_t Hkv : {1, 2, 8, 24}) {
      for (int64_t N : {1, 63, 64, 65, 300, 1024, 4096, 32768, 131072, 1048576}) {
        for (int64_t sms : {1, 16, 108, 132}) {
          for (int64_t per_sm : {1, 2, 3}) {
            const int64_t s = choose_split_count(B, Hkv, N, sms, per_sm, 64);
            const int64_t tiles = ceil_div(N, 64);
            ASSERT_GE(s, 1);
            ASSERT_LE(s, 128);
            ASSERT_LE(s, std::max<int64_t>(1, tiles / 2)) << "at least 2 tiles per split of the longest sequence";
            ASSERT_EQ(s, brute_splits(B, Hkv, N, sms, per_sm, 64))
                << "B " << B << " Hkv " << Hkv << " N " << N << " sms " << sms << " per_sm " << per_sm;
          }
        }
      }
    }
  }
  // KERNELS.md §2 on 132 SMs, 2 CTAs per SM, 64-key tiles.
  EXPECT_EQ(choose_split_count(1, 8, 1 << 20, 132, 2, 64), 29);   // 232 CTAs = 88 % of 264 slots
  EXPECT_EQ(choose_split_count(1, 8, 1 << 17, 132, 2, 64), 29);
  EXPECT_EQ(choose_split_count(8, 8, 1 << 17, 132, 2, 64), 4);    // 256 CTAs, 97 %
  EXPECT_EQ(choose_split_count(64, 8, 1 << 20, 132, 2, 64), 1);   // 512 CTAs, 1.94 waves
  EXPECT_EQ(choose_split_count(1, 8, 300, 132, 2, 64), 2);        // 5 tiles: cap 2
  EXPECT_EQ(choose_split_count(1, 8, 64, 132, 2, 64), 1);         // one tile: never split
  EXPECT_EQ(choose_split_count(1, 24, 1024, 132, 2, 64), 7);      // yoco-swa ring, W 1024: cap 8; 7 is 87 % of 8's
}

TEST(DecodePlan, OccupancyArithmetic) {
  EXPECT_EQ(blocks_per_sm(128, 128, 3 * 32 * 1024), 2);   // D 128: 3 stages of 32 KiB
  EXPECT_EQ(blocks_per_sm(128, 128, 4 * 16 * 1024), 3);   // D 64
  EXPECT_EQ(blocks_per_sm(128, 128, 3 * 64 * 1024), 1);   // D 256
  EXPECT_EQ(blocks_per_sm(168, 384, 160 * 1024), 1);      // the prefill CTA of §6
  EXPECT_EQ(blocks_per_sm(32, 128, 0), 16);
}

TEST(DecodePlan, OffsetsAreInt64AtOneMillionTokens) {
  const int64_t B = 8, N = (1 << 20) + 1024, Hkv = 8, D = 128, H = 24;
  const int64_t last_kv = kv_offset(B - 1, N - 1, Hkv - 1, N, Hkv * D, D) + D - 1;
  EXPECT_EQ(last_kv, B * N * Hkv * D - 1);
  EXPECT_GT(last_kv, int64_t{1} << 31);
  // One sequence of 1M tokens: the last q element of a [1M, 24·128] tensor (KERNELS.md §5 row 1).
  EXPECT_EQ(q_offset((1 << 20) - 1, H - 1, H, D) + D - 1, int64_t{3221225471});
  EXPECT_EQ(partial_slot(B - 1, H - 1, 127, H, 128), B * H * 128 - 1);
  // Strided rows (K inside a fused [K | V] buffer).
  EXPECT_EQ(kv_offset(1, 2, 3, 10, 2 * Hkv * D, D), (1 * 10 + 2) * 2 * Hkv * D + 3 * D);
  for (int64_t h = 0; h < 24; ++h) EXPECT_EQ(kv_head_of(h, 24, 8), h / 3);
  EXPECT_EQ(kv_head_of(3, 4, 2), 1);  // not h mod Hkv
}

// ---- The kernel's arithmetic, mirrored on the CPU --------------------------------------

float bf16_round(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  u += 0x7fffu + ((u >> 16) & 1u);
  u &= 0xffff0000u;
  float r;
  std::memcpy(&r, &u, 4);
  return r;
}

struct Partial {
  std::vector<float> o;  // [G, D], normalised
  std::vector<float> lse;  // [G], log2 domain, -inf when empty
};

// One split block: keys [key0, key0 + n) of k/v ([rows, D] per head group),
// tiles of 64, warp w owning keys 16w .. 16w+15 of each tile.
Partial emulate_split(const std::vector<float>& q, const std::vector<float>& k, const std::vector<float>& v, int G,
                      int D, int64_t key0, int64_t n, float scale_log2) {
  constexpr int kTile = 64, kWarps = 4;
  std::vector<float> m(kWarps * G, -INFINITY), l(kWarps * G, 0.0f), acc(static_cast<size_t>(kWarps * G * D), 0.0f);
  for (int64_t t = 0; t * kTile < n; ++t) {
    for (int w = 0; w < kWarps; ++w) {
      for (int g = 0; g < G; ++g) {
        float s[16];
        float mt = -INFINITY;
        for (int j = 0; j < 16; ++j) {
          const int64_t key = t * kTile + w * 16 + j;
          if (key >= n) {
            s[j] = -INFINITY;
            continue;
          }
          float dot = 0;
          for (int d = 0; d < D; ++d) dot += q[static_cast<size_t>(g * D + d)] * k[static_cast<size_t>((key0 + key) * D + d)];
          s[j] = dot * scale_log2;
          mt = std::max(mt, s[j]);
        }
        float& mm = m[static_cast<size_t>(w * G + g)];
        const float m_new = std::max(mm, mt);
        const float m_use = m_new == -INFINITY ? 0.0f : m_new;
        const float corr = std::exp2(mm - m_use);
        mm = m_new;
        float psum = 0;
        float* a = &acc[static_cast<size_t>((w * G + g) * D)];
        for (int d = 0; d < D; ++d) a[d] *= corr;
        for (int j = 0; j < 16; ++j) {
          const float p = std::exp2(s[j] - m_use);
          psum += p;
          const int64_t key = t * kTile + w * 16 + j;
          if (key >= n) continue;  // the kernel reads zero-filled V there: p = 0 and V = 0
          const float hi = bf16_round(p), lo = bf16_round(p - hi);
          for (int d = 0; d < D; ++d) a[d] += (hi + lo) * v[static_cast<size_t>((key0 + key) * D + d)];
        }
        float& ll = l[static_cast<size_t>(w * G + g)];
        ll = ll * corr + psum;
      }
    }
  }
  Partial out{std::vector<float>(static_cast<size_t>(G * D)), std::vector<float>(static_cast<size_t>(G))};
  for (int g = 0; g < G; ++g) {
    float mx = -INFINITY;
    for (int w = 0; w < kWarps; ++w) mx = std::max(mx, m[static_cast<size_t>(w * G + g)]);
    float lsum = 0;
    std::vector<float> o(static_cast<size_t>(D), 0.0f);
    if (mx != -INFINITY) {
      for (int w = 0; w < kWarps; ++w) {
        const float c = std::exp2(m[static_cast<size_t>(w * G + g)] - mx);
        lsum += l[static_cast<size_t>(w * G + g)] * c;
        for (int d = 0; d < D; ++d) o[static_cast<size_t>(d)] += acc[static_cast<size_t>((w * G + g) * D + d)] * c;
      }
    }
    for (int d = 0; d < D; ++d) out.o[static_cast<size_t>(g * D + d)] = lsum > 0 ? o[static_cast<size_t>(d)] / lsum : 0.0f;
    out.lse[static_cast<size_t>(g)] = lsum > 0 ? mx + std::log2(lsum) : -INFINITY;
  }
  return out;
}

std::vector<float> emulate_decode(const std::vector<float>& q, const std::vector<float>& k,
                                  const std::vector<float>& v, int G, int D, int64_t len, int64_t window, bool ring,
                                  int64_t splits, float scale) {
  const KeyRange kr = decode_key_range(len, window, ring);
  const float scale_log2 = scale * 1.4426950408889634f;
  std::vector<Partial> parts;
  for (int64_t i = 0; i < splits; ++i) {
    const SplitRange r = split_key_range(kr.count, 64, splits, i);
    parts.push_back(emulate_split(q, k, v, G, D, kr.begin + r.begin, r.end - r.begin, scale_log2));
  }
  // The combine kernel.
  std::vector<float> out(static_cast<size_t>(G * D));
  for (int g = 0; g < G; ++g) {
    float mx = -INFINITY;
    for (const Partial& p : parts) mx = std::max(mx, p.lse[static_cast<size_t>(g)]);
    for (int d = 0; d < D; ++d) {
      float num = 0, den = 0;
      if (mx != -INFINITY) {
        for (const Partial& p : parts) {
          if (p.lse[static_cast<size_t>(g)] == -INFINITY) continue;
          const float w = std::exp2(p.lse[static_cast<size_t>(g)] - mx);
          num += w * p.o[static_cast<size_t>(g * D + d)];
          den += w;
        }
      }
      out[static_cast<size_t>(g * D + d)] = den > 0 ? num / den : 0.0f;
    }
  }
  return out;
}

// Unsplit softmax attention in fp64 over rows [begin, begin + count).
std::vector<double> exact_decode(const std::vector<float>& q, const std::vector<float>& k,
                                 const std::vector<float>& v, int G, int D, KeyRange kr, double scale) {
  std::vector<double> out(static_cast<size_t>(G * D), 0.0);
  for (int g = 0; g < G; ++g) {
    std::vector<double> s(static_cast<size_t>(kr.count));
    double mx = -INFINITY;
    for (int64_t j = 0; j < kr.count; ++j) {
      double dot = 0;
      for (int d = 0; d < D; ++d) dot += double(q[static_cast<size_t>(g * D + d)]) * k[static_cast<size_t>((kr.begin + j) * D + d)];
      s[static_cast<size_t>(j)] = dot * scale;
      mx = std::max(mx, s[static_cast<size_t>(j)]);
    }
    double den = 0;
    for (int64_t j = 0; j < kr.count; ++j) {
      const double p = std::exp(s[static_cast<size_t>(j)] - mx);
      den += p;
      for (int d = 0; d < D; ++d) out[static_cast<size_t>(g * D + d)] += p * v[static_cast<size_t>((kr.begin + j) * D + d)];
    }
    for (int d = 0; d < D && den > 0; ++d) out[static_cast<size_t>(g * D + d)] /= den;
  }
  return out;
}

double rel_rms(const std::vector<float>& got, const std::vector<double>& want) {
  double num = 0, den = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    num += (got[i] - want[i]) * (got[i] - want[i]);
    den += want[i] * want[i];
  }
  return std::sqrt(num / std::max(den, 1e-300));
}

std::vector<float> random_bf16(size_t n, uint64_t seed, float sd) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> dist(0.0f, sd);
  std::vector<float> x(n);
  for (auto& e : x) e = bf16_round(dist(rng));
  return x;
}

TEST(DecodePlan, SplitAndCombineEqualTheUnsplitSoftmax) {
  struct Case {
    int G, D;
    int64_t rows, len, window;
    bool ring;
    float q_sd;  // larger: peakier softmax
  };
  const std::vector<Case> cases = {
      {3, 64, 1, 1, 0, false, 1.0f},          // N = 1
      {3, 64, 700, 700, 0, false, 1.0f},      // 11 tiles, last ragged
      {8, 32, 2000, 2000, 0, false, 3.0f},    // GQA 8, peaky
      {1, 32, 64, 64, 0, false, 1.0f},        // exactly one tile
      {2, 32, 900, 900, 100, false, 1.0f},    // trailing window of a linear cache
      {2, 32, 100, 250, 100, true, 1.0f},     // ring: 100 slots, 250 tokens seen
      {2, 32, 100, 40, 100, true, 1.0f},      // ring not yet full
  };
  for (const Case& c : cases) {
    const auto q = random_bf16(static_cast<size_t>(c.G * c.D), 1, c.q_sd);
    const auto k = random_bf16(static_cast<size_t>(c.rows * c.D), 2, 1.0f);
    const auto v = random_bf16(static_cast<size_t>(c.rows * c.D), 3, 1.0f);
    const double scale = 1.0 / std::sqrt(double(c.D));
    const KeyRange kr = decode_key_range(c.len, c.window, c.ring);
    ASSERT_LE(kr.begin + kr.count, c.rows);
    const auto want = exact_decode(q, k, v, c.G, c.D, kr, scale);
    const int64_t tiles = ceil_div(kr.count, 64);
    for (int64_t s : {int64_t{1}, int64_t{2}, int64_t{3}, int64_t{7}, int64_t{33}, int64_t{128}, tiles + 5}) {
      const auto got = emulate_decode(q, k, v, c.G, c.D, c.len, c.window, c.ring, s, static_cast<float>(scale));
      for (float x : got) ASSERT_TRUE(std::isfinite(x));
      EXPECT_LT(rel_rms(got, want), 2e-5) << "G " << c.G << " D " << c.D << " len " << c.len << " splits " << s;
    }
  }
}

TEST(DecodePlan, NoVisibleKeyGivesZeros) {
  const auto q = random_bf16(64, 1, 1.0f), k = random_bf16(64 * 4, 2, 1.0f), v = random_bf16(64 * 4, 3, 1.0f);
  for (int64_t s : {1, 3}) {
    const auto got = emulate_decode(q, k, v, 1, 64, 0, 0, false, s, 0.125f);
    for (float x : got) EXPECT_EQ(x, 0.0f);
  }
}

}  // namespace
}  // namespace yoco::cuda::decode_plan
