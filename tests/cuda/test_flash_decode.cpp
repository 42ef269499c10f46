// FlashDecoding against the reference attention with one query per sequence:
// any split count equals the unsplit result; lengths at and around split
// boundaries; GQA groups 1, 3 and 8; head dims 64, 128, 256; a batch whose
// sequences have different lengths; a sliding window.
#include <gtest/gtest.h>

#include <cmath>

#include "device_test_data.hpp"
#include "flash_decode.hpp"
#include "gpu_test_support.hpp"
#include "ops.hpp"

namespace yoco::cuda {
namespace {

using namespace yoco::cuda_test;

struct Case {
  int64_t H, Hkv, Da, window;
  std::vector<int64_t> lengths;
};

// Runs the kernel with `splits` and returns [batch, H·Da] as floats.
std::vector<float> run(const Case& c, int64_t capacity, const std::vector<float>& q, const std::vector<float>& k,
                       const std::vector<float>& v, int splits) {
  const int64_t B = static_cast<int64_t>(c.lengths.size());
  DecodeAttentionShape s{B, c.H, c.Hkv, c.Da, capacity, c.window, 1.0f / std::sqrt(static_cast<float>(c.Da))};
  DeviceArray<__nv_bfloat16> dq(q.size()), dk(k.size()), dv(v.size()), out(B * c.H * c.Da);
  DeviceArray<int64_t> dl(B);
  DeviceArray<float> ws(decode_workspace_floats(s, splits));
  upload_bf16(dq, q);
  upload_bf16(dk, k);
  upload_bf16(dv, v);
  upload(dl, c.lengths);
  EXPECT_EQ(launch_flash_decode(dq.ptr, dk.ptr, dv.ptr, dl.ptr, s, splits, ws.ptr, out.ptr, nullptr), cudaSuccess);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  return download_bf16(out);
}

TEST(FlashDecode, AnySplitCountEqualsTheReference) {
  YOCO_REQUIRE_GPU();
  const std::vector<Case> cases = {
      {4, 4, 64, 0, {1}},          {24, 8, 128, 0, {255, 256, 257}},  {8, 1, 128, 0, {1000}},
      {16, 2, 256, 0, {300, 7}},   {6, 2, 128, 64, {500, 63, 64}},    {24, 8, 128, 0, {4096}},
  };
  for (const Case& c : cases) {
    const int64_t B = static_cast<int64_t>(c.lengths.size());
    const int64_t cap = *std::max_element(c.lengths.begin(), c.lengths.end()) + 3;
    const int64_t qw = c.H * c.Da, kvw = c.Hkv * c.Da;
    const auto q = random_bf16_values(B * qw, 11), k = random_bf16_values(B * cap * kvw, 12),
               v = random_bf16_values(B * cap * kvw, 13);
    // The reference, sequence by sequence: the query at position len - 1.
    std::vector<double> want;
    for (int64_t b = 0; b < B; ++b) {
      const int64_t len = c.lengths[b];
      const Mat<double> qb = to_mat(std::vector<float>(q.begin() + b * qw, q.begin() + (b + 1) * qw), 1, qw);
      const Mat<double> kb = to_mat(std::vector<float>(k.begin() + b * cap * kvw, k.begin() + (b * cap + len) * kvw), len, kvw);
      const Mat<double> vb = to_mat(std::vector<float>(v.begin() + b * cap * kvw, v.begin() + (b * cap + len) * kvw), len, kvw);
      const Mat<double> o = attention<double>(qb, kb, vb, c.H, c.Hkv, c.Da, len - 1, 0, c.window, 1.0 / std::sqrt(double(c.Da)));
      for (int64_t i = 0; i < qw; ++i) want.push_back(o(0, i));
    }
    const int max_splits = 128;
    for (int splits : {1, 2, 7, max_splits}) {
      const auto got = run(c, cap, q, k, v, splits);
      EXPECT_LE(rms_error(got, want), bf16_output_bound(want))
          << "H " << c.H << " Hkv " << c.Hkv << " Da " << c.Da << " window " << c.window << " splits " << splits;
    }
  }
}

TEST(FlashDecode, SplitChoiceFillsTheDevice) {
  DecodeAttentionShape s{1, 24, 8, 128, 1 << 20, 0, 0.088f};
  EXPECT_EQ(choose_decode_splits(s, 1 << 20, 132), 33);  // 8 KV heads x 33 >= 2 x 132 blocks
  EXPECT_EQ(choose_decode_splits(s, 300, 132), 1);       // short: at least 256 keys per split
  s.batch = 64;
  EXPECT_EQ(choose_decode_splits(s, 1 << 20, 132), 1);   // the batch fills the device already
}

}  // namespace
}  // namespace yoco::cuda
