// The long case of `yoco check gret` (label `long`, not in the default suite:
// ctest -L long): 1M tokens, the length where fla's int32 offsets wrapped
// (#1080), generated, judged right, and a wrap placed near the end found
// exactly. A few heads only: the test is about lengths and offsets; the
// README states the time of the full 24 x 128 case.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "check_generate.hpp"
#include "dtype.hpp"
#include "gret.hpp"
#include "gret_check.hpp"
#include "safetensors.hpp"
#include "tensor_file.hpp"

namespace {

using namespace yoco::check;
namespace fs = std::filesystem;

TEST(CheckLong, OneMillionTokensAndAWrapNearTheEnd) {
  const fs::path dir = fs::temp_directory_path() / ("yoco_check_long_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  GretGenerateOptions g;
  g.T = int64_t{1} << 20, g.H = 2, g.D = 64, g.dtype = yoco::DType::f32;
  const std::string in = (dir / "in.st").string();
  generate_gret_inputs(in, g);
  const auto inputs = TensorFile::open(in);
  // The candidate: fp32 chunkwise per head (the f32 tolerance's emulation),
  // streamed into [1, T, H, D]; from token `wrap` on, the outputs of 2^19
  // tokens earlier.
  const int64_t T = g.T, H = g.H, D = g.D, wrap = T - 4097;
  std::vector<std::vector<float>> per_head(static_cast<size_t>(H));
  for (int64_t h = 0; h < H; ++h) {
    yoco::Mat<float> q(T, D), k(T, D), v(T, D);
    yoco::Vec<float> lg(T);
    constexpr int64_t kBlock = 1 << 16;  // tokens read at a time
    std::vector<double> qb(static_cast<size_t>(kBlock * H * D)), kb(qb.size()), vb(qb.size()),
        gb(static_cast<size_t>(kBlock * H));
    for (int64_t t0 = 0; t0 < T; t0 += kBlock) {
      const int64_t L = std::min(kBlock, T - t0);
      inputs->read("q", t0 * H * D, L * H * D, qb.data());
      inputs->read("k", t0 * H * D, L * H * D, kb.data());
      inputs->read("v", t0 * H * D, L * H * D, vb.data());
      inputs->read("g", t0 * H, L * H, gb.data());
      for (int64_t t = 0; t < L; ++t) {
        const size_t base = static_cast<size_t>((t * H + h) * D);
        for (int64_t c = 0; c < D; ++c) {
          q(t0 + t, c) = static_cast<float>(qb[base + c] / std::sqrt(static_cast<double>(D)));
          k(t0 + t, c) = static_cast<float>(kb[base + c]);
          v(t0 + t, c) = static_cast<float>(vb[base + c]);
        }
        lg(t0 + t) = static_cast<float>(gb[static_cast<size_t>(t * H + h)]);
      }
    }
    const auto r = yoco::gret_chunkwise<float>(q, k, v, lg, nullptr, 64);
    per_head[h].assign(r.o.data(), r.o.data() + T * D);
  }
  for (const bool wrapped : {false, true}) {
    const std::string out = (dir / (wrapped ? "bad.st" : "ok.st")).string();
    yoco::SafetensorsWriter w(out, {{"o", yoco::DType::f32, {1, T, H, D}}}, {});
    std::vector<float> tok(static_cast<size_t>(H * D));
    for (int64_t t = 0; t < T; ++t) {
      const int64_t src = wrapped && t >= wrap ? t - (int64_t{1} << 19) : t;
      for (int64_t h = 0; h < H; ++h)
        std::copy_n(per_head[h].data() + src * D, D, tok.data() + h * D);
      w.append(tok.data(), H * D);
    }
    w.commit();
    const CheckReport r = check_gret(*inputs, *TensorFile::open(out), {});
    if (wrapped) {
      EXPECT_FALSE(r.pass());
      EXPECT_EQ(r.verdicts[0].first_bad_token, wrap);
    } else {
      EXPECT_TRUE(r.pass()) << r.verdicts[0].rms_ratio << " " << r.verdicts[0].tolerance;
      EXPECT_EQ(r.verdicts[0].first_bad_token, -1);
    }
  }
  fs::remove_all(dir);
}

}  // namespace
