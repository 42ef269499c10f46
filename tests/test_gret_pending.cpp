// The deferred gRet decode step on the CPU (cuda/gret/gret_pending.hpp,
// cuda/gret/gret_decay.hpp): the pending records tile their buffer without overlap
// at every head dim the step serves, and a model of the protocol — each
// V-slice applies its own record, then forms the step in registers and writes
// the new record through the same byte offsets the kernel uses — gives the
// eager step's outputs bit for bit, leaves the state one step behind, and
// after a flush the eager state exactly. A zeroed record changes nothing, not
// even the sign of a zero.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "dtype.hpp"
#include "gret/gret_decay.hpp"
#include "gret/gret_pending.hpp"

namespace yoco::cuda {
namespace {

TEST(GretPending, RecordsTileTheBufferAtEverySupportedHeadDim) {
  for (int64_t D = 1; D <= 320; ++D) {
    const int w = gret_deferred_slice_width(D);
    const GretPendingLayout L = gret_pending_layout(D);
    const bool supported = (D % 16 == 0 && D <= 128) || (D % 32 == 0 && D > 128 && D <= 256);
    ASSERT_EQ(w != 0, supported) << "D " << D;
    if (!supported) {
      EXPECT_EQ(L.slices, 0);
      EXPECT_EQ(gret_pending_bytes(3, 24, D), 0);
      continue;
    }
    EXPECT_EQ(L.width, w);
    EXPECT_EQ(L.slices * w, D);
    EXPECT_LE(L.slices, 8) << "a head's slices must fit one portable cluster (the fused step)";
    EXPECT_EQ(L.record_bytes % 16, 0);
    // k, v, log γ in order, inside the record, each aligned for its type.
    EXPECT_EQ(L.k_offset(), 0);
    EXPECT_EQ(L.v_offset(), 2 * D);
    EXPECT_EQ(L.log_gamma_offset(), 2 * D + 2 * w);
    EXPECT_EQ(L.log_gamma_offset() % 4, 0);
    EXPECT_EQ(L.flag_offset(), L.log_gamma_offset() + 4);
    EXPECT_LE(L.flag_offset() + 4, L.record_bytes);
    EXPECT_LT(L.record_bytes - (L.flag_offset() + 4), 16) << "padding only to 16 bytes";
    for (int64_t bh : {int64_t{0}, int64_t{1}, int64_t{7 * 24 + 5}})
      for (int s = 0; s < L.slices; ++s) {
        const int64_t next = s + 1 < L.slices ? L.record_offset(bh, s + 1) : L.record_offset(bh + 1, 0);
        EXPECT_EQ(next - L.record_offset(bh, s), L.record_bytes);
      }
    EXPECT_EQ(gret_pending_bytes(8, 24, D), L.record_offset(8 * 24, 0));
  }
  // yoco-3b: 24 heads × 128, 8 slices of 304 bytes: 3.7 % on top of the state bytes a step moves
  // (each slice keeps its own copy of k); 16 heads × 256: 8 slices of 592 bytes, 0.9 %.
  EXPECT_EQ(gret_pending_layout(128).record_bytes, 304);
  EXPECT_EQ(gret_pending_bytes(1, 24, 128), 24 * 8 * 304);
  EXPECT_LT(static_cast<double>(gret_pending_bytes(1, 24, 128)), 0.04 * 24 * 128 * 128 * 4);
  EXPECT_EQ(gret_pending_bytes(1, 16, 256), 16 * 8 * 592);
}

// One head's state [D, D] and the kernels' two orders of the same arithmetic.
struct Head {
  int64_t D;
  std::vector<float> S;
};

// The eager step: S ← γ S + kᵀ v stored; n (the new state) feeds o.
std::vector<float> eager_step(Head& h, const std::vector<float>& q, const std::vector<float>& k,
                              const std::vector<float>& v, float lg) {
  const GretDecay g = make_gret_decay(lg);
  std::vector<float> o(h.D, 0.0f);
  for (int64_t i = 0; i < h.D; ++i)
    for (int64_t j = 0; j < h.D; ++j) {
      float& s = h.S[i * h.D + j];
      s = gret_decay_add(g, s, k[i], v[j]);
      o[j] = std::fma(q[i], s, o[j]);
    }
  return o;
}

// The deferred step, slice by slice as the CTAs do, through the record bytes.
std::vector<float> deferred_step(Head& h, std::vector<unsigned char>& pending, const GretPendingLayout& L,
                                 const std::vector<float>& q, const std::vector<float>& k,
                                 const std::vector<float>& v, float lg, bool flush_only = false) {
  const int64_t D = h.D;
  std::vector<float> o(D, 0.0f);
  for (int s = 0; s < L.slices; ++s) {
    unsigned char* rec = pending.data() + L.record_offset(0, s);
    auto bf = [&](int64_t off) {
      uint16_t b;
      std::memcpy(&b, rec + off, 2);
      return bf16_bits_to_float(b);
    };
    float plg;
    uint32_t flag;
    std::memcpy(&plg, rec + L.log_gamma_offset(), 4);
    std::memcpy(&flag, rec + L.flag_offset(), 4);
    const GretDecay gp = make_gret_decay(plg);
    // Before the wait: apply the record to this slice and store it.
    std::vector<float> held(static_cast<size_t>(D * L.width));
    for (int64_t i = 0; i < D; ++i)
      for (int c = 0; c < L.width; ++c) {
        const int64_t j = s * L.width + c;
        float& st = h.S[i * D + j];
        if (flag) st = gret_decay_add(gp, st, bf(L.k_offset() + 2 * i), bf(L.v_offset() + 2 * c));
        held[i * L.width + c] = st;
      }
    if (flush_only) {
      std::memset(rec, 0, static_cast<size_t>(L.record_bytes));
      continue;
    }
    // After the wait: this step in registers only, then the new record.
    const GretDecay g = make_gret_decay(lg);
    for (int64_t i = 0; i < D; ++i)
      for (int c = 0; c < L.width; ++c) {
        const int64_t j = s * L.width + c;
        o[j] = std::fma(q[i], gret_decay_add(g, held[i * L.width + c], k[i], v[j]), o[j]);
      }
    for (int64_t i = 0; i < D; ++i) {
      const uint16_t b = float_to_bf16_bits(k[i]);
      std::memcpy(rec + L.k_offset() + 2 * i, &b, 2);
    }
    for (int c = 0; c < L.width; ++c) {
      const uint16_t b = float_to_bf16_bits(v[s * L.width + c]);
      std::memcpy(rec + L.v_offset() + 2 * c, &b, 2);
    }
    std::memcpy(rec + L.log_gamma_offset(), &lg, 4);
    const uint32_t one = 1;
    std::memcpy(rec + L.flag_offset(), &one, 4);
  }
  return o;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

TEST(GretPending, DeferredStepsGiveTheEagerBits) {
  for (int64_t D : {16, 48, 128, 256}) {
    SCOPED_TRACE("D " + std::to_string(D));
    const GretPendingLayout L = gret_pending_layout(D);
    std::mt19937_64 rng(static_cast<uint64_t>(D));
    std::normal_distribution<float> nd;
    Head eager{D, std::vector<float>(static_cast<size_t>(D * D))};
    for (auto& x : eager.S) x = 0.3f * nd(rng);
    // Zeros of both signs and a subnormal: a zeroed record must leave even their bits alone.
    eager.S[0] = -0.0f;
    eager.S[1] = 0.0f;
    eager.S[D + 1] = -1e-40f;
    Head deferred = eager;
    std::vector<unsigned char> pending(static_cast<size_t>(gret_pending_bytes(1, 1, D)), 0);
    std::vector<float> behind = eager.S;  // the eager state one step back
    const int steps = 40;
    for (int t = 0; t < steps; ++t) {
      std::vector<float> q(D), k(D), v(D);
      for (int64_t i = 0; i < D; ++i) {
        q[i] = round_to_bf16(nd(rng));
        k[i] = round_to_bf16(nd(rng) / std::sqrt(static_cast<float>(D)));
        v[i] = round_to_bf16(nd(rng));
      }
      // Decays: none, strong, near one (the δ path) and ordinary.
      const float lg = t % 7 == 0 ? 0.0f : t % 5 == 0 ? -8.0f : t % 2 ? -1e-3f * (1 + t % 3) : -0.7f;
      const auto oe = eager_step(eager, q, k, v, lg);
      const auto od = deferred_step(deferred, pending, L, q, k, v, lg);
      ASSERT_TRUE(same_bits(oe, od)) << "o differs at step " << t;
      ASSERT_TRUE(same_bits(deferred.S, behind)) << "state is not one step behind at step " << t;
      behind = eager.S;
    }
    deferred_step(deferred, pending, L, {}, {}, {}, 0.0f, /*flush_only=*/true);
    EXPECT_TRUE(same_bits(deferred.S, eager.S)) << "state after the flush";
    EXPECT_TRUE(std::all_of(pending.begin(), pending.end(), [](unsigned char c) { return c == 0; }));
    deferred_step(deferred, pending, L, {}, {}, {}, 0.0f, /*flush_only=*/true);
    EXPECT_TRUE(same_bits(deferred.S, eager.S)) << "a second flush must change nothing";
  }
}

}  // namespace
}  // namespace yoco::cuda
