// Prefill attention, v1 (cuda/attention/flash_prefill_v1.cu, mma.sync), v2
// (cuda/attention/flash_prefill_v2.cu, wgmma; D 128 only), v3 (cuda/attention/flash_prefill_v3.cu, v2's
// maths fed by a TMA producer warp; 2 and 3 stages), and the GPU oracle
// (cuda/attention/attention_oracle.cu) against the fp64 CPU reference attention<double>.
// Every reference case runs v1, v2 and v3 (where they support the head dim) and the
// dispatching launch_flash_prefill, each against the reference, plus each vs v1
// (RMS ratio <= 2x the bound: each is within one bound of the exact output):
//  - short lengths: head dims 64/128/256; GQA groups 1, 2, 3, 8 with distinct
//    K/V per head; q0 = 0 and q0 not tile-aligned (chunked prefill); windows
//    1, 7, 64, 1000; batch 3 with different lengths; q_len 1; strides larger
//    than dense; LSE against an fp64 log-sum-exp; rows past q_len untouched;
//  - chunked prefill in pieces equals one-shot;
//  - the oracle equals the CPU reference (<= 4K keys);
//  - kernel vs oracle at 32K and at 128K (sampled rows: first/last rows of
//    tiles, the last row, random rows), each version;
//  - v2/v3 only: windows 1, 64, 1024; lengths 1 .. 4K including non-multiples
//    of every tile (64, 128); GQA groups 1, 3, 8; each == v1 on whole outputs;
//  - unwritten cache rows (NaN) past the queries, and NaN query padding rows,
//    never reach an output (v3 loads K/V rows verbatim with TMA).
// Bound (DESIGN §6): RMS ratio <= 2x the error of rounding the exact output to bf16.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "attention/attention_oracle.hpp"
#include "device/device_fill.hpp"
#include "device_test_data.hpp"
#include "lse_emulation.hpp"
#include "parallel_for.hpp"
#include "attention/flash_prefill.hpp"
#include "gpu_test_support.hpp"
#include "ops.hpp"

