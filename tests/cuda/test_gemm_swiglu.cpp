// The fused W1|W3 GEMM + SwiGLU kernel (cuda/ops/gemm_swiglu.hpp) against the fp64 reference of its
// contract (gate and up values rounded to bf16, silu(gate) * up, rounded once) within DESIGN.md §6's
// bound, against the unfused pair it replaces (cuBLAS's GEMM, then launch_swiglu) on the GPU, rows
// past M untouched, refusals that launch nothing, and the runners' selector choosing as it says.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "device_test_data.hpp"
#include "gpu_test_support.hpp"
#include "ops.hpp"
#include "ops/elementwise.hpp"
#include "ops/gemm.hpp"
#include "device/device_query.hpp"
#include "ops/ffn_up.hpp"
#include "ops/gemm_swiglu.hpp"

namespace yoco::cuda {
namespace {

using namespace yoco::cuda_test;
namespace gs = gemm_swiglu;

// The fused kernel is sm_90 only; the GPU suite also sets YOCO_FFN_SKIP_FUSED=1 when its smoke
// test (the selector's, below) failed, so that a hang stays in the smoke step.
#define YOCO_REQUIRE_HOPPER()                                                                      \
  do {                                                                                            \
    YOCO_REQUIRE_GPU();                                                                           \
    if (!::yoco::cuda::current_device().is_sm90()) GTEST_SKIP() << "the fused kernel is for sm_90 only"; \
    if (const char* skip = std::getenv("YOCO_FFN_SKIP_FUSED"); skip && std::string(skip) == "1")  \
      GTEST_SKIP() << "YOCO_FFN_SKIP_FUSED=1 (the GPU suite's smoke test of the fused kernel failed)"; \
  } while (0)

// The contract in fp64 for rows [r0, r1): gate and up rounded to bf16, silu(gate) * up.
std::vector<double> reference(const std::vector<float>& x, const std::vector<float>& w13, int64_t K, int64_t F,
                              int64_t x_stride, int64_t r0, int64_t r1) {
  std::vector<double> out(static_cast<size_t>((r1 - r0) * F));
  for (int64_t r = r0; r < r1; ++r)
    for (int64_t c = 0; c < F; ++c) {
      double g = 0, u = 0;
      const float* xr = &x[static_cast<size_t>(r * x_stride)];
      const float* w1 = &w13[static_cast<size_t>(c * K)];
      const float* w3 = &w13[static_cast<size_t>((F + c) * K)];
      for (int64_t k = 0; k < K; ++k) g += static_cast<double>(xr[k]) * w1[k], u += static_cast<double>(xr[k]) * w3[k];
      const double gb = round_to_bf16(static_cast<float>(g)), ub = round_to_bf16(static_cast<float>(u));
      out[static_cast<size_t>((r - r0) * F + c)] = silu<double>(gb) * ub;
    }
  return out;
}

struct Case {
  int64_t M, K, F, x_pad, out_pad;
};

TEST(GemmSwiglu, MatchesItsContractAndTheUnfusedPairAndLeavesRowsPastMAlone) {
  YOCO_REQUIRE_HOPPER();
  Gemm gemm;
  ASSERT_TRUE(gemm.ok()) << gemm.error();
  // One row; a ragged M over several row groups with padded strides; the small presets' d 256,
  // F 768; more row tiles than SMs (a CTA takes several tiles); yoco-3b's K and F.
  for (const Case cs : {Case{1, 64, 128, 0, 0}, Case{300, 128, 256, 64, 8}, Case{1100, 256, 768, 0, 0},
                        Case{4096 + 77, 192, 768, 0, 0}, Case{2048, 3072, 8192, 0, 0}}) {
    const int64_t M = cs.M, K = cs.K, F = cs.F, xs = K + cs.x_pad, os = F + cs.out_pad, extra = 3;
    SCOPED_TRACE(std::to_string(M) + " x " + std::to_string(K) + " -> " + std::to_string(F));
    const auto x = random_bf16_values(static_cast<size_t>(M * xs), 11);
    const auto w = random_bf16_values(static_cast<size_t>(2 * F * K), 12, 1.0f / std::sqrt(static_cast<float>(K)));
    DeviceArray<bf16> dx(M * xs), dw(2 * F * K), fused((M + extra) * os), h13(M * 2 * F), unfused(M * F);
    upload_bf16(dx, x);
    upload_bf16(dw, w);
    ASSERT_EQ(launch_gemm_swiglu(dx.ptr, dw.ptr, gs::Shape{M, K, F, xs, os}, fused.ptr, nullptr), cudaSuccess);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    // The unfused pair on dense rows (x copied dense when padded).
    std::vector<float> xd(static_cast<size_t>(M * K));
    for (int64_t r = 0; r < M; ++r)
      std::memcpy(&xd[static_cast<size_t>(r * K)], &x[static_cast<size_t>(r * xs)], static_cast<size_t>(K) * 4);
    DeviceArray<bf16> dxd(M * K);
    upload_bf16(dxd, xd);
    ASSERT_EQ(gemm.linear(dxd.ptr, M, K, dw.ptr, 2 * F, h13.ptr, nullptr), "");
    ASSERT_EQ(launch_swiglu(h13.ptr, M, F, unfused.ptr, nullptr), cudaSuccess);
    const auto got_all = download_bf16(fused);
    const auto want_gpu = download_bf16(unfused);
    std::vector<float> got(static_cast<size_t>(M * F));
    for (int64_t r = 0; r < M; ++r)
      for (int64_t c = 0; c < F; ++c) got[static_cast<size_t>(r * F + c)] = got_all[static_cast<size_t>(r * os + c)];
    // Padding columns of a row and the rows past M keep the poison (NaN bits).
    for (int64_t r = 0; r < M + extra; ++r)
      for (int64_t c = (r < M ? F : 0); c < os; ++c)
        ASSERT_TRUE(std::isnan(got_all[static_cast<size_t>(r * os + c)])) << "wrote row " << r << " col " << c;
    // Against the unfused pair: they differ only where the two GEMMs' summation orders flip a
    // bf16 rounding of a gate or up value (rare: well under 1% of the elements, each off by a
    // rounding's worth), so the difference's RMS is far below 1e-3 of the values'; a wrong tile,
    // row or column would be O(1).
    size_t differ = 0;
    for (size_t i = 0; i < got.size(); ++i) differ += got[i] != want_gpu[i];
    EXPECT_LE(differ, got.size() / 100) << differ << " of " << got.size() << " elements differ from the pair";
    EXPECT_LE(rms_error(got, want_gpu), 1e-3);
    // Against the fp64 contract, on every row of the small cases and 16 spread rows of the large.
    const int64_t sample = M * F * K > (int64_t{1} << 31) ? 16 : M;
    std::vector<float> got_s;
    std::vector<double> want_s;
    for (int64_t i = 0; i < sample; ++i) {
      const int64_t r = sample == M ? i : i * (M - 1) / (sample - 1);
      const auto want_r = reference(x, w, K, F, xs, r, r + 1);
      want_s.insert(want_s.end(), want_r.begin(), want_r.end());
      got_s.insert(got_s.end(), got.begin() + r * F, got.begin() + (r + 1) * F);
    }
    EXPECT_LE(rms_error(got_s, want_s), bf16_output_bound(want_s));
  }
}

TEST(GemmSwiglu, RefusesWhatItDoesNotServeAndLaunchesNothing) {
  YOCO_REQUIRE_GPU();
  DeviceArray<bf16> x(64 * 128), w(2 * 1000 * 128), out(64 * 1000);
  const auto before = download_bf16(out);
  EXPECT_EQ(launch_gemm_swiglu(x.ptr, w.ptr, gs::Shape{64, 128, 1000, 128, 1000}, out.ptr, nullptr),
            cudaErrorInvalidValue);  // F % 128
  EXPECT_EQ(launch_gemm_swiglu(x.ptr, w.ptr, gs::Shape{64, 96, 128, 96, 128}, out.ptr, nullptr),
            cudaErrorInvalidValue);  // K % 64
  EXPECT_EQ(launch_gemm_swiglu(nullptr, w.ptr, gs::Shape{64, 128, 128, 128, 128}, out.ptr, nullptr),
            cudaErrorInvalidValue);
  EXPECT_EQ(launch_gemm_swiglu(x.ptr + 1, w.ptr, gs::Shape{8, 128, 128, 128, 128}, out.ptr, nullptr),
            cudaErrorInvalidValue);  // x not 16-byte aligned
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const auto after = download_bf16(out);
  EXPECT_EQ(std::memcmp(before.data(), after.data(), before.size() * sizeof(float)), 0);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);  // a refusal leaves no error behind
}

// The runners' one selector: the fused kernel from kMinRowsToFuse rows when asked, else (and for
// shapes it refuses) the pair, each bit for bit what it stands for.
TEST(GemmSwiglu, TheSelectorTakesTheFusedKernelOnlyWhereItShould) {
  YOCO_REQUIRE_HOPPER();
  Gemm gemm;
  ASSERT_TRUE(gemm.ok()) << gemm.error();
  struct Sel {
    int64_t M, F;
    bool fused_expected;
  };
  const int64_t K = 128;
  for (const Sel sc : {Sel{gs::kMinRowsToFuse, 256, true}, Sel{gs::kMinRowsToFuse - 1, 256, false},
                       Sel{gs::kMinRowsToFuse, 200, false}}) {
    const int64_t M = sc.M, F = sc.F;
    SCOPED_TRACE(std::to_string(M) + " rows, F " + std::to_string(F));
    const auto x = random_bf16_values(static_cast<size_t>(M * K), 21);
    const auto w = random_bf16_values(static_cast<size_t>(2 * F * K), 22, 0.1f);
    DeviceArray<bf16> dx(M * K), dw(2 * F * K), h13(M * 2 * F), sel(M * F), direct(M * F);
    upload_bf16(dx, x);
    upload_bf16(dw, w);
    // Where the fused kernel is expected no W1|W3 buffer is given: the pair cannot have run.
    ASSERT_EQ(ffn_up_swiglu(gemm, dx.ptr, M, K, dw.ptr, F, sc.fused_expected ? nullptr : h13.ptr,
                            sc.fused_expected ? 0 : M, sel.ptr, true, nullptr),
              "");
    if (sc.fused_expected) {
      ASSERT_EQ(launch_gemm_swiglu(dx.ptr, dw.ptr, gs::Shape{M, K, F, K, F}, direct.ptr, nullptr), cudaSuccess);
    } else {
      ASSERT_EQ(gemm.linear(dx.ptr, M, K, dw.ptr, 2 * F, h13.ptr, nullptr), "");
      ASSERT_EQ(launch_swiglu(h13.ptr, M, F, direct.ptr, nullptr), cudaSuccess);
    }
    const auto a = download_bf16(sel), b = download_bf16(direct);
    ASSERT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0);
    // The pair's turn without a W1|W3 buffer is an error, not a write through null.
    if (!sc.fused_expected) {
      EXPECT_NE(ffn_up_swiglu(gemm, dx.ptr, M, K, dw.ptr, F, nullptr, 0, sel.ptr, true, nullptr), "");
      EXPECT_NE(ffn_up_swiglu(gemm, dx.ptr, M, K, dw.ptr, F, h13.ptr, M - 1, sel.ptr, true, nullptr), "")
          << "a buffer a row short";
    }
  }
  Gemm& g = gemm;
  DeviceArray<bf16> x(gs::kMinRowsToFuse * K), w(2 * 256 * K), out(gs::kMinRowsToFuse * 256);
  EXPECT_NE(ffn_up_swiglu(g, x.ptr, gs::kMinRowsToFuse, K, w.ptr, 256, nullptr, 0, out.ptr, false, nullptr), "")
      << "not asked to fuse, and no buffer for the pair";
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
}

