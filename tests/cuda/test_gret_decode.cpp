// The gRet decode kernels (issue 14) against the fp64 reference:
// - the sliced decode step (plain and fused with norm + gate) vs gret_recurrent<double>
//   one token per step, batch 1 and 3, 24 heads, D 48/64/128/256 (and 40, the
//   general path), q/k/v inside a wider row, a random starting state, decays
//   from strong (log γ = −8) to none (log γ = 0);
// - 4096 steps at γ ≈ 0.999 and ≈ 0.99994 vs an fp64 recurrence: the fp32 state
//   must not drift (KERNELS.md §5 row 2);
// - the norm + gate kernel vs rms_norm_heads_inplace then silu(g) ⊙ o, vector
//   and scalar paths, out aliasing o;
// - the half-warp norm + gate kernel (D 128) vs the per-warp one bit for bit,
//   odd item counts, g contiguous and inside q|k|v|g rows, out aliasing o; its
//   refusals (D ≠ 128, misaligned pointers or stride: nothing launched);
// - the log-decay kernel vs logsigmoid(z)/16 elementwise, |z| up to 80: no NaN
//   or Inf, every value ≤ 0;
// - 13 layers' steps launched as programmatic dependents (overlap_previous),
//   eagerly and from a CUDA graph, equal the plain launches bit for bit;
// - the deferred step (gret_pending.hpp), plain and fused, alone and as
//   programmatic dependents, eager and from a graph: every output equal to the
//   eager step's bit for bit, the state one step behind, and after the flush
//   the eager state bit for bit (also over the 4096-step decode);
// - the split step (output step + state update on side streams), plain and
//   fused, alone, as programmatic dependents and from a graph: outputs and
//   states equal the eager step's bit for bit.
// Every output buffer starts poisoned (NaN), so an unwritten element fails.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "device_test_data.hpp"
#include "gpu_test_support.hpp"
#include "gret.hpp"
#include "gret/gret_gate.hpp"
#include "gret/gret_recurrent.hpp"
#include "gret/gret_select.hpp"
#include "gret/gret_update_branches.hpp"
#include "ops.hpp"