namespace yoco::cuda {
namespace {

using namespace yoco::cuda_test;

struct Case {
  int64_t H, Hkv, D, window;
  std::vector<int64_t> q_start, q_len;
  int64_t q_pad = 0, kv_pad = 0;  // extra elements per row beyond dense (multiples of 8)
  // NaN in every K/V row past q_start + q_len (unwritten cache) and every query padding row.
  bool nan_unwritten = false;
};

struct Inputs {
  int64_t B, q_rows, capacity, q_stride, kv_stride;
  std::vector<float> q, k, v;
};

Inputs make_inputs(const Case& c, uint64_t seed) {
  Inputs in;
  in.B = static_cast<int64_t>(c.q_len.size());
  in.q_rows = *std::max_element(c.q_len.begin(), c.q_len.end()) + 5;  // padding rows stay untouched
  in.capacity = 0;
  for (int64_t b = 0; b < in.B; ++b) in.capacity = std::max(in.capacity, c.q_start[b] + c.q_len[b]);
  in.capacity += 3;
  in.q_stride = c.H * c.D + c.q_pad;
  in.kv_stride = c.Hkv * c.D + c.kv_pad;
  in.q = random_bf16_values(static_cast<size_t>(in.B * in.q_rows * in.q_stride), seed);
  in.k = random_bf16_values(static_cast<size_t>(in.B * in.capacity * in.kv_stride), seed + 1);
  in.v = random_bf16_values(static_cast<size_t>(in.B * in.capacity * in.kv_stride), seed + 2);
  if (c.nan_unwritten)
    for (int64_t b = 0; b < in.B; ++b) {
      for (int64_t r = c.q_start[b] + c.q_len[b]; r < in.capacity; ++r)
        for (int64_t x = 0; x < in.kv_stride; ++x) {
          in.k[static_cast<size_t>((b * in.capacity + r) * in.kv_stride + x)] = NAN;
          in.v[static_cast<size_t>((b * in.capacity + r) * in.kv_stride + x)] = NAN;
        }
      for (int64_t i = c.q_len[b]; i < in.q_rows; ++i)
        for (int64_t x = 0; x < in.q_stride; ++x) in.q[static_cast<size_t>((b * in.q_rows + i) * in.q_stride + x)] = NAN;
    }
  return in;
}

PrefillAttentionShape shape_of(const Case& c, const Inputs& in) {
  PrefillAttentionShape s;
  s.batch = in.B;
  s.n_heads = c.H;
  s.n_kv_heads = c.Hkv;
  s.head_dim = c.D;
  s.q_rows = in.q_rows;
  s.capacity = in.capacity;
  s.q_stride = in.q_stride;
  s.kv_stride = in.kv_stride;
  s.window = c.window;
  s.scale = 1.0f / std::sqrt(static_cast<float>(c.D));
  return s;
}

struct KernelOut {
  std::vector<float> o, lse;
};

// The variants are the library's table (kFlashPrefillVariants); automatic is the dispatcher.
using Ver = PrefillVariant;
const char* ver_name(Ver v) { return flash_prefill_variant_name(v); }
cudaError_t launch(Ver ver, const __nv_bfloat16* q, const __nv_bfloat16* k, const __nv_bfloat16* v,
                   const int64_t* q_start, const int64_t* q_len, const PrefillAttentionShape& s, __nv_bfloat16* o,
                   float* lse) {
  return launch_flash_prefill_variant(ver, q, k, v, q_start, q_len, s, o, lse, nullptr);
}

// YOCO_PREFILL_SKIP_V3=1 leaves v3 out of every test, FlashPrefillV3.Smoke too: scripts/gpu-suite.sh
// runs that smoke test alone first and sets it when it fails or hangs, so that one broken kernel (a
// wrong mbarrier phase hangs) does not stall every other version's tests, the sanitizers and the
// bench, nor hang again when the whole binary runs.
std::vector<Ver> unless_v3_skipped(std::vector<Ver> vers) {
  const char* e = std::getenv("YOCO_PREFILL_SKIP_V3");
  if (e == nullptr || *e == '\0' || std::string(e) == "0") return vers;
  static bool said = false;
  if (!said) std::printf("NOTE: YOCO_PREFILL_SKIP_V3 is set: prefill v3 is left out of these tests\n");
  said = true;
  std::erase_if(vers, [](Ver v) { return v == Ver::v3 || v == Ver::v3_stages3; });
  return vers;
}

// The variants of the table that serve head dim D, and the dispatcher.
std::vector<Ver> versions_for(int64_t D) {
  std::vector<Ver> v;
  for (const PrefillVariantRow& r : kFlashPrefillVariants)
    if (flash_prefill_variant_serves(r.variant, D)) v.push_back(r.variant);
  v.push_back(Ver::automatic);
  return unless_v3_skipped(v);
}

KernelOut run_kernel(const Case& c, const Inputs& in, Ver ver = Ver::automatic) {
  const PrefillAttentionShape s = shape_of(c, in);
  DeviceArray<__nv_bfloat16> dq(in.q.size()), dk(in.k.size()), dv(in.v.size()),
      dout(static_cast<size_t>(in.B * in.q_rows * c.H * c.D));
  DeviceArray<float> dlse(static_cast<size_t>(in.B * c.H * in.q_rows));
  DeviceArray<int64_t> dstart(c.q_start.size()), dlen(c.q_len.size());
  upload_bf16(dq, in.q);
  upload_bf16(dk, in.k);
  upload_bf16(dv, in.v);
  upload(dstart, c.q_start);
  upload(dlen, c.q_len);
  EXPECT_EQ(launch(ver, dq.ptr, dk.ptr, dv.ptr, dstart.ptr, dlen.ptr, s, dout.ptr, dlse.ptr), cudaSuccess)
      << ver_name(ver);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess) << ver_name(ver);
  return {download_bf16(dout), download(dlse)};
}

// Dense [rows, heads*D] block of a strided buffer.
Mat<double> dense(const std::vector<float>& buf, int64_t row0, int64_t rows, int64_t stride, int64_t width) {
  Mat<double> m(rows, width);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t x = 0; x < width; ++x) m(r, x) = buf[static_cast<size_t>((row0 + r) * stride + x)];
  return m;
}

// The kernels' key tiles: 64 keys (v1 at head dims 128 and 256) and 128 (v1 at 64, v2, v3). A
// derived LSE bound covers both.
const std::vector<int> kKeyTiles = {64, 128};

// Query row i of sequence b, head h: its LSE exact and as the kernels round it at both key tiles
// (lse_emulation.hpp).
LseOfRow lse_row(const Inputs& in, const Case& c, int64_t b, int64_t i, int64_t h) {
  const int64_t p = c.q_start[b] + i, kvh = h / (c.H / c.Hkv);
  const int64_t lo = c.window > 0 ? std::max<int64_t>(0, p - c.window + 1) : 0;
  const float* qr = in.q.data() + (b * in.q_rows + i) * in.q_stride + h * c.D;
  const float* kb = in.k.data() + b * in.capacity * in.kv_stride + kvh * c.D;
  return lse_of_row(
      c.D, lo, p, 1.0f / std::sqrt(static_cast<float>(c.D)), kKeyTiles, [&](int64_t d) { return qr[d]; },
      [&](int64_t j, int64_t d) { return kb[j * in.kv_stride + d]; });
}

// fp64 log-sum-exp of row i's scaled visible scores, head h (written here, independently).
double lse_reference(const Inputs& in, const Case& c, int64_t b, int64_t i, int64_t h) {
  return lse_row(in, c, b, i, h).exact;
}