// The kernel in CTA pairs (GemmSwigluCtas::pair: clusters of two sharing the weight tile by
// multicast) runs the one-CTA kernel's arithmetic in the same order, so it must give its bits in every
// element, and leave the same padding and rows past M alone. The GPU suite runs the Smoke test alone
// first (a wrong barrier count hangs) and sets YOCO_FFN_SKIP_PAIRS=1 when it fails.
#define YOCO_REQUIRE_PAIRS()                                                                        \
  do {                                                                                             \
    YOCO_REQUIRE_HOPPER();                                                                         \
    if (const char* skip = std::getenv("YOCO_FFN_SKIP_PAIRS"); skip && std::string(skip) == "1")    \
      GTEST_SKIP() << "YOCO_FFN_SKIP_PAIRS=1 (the GPU suite's smoke test of the CTA pairs failed)"; \
  } while (0)

void expect_pairs_give_the_one_cta_bits(const Case& cs, uint64_t seed, int pair_launches = 1) {
  const int64_t M = cs.M, K = cs.K, F = cs.F, xs = K + cs.x_pad, os = F + cs.out_pad, extra = 3;
  SCOPED_TRACE(std::to_string(M) + " x " + std::to_string(K) + " -> " + std::to_string(F) + ", " +
               std::to_string(gs::row_tiles(M)) + " row tiles");
  const auto x = random_bf16_values(static_cast<size_t>(M * xs), seed);
  const auto w = random_bf16_values(static_cast<size_t>(2 * F * K), seed + 1, 1.0f / std::sqrt(static_cast<float>(K)));
  DeviceArray<bf16> dx(M * xs), dw(2 * F * K), one((M + extra) * os), pairs((M + extra) * os);
  upload_bf16(dx, x);
  upload_bf16(dw, w);
  const gs::Shape shape{M, K, F, xs, os};
  ASSERT_EQ(launch_gemm_swiglu(dx.ptr, dw.ptr, shape, one.ptr, nullptr, GemmSwigluCtas::one), cudaSuccess);
  const auto a = download_bf16(one);
  // Repeated: a race between the two CTAs' rings would show in some launches only.
  for (int launch = 0; launch < pair_launches; ++launch) {
    const int64_t pairs_before = gemm_swiglu_launches(GemmSwigluCtas::pair);
    ASSERT_EQ(launch_gemm_swiglu(dx.ptr, dw.ptr, shape, pairs.ptr, nullptr, GemmSwigluCtas::pair), cudaSuccess);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    ASSERT_EQ(gemm_swiglu_launches(GemmSwigluCtas::pair), pairs_before + 1) << "the one-CTA kernel ran instead";
    const auto b = download_bf16(pairs);
    size_t differ = 0, first = a.size();
    for (size_t i = 0; i < a.size(); ++i)
      if (std::memcmp(&a[i], &b[i], sizeof(float)) != 0) first = std::min(first, i), ++differ;
    ASSERT_EQ(differ, 0u) << "launch " << launch << ", first at row " << first / static_cast<size_t>(os) << " col "
                          << first % static_cast<size_t>(os);
  }
  const auto b = download_bf16(pairs);
  // The one-CTA kernel's output is checked against the contract above; the poison past M holds in both.
  for (int64_t r = M; r < M + extra; ++r) ASSERT_TRUE(std::isnan(b[static_cast<size_t>(r * os)])) << "wrote row " << r;
}

