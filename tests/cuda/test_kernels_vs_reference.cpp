// Each shared CUDA kernel against the reference op it must equal (DESIGN.md
// §6): fresh random bf16 inputs, outputs poisoned with NaN before the run,
// error as RMS ratio against the fp64 reference on the same inputs, bounded by
// 2x the error of rounding the exact output to bf16 (fp32 outputs: 1e-5).
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <random>

#include "device_test_data.hpp"
#include "ops/elementwise.hpp"
#include "ops/gemm.hpp"
#include "gpu_test_support.hpp"
#include "gret.hpp"
#include "gret/gret_recurrent.hpp"
#include "ops.hpp"

namespace yoco::cuda {
namespace {

using namespace yoco::cuda_test;

TEST(CudaKernels, EmbeddingGathersAndScales) {
  YOCO_REQUIRE_GPU();
  const int64_t V = 50, d = 777, n = 65;
  const auto table = random_bf16_values(V * d, 1);
  std::vector<int64_t> tokens(n);
  for (int64_t i = 0; i < n; ++i) tokens[i] = (i * 37) % V;
  DeviceArray<bf16> dt(V * d);
  DeviceArray<int64_t> dtok(n);
  DeviceArray<float> out(n * d);
  upload_bf16(dt, table);
  upload(dtok, tokens);
  const float scale = std::sqrt(static_cast<float>(d));
  ASSERT_EQ(launch_embedding(dtok.ptr, n, dt.ptr, d, scale, out.ptr, nullptr), cudaSuccess);
  const auto got = download(out);
  for (int64_t r = 0; r < n; ++r)
    for (int64_t c = 0; c < d; ++c) ASSERT_EQ(got[r * d + c], scale * table[tokens[r] * d + c]) << r << "," << c;
}

TEST(CudaKernels, RmsNormAndTheFusedAddMatchTheReference) {
  YOCO_REQUIRE_GPU();
  for (int64_t rows : {1, 3, 65}) {
    for (int64_t d : {64, 768, 3072, 4097}) {
      SCOPED_TRACE(std::to_string(rows) + " x " + std::to_string(d));
      const auto x = random_bf16_values(rows * d, 2, 3.0f), delta = random_bf16_values(rows * d, 3);
      const auto w = random_bf16_values(d, 4, 0.25f);
      std::vector<double> wd(w.begin(), w.end());
      // Plain norm of x.
      DeviceArray<float> res(rows * d);
      DeviceArray<bf16> dw(d), ddelta(rows * d), out(rows * d);
      upload(res, x);
      upload_bf16(dw, w);
      upload_bf16(ddelta, delta);
      ASSERT_EQ(launch_rms_norm(res.ptr, dw.ptr, rows, d, 1e-5f, out.ptr, nullptr), cudaSuccess);
      const auto want = to_vector(rms_norm<double>(to_mat(x, rows, d), wd.data(), 1e-5));
      EXPECT_LE(rms_error(download_bf16(out), want), bf16_output_bound(want));
      // residual += delta; norm.
      ASSERT_EQ(launch_add_rms_norm(res.ptr, ddelta.ptr, dw.ptr, rows, d, 1e-5f, out.ptr, nullptr), cudaSuccess);
      const Mat<double> sum = to_mat(x, rows, d) + to_mat(delta, rows, d);
      EXPECT_LE(rms_error(download(res), to_vector(sum)), 1e-7);  // one fp32 add of bf16 values
      const auto want2 = to_vector(rms_norm<double>(sum, wd.data(), 1e-5));
      EXPECT_LE(rms_error(download_bf16(out), want2), bf16_output_bound(want2));
    }
  }
}

// The cached kernel (weights loaded first, the row kept in registers) against the looped one: the same
// bits in the residual and the output, with and without the add and the weight, at one row (a decode
// step), a few, and past a block's worth; widths in pieces of 4 up to the cached kernel's 4096, the
// scalar path (d odd), and delta aliasing the output as the runners' prefill runs it.
void expect_same_bits(const std::vector<float>& a, const std::vector<float>& b, const char* what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (size_t i = 0; i < a.size(); ++i)
    ASSERT_EQ(std::bit_cast<uint32_t>(a[i]), std::bit_cast<uint32_t>(b[i])) << what << " differs at " << i;
}

TEST(CudaKernels, RmsNormCachedEqualsLoopedBitForBit) {
  YOCO_REQUIRE_GPU();
  for (int64_t rows : {1, 3, 300}) {
    for (int64_t d : {64, 768, 3072, 4096, 1001}) {
      for (const bool add : {false, true}) {
        for (const bool weight : {true, false}) {
          for (const bool alias : {false, true}) {
            if (alias && !add) continue;
            SCOPED_TRACE(std::to_string(rows) + " x " + std::to_string(d) + (add ? " add" : "") +
                         (weight ? " weight" : "") + (alias ? " delta = out" : ""));
            const auto x = random_bf16_values(rows * d, 12, 3.0f), delta = random_bf16_values(rows * d, 13);
            const auto w = random_bf16_values(d, 14, 0.25f);
            DeviceArray<float> res[2] = {DeviceArray<float>(rows * d), DeviceArray<float>(rows * d)};
            DeviceArray<bf16> out[2] = {DeviceArray<bf16>(rows * d), DeviceArray<bf16>(rows * d)};
            DeviceArray<bf16> ddelta(rows * d), dw(d);
            upload_bf16(dw, w);
            const RmsNormKernel kernels[2] = {RmsNormKernel::looped, RmsNormKernel::cached};
            for (int k = 0; k < 2; ++k) {
              upload(res[k], x);
              upload_bf16(alias ? out[k] : ddelta, delta);
              const bf16* dl = alias ? out[k].ptr : ddelta.ptr;
              const bf16* wp = weight ? dw.ptr : nullptr;
              const cudaError_t e =
                  add ? launch_add_rms_norm(res[k].ptr, dl, wp, rows, d, 1e-5f, out[k].ptr, nullptr, kernels[k])
                      : launch_rms_norm(res[k].ptr, wp, rows, d, 1e-5f, out[k].ptr, nullptr, kernels[k]);
              ASSERT_EQ(e, cudaSuccess);
            }
            expect_same_bits(download(res[0]), download(res[1]), "residual");
            expect_same_bits(download_bf16(out[0]), download_bf16(out[1]), "output");
          }
        }
      }
    }
  }
  // Past its width the cached kernel is refused, and automatic takes the looped one.
  DeviceArray<float> res(4100);
  DeviceArray<bf16> out(4100);
  EXPECT_EQ(launch_rms_norm(res.ptr, nullptr, 1, 4100, 1e-5f, out.ptr, nullptr, RmsNormKernel::cached),
            cudaErrorInvalidValue);
  cudaGetLastError();
  EXPECT_EQ(launch_rms_norm(res.ptr, nullptr, 1, 4100, 1e-5f, out.ptr, nullptr), cudaSuccess);
}

// A layer's two norms with its residual stored once (launch_rms_norm_of_sum between the sublayers,
// launch_add2_rms_norm after the second; YOCO_RESIDUAL_PER_LAYER) against two add + RMSNorm passes:
// both normed outputs and the final residual, bit for bit, on both kernels, pieces of 4 and scalar,
// with and without weights. The residual has full fp32 mantissas (a residual of bf16 values would make
// x + d1 + d2 exact in any order, and a reassociated sum would pass). Aliasing as the header allows:
// the first delta in the last norm's output rows (YOCO keeps its mixer delta there), or in the middle
// norm's own output. And the middle norm leaves the residual exactly as it was.
TEST(CudaKernels, ResidualStoredOnceALayerEqualsTwoAddNormsBitForBit) {
  YOCO_REQUIRE_GPU();
  enum class Alias { none, first_is_last_out, first_is_mid_out };
  for (int64_t rows : {1, 3, 300}) {
    for (int64_t d : {768, 3072, 1001}) {
      for (const RmsNormKernel kernel : {RmsNormKernel::looped, RmsNormKernel::cached}) {
        for (const bool weight : {true, false}) {
          for (const Alias alias : {Alias::none, Alias::first_is_last_out, Alias::first_is_mid_out}) {
            SCOPED_TRACE(std::to_string(rows) + " x " + std::to_string(d) +
                         (kernel == RmsNormKernel::cached ? " cached" : " looped") + (weight ? " weight" : "") +
                         (alias == Alias::first_is_last_out  ? " first = last out"
                          : alias == Alias::first_is_mid_out ? " first = middle out"
                                                             : ""));
            std::mt19937_64 rng(21 + rows + d);
            std::normal_distribution<float> normal(0.0f, 3.0f);
            std::vector<float> x(static_cast<size_t>(rows * d));
            for (float& v : x) v = normal(rng);  // every mantissa bit in use
            const auto d1 = random_bf16_values(rows * d, 23), d2 = random_bf16_values(rows * d, 24, 2.0f);
            const auto w1 = random_bf16_values(d, 25, 0.25f), w2 = random_bf16_values(d, 26, 0.5f);
            DeviceArray<float> res_pair(rows * d), res_once(rows * d);
            DeviceArray<bf16> first(rows * d), second(rows * d), wa(d), wb(d);
            DeviceArray<bf16> mid_pair(rows * d), mid_once(rows * d), end_pair(rows * d), end_once(rows * d);
            upload(res_pair, x);
            upload(res_once, x);
            upload_bf16(second, d2);
            upload_bf16(wa, w1);
            upload_bf16(wb, w2);
            const bf16* wpa = weight ? wa.ptr : nullptr;
            const bf16* wpb = weight ? wb.ptr : nullptr;
            // The pair: residual += d1, norm; residual += d2, norm.
            upload_bf16(first, d1);
            ASSERT_EQ(launch_add_rms_norm(res_pair.ptr, first.ptr, wpa, rows, d, 1e-5f, mid_pair.ptr, nullptr, kernel),
                      cudaSuccess);
            ASSERT_EQ(launch_add_rms_norm(res_pair.ptr, second.ptr, wpb, rows, d, 1e-5f, end_pair.ptr, nullptr, kernel),
                      cudaSuccess);
            // Once a layer, the first delta where the alias puts it.
            DeviceArray<bf16>& kept = alias == Alias::first_is_last_out ? end_once
                                      : alias == Alias::first_is_mid_out ? mid_once
                                                                         : first;
            upload_bf16(kept, d1);
            ASSERT_EQ(launch_rms_norm_of_sum(res_once.ptr, kept.ptr, wpa, rows, d, 1e-5f, mid_once.ptr, nullptr,
                                             kernel),
                      cudaSuccess);
            expect_same_bits(download(res_once), x, "the residual after the middle norm (it must not be stored)");
            expect_same_bits(download_bf16(mid_once), download_bf16(mid_pair), "the middle norm's output");
            if (alias == Alias::first_is_mid_out) upload_bf16(mid_once, d1);  // the middle output replaced it
            ASSERT_EQ(launch_add2_rms_norm(res_once.ptr, kept.ptr, second.ptr, wpb, rows, d, 1e-5f, end_once.ptr,
                                           nullptr, kernel),
                      cudaSuccess);
            expect_same_bits(download_bf16(end_once), download_bf16(end_pair), "the last norm's output");
            expect_same_bits(download(res_once), download(res_pair), "the residual after the layer");
          }
        }
      }
    }
  }
  // A delta it needs and is not given: refused before any launch.
  DeviceArray<float> res(64);
  DeviceArray<bf16> out(64), delta(64);
  EXPECT_EQ(launch_rms_norm_of_sum(res.ptr, nullptr, nullptr, 1, 64, 1e-5f, out.ptr, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(launch_add2_rms_norm(res.ptr, delta.ptr, nullptr, nullptr, 1, 64, 1e-5f, out.ptr, nullptr),
            cudaErrorInvalidValue);
  EXPECT_EQ(launch_add2_rms_norm(res.ptr, nullptr, delta.ptr, nullptr, 1, 64, 1e-5f, out.ptr, nullptr),
            cudaErrorInvalidValue);
}

// Which rows the cached kernel takes: host arithmetic, no GPU.
TEST(CudaKernels, RmsNormCachedFitsUpTo4096ColumnsInPiecesOf4) {
  EXPECT_TRUE(rms_norm_cached_fits(3072, true));
  EXPECT_TRUE(rms_norm_cached_fits(4096, true));
  EXPECT_FALSE(rms_norm_cached_fits(4100, true));
  EXPECT_FALSE(rms_norm_cached_fits(3074, true));  // not in pieces of 4
  EXPECT_TRUE(rms_norm_cached_fits(1024, false));
  EXPECT_FALSE(rms_norm_cached_fits(1025, false));
  EXPECT_FALSE(rms_norm_cached_fits(0, false));
}

// F 1000: 16-byte pieces; F 1001: the scalar path; 70,000 rows of 8: more rows
// than the grid's 65,535 (rows are grid-strided).
TEST(CudaKernels, SwigluMatchesSiluTimesGate) {
  YOCO_REQUIRE_GPU();
  struct Case {
    int64_t rows, F;
  };
  for (const Case cs : {Case{1, 1000}, Case{63, 1000}, Case{64, 1000}, Case{65, 1000}, Case{3, 1001}, Case{65, 1001},
                        Case{70000, 8}}) {
    const int64_t rows = cs.rows, F = cs.F;
    const auto h = random_bf16_values(rows * 2 * F, 5, 2.0f);
    DeviceArray<bf16> dh(rows * 2 * F), out(rows * F);
    upload_bf16(dh, h);
    ASSERT_EQ(launch_swiglu(dh.ptr, rows, F, out.ptr, nullptr), cudaSuccess);
    std::vector<double> want(rows * F);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < F; ++c) want[r * F + c] = silu<double>(h[r * 2 * F + c]) * h[r * 2 * F + F + c];
    EXPECT_LE(rms_error(download_bf16(out), want), bf16_output_bound(want)) << rows << " x " << F;
  }
}

// Both layouts and frequency rules, a row stride wider than the heads (q inside
// a fused projection), batch rows restarting their positions, and positions
// near 1M where fp32 angles would be off by ~0.06 rad.
TEST(CudaKernels, RopeMatchesTheReferenceIncludingFarPositions) {
  YOCO_REQUIRE_GPU();
  struct Case {
    RopeLayout layout;
    bool linspace;
    int64_t pos0, heads;
  };
  // Heads 3: the one-at-a-time loop alone; 6: a group of four, then two.
  for (const Case& cs : {Case{RopeLayout::interleaved, true, 0, 3}, Case{RopeLayout::half_split, false, 0, 3},
                         Case{RopeLayout::interleaved, true, (1 << 20) - 7, 3}, Case{RopeLayout::half_split, true, 9, 6},
                         Case{RopeLayout::interleaved, false, (1 << 20) - 7, 6}}) {
    const int64_t heads = cs.heads, D = 128, per_seq = 5, batch = 2, rows = batch * per_seq, stride = heads * D + 40;
    const auto x = random_bf16_values(rows * stride, 6);
    const auto inv = cs.linspace ? rope_inv_freq_linspace(D, 10000.0) : rope_inv_freq_pow(D, 10000.0);
    DeviceArray<bf16> dx(rows * stride);
    DeviceArray<double> dinv(inv.size());
    upload_bf16(dx, x);
    upload(dinv, inv);
    ASSERT_EQ(launch_rope(dx.ptr, rows, stride, heads, D, cs.pos0, per_seq, dinv.ptr, cs.layout, nullptr), cudaSuccess);
    const auto got = download_bf16(dx);
    Mat<double> ref = to_mat(x, rows, stride).leftCols(heads * D);
    std::vector<int64_t> pos(rows);
    for (int64_t r = 0; r < rows; ++r) pos[r] = cs.pos0 + r % per_seq;
    apply_rope(ref, heads, D, pos, inv, cs.layout);
    std::vector<double> want, have;
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t c = 0; c < heads * D; ++c) {
        want.push_back(ref(r, c));
        have.push_back(got[r * stride + c]);
      }
      for (int64_t c = heads * D; c < stride; ++c) ASSERT_EQ(got[r * stride + c], x[r * stride + c]) << "untouched";
    }
    EXPECT_LE(rms_error(have, want), bf16_output_bound(want)) << "pos0 " << cs.pos0 << ", heads " << heads;
  }
}

TEST(CudaKernels, GemmMatchesLinearAtOddShapes) {
  YOCO_REQUIRE_GPU();
  Gemm gemm;
  ASSERT_TRUE(gemm.ok()) << gemm.error();
  for (int64_t m : {1, 63, 65, 300}) {
    const int64_t k = 770, n = 515;
    const auto x = random_bf16_values(m * k, 7), w = random_bf16_values(n * k, 8, 1.0f / 27);
    DeviceArray<bf16> dx(m * k), dw(n * k), y(m * n);
    DeviceArray<float> y32(m * n);
    upload_bf16(dx, x);
    upload_bf16(dw, w);
    ASSERT_EQ(gemm.linear(dx.ptr, m, k, dw.ptr, n, y.ptr, nullptr), "");
    ASSERT_EQ(gemm.linear_f32(dx.ptr, m, k, dw.ptr, n, y32.ptr, nullptr), "");
    const auto want = to_vector(linear<double>(to_mat(x, m, k), to_mat(w, n, k)));
    EXPECT_LE(rms_error(download_bf16(y), want), bf16_output_bound(want)) << m;
    EXPECT_LE(rms_error(download(y32), want), 1e-5) << m;  // fp32 accumulation only
  }
}

// Chained decode steps equal the reference recurrence, outputs and fp32 state.
TEST(CudaKernels, GretRecurrentStepsMatchTheReference) {
  YOCO_REQUIRE_GPU();
  for (int64_t D : {64, 128, 256}) {
    for (int64_t batch : {1, 3}) {
      for (double n : {0.1, 1.0, 16.0}) {
        SCOPED_TRACE("D " + std::to_string(D) + " batch " + std::to_string(batch) + " gate /" + std::to_string(n));
        const int64_t heads = 2, steps = 9, stride = heads * D * 3;  // q | k | v in one row
        std::mt19937_64 rng(static_cast<uint64_t>(D * 10 + batch));
        std::normal_distribution<double> gauss;
        DeviceArray<float> state(batch * heads * D * D);
        ASSERT_EQ(cudaMemset(state.ptr, 0, state.n * sizeof(float)), cudaSuccess);
        DeviceArray<bf16> qkv(batch * stride), o(batch * heads * D);
        DeviceArray<float> lg(batch * heads);
        std::vector<std::vector<float>> q_all(batch * heads), k_all(batch * heads), v_all(batch * heads);
        std::vector<std::vector<double>> g_all(batch * heads);
        std::vector<float> last;
        for (int64_t t = 0; t < steps; ++t) {
          const auto row = random_bf16_values(batch * stride, 100 + t, 0.5f);
          std::vector<float> g(batch * heads);
          for (auto& x : g) x = static_cast<float>(logsigmoid(gauss(rng)) / n);
          for (int64_t b = 0; b < batch; ++b)
            for (int64_t h = 0; h < heads; ++h) {
              const int64_t bh = b * heads + h;
              for (int64_t i = 0; i < D; ++i) {
                q_all[bh].push_back(row[b * stride + h * D + i]);
                k_all[bh].push_back(row[b * stride + heads * D + h * D + i]);
                v_all[bh].push_back(row[b * stride + 2 * heads * D + h * D + i]);
              }
              g_all[bh].push_back(g[bh]);
            }
          upload_bf16(qkv, row);
          upload(lg, g);
          ASSERT_EQ(launch_gret_recurrent_step(qkv.ptr, qkv.ptr + heads * D, qkv.ptr + 2 * heads * D, stride, lg.ptr,
                                               state.ptr, o.ptr, batch, heads, D, nullptr),
                    cudaSuccess);
          last = download_bf16(o);
        }
        const auto got_state = download(state);
        for (int64_t bh = 0; bh < batch * heads; ++bh) {
          const auto Q = to_mat(q_all[bh], steps, D), Kx = to_mat(k_all[bh], steps, D), Vx = to_mat(v_all[bh], steps, D);
          Vec<double> G(steps);
          for (int64_t t = 0; t < steps; ++t) G(t) = g_all[bh][t];
          const auto ref = gret_recurrent<double>(Q, Kx, Vx, G, nullptr);
          std::vector<double> want_o(D), have_o(D), want_s, have_s;
          for (int64_t j = 0; j < D; ++j) {
            want_o[j] = ref.o(steps - 1, j);
            have_o[j] = last[(bh / heads) * heads * D + (bh % heads) * D + j];
          }
          for (int64_t i = 0; i < D * D; ++i) {
            want_s.push_back(ref.state.data()[i]);
            have_s.push_back(got_state[bh * D * D + i]);
          }
          EXPECT_LE(rms_error(have_o, want_o), bf16_output_bound(want_o)) << bh;
          EXPECT_LE(rms_error(have_s, want_s), 1e-5) << bh;
        }
      }
    }
  }
}

}  // namespace
}  // namespace yoco::cuda