namespace yoco::cuda {
namespace {

using namespace yoco::cuda_test;
using bf16 = __nv_bfloat16;

constexpr float kEps = 1e-5f;

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// A zeroed pending buffer for the deferred step (the allocation is poisoned first).
struct Pending {
  DeviceArray<unsigned char> bytes;
  explicit Pending(int64_t batch, int64_t heads, int64_t D)
      : bytes(static_cast<size_t>(std::max<int64_t>(16, gret_pending_bytes(batch, heads, D)))) {
    EXPECT_EQ(cudaMemset(bytes.ptr, 0, bytes.n), cudaSuccess);
  }
};

// fp64: per head of a [rows, heads·D] matrix, RMSNorm (no weight) then silu(g) ⊙ o.
Mat<double> norm_gate_reference(Mat<double> o, const Mat<double>& g, int64_t D) {
  rms_norm_heads_inplace<double>(o, D, kEps);
  return g.unaryExpr([](double x) { return silu(x); }).cwiseProduct(o);
}

struct StepCase {
  int64_t batch, heads, D, steps;
};

// Runs `steps` decode steps on the device, plain and fused, and checks every
// step's output and the final state against gret_recurrent<double>.
void check_steps(const StepCase& c, uint64_t seed) {
  const int64_t B = c.batch, H = c.heads, D = c.D, T = c.steps, HD = H * D;
  // Row layout: [pad 8 | q | pad 8 | k | pad 8 | v | g | pad 5]: q/k/v/g inside a wider row.
  const int64_t q_off = 8, k_off = q_off + HD + 8, v_off = k_off + HD + 8, g_off = v_off + HD;
  const int64_t stride = g_off + HD + 5;
  const auto rows = random_bf16_values(static_cast<size_t>(T * B * stride), seed, 1.0f);
  // k pre-scaled by D^-1/2 as the model does (rounded to bf16 again).
  std::vector<float> in = rows;
  for (int64_t t = 0; t < T * B; ++t)
    for (int64_t i = 0; i < HD; ++i) {
      float& x = in[t * stride + k_off + i];
      x = round_to_bf16(static_cast<float>(x / std::sqrt(static_cast<double>(D))));
    }
  // Decays: mostly logsigmoid(N(0, 2))/16, plus none (0) and strong (−8).
  std::mt19937_64 rng(seed * 7 + 1);
  std::normal_distribution<double> gauss(0.0, 2.0);
  std::vector<float> lg(T * B * H);
  for (size_t i = 0; i < lg.size(); ++i) {
    lg[i] = static_cast<float>(logsigmoid(gauss(rng)) / 16.0);
    if (i % 11 == 3) lg[i] = 0.0f;
    if (i % 13 == 5) lg[i] = -8.0f;
  }
  const auto s0 = random_bf16_values(static_cast<size_t>(B * H * D * D), seed + 99, 0.3f);

  DeviceArray<bf16> din(in.size()), o(B * HD), fused(B * HD);
  DeviceArray<float> dlg(lg.size()), state(s0.size()), state_f(s0.size());
  upload_bf16(din, in);
  upload(dlg, lg);
  upload(state, s0);
  upload(state_f, s0);
  const bool fused_ok = gret_fused_step_supported(D);
  // The deferred step (plain and fused) beside the eager ones: same outputs,
  // bit for bit, every step; the state one step behind until the flush.
  DeviceArray<bf16> o_d(B * HD), fused_d(B * HD);
  DeviceArray<float> state_d(s0.size()), state_fd(s0.size());
  upload(state_d, s0);
  upload(state_fd, s0);
  Pending pend(B, H, D), pend_f(B, H, D);
  std::vector<float> eager_before_last;
  std::vector<std::vector<float>> got_o(T), got_f(T);
  for (int64_t t = 0; t < T; ++t) {
    const bf16* row = din.ptr + t * B * stride;
    if (t == T - 1) eager_before_last = download(state);
    ASSERT_EQ(launch_gret_recurrent_step(row + q_off, row + k_off, row + v_off, stride, dlg.ptr + t * B * H,
                                         state.ptr, o.ptr, B, H, D, nullptr),
              cudaSuccess);
    const cudaError_t ef = launch_gret_recurrent_step_norm_gate(row + q_off, row + k_off, row + v_off, stride,
                                                                dlg.ptr + t * B * H, state_f.ptr, row + g_off, stride,
                                                                kEps, fused.ptr, B, H, D, nullptr);
    const cudaError_t ed = launch_gret_deferred_step(row + q_off, row + k_off, row + v_off, stride,
                                                     dlg.ptr + t * B * H, state_d.ptr, pend.bytes.ptr, o_d.ptr, B, H,
                                                     D, nullptr);
    const cudaError_t efd = launch_gret_deferred_step_norm_gate(
        row + q_off, row + k_off, row + v_off, stride, dlg.ptr + t * B * H, state_fd.ptr, pend_f.bytes.ptr,
        row + g_off, stride, kEps, fused_d.ptr, B, H, D, nullptr);
    if (fused_ok) {
      ASSERT_EQ(ef, cudaSuccess) << cudaGetErrorString(ef);
      ASSERT_EQ(ed, cudaSuccess) << cudaGetErrorString(ed);
      ASSERT_EQ(efd, cudaSuccess) << cudaGetErrorString(efd);
    } else {
      ASSERT_EQ(ef, cudaErrorInvalidValue);
      ASSERT_EQ(ed, cudaErrorInvalidValue);
      ASSERT_EQ(efd, cudaErrorInvalidValue);
    }
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    got_o[t] = download_bf16(o);
    if (fused_ok) {
      got_f[t] = download_bf16(fused);
      EXPECT_TRUE(same_bits(download_bf16(o_d), got_o[t])) << "deferred o, step " << t;
      EXPECT_TRUE(same_bits(download_bf16(fused_d), got_f[t])) << "deferred fused out, step " << t;
    }
  }
  const auto got_s = download(state);
  const auto got_sf = download(state_f);
  if (fused_ok) {
    EXPECT_TRUE(same_bits(download(state_d), eager_before_last)) << "deferred state is not one step behind";
    ASSERT_EQ(launch_gret_pending_flush(state_d.ptr, pend.bytes.ptr, B, H, D, nullptr), cudaSuccess);
    ASSERT_EQ(launch_gret_pending_flush(state_fd.ptr, pend_f.bytes.ptr, B, H, D, nullptr), cudaSuccess);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    EXPECT_TRUE(same_bits(download(state_d), got_s)) << "deferred state after the flush";
    EXPECT_TRUE(same_bits(download(state_fd), got_sf)) << "deferred fused state after the flush";
    const auto zeros = [](const std::vector<unsigned char>& v) {
      return std::all_of(v.begin(), v.end(), [](unsigned char c) { return c == 0; });
    };
    std::vector<unsigned char> bytes(pend.bytes.n);
    ASSERT_EQ(cudaMemcpy(bytes.data(), pend.bytes.ptr, bytes.size(), cudaMemcpyDeviceToHost), cudaSuccess);
    EXPECT_TRUE(zeros(bytes)) << "the flush leaves no update pending";
    ASSERT_EQ(cudaMemcpy(bytes.data(), pend_f.bytes.ptr, bytes.size(), cudaMemcpyDeviceToHost), cudaSuccess);
    EXPECT_TRUE(zeros(bytes)) << "the flush leaves no fused update pending";
    // Decoding goes on after a flush (the first rows again): still the eager bits,
    // and the states after a second flush too.
    for (int64_t t = 0; t < std::min<int64_t>(T, 2); ++t) {
      const bf16* row = din.ptr + t * B * stride;
      const float* lgt = dlg.ptr + t * B * H;
      ASSERT_EQ(launch_gret_recurrent_step(row + q_off, row + k_off, row + v_off, stride, lgt, state.ptr, o.ptr, B, H,
                                           D, nullptr),
                cudaSuccess);
      ASSERT_EQ(launch_gret_recurrent_step_norm_gate(row + q_off, row + k_off, row + v_off, stride, lgt, state_f.ptr,
                                                     row + g_off, stride, kEps, fused.ptr, B, H, D, nullptr),
                cudaSuccess);
      ASSERT_EQ(launch_gret_deferred_step(row + q_off, row + k_off, row + v_off, stride, lgt, state_d.ptr,
                                          pend.bytes.ptr, o_d.ptr, B, H, D, nullptr),
                cudaSuccess);
      ASSERT_EQ(launch_gret_deferred_step_norm_gate(row + q_off, row + k_off, row + v_off, stride, lgt, state_fd.ptr,
                                                    pend_f.bytes.ptr, row + g_off, stride, kEps, fused_d.ptr, B, H, D,
                                                    nullptr),
                cudaSuccess);
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      EXPECT_TRUE(same_bits(download_bf16(o_d), download_bf16(o))) << "deferred o after a flush, step " << t;
      EXPECT_TRUE(same_bits(download_bf16(fused_d), download_bf16(fused))) << "deferred fused out after a flush";
    }
    ASSERT_EQ(launch_gret_pending_flush(state_d.ptr, pend.bytes.ptr, B, H, D, nullptr), cudaSuccess);
    ASSERT_EQ(launch_gret_pending_flush(state_fd.ptr, pend_f.bytes.ptr, B, H, D, nullptr), cudaSuccess);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    EXPECT_TRUE(same_bits(download(state_d), download(state))) << "deferred state after steps past a flush";
    EXPECT_TRUE(same_bits(download(state_fd), download(state_f))) << "deferred fused state after steps past a flush";
  } else {
    EXPECT_EQ(launch_gret_pending_flush(state_d.ptr, pend.bytes.ptr, B, H, D, nullptr), cudaErrorInvalidValue);
  }

  for (int64_t b = 0; b < B; ++b) {
    Mat<double> o_all(T, HD), g_all(T, HD);
    for (int64_t h = 0; h < H; ++h) {
      const int64_t bh = b * H + h;
      Mat<double> Q(T, D), K(T, D), V(T, D);
      Vec<double> G(T);
      for (int64_t t = 0; t < T; ++t) {
        const int64_t r = (t * B + b) * stride;
        for (int64_t i = 0; i < D; ++i) {
          Q(t, i) = in[r + q_off + h * D + i];
          K(t, i) = in[r + k_off + h * D + i];
          V(t, i) = in[r + v_off + h * D + i];
          g_all(t, h * D + i) = in[r + g_off + h * D + i];
        }
        G(t) = lg[(t * B + b) * H + h];
      }
      Mat<double> S0(D, D);
      for (int64_t i = 0; i < D * D; ++i) S0.data()[i] = s0[bh * D * D + i];
      const auto ref = gret_recurrent<double>(Q, K, V, G, &S0);
      o_all.block(0, h * D, T, D) = ref.o;
      std::vector<double> want_s(ref.state.data(), ref.state.data() + D * D), have_s(D * D), have_sf(D * D);
      for (int64_t i = 0; i < D * D; ++i) {
        have_s[i] = got_s[bh * D * D + i];
        have_sf[i] = got_sf[bh * D * D + i];
      }
      EXPECT_LE(rms_error(have_s, want_s), 1e-5) << "state, b " << b << " h " << h;
      if (fused_ok) {
        EXPECT_LE(rms_error(have_sf, want_s), 1e-5) << "fused state, b " << b << " h " << h;
      }
    }
    const Mat<double> want_f = norm_gate_reference(o_all, g_all, D);
    for (int64_t t = 0; t < T; ++t) {
      std::vector<double> want(HD), wf(HD), have(HD), hf(HD);
      for (int64_t i = 0; i < HD; ++i) {
        want[i] = o_all(t, i);
        wf[i] = want_f(t, i);
        have[i] = got_o[t][b * HD + i];
        if (fused_ok) hf[i] = got_f[t][b * HD + i];
      }
      EXPECT_LE(rms_error(have, want), bf16_output_bound(want)) << "o, step " << t << " b " << b;
      if (fused_ok) {
        EXPECT_LE(rms_error(hf, wf), bf16_output_bound(wf)) << "fused out, step " << t << " b " << b;
      }
    }
  }
}

TEST(GretDecode, StepMatchesTheReference) {
  YOCO_REQUIRE_GPU();
  for (int64_t D : {40, 48, 64, 128, 256})
    for (int64_t batch : {1, 3}) {
      SCOPED_TRACE("D " + std::to_string(D) + " batch " + std::to_string(batch));
      check_steps({batch, 24, D, 5}, static_cast<uint64_t>(D * 10 + batch));
    }
}

TEST(GretDecode, FusedSupportIsWhatTheHeaderSays) {
  EXPECT_TRUE(gret_fused_step_supported(64));
  EXPECT_TRUE(gret_fused_step_supported(128));
  EXPECT_TRUE(gret_fused_step_supported(256));
  EXPECT_TRUE(gret_fused_step_supported(48));
  EXPECT_FALSE(gret_fused_step_supported(40));
  EXPECT_FALSE(gret_fused_step_supported(144));  // 9 slices of 16 > one portable cluster
  EXPECT_FALSE(gret_fused_step_supported(512));
}

// 4096 steps with γ near 1 (the decay horizon is 1000 and 16000 steps): every
// step's o within the bf16 bound and the final fp32 state within 1e-5 of an fp64
// recurrence. A bf16 state, or a constant fp32 γ applied as γ·S, fails this.
TEST(GretDecode, LongDecodeDoesNotDrift) {
  YOCO_REQUIRE_GPU();
  const int64_t H = 4, D = 128, T = 4096, HD = H * D, stride = 3 * HD;
  std::vector<float> in(static_cast<size_t>(T * stride));
  {
    std::mt19937_64 rng(4242);
    std::normal_distribution<float> gauss;
    for (int64_t t = 0; t < T; ++t)
      for (int64_t i = 0; i < HD; ++i) {
        in[t * stride + i] = round_to_bf16(gauss(rng));                                   // q
        in[t * stride + HD + i] = round_to_bf16(gauss(rng) / std::sqrt(float(D)));        // k
        in[t * stride + 2 * HD + i] = round_to_bf16(gauss(rng));                          // v
      }
  }
  // Heads: γ = 0.999 constant; γ ≈ 0.999 varying; γ ≈ 0.99994 constant; mixed.
  std::vector<float> lg(T * H);
  {
    std::mt19937_64 rng(77);
    std::normal_distribution<double> gauss;
    for (int64_t t = 0; t < T; ++t) {
      lg[t * H + 0] = static_cast<float>(logsigmoid(4.13) / 16.0);
      lg[t * H + 1] = static_cast<float>(logsigmoid(4.13 + 0.5 * gauss(rng)) / 16.0);
      lg[t * H + 2] = static_cast<float>(logsigmoid(7.0) / 16.0);
      lg[t * H + 3] = static_cast<float>(logsigmoid(3.0 * gauss(rng)) / 16.0);
    }
  }
  DeviceArray<bf16> din(in.size()), o(T * HD);
  DeviceArray<float> dlg(lg.size()), state(H * D * D);
  upload_bf16(din, in);
  upload(dlg, lg);
  ASSERT_EQ(cudaMemset(state.ptr, 0, state.n * sizeof(float)), cudaSuccess);
  // The deferred step beside it, one layer's steps back to back (not overlapped: the contract).
  DeviceArray<bf16> o_d(T * HD);
  DeviceArray<float> state_d(H * D * D);
  ASSERT_EQ(cudaMemset(state_d.ptr, 0, state_d.n * sizeof(float)), cudaSuccess);
  Pending pend(1, H, D);
  for (int64_t t = 0; t < T; ++t) {
    const bf16* row = din.ptr + t * stride;
    ASSERT_EQ(launch_gret_recurrent_step(row, row + HD, row + 2 * HD, stride, dlg.ptr + t * H, state.ptr,
                                         o.ptr + t * HD, 1, H, D, nullptr),
              cudaSuccess);
    ASSERT_EQ(launch_gret_deferred_step(row, row + HD, row + 2 * HD, stride, dlg.ptr + t * H, state_d.ptr,
                                        pend.bytes.ptr, o_d.ptr + t * HD, 1, H, D, nullptr),
              cudaSuccess);
  }
  ASSERT_EQ(launch_gret_pending_flush(state_d.ptr, pend.bytes.ptr, 1, H, D, nullptr), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const auto got_o = download_bf16(o);
  const auto got_s = download(state);
  EXPECT_TRUE(same_bits(download_bf16(o_d), got_o)) << "deferred outputs over 4096 steps";
  EXPECT_TRUE(same_bits(download(state_d), got_s)) << "deferred state after 4096 steps and the flush";
  for (int64_t h = 0; h < H; ++h) {
    Mat<double> Q(T, D), K(T, D), V(T, D);
    Vec<double> G(T);
    for (int64_t t = 0; t < T; ++t) {
      for (int64_t i = 0; i < D; ++i) {
        Q(t, i) = in[t * stride + h * D + i];
        K(t, i) = in[t * stride + HD + h * D + i];
        V(t, i) = in[t * stride + 2 * HD + h * D + i];
      }
      G(t) = lg[t * H + h];
    }
    const auto ref = gret_recurrent<double>(Q, K, V, G, nullptr);
    std::vector<double> want_s(ref.state.data(), ref.state.data() + D * D), have_s(D * D);
    for (int64_t i = 0; i < D * D; ++i) have_s[i] = got_s[h * D * D + i];
    EXPECT_LE(rms_error(have_s, want_s), 1e-5) << "state drift, head " << h;
    // o over the last 256 steps, and over all steps.
    for (int64_t first : {T - 256, int64_t{0}}) {
      std::vector<double> want, have;
      for (int64_t t = first; t < T; ++t)
        for (int64_t i = 0; i < D; ++i) {
          want.push_back(ref.o(t, i));
          have.push_back(got_o[t * HD + h * D + i]);
        }
      EXPECT_LE(rms_error(have, want), bf16_output_bound(want)) << "o, head " << h << " from step " << first;
    }
  }
}

TEST(GretDecode, NormGateMatchesTheReference) {
  YOCO_REQUIRE_GPU();
  const int64_t H = 24;
  for (int64_t D : {64, 128, 256, 48})
    for (int64_t rows : {1, 7, 1000})
      for (int variant = 0; variant < 3; ++variant) {  // 0: vector path; 1: odd g stride (scalar); 2: out = o
        SCOPED_TRACE("D " + std::to_string(D) + " rows " + std::to_string(rows) + " variant " +
                     std::to_string(variant));
        const int64_t HD = H * D, g_stride = variant == 1 ? 2 * HD + 3 : 2 * HD, g_off = HD;
        const auto o = random_bf16_values(static_cast<size_t>(rows * HD), 500 + D + rows, 3.0f);
        const auto graw = random_bf16_values(static_cast<size_t>(rows * g_stride), 600 + D + rows, 2.0f);
        DeviceArray<bf16> d_o(o.size()), d_g(graw.size()), d_out(o.size());
        upload_bf16(d_o, o);
        upload_bf16(d_g, graw);
        bf16* out = variant == 2 ? d_o.ptr : d_out.ptr;
        ASSERT_EQ(launch_gret_norm_gate(d_o.ptr, d_g.ptr + g_off, g_stride, rows, H, D, kEps, out, nullptr),
                  cudaSuccess);
        ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
        const auto got = download_bf16(variant == 2 ? d_o : d_out);
        Mat<double> om(rows, HD), gm(rows, HD);
        for (int64_t r = 0; r < rows; ++r)
          for (int64_t i = 0; i < HD; ++i) {
            om(r, i) = o[r * HD + i];
            gm(r, i) = graw[r * g_stride + g_off + i];
          }
        const auto want = to_vector(norm_gate_reference(om, gm, D));
        EXPECT_LE(rms_error(got, want), bf16_output_bound(want));
      }
}

std::vector<uint16_t> download_bits(const DeviceArray<bf16>& d) {
  std::vector<uint16_t> bits(d.n);
  EXPECT_EQ(cudaMemcpy(bits.data(), d.ptr, d.n * 2, cudaMemcpyDeviceToHost), cudaSuccess);
  return bits;
}

bool bf16_bits_finite(uint16_t b) { return (b & 0x7f80u) != 0x7f80u; }

// The half-warp kernel (D 128) against the per-warp one (and automatic) bit for
// bit: odd and even item counts (rows 1/3/301/2047 x heads 1/24; 2047 x 24 needs
// 1536 blocks, over the persistent grid's cap of at most SMs x 8, so its warps
// loop), g contiguous and g inside q|k|v|g rows (g_stride 4·H·D, the model's
// layout), out apart and out = o.
TEST(GretDecode, NormGateHalfWarpEqualsPerWarpBitForBit) {
  YOCO_REQUIRE_GPU();
  const int64_t D = 128;
  for (int64_t rows : {1, 3, 301, 2047})
    for (int64_t H : {1, 24})
      for (bool g_in_qkvg : {false, true})
        for (bool in_place : {false, true}) {
          SCOPED_TRACE("rows " + std::to_string(rows) + " heads " + std::to_string(H) +
                       (g_in_qkvg ? " g in q|k|v|g" : " g contiguous") + (in_place ? " out = o" : " out apart"));
          const int64_t HD = H * D, g_stride = g_in_qkvg ? 4 * HD : HD, g_off = g_in_qkvg ? 3 * HD : 0;
          auto o = random_bf16_values(static_cast<size_t>(rows * HD), 700 + rows + H, 3.0f);
          std::fill(o.begin(), o.begin() + D, 0.0f);  // item 0 all zeros: Σ x² = 0, inv = 1/sqrt(eps)
          const auto graw = random_bf16_values(static_cast<size_t>(rows * g_stride), 800 + rows + H, 2.0f);
          DeviceArray<bf16> d_g(graw.size());
          upload_bf16(d_g, graw);
          const NormGateKernel kinds[] = {NormGateKernel::per_warp, NormGateKernel::half_warp,
                                          NormGateKernel::automatic};
          std::vector<uint16_t> got[3];
          // 64 poisoned elements past the end of o and out: a store by an invalid half-warp, or past the
          // last item, must leave them as they were.
          constexpr size_t kGuard = 64;
          for (int k = 0; k < 3; ++k) {
            DeviceArray<bf16> d_o(o.size() + kGuard), d_out(o.size() + kGuard);
            upload_bf16(d_o, o);
            bf16* out = in_place ? d_o.ptr : d_out.ptr;
            ASSERT_EQ(launch_gret_norm_gate(d_o.ptr, d_g.ptr + g_off, g_stride, rows, H, D, kEps, out, nullptr,
                                            kinds[k]),
                      cudaSuccess);
            ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
            got[k] = download_bits(in_place ? d_o : d_out);
          }
          // The per-warp output is finite everywhere (its values are checked against the
          // reference above), so equal bits also say that every element was written.
          for (int k = 0; k < 3; ++k) {
            EXPECT_TRUE(std::all_of(got[k].end() - kGuard, got[k].end(), [](uint16_t b) { return b == 0xffffu; }))
                << "kernel " << k << " wrote past the last item";
            got[k].resize(got[k].size() - kGuard);
          }
          EXPECT_TRUE(std::all_of(got[0].begin(), got[0].end(), bf16_bits_finite)) << "per-warp output not finite";
          size_t diff = 0, first = got[0].size();
          for (size_t i = 0; i < got[0].size(); ++i)
            if (got[1][i] != got[0][i] && diff++ == 0) first = i;
          EXPECT_EQ(diff, 0u) << "half-warp differs at " << diff << " elements, first " << first;
          EXPECT_TRUE(got[2] == got[0]) << "automatic differs from per-warp";
        }
}

// half_warp where it does not apply: cudaErrorInvalidValue and nothing launched
// (the output stays poisoned), also at rows 0; the same calls with per_warp
// and automatic succeed. Without a GPU the refusals, which come before any
// CUDA call, are checked on fake aligned addresses.
TEST(GretDecode, NormGateHalfWarpRefusals) {
  const bool gpu = query_devices().count > 0;
  // Under YOCO_EXPECT_GPU=1 the host-only half of this test must not stand in for the whole.
  if (!gpu && gpu_expected()) FAIL() << "YOCO_EXPECT_GPU=1 but no CUDA device";
  const int64_t rows = 3, H = 24, D = 128, HD = H * D, g_stride = 4 * HD;
  std::unique_ptr<DeviceArray<bf16>> d_o, d_g, d_out;
  bf16 *o = reinterpret_cast<bf16*>(uintptr_t{1} << 20), *g = o + 2 * rows * g_stride,
       *out = g + 2 * rows * g_stride;
  if (gpu) {
    d_o = std::make_unique<DeviceArray<bf16>>(static_cast<size_t>(rows * g_stride + 64));
    d_g = std::make_unique<DeviceArray<bf16>>(static_cast<size_t>(rows * g_stride + 64));
    d_out = std::make_unique<DeviceArray<bf16>>(static_cast<size_t>(rows * g_stride + 64));
    upload_bf16(*d_o, random_bf16_values(d_o->n, 901, 1.0f));
    upload_bf16(*d_g, random_bf16_values(d_g->n, 902, 1.0f));
    o = d_o->ptr;
    g = d_g->ptr;
    out = d_out->ptr;
  }
  struct Case {
    const char* what;
    const bf16* o;
    const bf16* g;
    int64_t g_stride, rows, D;
    bf16* out;
  };
  const Case cases[] = {
      {"D 64", o, g, g_stride, rows, 64, out},
      {"D 64, rows 0", o, g, g_stride, 0, 64, out},
      {"D 256", o, g, g_stride, rows, 256, out},
      {"g 8-byte aligned", o, g + 4, g_stride, rows, D, out},
      {"g 2-byte aligned", o, g + 1, g_stride, rows, D, out},
      {"g misaligned, rows 0", o, g + 4, g_stride, 0, D, out},
      {"g_stride 4 mod 8", o, g, g_stride + 4, rows, D, out},
      {"o 8-byte aligned", o + 4, g, g_stride, rows, D, out},
      {"out 8-byte aligned", o, g, g_stride, rows, D, out + 4},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    EXPECT_EQ(launch_gret_norm_gate(c.o, c.g, c.g_stride, c.rows, H, c.D, kEps, c.out, nullptr,
                                    NormGateKernel::half_warp),
              cudaErrorInvalidValue);
    if (!gpu) continue;
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    EXPECT_EQ(cudaGetLastError(), cudaSuccess);
    const auto bits = download_bits(*d_out);
    EXPECT_TRUE(std::all_of(bits.begin(), bits.end(), [](uint16_t b) { return b == 0xffffu; }))
        << "a refused call wrote the output";
    for (NormGateKernel k : {NormGateKernel::per_warp, NormGateKernel::automatic})  // apply everywhere
      EXPECT_EQ(launch_gret_norm_gate(c.o, c.g, c.g_stride, c.rows, H, c.D, kEps, c.out, nullptr, k), cudaSuccess);
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    EXPECT_EQ(cudaMemset(d_out->ptr, 0xff, d_out->n * 2), cudaSuccess);  // poisoned again
  }
  // A value outside the enum, and the checks every kernel shares.
  EXPECT_EQ(launch_gret_norm_gate(o, g, g_stride, rows, H, D, kEps, out, nullptr, static_cast<NormGateKernel>(7)),
            cudaErrorInvalidValue);
  EXPECT_EQ(launch_gret_norm_gate(o, g, HD - 8, rows, H, D, kEps, out, nullptr, NormGateKernel::half_warp),
            cudaErrorInvalidValue);
  EXPECT_EQ(launch_gret_norm_gate(o, g, g_stride, -1, H, D, kEps, out, nullptr, NormGateKernel::half_warp),
            cudaErrorInvalidValue);
  if (gpu) {
    // rows 0 where half_warp applies: success, nothing to do.
    EXPECT_EQ(launch_gret_norm_gate(o, g, g_stride, 0, H, D, kEps, out, nullptr, NormGateKernel::half_warp),
              cudaSuccess);
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    const auto bits = download_bits(*d_out);
    EXPECT_TRUE(std::all_of(bits.begin(), bits.end(), [](uint16_t b) { return b == 0xffffu; }));
  }
}

template <class Z>
void check_log_decay(bool bf16_input) {
  const int64_t rows = 1000, H = 24, z_stride = 31;
  std::mt19937_64 rng(bf16_input ? 9 : 8);
  std::normal_distribution<double> gauss(0.0, 6.0);
  std::vector<float> z(static_cast<size_t>(rows * z_stride));
  for (auto& x : z) x = static_cast<float>(std::clamp(gauss(rng), -80.0, 80.0));
  const float specials[] = {80.0f, -80.0f, 79.5f, -79.5f, 40.0f, -40.0f, 17.0f, -17.0f, 1e-3f, -1e-3f, 0.0f, -0.0f,
                            4.13f, 7.0f,   -7.0f, 1e-30f, -1e-30f, 63.0f};
  for (size_t i = 0; i < sizeof(specials) / sizeof(float); ++i) z[i] = specials[i];  // row 0 (and row 1's start)
  if (bf16_input)
    for (auto& x : z) x = round_to_bf16(x);
  DeviceArray<Z> dz(z.size());
  DeviceArray<float> out(rows * H);
  if constexpr (std::is_same_v<Z, float>) {
    upload(dz, z);
    ASSERT_EQ(launch_gret_log_decay(dz.ptr, z_stride, rows, H, 16.0f, out.ptr, nullptr), cudaSuccess);
  } else {
    upload_bf16(dz, z);
    ASSERT_EQ(launch_gret_log_decay(dz.ptr, z_stride, rows, H, 16.0f, out.ptr, nullptr), cudaSuccess);
  }
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const auto got = download(out);
  int bad = 0;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t h = 0; h < H; ++h) {
      const double zz = z[r * z_stride + h];
      const double want = logsigmoid(zz) / 16.0;
      const float g = got[r * H + h];
      const bool ok = std::isfinite(g) && g <= 0.0f && std::abs(g - want) <= 2e-6 * std::abs(want) + 1e-44;
      if (!ok && ++bad <= 10)
        ADD_FAILURE() << "z " << zz << ": got " << g << ", want " << want << " (row " << r << " head " << h << ")";
    }
  EXPECT_EQ(bad, 0);
}

// A chain of `layers` decode layers' inputs: per layer B rows of `stride`
// elements (q | k | v at 0, HD, 2·HD), B·H decays, a random fp32 state; on the
// device, with a non-blocking stream for the chains. Decays near 1 (the δ
// form), and with strong_decays every fifth one far from it (the γ form).
struct LayerInputs {
  std::vector<float> s0;
  DeviceArray<bf16> row;
  DeviceArray<float> lg, state;
  cudaStream_t stream = nullptr;
  LayerInputs(int64_t B, int64_t H, int64_t D, int64_t stride, int64_t layers, uint64_t seed, bool strong_decays)
      : s0(static_cast<size_t>(layers * B * H * D * D)),
        row(static_cast<size_t>(layers * B * stride)),
        lg(static_cast<size_t>(layers * B * H)),
        state(s0.size()) {
    upload_bf16(row, random_bf16_values(row.n, seed));
    std::vector<float> decays(lg.n);
    std::mt19937_64 rng(seed + 1);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    for (size_t i = 0; i < decays.size(); ++i)
      decays[i] = strong_decays && i % 5 == 0 ? -1.0f - std::abs(nd(rng)) : std::min(0.0f, -std::abs(nd(rng)) * 0.05f);
    for (auto& x : s0) x = 0.1f * nd(rng);
    upload(lg, decays);
    if (cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) != cudaSuccess) stream = nullptr;
  }
  LayerInputs(const LayerInputs&) = delete;
  LayerInputs& operator=(const LayerInputs&) = delete;
  ~LayerInputs() {
    if (stream) cudaStreamDestroy(stream);
  }
};

TEST(GretDecode, OverlappedLaunchesEqualPlainOnesBitForBit) {
  YOCO_REQUIRE_GPU();
  const int64_t B = 2, H = 24, D = 128, HD = H * D, stride = 3 * HD + 8, layers = 13, steps = 3;
  const size_t state_elems = static_cast<size_t>(B * H * D * D);
  LayerInputs in(B, H, D, stride, layers, 91, false);
  ASSERT_NE(in.stream, nullptr);
  DeviceArray<bf16> o(static_cast<size_t>(layers * B * HD));
  auto& [s0, drow, dlg, st, stream] = in;
  // Each layer reads its own q/k/v rows, decay and state and writes its own o:
  // the overlap contract holds (no step writes the next one's state).
  auto chain = [&](bool overlap) {
    for (int64_t l = 0; l < layers; ++l) {
      const bf16* base = drow.ptr + l * B * stride;
      const cudaError_t e = launch_gret_recurrent_step(base, base + HD, base + 2 * HD, stride, dlg.ptr + l * B * H,
                                                       st.ptr + l * state_elems, o.ptr + l * B * HD, B, H, D, stream,
                                                       overlap);
      if (e != cudaSuccess) return e;
    }
    return cudaSuccess;
  };
  auto run = [&](int mode) {  // 0 plain, 1 overlapped eager, 2 overlapped from a graph
    upload(st, s0);
    EXPECT_EQ(cudaMemset(o.ptr, 0xff, o.n * sizeof(bf16)), cudaSuccess);
    // The resets run on the legacy stream, which does not order the non-blocking one.
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    cudaGraph_t graph = nullptr;
    cudaGraphExec_t exec = nullptr;
    if (mode == 2) {
      EXPECT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), cudaSuccess);
      EXPECT_EQ(chain(true), cudaSuccess);
      EXPECT_EQ(cudaStreamEndCapture(stream, &graph), cudaSuccess);
      EXPECT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
    }
    for (int t = 0; t < steps; ++t) {
      if (mode == 2) EXPECT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
      else EXPECT_EQ(chain(mode == 1), cudaSuccess);
    }
    EXPECT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    if (exec) cudaGraphExecDestroy(exec);
    if (graph) cudaGraphDestroy(graph);
    return std::make_pair(download(st), download_bf16(o));
  };
  const auto plain = run(0);
  for (float x : plain.second) ASSERT_TRUE(std::isfinite(x));
  for (int mode : {1, 2}) {
    const auto got = run(mode);
    EXPECT_TRUE(got.first == plain.first) << "states differ, mode " << mode;
    EXPECT_TRUE(got.second == plain.second) << "outputs differ, mode " << mode;
  }

  // The deferred step, plain and fused, in the same chains: each layer has its
  // own state and pending buffer, so overlapping the layer before is allowed.
  // Outputs equal the eager plain (and eager fused) chain's bit for bit; the
  // states after one flush per layer too.
  const size_t pend_bytes = static_cast<size_t>(gret_pending_bytes(B, H, D));
  DeviceArray<unsigned char> pend(layers * pend_bytes);
  DeviceArray<bf16> out(static_cast<size_t>(layers * B * HD));
  auto chain_deferred = [&](bool overlap, bool fused) {
    for (int64_t l = 0; l < layers; ++l) {
      const bf16* base = drow.ptr + l * B * stride;
      const float* lgl = dlg.ptr + l * B * H;
      float* s = st.ptr + l * state_elems;
      void* p = pend.ptr + l * pend_bytes;
      const cudaError_t e =
          fused ? launch_gret_deferred_step_norm_gate(base, base + HD, base + 2 * HD, stride, lgl, s, p,
                                                      base + 2 * HD, stride, kEps, out.ptr + l * B * HD, B, H, D,
                                                      stream, overlap)
                : launch_gret_deferred_step(base, base + HD, base + 2 * HD, stride, lgl, s, p, o.ptr + l * B * HD, B,
                                            H, D, stream, overlap);
      if (e != cudaSuccess) return e;
    }
    return cudaSuccess;
  };
  auto chain_fused_eager = [&]() {
    for (int64_t l = 0; l < layers; ++l) {
      const bf16* base = drow.ptr + l * B * stride;
      const cudaError_t e = launch_gret_recurrent_step_norm_gate(
          base, base + HD, base + 2 * HD, stride, dlg.ptr + l * B * H, st.ptr + l * state_elems, base + 2 * HD, stride,
          kEps, out.ptr + l * B * HD, B, H, D, stream);
      if (e != cudaSuccess) return e;
    }
    return cudaSuccess;
  };
  // mode 0: not overlapped, 1: overlapped eager, 2: overlapped from a graph; fused: out (g = v here).
  auto run_deferred = [&](int mode, bool fused) {
    upload(st, s0);
    EXPECT_EQ(cudaMemset(pend.ptr, 0, pend.n), cudaSuccess);
    EXPECT_EQ(cudaMemset(o.ptr, 0xff, o.n * sizeof(bf16)), cudaSuccess);
    EXPECT_EQ(cudaMemset(out.ptr, 0xff, out.n * sizeof(bf16)), cudaSuccess);
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);  // the resets before the non-blocking stream's chain
    cudaGraph_t graph = nullptr;
    cudaGraphExec_t exec = nullptr;
    if (mode == 2) {
      EXPECT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), cudaSuccess);
      EXPECT_EQ(chain_deferred(true, fused), cudaSuccess);
      EXPECT_EQ(cudaStreamEndCapture(stream, &graph), cudaSuccess);
      EXPECT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
    }
    for (int t = 0; t < steps; ++t) {
      if (mode == 2) EXPECT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
      else EXPECT_EQ(chain_deferred(mode == 1, fused), cudaSuccess);
    }
    for (int64_t l = 0; l < layers; ++l)
      EXPECT_EQ(launch_gret_pending_flush(st.ptr + l * state_elems, pend.ptr + l * pend_bytes, B, H, D, stream),
                cudaSuccess);
    EXPECT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    if (exec) cudaGraphExecDestroy(exec);
    if (graph) cudaGraphDestroy(graph);
    return std::make_pair(download(st), download_bf16(fused ? out : o));
  };
  for (int mode : {0, 1, 2}) {
    const auto got = run_deferred(mode, false);
    EXPECT_TRUE(same_bits(got.first, plain.first)) << "deferred states differ, mode " << mode;
    EXPECT_TRUE(same_bits(got.second, plain.second)) << "deferred outputs differ, mode " << mode;
  }
  upload(st, s0);
  EXPECT_EQ(cudaMemset(out.ptr, 0xff, out.n * sizeof(bf16)), cudaSuccess);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  for (int t = 0; t < steps; ++t) EXPECT_EQ(chain_fused_eager(), cudaSuccess);
  EXPECT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  const auto fused_plain = std::make_pair(download(st), download_bf16(out));
  for (float x : fused_plain.second) ASSERT_TRUE(std::isfinite(x));
  for (int mode : {0, 1, 2}) {
    const auto got = run_deferred(mode, true);
    EXPECT_TRUE(same_bits(got.first, fused_plain.first)) << "deferred fused states differ, mode " << mode;
    EXPECT_TRUE(same_bits(got.second, fused_plain.second)) << "deferred fused outputs differ, mode " << mode;
  }
}