// Checks a case against the CPU reference, for every version that runs its head dim (or only
// `only` when given), and each against v1; returns the last version's output.
KernelOut check_against_reference(const Case& c, uint64_t seed, const std::vector<Ver>& only = {}) {
  const Inputs in = make_inputs(c, seed);
  const int64_t W = c.H * c.D;
  const double scale = static_cast<double>(1.0f / std::sqrt(static_cast<float>(c.D)));
  std::vector<double> want;
  std::vector<double> lse_want;  // rows (b, i) of lse_rows, every head
  struct LseRow {
    int64_t b, i;
  };
  std::vector<LseRow> lse_rows;
  std::vector<LseOfRow> lse_emulated;  // the same rows: the derived bound's
  for (int64_t b = 0; b < in.B; ++b) {
    const int64_t q0 = c.q_start[b], n = c.q_len[b];
    const Mat<double> q = dense(in.q, b * in.q_rows, n, in.q_stride, W);
    const Mat<double> k = dense(in.k, b * in.capacity, q0 + n, in.kv_stride, c.Hkv * c.D);
    const Mat<double> v = dense(in.v, b * in.capacity, q0 + n, in.kv_stride, c.Hkv * c.D);
    const Mat<double> o = attention<double>(q, k, v, c.H, c.Hkv, c.D, q0, 0, c.window, scale);
    for (int64_t i = 0; i < n; ++i)
      for (int64_t x = 0; x < W; ++x) want.push_back(o(i, x));
    // LSE on a few rows per sequence (first, last, middle) and every head.
    for (int64_t i : {int64_t{0}, n / 2, n - 1}) {
      lse_rows.push_back({b, i});
      for (int64_t h = 0; h < c.H; ++h) {
        lse_emulated.push_back(lse_row(in, c, b, i, h));
        lse_want.push_back(lse_emulated.back().exact);
      }
    }
  }
  const double lse_derived = derived_lse_bound(lse_emulated);
  const double bound = bf16_output_bound(want);
  const std::vector<Ver> vers = only.empty() ? versions_for(c.D) : only;
  std::vector<float> out_v1;
  KernelOut got;
  for (Ver ver : vers) {
    got = run_kernel(c, in, ver);
    std::vector<float> have;
    int64_t untouched_bad = 0;
    for (int64_t b = 0; b < in.B; ++b) {
      const int64_t n = c.q_len[b];
      for (int64_t i = 0; i < n; ++i)
        for (int64_t x = 0; x < W; ++x) have.push_back(got.o[static_cast<size_t>((b * in.q_rows + i) * W + x)]);
      for (int64_t i = n; i < in.q_rows; ++i)  // rows past q_len keep their poison
        for (int64_t x = 0; x < W; ++x)
          if (!std::isnan(got.o[static_cast<size_t>((b * in.q_rows + i) * W + x)])) ++untouched_bad;
    }
    double lse_err = 0;
    for (size_t r = 0; r < lse_rows.size(); ++r)
      for (int64_t h = 0; h < c.H; ++h) {
        const double g = got.lse[static_cast<size_t>((lse_rows[r].b * c.H + h) * in.q_rows + lse_rows[r].i)];
        const double ref = lse_want[r * static_cast<size_t>(c.H) + static_cast<size_t>(h)];
        lse_err = std::max(lse_err, std::isnan(g) ? INFINITY : std::abs(g - ref));
      }
    const double err = rms_error(have, want);
    EXPECT_LE(err, bound) << ver_name(ver) << ": H " << c.H << " Hkv " << c.Hkv << " D " << c.D << " W " << c.window
                          << " B " << in.B << " q_start[0] " << c.q_start[0] << " q_len[0] " << c.q_len[0];
    const std::string lse_what =
        std::string(ver_name(ver)) + ": LSE (fp64 reference), D " + std::to_string(c.D) + " W " + std::to_string(c.window);
    expect_within_interim_bound(lse_err, 2e-3, lse_what);
    report_derived_bound(lse_err, lse_derived, lse_what);
    EXPECT_EQ(untouched_bad, 0) << ver_name(ver) << ": rows past q_len were written";
    if (ver == Ver::v1) out_v1 = have;
    if (ver != Ver::v1 && ver != Ver::automatic && !out_v1.empty()) {  // v1 runs first
      const std::vector<double> v1d(out_v1.begin(), out_v1.end());
      EXPECT_LE(rms_error(have, v1d), 2.0 * bound) << ver_name(ver) << " vs v1: H " << c.H << " Hkv " << c.Hkv
                                                   << " D " << c.D << " W " << c.window << " q_len[0] " << c.q_len[0];
    }
  }
  return got;
}

