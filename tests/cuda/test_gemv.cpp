// The decode GEMV (cuda/ops/gemv.hpp) against the reference linear() in fp64: bf16 and fp32 outputs and
// the accumulating one, m = 1..4, the 3B presets' shapes and odd ones (a round of loads cut short, rows
// not a multiple of a block's warps, more rows than the capped grid's warps); what it refuses; and
// Gemm's dispatch (set_small_rows): the GEMV's bits where it serves the call, cuBLAS's where it does not.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "device_test_data.hpp"
#include "gemv_emulation.hpp"
#include "gpu_test_support.hpp"
#include "ops.hpp"
#include "ops/gemm.hpp"
#include "ops/gemv.hpp"
#include "ops/gemv_plan.hpp"

namespace yoco::cuda {
namespace {

using namespace yoco::cuda_test;
using bf16 = __nv_bfloat16;

struct Problem {
  int64_t m, k, n;
};

TEST(Gemv, MatchesLinearForEveryOutputAndRowCount) {
  YOCO_REQUIRE_GPU();
  const std::vector<Problem> shapes = {
      {1, 3072, 3072}, {4, 3072, 3072}, {2, 8192, 515}, {3, 200, 13}, {1, 1032, 9}, {4, 8, 1},
      {1, 8, gemv::kMaxBlocks * gemv::kWarpsPerBlock + 77}};
  for (const Problem& p : shapes) {
    SCOPED_TRACE("m " + std::to_string(p.m) + " k " + std::to_string(p.k) + " n " + std::to_string(p.n));
    const auto x = random_bf16_values(p.m * p.k, 11), w = random_bf16_values(p.n * p.k, 12, 1.0f / 27);
    DeviceArray<bf16> dx(p.m * p.k), dw(p.n * p.k), y(p.m * p.n);
    DeviceArray<float> y32(p.m * p.n), acc(p.m * p.n);
    upload_bf16(dx, x);
    upload_bf16(dw, w);
    // The accumulating output starts from a known residual r[i] = (i mod 97) / 97.
    std::vector<float> r(static_cast<size_t>(p.m * p.n));
    for (size_t i = 0; i < r.size(); ++i) r[i] = static_cast<float>(i % 97) / 97.0f;
    ASSERT_EQ(cudaMemcpy(acc.ptr, r.data(), r.size() * sizeof(float), cudaMemcpyHostToDevice), cudaSuccess);
    ASSERT_EQ(launch_gemv(dx.ptr, p.m, p.k, dw.ptr, p.n, y.ptr, GemvOut::bf16, nullptr), cudaSuccess);
    ASSERT_EQ(launch_gemv(dx.ptr, p.m, p.k, dw.ptr, p.n, y32.ptr, GemvOut::f32, nullptr), cudaSuccess);
    ASSERT_EQ(launch_gemv(dx.ptr, p.m, p.k, dw.ptr, p.n, acc.ptr, GemvOut::f32_accumulate, nullptr), cudaSuccess);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    const auto want = to_vector(linear<double>(to_mat(x, p.m, p.k), to_mat(w, p.n, p.k)));
    EXPECT_LE(rms_error(download_bf16(y), want), bf16_output_bound(want));
    EXPECT_LE(rms_error(download(y32), want), 1e-5);  // fp32 sums only
    std::vector<double> want_acc(want.size());
    for (size_t i = 0; i < want.size(); ++i) want_acc[i] = want[i] + r[i];
    EXPECT_LE(rms_error(download(acc), want_acc), 1e-5);
    // The kernel's own order of sums, replayed on the CPU: the fp32 outputs equal it bit for bit, the
    // bf16 one is its rounding, and the accumulating one the residual plus it (one add).
    const std::vector<float> bits = gemv_emulate(x, p.m, p.k, w, p.n);
    EXPECT_EQ(download(y32), bits) << "the fp32 sums differ from the kernel's order replayed";
    std::vector<float> rounded(bits.size()), added(bits.size());
    for (size_t i = 0; i < bits.size(); ++i) {
      rounded[i] = round_to_bf16(bits[i]);
      added[i] = r[i] + bits[i];
    }
    EXPECT_EQ(download_bf16(y), rounded) << "the bf16 output is not the fp32 sums rounded once";
    EXPECT_EQ(download(acc), added) << "the accumulating output is not the residual plus the sums";
  }
}

TEST(Gemv, RefusesWhatItDoesNotServe) {
  YOCO_REQUIRE_GPU();
  DeviceArray<bf16> dx(5 * 64), dw(64 * 64), y(5 * 64);
  EXPECT_EQ(launch_gemv(dx.ptr, 5, 64, dw.ptr, 64, y.ptr, GemvOut::bf16, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(launch_gemv(dx.ptr, 1, 60, dw.ptr, 64, y.ptr, GemvOut::bf16, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(launch_gemv(dx.ptr + 1, 1, 56, dw.ptr, 64, y.ptr, GemvOut::bf16, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(launch_gemv(dx.ptr, 1, 64, dw.ptr, 64, nullptr, GemvOut::bf16, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(launch_gemv(nullptr, 1, 64, dw.ptr, 64, y.ptr, GemvOut::bf16, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(launch_gemv(dx.ptr, 1, 64, nullptr, 64, y.ptr, GemvOut::bf16, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess) << "a refusal launches nothing";
}

// x [m, k] and w [n, k] of random bf16 values, on the device, and their product in fp64.
struct Operands {
  int64_t m, k, n;
  std::vector<float> x, w;
  DeviceArray<bf16> dx, dw;
  Operands(int64_t m_, int64_t k_, int64_t n_, uint64_t seed)
      : m(m_), k(k_), n(n_), x(random_bf16_values(m * k, seed)), w(random_bf16_values(n * k, seed + 1, 1.0f / 55)),
        dx(m * k), dw(n * k) {
    upload_bf16(dx, x);
    upload_bf16(dw, w);
  }
  std::vector<double> product() const { return to_vector(linear<double>(to_mat(x, m, k), to_mat(w, n, k))); }
};

TEST(Gemv, GemmTakesItForAFewRowsAndCublasForTheRest) {
  YOCO_REQUIRE_GPU();
  Gemm cublas, small;
  ASSERT_TRUE(cublas.ok() && small.ok());
  small.set_small_rows(GemmSmallRows::gemv);
  const int64_t k = 3072, n = 2048;
  for (const int64_t m : {int64_t{2}, int64_t{5}}) {
    SCOPED_TRACE("m " + std::to_string(m));
    const Operands o(m, k, n, 21);
    DeviceArray<bf16> y_gemm(m * n), y_direct(m * n), y_cublas(m * n);
    ASSERT_EQ(small.linear(o.dx.ptr, m, k, o.dw.ptr, n, y_gemm.ptr, nullptr), "");
    ASSERT_EQ(cublas.linear(o.dx.ptr, m, k, o.dw.ptr, n, y_cublas.ptr, nullptr), "");
    const auto got = download_bf16(y_gemm);
    if (m <= gemv::kMaxRows) {
      ASSERT_EQ(launch_gemv(o.dx.ptr, m, k, o.dw.ptr, n, y_direct.ptr, GemvOut::bf16, nullptr), cudaSuccess);
      EXPECT_EQ(got, download_bf16(y_direct)) << "the GEMV's bits";
    } else {
      EXPECT_EQ(got, download_bf16(y_cublas)) << "cuBLAS's bits past the GEMV's rows";
    }
    const auto want = o.product();
    EXPECT_LE(rms_error(got, want), bf16_output_bound(want));
  }
  // fp32 out, written and added to (the LM head's and the residual-in-GEMM path's calls): the GEMV's bits.
  {
    const Operands o(3, k, n, 25);
    DeviceArray<float> y_gemm(3 * n), y_direct(3 * n);
    ASSERT_EQ(small.linear_f32(o.dx.ptr, 3, k, o.dw.ptr, n, y_gemm.ptr, nullptr), "");
    ASSERT_EQ(launch_gemv(o.dx.ptr, 3, k, o.dw.ptr, n, y_direct.ptr, GemvOut::f32, nullptr), cudaSuccess);
    EXPECT_EQ(download(y_gemm), download(y_direct)) << "linear_f32";
    ASSERT_EQ(small.accumulate_f32(o.dx.ptr, 3, k, o.dw.ptr, n, y_gemm.ptr, nullptr), "");
    ASSERT_EQ(launch_gemv(o.dx.ptr, 3, k, o.dw.ptr, n, y_direct.ptr, GemvOut::f32_accumulate, nullptr), cudaSuccess);
    EXPECT_EQ(download(y_gemm), download(y_direct)) << "accumulate_f32";
  }
  // A tuned Gemm times its own candidates: set_small_rows does not change its path.
  {
    Gemm tuned, tuned_small;
    ASSERT_EQ(tuned.choose_algorithms(GemmAlgorithms::tuned), "");
    ASSERT_EQ(tuned_small.choose_algorithms(GemmAlgorithms::tuned), "");
    tuned_small.set_small_rows(GemmSmallRows::gemv);
    const Operands o(1, k, n, 27);
    DeviceArray<bf16> y_a(n), y_b(n);
    ASSERT_EQ(tuned.linear(o.dx.ptr, 1, k, o.dw.ptr, n, y_a.ptr, nullptr), "");
    ASSERT_EQ(tuned_small.linear(o.dx.ptr, 1, k, o.dw.ptr, n, y_b.ptr, nullptr), "");
    const auto want = o.product();
    EXPECT_LE(rms_error(download_bf16(y_a), want), bf16_output_bound(want));
    EXPECT_LE(rms_error(download_bf16(y_b), want), bf16_output_bound(want));
    EXPECT_EQ(tuned.tuning_record().size(), tuned_small.tuning_record().size()) << "both timed the shape";
  }
  // A call the GEMV refuses (x not 16-byte aligned: the buffers read from their second element, as
  // [1, 3064] and [n, 3064]) goes to cuBLAS: its bits.
  const Operands o(1, k, n, 23);
  const int64_t kk = k - 8;
  DeviceArray<bf16> y(n), y_cublas(n);
  ASSERT_EQ(small.linear(o.dx.ptr + 1, 1, kk, o.dw.ptr, n, y.ptr, nullptr), "");
  ASSERT_EQ(cublas.linear(o.dx.ptr + 1, 1, kk, o.dw.ptr, n, y_cublas.ptr, nullptr), "");
  EXPECT_EQ(download_bf16(y), download_bf16(y_cublas));
}

}  // namespace
}  // namespace yoco::cuda