TEST(GemmSwigluCtaPairs, Smoke) {
  YOCO_REQUIRE_PAIRS();
  // One row (one row tile: its pair's rank 1 is a phantom); three row tiles with padded strides.
  expect_pairs_give_the_one_cta_bits(Case{1, 64, 128, 0, 0}, 31);
  expect_pairs_give_the_one_cta_bits(Case{300, 128, 256, 64, 8}, 33);
}

TEST(GemmSwigluCtaPairs, GiveTheOneCtaKernelsBitsEverywhere) {
  YOCO_REQUIRE_PAIRS();
  // Even and odd row tiles, a ragged M; more pair tiles than clusters fit (each cluster walks
  // several, its two rings in step), also at one k block a tile (every release a tile's last); yoco-3b's
  // K and F, launched 20 times.
  for (const Case cs : {Case{1100, 256, 768, 0, 0}, Case{4096 + 77, 192, 768, 0, 0}, Case{8192 + 128, 128, 2048, 0, 0},
                        Case{8192 + 128, 64, 2048, 0, 0}})
    expect_pairs_give_the_one_cta_bits(cs, 41);
  expect_pairs_give_the_one_cta_bits(Case{2048, 3072, 8192, 0, 0}, 43, 20);
}

}  // namespace
}  // namespace yoco::cuda