TEST(FlashPrefill, HeadDimsAndGqaGroups) {
  YOCO_REQUIRE_GPU();
  check_against_reference({4, 4, 64, 0, {0}, {300}}, 101);          // group 1, D 64
  check_against_reference({4, 2, 128, 0, {0}, {200}}, 102);         // group 2 (the tiny config's map)
  check_against_reference({24, 8, 128, 0, {0}, {517}}, 103);        // group 3, transformer-3b heads
  check_against_reference({8, 1, 256, 0, {0}, {260}}, 104);         // group 8, D 256
  check_against_reference({8, 8, 256, 0, {0}, {131}}, 105);         // D 256, group 1
  check_against_reference({8, 1, 64, 0, {0}, {129}}, 106);          // D 64, group 8
}

TEST(FlashPrefill, ChunkOffsetsNotTileAligned) {
  YOCO_REQUIRE_GPU();
  check_against_reference({4, 2, 128, 0, {1000}, {97}}, 201);
  check_against_reference({8, 1, 256, 0, {1000}, {97}}, 202);
  check_against_reference({4, 4, 64, 0, {333}, {260}}, 203);
  check_against_reference({24, 8, 128, 0, {777}, {1}}, 204);        // q_len 1: the last position sees all keys
  check_against_reference({4, 2, 64, 0, {0}, {1}}, 205);            // one query, one key
}

TEST(FlashPrefill, SlidingWindows) {
  YOCO_REQUIRE_GPU();
  for (int64_t w : {1, 7, 64, 1000}) {
    check_against_reference({4, 2, 128, w, {0}, {600}}, 300 + w);
    check_against_reference({4, 2, 64, w, {350}, {300}}, 400 + w);
  }
  check_against_reference({8, 1, 256, 7, {100}, {200}}, 501);
  check_against_reference({8, 8, 256, 1000, {0}, {300}}, 502);
}

TEST(FlashPrefill, BatchOfDifferentLengthsAndWideStrides) {
  YOCO_REQUIRE_GPU();
  check_against_reference({8, 2, 64, 0, {0, 50, 130}, {257, 1, 128}, 16, 24}, 601);
  check_against_reference({24, 8, 128, 0, {0, 700, 3}, {300, 129, 1}, 8 * 128 * 2, 16}, 602);  // q in a fused QKV row
  check_against_reference({8, 1, 256, 64, {10, 0, 500}, {90, 200, 33}, 256, 8}, 603);
}

// Rows a kernel must never let through: unwritten cache rows past each sequence's last query
// (NaN, as a fresh arena may hold) inside the last key block, and NaN query padding rows. v1/v2
// zero-fill them on load; v3's TMA copies them, so it masks K and zero-fills those V blocks.
TEST(FlashPrefill, UnwrittenCacheRowsNeverReachAnOutput) {
  YOCO_REQUIRE_GPU();
  check_against_reference({8, 2, 128, 0, {0, 0}, {130, 300}, 0, 0, true}, 1601);      // 170 NaN rows in seq 0
  check_against_reference({24, 8, 128, 0, {200, 5}, {77, 1}, 0, 0, true}, 1602);      // chunks, not tile-aligned
  check_against_reference({8, 1, 128, 64, {0, 100}, {250, 129}, 0, 0, true}, 1603);   // window 64
  check_against_reference({4, 2, 64, 7, {0, 3}, {60, 1}, 0, 0, true}, 1604);          // v1-only head dim
  check_against_reference({8, 8, 256, 0, {10, 0}, {90, 33}, 0, 0, true}, 1605);
}

TEST(FlashPrefill, ChunkedEqualsOneShot) {
  YOCO_REQUIRE_GPU();
  for (int64_t D : {64, 128})
  for (Ver ver : versions_for(D)) {
    const Case whole{8, 2, D, 0, {0}, {1500}};
    const Inputs in = make_inputs(whole, 700 + D);
    const KernelOut one = run_kernel(whole, in, ver);
    const PrefillAttentionShape s = shape_of(whole, in);
    DeviceArray<__nv_bfloat16> dq(in.q.size()), dk(in.k.size()), dv(in.v.size()),
        dout(static_cast<size_t>(in.q_rows * whole.H * D));
    upload_bf16(dq, in.q);
    upload_bf16(dk, in.k);
    upload_bf16(dv, in.v);
    const int64_t W = whole.H * D;
    for (int64_t c0 = 0; c0 < 1500;) {  // chunks of 1000, 97, 403
      const int64_t n = c0 == 0 ? 1000 : (c0 == 1000 ? 97 : 1500 - c0);
      PrefillAttentionShape sc = s;
      sc.q_rows = n;
      DeviceArray<int64_t> st(1), ln(1);
      upload(st, std::vector<int64_t>{c0});
      upload(ln, std::vector<int64_t>{n});
      ASSERT_EQ(launch(ver, dq.ptr + c0 * in.q_stride, dk.ptr, dv.ptr, st.ptr, ln.ptr, sc, dout.ptr + c0 * W, nullptr),
                cudaSuccess);
      c0 += n;
    }
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    const std::vector<float> chunked = download_bf16(dout);
    std::vector<double> want;
    std::vector<float> have;
    for (int64_t i = 0; i < 1500 * W; ++i) {
      want.push_back(one.o[static_cast<size_t>(i)]);
      have.push_back(chunked[static_cast<size_t>(i)]);
    }
    // The same per-row arithmetic in both: equal up to (at most) output rounding.
    EXPECT_LE(rms_error(have, want), 0.25 * bf16_output_bound(want)) << ver_name(ver) << " D " << D;
  }
}