TEST(GretDecode, DeferredAndSplitStepsRejectWhatTheyCannotServe) {
  YOCO_REQUIRE_GPU();
  const int64_t H = 2, D = 128, HD = H * D;
  DeviceArray<bf16> row(3 * HD), o(HD);
  DeviceArray<float> lg(H), st(H * D * D + 4);
  Pending pend(1, H, D);
  DeviceArray<unsigned char> pend_big(static_cast<size_t>(gret_pending_bytes(1, H, D)) + 16);
  const bf16 *q = row.ptr, *k = row.ptr + HD, *v = row.ptr + 2 * HD;
  EXPECT_EQ(launch_gret_deferred_step(q, k, v, 3 * HD, lg.ptr, st.ptr, pend_big.ptr + 8, o.ptr, 1, H, D, nullptr),
            cudaErrorInvalidValue);  // pending not 16-byte aligned
  EXPECT_EQ(launch_gret_deferred_step(q, k, v, 3 * HD, lg.ptr, st.ptr + 1, pend.bytes.ptr, o.ptr, 1, H, D, nullptr),
            cudaErrorInvalidValue);  // state not 16-byte aligned
  EXPECT_EQ(launch_gret_deferred_step(q, k, v, 3 * HD, lg.ptr, st.ptr, pend.bytes.ptr, o.ptr, 1, H, 96 + 8, nullptr),
            cudaErrorInvalidValue);  // head dim not a multiple of 16
  EXPECT_EQ(launch_gret_deferred_step(q, k, v, 3 * HD, lg.ptr, st.ptr, pend.bytes.ptr, o.ptr, 0, H, D, nullptr),
            cudaErrorInvalidValue);
  EXPECT_EQ(launch_gret_pending_flush(st.ptr, pend.bytes.ptr, 1, H, 512, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(launch_gret_output_step(q, k, v, 3 * HD, lg.ptr, st.ptr + 1, o.ptr, 1, H, D, nullptr),
            cudaErrorInvalidValue);  // state not 16-byte aligned
  EXPECT_EQ(launch_gret_state_update(k, v, 3 * HD, lg.ptr, st.ptr + 1, 1, H, D, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(launch_gret_output_step(q, k, v, 3 * HD, lg.ptr, st.ptr, o.ptr, 1, H, 96 + 8, nullptr),
            cudaErrorInvalidValue);  // head dim not a multiple of 16
  EXPECT_EQ(launch_gret_state_update(k, v, 3 * HD, lg.ptr, st.ptr, 1, H, 144, nullptr),
            cudaErrorInvalidValue);  // 9 slices of 16: no shared shape
  EXPECT_EQ(launch_gret_output_step_norm_gate(q, k, v, 3 * HD, lg.ptr, st.ptr, v, 3 * HD, kEps, o.ptr, 0, H, D,
                                              nullptr),
            cudaErrorInvalidValue);
  EXPECT_EQ(launch_gret_decode_norm_gate(GretDecodeVariant::split, q, k, v, 3 * HD, lg.ptr, st.ptr, nullptr, v,
                                         3 * HD, kEps, o.ptr, 1, H, D, nullptr, false, nullptr),
            cudaErrorInvalidValue)
      << "the split step needs its branches";
  EXPECT_EQ(cudaGetLastError(), cudaSuccess) << "a refused launch leaves no error behind";
}

// The split step (launch_gret_output_step[_norm_gate] + launch_gret_state_update
// forked onto GretUpdateBranches): 13 layers (5 at D != 128: still more than
// 4 side streams) x 3 steps, B 2, each layer its own rows, decay and state, at
// head dim D. The outputs equal the eager step's
// (plain) and the fused step's (norm + gate) bit for bit, and so do the final
// states; with the updates on 1 and on 4 side streams, launched plainly, as
// programmatic dependents, and from a captured graph replayed. A lone output
// step leaves the state's bits untouched.
void check_split_step(int64_t D) {
  const int64_t B = 2, H = 24, HD = H * D, stride = 3 * HD + 8, layers = D == 128 ? 13 : 5, steps = 3;
  const size_t state_elems = static_cast<size_t>(B * H * D * D);
  LayerInputs in(B, H, D, stride, layers, 191, true);
  ASSERT_NE(in.stream, nullptr);
  DeviceArray<bf16> out(static_cast<size_t>(layers * B * HD));
  auto& [s0, drow, dlg, st, stream] = in;
  auto q_of = [&](int64_t l) { return drow.ptr + l * B * stride; };
  auto reset = [&]() {
    upload(st, s0);
    EXPECT_EQ(cudaMemset(out.ptr, 0xff, out.n * sizeof(bf16)), cudaSuccess);
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);  // the legacy-stream resets before the non-blocking chains
  };
  // The eager chains: the plain step (o) and the fused step (out, g = v).
  auto eager = [&](bool fused) {
    reset();
    for (int t = 0; t < steps; ++t)
      for (int64_t l = 0; l < layers; ++l) {
        const bf16* b = q_of(l);
        const cudaError_t e =
            fused ? launch_gret_recurrent_step_norm_gate(b, b + HD, b + 2 * HD, stride, dlg.ptr + l * B * H,
                                                         st.ptr + l * state_elems, b + 2 * HD, stride, kEps,
                                                         out.ptr + l * B * HD, B, H, D, stream)
                  : launch_gret_recurrent_step(b, b + HD, b + 2 * HD, stride, dlg.ptr + l * B * H,
                                               st.ptr + l * state_elems, out.ptr + l * B * HD, B, H, D, stream);
        EXPECT_EQ(e, cudaSuccess);
      }
    EXPECT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    return std::make_pair(download(st), download_bf16(out));
  };
  // One token's 13 layers, split; joined at the end as a runner's step is.
  // The first layer's output step is a plain launch: it follows the last
  // token's join (gret_update_branches.hpp: no programmatic launch right
  // after a join).
  auto split_step = [&](GretUpdateBranches& br, bool fused, bool overlap_layers) {
    for (int64_t l = 0; l < layers; ++l) {
      const bool overlap = overlap_layers && l > 0;
      const bf16* b = q_of(l);
      const float* lgl = dlg.ptr + l * B * H;
      float* s = st.ptr + l * state_elems;
      const cudaError_t e =
          fused ? launch_gret_output_step_norm_gate(b, b + HD, b + 2 * HD, stride, lgl, s, b + 2 * HD, stride, kEps,
                                                    out.ptr + l * B * HD, B, H, D, stream, overlap)
                : launch_gret_output_step(b, b + HD, b + 2 * HD, stride, lgl, s, out.ptr + l * B * HD, B, H, D,
                                          stream, overlap);
      if (e != cudaSuccess) return e;
      if (const cudaError_t u = br.launch_update(stream, b + HD, b + 2 * HD, stride, lgl, s, B, H, D);
          u != cudaSuccess)
        return u;
    }
    return br.join(stream);
  };
  // mode 0: plain launches, 1: programmatic dependents, 2: those captured once and replayed.
  auto split = [&](int streams, int mode, bool fused) {
    reset();
    GretUpdateBranches br(streams);
    EXPECT_EQ(br.prepare(), cudaSuccess);
    cudaGraph_t graph = nullptr;
    cudaGraphExec_t exec = nullptr;
    if (mode == 2) {
      EXPECT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), cudaSuccess);
      EXPECT_EQ(split_step(br, fused, true), cudaSuccess);
      EXPECT_EQ(cudaStreamEndCapture(stream, &graph), cudaSuccess);
      EXPECT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
    }
    for (int t = 0; t < steps; ++t) {
      if (mode == 2) EXPECT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
      else EXPECT_EQ(split_step(br, fused, mode == 1), cudaSuccess);
    }
    EXPECT_FALSE(br.outstanding());
    EXPECT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    if (exec) cudaGraphExecDestroy(exec);
    if (graph) cudaGraphDestroy(graph);
    return std::make_pair(download(st), download_bf16(out));
  };
  for (bool fused : {false, true}) {
    const auto want = eager(fused);
    for (float x : want.second) ASSERT_TRUE(std::isfinite(x));
    for (int streams : {1, 4})
      for (int mode : {0, 1, 2}) {
        const auto got = split(streams, mode, fused);
        const std::string what = std::string(fused ? "fused" : "plain") + ", " + std::to_string(streams) +
                                 " side streams, mode " + std::to_string(mode);
        EXPECT_TRUE(same_bits(got.first, want.first)) << "states differ: " << what;
        EXPECT_TRUE(same_bits(got.second, want.second)) << "outputs differ: " << what;
      }
  }

  // A lone output step: the eager step's o, the state's bits as they were.
  reset();
  const bf16* b = q_of(0);
  ASSERT_EQ(launch_gret_output_step(b, b + HD, b + 2 * HD, stride, dlg.ptr, st.ptr, out.ptr, B, H, D, stream),
            cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  const std::vector<float> after = download(st);
  EXPECT_TRUE(same_bits(std::vector<float>(after.begin(), after.begin() + static_cast<int64_t>(state_elems)),
                        std::vector<float>(s0.begin(), s0.begin() + static_cast<int64_t>(state_elems))))
      << "the output step wrote the state";
  const auto lone = download_bf16(out);
  reset();
  ASSERT_EQ(launch_gret_recurrent_step(b, b + HD, b + 2 * HD, stride, dlg.ptr, st.ptr, out.ptr, B, H, D, stream),
            cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  const auto eager_o = download_bf16(out);
  EXPECT_EQ(std::memcmp(lone.data(), eager_o.data(), static_cast<size_t>(B * HD) * sizeof(float)), 0)
      << "a lone output step's o differs from the eager step's";
}

TEST(GretDecode, SplitStepEqualsTheEagerStepBitForBit) {
  YOCO_REQUIRE_GPU();
  for (int64_t D : {64, 128, 256}) {  // the three CTA shapes
    SCOPED_TRACE("D " + std::to_string(D));
    check_split_step(D);
  }
}

// The split variant is chosen only where its kernels serve the head dim, and
// YOCO_GRET_DECODE names it (no device needed).
TEST(GretDecode, SplitIsSelectedWhereItsKernelsServe) {
  EXPECT_EQ(select_gret_decode(128, GretDecodeVariant::split), GretDecodeVariant::split);
  EXPECT_EQ(select_gret_decode(256, GretDecodeVariant::split), GretDecodeVariant::split);
  EXPECT_EQ(select_gret_decode(144, GretDecodeVariant::split), GretDecodeVariant::eager);
  EXPECT_EQ(select_gret_decode(40, GretDecodeVariant::split), GretDecodeVariant::eager);
  EXPECT_STREQ(gret_decode_variant_name(GretDecodeVariant::split), "split");
  const char* old = std::getenv("YOCO_GRET_DECODE");
  const std::string saved = old ? old : "";
  setenv("YOCO_GRET_DECODE", "split", 1);
  EXPECT_EQ(gret_decode_variant_from_env(), GretDecodeVariant::split);
  setenv("YOCO_GRET_DECODE", "splitt", 1);
  try {
    (void)gret_decode_variant_from_env();
    ADD_FAILURE() << "YOCO_GRET_DECODE=splitt was accepted";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("YOCO_GRET_DECODE"), std::string::npos) << e.what();
  }
  if (old) setenv("YOCO_GRET_DECODE", saved.c_str(), 1);
  else unsetenv("YOCO_GRET_DECODE");
}

TEST(GretDecode, LogDecayMatchesTheReferenceAndIsNeverPositive) {
  YOCO_REQUIRE_GPU();
  {
    SCOPED_TRACE("fp32 z");
    check_log_decay<float>(false);
  }
  {
    SCOPED_TRACE("bf16 z");
    check_log_decay<bf16>(true);
  }
}

}  // namespace
}  // namespace yoco::cuda