TEST(FlashPrefill, RejectsBadShapes) {
  PrefillAttentionShape s{1, 24, 8, 128, 64, 64, 24 * 128, 8 * 128, 0, 0.088f};
  auto* p = reinterpret_cast<__nv_bfloat16*>(uintptr_t{256});
  auto* i = reinterpret_cast<int64_t*>(uintptr_t{256});
  PrefillAttentionShape bad = s;
  bad.head_dim = 96;
  EXPECT_EQ(launch_flash_prefill(p, p, p, i, i, bad, p, nullptr, nullptr), cudaErrorInvalidValue);
  bad = s;
  bad.n_kv_heads = 5;
  EXPECT_EQ(launch_flash_prefill(p, p, p, i, i, bad, p, nullptr, nullptr), cudaErrorInvalidValue);
  bad = s;
  bad.q_stride = 24 * 128 - 8;
  EXPECT_EQ(launch_flash_prefill(p, p, p, i, i, bad, p, nullptr, nullptr), cudaErrorInvalidValue);
  bad = s;
  bad.kv_stride = 8 * 128 + 4;  // not a whole 16 bytes
  EXPECT_EQ(launch_flash_prefill(p, p, p, i, i, bad, p, nullptr, nullptr), cudaErrorInvalidValue);
  bad = s;
  bad.scale = 0;
  EXPECT_EQ(launch_flash_prefill(p, p, p, i, i, bad, p, nullptr, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(launch_flash_prefill(p + 1, p, p, i, i, s, p, nullptr, nullptr), cudaErrorInvalidValue);  // misaligned
  EXPECT_EQ(launch_flash_prefill(nullptr, p, p, i, i, s, p, nullptr, nullptr), cudaErrorInvalidValue);
  // The explicit versions check the same; v2 also refuses head dims it does not run.
  EXPECT_EQ(launch_flash_prefill_v1(p + 1, p, p, i, i, s, p, nullptr, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(launch_flash_prefill_v2(p + 1, p, p, i, i, s, p, nullptr, nullptr), cudaErrorInvalidValue);
  bad = s;
  bad.scale = 0;
  EXPECT_EQ(launch_flash_prefill_v2(p, p, p, i, i, bad, p, nullptr, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(launch_flash_prefill_v3(p + 1, p, p, i, i, s, p, nullptr, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(launch_flash_prefill_v3(p, p, p, i, i, bad, p, nullptr, nullptr), cudaErrorInvalidValue);
  for (int stages : {0, 1, 4})  // v3 runs rings of 2 or 3 stages only
    EXPECT_EQ(detail::launch_flash_prefill_v3_stages(stages, p, p, p, i, i, s, p, nullptr, nullptr),
              cudaErrorInvalidValue)
        << stages;
  EXPECT_TRUE(flash_prefill_v2_supported(128));
  for (int64_t d : {64, 256}) {
    bad = s;
    bad.head_dim = d;
    bad.q_stride = 24 * d;
    bad.kv_stride = 8 * d;
    if (!flash_prefill_v2_supported(d)) {
      EXPECT_EQ(launch_flash_prefill_v2(p, p, p, i, i, bad, p, nullptr, nullptr), cudaErrorInvalidValue) << d;
      EXPECT_EQ(launch_flash_prefill_v3(p, p, p, i, i, bad, p, nullptr, nullptr), cudaErrorInvalidValue) << d;
    }
  }
}

TEST(AttentionOracle, EqualsTheCpuReference) {
  YOCO_REQUIRE_GPU();
  for (int64_t window : {0, 100}) {
    const Case c{4, 2, 128, window, {0, 1500}, {2048, 600}, 0, 8};
    const Inputs in = make_inputs(c, 800 + window);
    DeviceArray<__nv_bfloat16> dq(in.q.size()), dk(in.k.size()), dv(in.v.size());
    upload_bf16(dq, in.q);
    upload_bf16(dk, in.k);
    upload_bf16(dv, in.v);
    std::vector<OracleRow> rows;
    for (int64_t i : {0, 1, 127, 128, 1000, 2046, 2047}) rows.push_back({0, i});
    for (int64_t i = 0; i < 600; i += 7) rows.push_back({1, i});
    rows.push_back({1, 599});
    OracleShape os{in.B, c.H, c.Hkv, c.D, in.q_rows, in.capacity, in.q_stride, in.kv_stride, window,
                   static_cast<double>(1.0f / std::sqrt(128.0f))};
    AttentionOracle oracle;
    ASSERT_TRUE(oracle.ok()) << oracle.error();
    std::vector<float> out;
    std::vector<double> lse;
    ASSERT_EQ(oracle.run(dq.ptr, dk.ptr, dv.ptr, os, c.q_start, rows, &out, &lse, nullptr), "");
    const int64_t W = c.H * c.D;
    std::vector<double> want(rows.size() * W, 0.0);
    std::vector<float> have(out.begin(), out.end());
    double lse_err = 0;
    for (int64_t b = 0; b < 2; ++b) {
      const int64_t q0 = c.q_start[b], n = c.q_len[b];
      const Mat<double> q = dense(in.q, b * in.q_rows, n, in.q_stride, W);
      const Mat<double> k = dense(in.k, b * in.capacity, q0 + n, in.kv_stride, c.Hkv * c.D);
      const Mat<double> v = dense(in.v, b * in.capacity, q0 + n, in.kv_stride, c.Hkv * c.D);
      const Mat<double> o = attention<double>(q, k, v, c.H, c.Hkv, c.D, q0, 0, window, os.scale);
      for (size_t r = 0; r < rows.size(); ++r) {
        if (rows[r].batch != b) continue;
        for (int64_t x = 0; x < W; ++x) want[r * W + x] = o(rows[r].row, x);
        for (int64_t h = 0; h < c.H; ++h)
          lse_err = std::max(lse_err, std::abs(lse[r * c.H + h] - lse_reference(in, c, b, rows[r].row, h)));
      }
    }
    // fp32 GEMMs on exact bf16 products: far inside any bf16 bound.
    EXPECT_LE(rms_error(have, want), 2e-6) << "window " << window;
    EXPECT_LE(lse_err, 1e-5) << "window " << window;
  }
}

// Kernel vs oracle on device-generated inputs, sampled rows, for every version that runs D;
// v2/v3 vs v1 on the whole output.
void check_long(int64_t H, int64_t Hkv, int64_t D, int64_t window, int64_t q_start, int64_t q_len, uint64_t seed) {
  const int64_t cap = q_start + q_len, q_stride = H * D, kv_stride = Hkv * D;
  DeviceArray<__nv_bfloat16> dq(static_cast<size_t>(q_len * q_stride)), dk(static_cast<size_t>(cap * kv_stride)),
      dv(static_cast<size_t>(cap * kv_stride)), dout(static_cast<size_t>(q_len * H * D)),
      dout_v1(static_cast<size_t>(q_len * H * D));
  ASSERT_EQ(launch_fill_normal_bf16(dq.ptr, static_cast<int64_t>(dq.n), seed, 1.0f, nullptr), cudaSuccess);
  ASSERT_EQ(launch_fill_normal_bf16(dk.ptr, static_cast<int64_t>(dk.n), seed + 1, 1.0f, nullptr), cudaSuccess);
  ASSERT_EQ(launch_fill_normal_bf16(dv.ptr, static_cast<int64_t>(dv.n), seed + 2, 1.0f, nullptr), cudaSuccess);
  DeviceArray<int64_t> st(1), ln(1);
  upload(st, std::vector<int64_t>{q_start});
  upload(ln, std::vector<int64_t>{q_len});
  const float scale = 1.0f / std::sqrt(static_cast<float>(D));
  PrefillAttentionShape s{1, H, Hkv, D, q_len, cap, q_stride, kv_stride, window, scale};
  DeviceArray<float> dlse(static_cast<size_t>(H * q_len));

  // Sampled rows: first and last rows of the first, second, a middle and the last tiles, the last
  // row, and random rows.
  const int64_t br = flash_prefill_tile_rows(D);
  std::vector<int64_t> idx;
  const int64_t tiles = (q_len + br - 1) / br;
  for (int64_t t : {int64_t{0}, int64_t{1}, tiles / 2, tiles - 1}) {
    idx.push_back(std::min(q_len - 1, t * br));
    idx.push_back(std::min(q_len - 1, t * br + br - 1));
  }
  idx.push_back(q_len - 1);
  std::mt19937_64 rng(seed);
  for (int r = 0; r < 16; ++r) idx.push_back(static_cast<int64_t>(rng() % static_cast<uint64_t>(q_len)));
  std::sort(idx.begin(), idx.end());
  idx.erase(std::unique(idx.begin(), idx.end()), idx.end());
  std::vector<OracleRow> rows;
  for (int64_t i : idx) rows.push_back({0, i});

  AttentionOracle oracle;
  ASSERT_TRUE(oracle.ok()) << oracle.error();
  OracleShape os{1, H, Hkv, D, q_len, cap, q_stride, kv_stride, window, static_cast<double>(scale)};
  std::vector<float> want_f;
  std::vector<double> want_lse;
  ASSERT_EQ(oracle.run(dq.ptr, dk.ptr, dv.ptr, os, {q_start}, rows, &want_f, &want_lse, nullptr), "");
  const std::vector<double> want(want_f.begin(), want_f.end());
  const double bound = bf16_output_bound(want);
  const int64_t W = H * D;

  // The sampled rows' LSEs, exact and as the kernels round them at both key tiles, on the host from
  // the device's inputs: what the derived bound comes from and what each kernel is measured against.
  std::vector<uint16_t> k_bits(dk.n), q_bits(rows.size() * W);
  ASSERT_EQ(cudaMemcpy(k_bits.data(), dk.ptr, dk.n * 2, cudaMemcpyDeviceToHost), cudaSuccess);
  for (size_t r = 0; r < rows.size(); ++r)
    ASSERT_EQ(cudaMemcpy(q_bits.data() + r * W, dq.ptr + rows[r].row * q_stride, W * 2, cudaMemcpyDeviceToHost),
              cudaSuccess);
  std::vector<LseOfRow> emulated(rows.size() * static_cast<size_t>(H));  // (row, head)
  parallel_for(static_cast<int64_t>(emulated.size()), [&](int64_t t) {
    const int64_t r = t / H, h = t % H, kvh = h / (H / Hkv), p = q_start + rows[r].row;
    const int64_t lo = window > 0 ? std::max<int64_t>(0, p - window + 1) : 0;
    const uint16_t* qr = q_bits.data() + r * W + h * D;
    const uint16_t* kb = k_bits.data() + kvh * D;
    emulated[static_cast<size_t>(t)] = lse_of_row(
        D, lo, p, scale, kKeyTiles, [&](int64_t d) { return bf16_bits_to_float(qr[d]); },
        [&](int64_t j, int64_t d) { return bf16_bits_to_float(kb[j * kv_stride + d]); });
  });
  const double lse_derived = derived_lse_bound(emulated);

  for (Ver ver : versions_for(D)) {
    if (ver == Ver::automatic) continue;  // the dispatcher is one of the two; covered by the short cases
    ASSERT_EQ(cudaMemset(dout.ptr, 0xff, dout.n * 2), cudaSuccess);
    ASSERT_EQ(cudaMemset(dlse.ptr, 0xff, dlse.n * 4), cudaSuccess);
    ASSERT_EQ(launch(ver, dq.ptr, dk.ptr, dv.ptr, st.ptr, ln.ptr, s, dout.ptr, dlse.ptr), cudaSuccess) << ver_name(ver);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess) << ver_name(ver);
    std::vector<float> have(rows.size() * W);
    std::vector<float> lse_all = download(dlse);
    double lse_err = 0, lse_err_exact = 0;
    for (size_t r = 0; r < rows.size(); ++r) {
      std::vector<uint16_t> bits(static_cast<size_t>(W));
      ASSERT_EQ(cudaMemcpy(bits.data(), dout.ptr + rows[r].row * W, W * 2, cudaMemcpyDeviceToHost), cudaSuccess);
      for (int64_t x = 0; x < W; ++x) have[r * W + x] = bf16_bits_to_float(bits[x]);
      for (int64_t h = 0; h < H; ++h) {
        const double g = lse_all[static_cast<size_t>(h * q_len + rows[r].row)];
        const double exact = emulated[r * static_cast<size_t>(H) + static_cast<size_t>(h)].exact;
        lse_err = std::max(lse_err, std::isnan(g) ? INFINITY : std::abs(g - want_lse[r * H + h]));
        lse_err_exact = std::max(lse_err_exact, std::isnan(g) ? INFINITY : std::abs(g - exact));
      }
    }
    EXPECT_LE(rms_error(have, want), bound) << ver_name(ver) << ": H " << H << " Hkv " << Hkv << " D " << D << " W "
                                            << window << " q_start " << q_start << " q_len " << q_len;
    expect_within_interim_bound(lse_err, 5e-3,
                                std::string(ver_name(ver)) + ": LSE (oracle) at q_len " + std::to_string(q_len));
    report_derived_bound(lse_err_exact, lse_derived,
                         std::string(ver_name(ver)) + ": LSE (fp64 on the host) at q_len " + std::to_string(q_len));
    if (ver == Ver::v1) {
      ASSERT_EQ(cudaMemcpy(dout_v1.ptr, dout.ptr, dout.n * 2, cudaMemcpyDeviceToDevice), cudaSuccess);
    } else {  // a v2 schedule or a v3 ring depth: whole outputs vs v1 (v1 ran first)
      const std::vector<float> a = download_bf16(dout), b1 = download_bf16(dout_v1);
      const std::vector<double> b(b1.begin(), b1.end());
      EXPECT_LE(rms_error(a, b), 2.0 * bound) << ver_name(ver) << " vs v1 at q_len " << q_len;
      int64_t nan = 0;
      for (float x : a) nan += std::isnan(x) ? 1 : 0;
      EXPECT_EQ(nan, 0) << ver_name(ver) << " left NaN / unwritten rows at q_len " << q_len;
    }
  }
}

TEST(FlashPrefill, MatchesTheOracleAt32K) {
  YOCO_REQUIRE_GPU();
  check_long(24, 8, 128, 0, 0, 32768, 900);
  check_long(8, 1, 256, 4096, 20000, 12768, 901);   // a later chunk, not tile-aligned, windowed
  check_long(8, 2, 64, 0, 12345, 20000, 902);
  check_long(8, 1, 128, 1024, 20000, 12768, 903);   // v2: later chunk, window, GQA 8
}

TEST(FlashPrefill, MatchesTheOracleAt128K) {
  YOCO_REQUIRE_GPU();
  check_long(24, 8, 128, 0, 0, 131072, 1000);
}

// v2 / v3 (D 128) specifics: windows 1, 64, 1024 with GQA 1, 3, 8; lengths 1 .. 4K including
// non-multiples of 64 and 128 (the CPU reference below 1.1K rows, the oracle on sampled rows
// plus v2 == v1 and v3 == v1 on whole outputs above).
TEST(FlashPrefillV2, Windows) {
  YOCO_REQUIRE_GPU();
  if (!flash_prefill_v2_supported(128)) GTEST_SKIP() << "no v2 for D 128";
  const std::vector<Ver> both = unless_v3_skipped({Ver::v1, Ver::v2, Ver::v3, Ver::v3_stages3});
  for (int64_t w : {1, 64, 1024}) {
    check_against_reference({8, 8, 128, w, {0}, {1100}}, 1100 + w, both);    // GQA 1
    check_against_reference({24, 8, 128, w, {300}, {333}}, 1200 + w, both);  // GQA 3, q0 not tile-aligned
    check_against_reference({8, 1, 128, w, {1029}, {257}}, 1300 + w, both);  // GQA 8, later chunk
  }
  check_long(24, 8, 128, 1024, 0, 4000, 1400);
  check_long(8, 1, 128, 64, 777, 4096, 1401);
}

// v3 alone on a few short cases (GQA 3, a later chunk with a window, NaN in unwritten rows, a
// batch): scripts/gpu-suite.sh runs it first, under a short timeout, and leaves v3 out of the rest
// of the suite if it fails or hangs.
TEST(FlashPrefillV3, Smoke) {
  YOCO_REQUIRE_GPU();
  if (!flash_prefill_v2_supported(128)) GTEST_SKIP() << "no v3 for D 128";
  const std::vector<Ver> v3 = unless_v3_skipped({Ver::v1, Ver::v3, Ver::v3_stages3});  // v1 first: "vs v1"
  if (v3.size() == 1) GTEST_SKIP() << "YOCO_PREFILL_SKIP_V3 is set";
  check_against_reference({24, 8, 128, 0, {0}, {517}}, 1701, v3);
  check_against_reference({8, 1, 128, 64, {1029}, {257}}, 1702, v3);
  check_against_reference({8, 2, 128, 0, {0, 0}, {130, 300}, 0, 0, true}, 1703, v3);
}

TEST(FlashPrefillV2, Lengths) {
  YOCO_REQUIRE_GPU();
  if (!flash_prefill_v2_supported(128)) GTEST_SKIP() << "no v2 for D 128";
  const std::vector<Ver> both = unless_v3_skipped({Ver::v1, Ver::v2, Ver::v3, Ver::v3_stages3});
  uint64_t seed = 1500;
  for (int64_t n : {1, 2, 63, 64, 65, 127, 128, 129, 191, 255, 256, 257, 383, 640, 1000})
    check_against_reference({8, 1, 128, 0, {0}, {n}}, seed++, both);
  for (int64_t n : {1, 5, 129, 700}) check_against_reference({24, 8, 128, 0, {n * 3 + 1}, {n}}, seed++, both);
  for (int64_t n : {1023, 2049, 3001, 4095, 4096}) check_long(24, 8, 128, 0, 0, n, seed++);
  check_long(8, 8, 128, 0, 4097, 1500, seed++);  // a later chunk, GQA 1
}

}  // namespace
}  // namespace yoco::cuda
