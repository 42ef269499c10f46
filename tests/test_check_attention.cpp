// `yoco check attention` (bench/check/attention_check): each accepted case is a
// correct softmax attention in a convention FlashAttention or SDPA users have;
// each rejected case is one mistake such a kernel makes.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "attention_check.hpp"
#include "check_generate.hpp"
#include "cli_runner.hpp"
#include "dtype.hpp"
#include "errors.hpp"
#include "ops.hpp"
#include "safetensors.hpp"
#include "tensor_file.hpp"

namespace {

using yoco::DType;
using yoco::InputError;
using yoco::Mat;
using namespace yoco::check;

struct Shape {
  int64_t B, Sq, Sk, Hq, Hkv, D;
};

// How a candidate computes; defaults are right for the check's defaults.
struct Candidate {
  bool causal = true;
  int64_t window = 0;
  int64_t q_offset = -1;      // -1: Sk - Sq (right)
  double scale_factor = 1.0;  // on top of D^-1/2
  bool heads_modulo = false;  // query head h reads kv head h % Hkv instead of h / group
};

class CheckAttention : public yoco_test::CliTest {
 protected:
  // Inputs from the generator, [B, S, H, D] or [B, H, S, D].
  std::string inputs(const Shape& s, bool bhsd, const std::string& name = "in.st", uint64_t seed = 1) {
    AttentionGenerateOptions g;
    g.B = s.B, g.Sq = s.Sq, g.Sk = s.Sk, g.Hq = s.Hq, g.Hkv = s.Hkv, g.D = s.D;
    g.seed = seed;
    g.bhsd = bhsd;
    g.q_scale = 2.0;  // peaky enough that a mask mistake shows
    const std::string f = path(name);
    generate_attention_inputs(f, g);
    return f;
  }
  // The candidate's output from the file's q, k, v, in the file's layout.
  std::string outputs(const std::string& in, const Shape& s, bool bhsd, const Candidate& c, DType dtype,
                      const std::string& name = "out.st", int64_t nan_at = -1) {
    const auto f = TensorFile::open(in);
    auto idx = [&](int64_t b, int64_t t, int64_t h, int64_t S, int64_t H) {
      return bhsd ? ((b * H + h) * S + t) * s.D : ((b * S + t) * H + h) * s.D;
    };
    std::vector<double> q(static_cast<size_t>(s.B * s.Sq * s.Hq * s.D)), k(static_cast<size_t>(s.B * s.Sk * s.Hkv * s.D)),
        v(k.size()), o(q.size());
    f->read("q", 0, static_cast<int64_t>(q.size()), q.data());
    f->read("k", 0, static_cast<int64_t>(k.size()), k.data());
    f->read("v", 0, static_cast<int64_t>(v.size()), v.data());
    const int64_t group = s.Hq / s.Hkv;
    const int64_t off = c.q_offset >= 0 ? c.q_offset : s.Sk - s.Sq;
    const double scale = c.scale_factor / std::sqrt(static_cast<double>(s.D));
    for (int64_t b = 0; b < s.B; ++b)
      for (int64_t h = 0; h < s.Hq; ++h) {
        const int64_t kh = c.heads_modulo ? h % s.Hkv : h / group;
        Mat<double> qh(s.Sq, s.D), kk(s.Sk, s.D), vv(s.Sk, s.D);
        for (int64_t t = 0; t < s.Sq; ++t)
          for (int64_t d = 0; d < s.D; ++d) qh(t, d) = q[static_cast<size_t>(idx(b, t, h, s.Sq, s.Hq) + d)];
        for (int64_t t = 0; t < s.Sk; ++t)
          for (int64_t d = 0; d < s.D; ++d) {
            kk(t, d) = k[static_cast<size_t>(idx(b, t, kh, s.Sk, s.Hkv) + d)];
            vv(t, d) = v[static_cast<size_t>(idx(b, t, kh, s.Sk, s.Hkv) + d)];
          }
        const Mat<double> oh = yoco::attention<double>(qh, kk, vv, 1, 1, s.D, c.causal ? off : s.Sk, 0, c.window, scale);
        for (int64_t t = 0; t < s.Sq; ++t)
          for (int64_t d = 0; d < s.D; ++d) o[static_cast<size_t>(idx(b, t, h, s.Sq, s.Hq) + d)] = oh(t, d);
      }
    if (nan_at >= 0) o[static_cast<size_t>(nan_at)] = std::numeric_limits<double>::quiet_NaN();
    const std::string out = path(name);
    const std::vector<int64_t> shape =
        bhsd ? std::vector<int64_t>{s.B, s.Hq, s.Sq, s.D} : std::vector<int64_t>{s.B, s.Sq, s.Hq, s.D};
    yoco::write_safetensors(out, {{"o", shape, o.data(), nullptr}}, dtype, {});
    return out;
  }
  CheckReport run(const std::string& in, const std::string& out, AttentionCheckOptions opt = {}) {
    return check_attention(*TensorFile::open(in), *TensorFile::open(out), opt);
  }
};

TEST_F(CheckAttention, AcceptsCorrectAttentionInEveryConvention) {
  struct Case {
    const char* what;
    Shape s;
    bool bhsd;
    Candidate c;
    AttentionCheckOptions opt;
  };
  AttentionCheckOptions windowed;
  windowed.window = 16;
  Candidate cw;
  cw.window = 16;
  AttentionCheckOptions none;
  none.causal = false;
  Candidate cn;
  cn.causal = false;
  AttentionCheckOptions at40;
  at40.q_offset = 40;
  Candidate c40;
  c40.q_offset = 40;
  const std::vector<Case> cases{
      {"prefill, MHA, FlashAttention layout", {2, 96, 96, 2, 2, 32}, false, {}, {}},
      {"prefill, GQA 4, SDPA layout", {1, 80, 80, 8, 2, 64}, true, {}, {}},
      {"chunked prefill: 48 queries after 112 keys", {1, 48, 160, 4, 1, 32}, false, {}, {}},
      {"decode: one query", {3, 1, 300, 4, 2, 64}, true, {}, {}},
      {"sliding window 16", {1, 100, 100, 2, 1, 32}, false, cw, windowed},
      {"no mask", {1, 30, 70, 2, 2, 16}, false, cn, none},
      {"query block at an explicit offset", {1, 20, 100, 2, 2, 16}, false, c40, at40},
  };
  for (const auto& k : cases) {
    const std::string in = inputs(k.s, k.bhsd);
    for (DType dt : {DType::bf16, DType::f32}) {
      const CheckReport r = run(in, outputs(in, k.s, k.bhsd, k.c, dt), [&] {
        AttentionCheckOptions o = k.opt;
        o.bhsd = k.bhsd;
        return o;
      }());
      ASSERT_EQ(r.verdicts.size(), 1u);
      EXPECT_TRUE(r.pass()) << k.what << " " << (dt == DType::bf16 ? "bf16" : "f32") << ": rms "
                            << r.verdicts[0].rms_ratio << " tolerance " << r.verdicts[0].tolerance;
      EXPECT_LT(r.verdicts[0].tolerance, dt == DType::bf16 ? 3e-2 : 1e-4) << k.what;
    }
  }
}

TEST_F(CheckAttention, RejectsEachMistake) {
  const Shape s{1, 64, 128, 8, 2, 32};
  const std::string in = inputs(s, false);
  struct Case {
    const char* what;
    Candidate c;
  };
  Candidate modulo;
  modulo.heads_modulo = true;
  Candidate top_left;
  top_left.q_offset = 0;  // queries aligned to the first keys, not the last
  Candidate one_early;
  one_early.q_offset = s.Sk - s.Sq - 1;  // each query misses its own key
  Candidate unscaled;
  unscaled.scale_factor = std::sqrt(32.0);
  Candidate twice;
  twice.scale_factor = 1.0 / std::sqrt(32.0);
  Candidate windowed;
  windowed.window = 64;  // a window where none was asked
  Candidate unmasked;
  unmasked.causal = false;
  for (const auto& k : std::vector<Case>{{"GQA head h reads kv head h % Hkv", modulo},
                                         {"top-left alignment", top_left},
                                         {"causal mask one key early", one_early},
                                         {"no scale", unscaled},
                                         {"scale applied twice", twice},
                                         {"a window", windowed},
                                         {"no mask", unmasked}}) {
    const CheckReport r = run(in, outputs(in, s, false, k.c, DType::bf16, std::string("bad.st")));
    EXPECT_FALSE(r.pass()) << k.what << ": rms " << r.verdicts[0].rms_ratio << " tolerance "
                           << r.verdicts[0].tolerance;
  }
  // A window one key too wide.
  const Shape w{1, 96, 96, 2, 2, 32};
  const std::string inw = inputs(w, false, "inw.st");
  Candidate wide;
  wide.window = 17;
  AttentionCheckOptions want16;
  want16.window = 16;
  EXPECT_FALSE(run(inw, outputs(inw, w, false, wide, DType::bf16, "wide.st"), want16).pass());
}

TEST_F(CheckAttention, OneNaNFailsAndIsPlaced) {
  const Shape s{2, 50, 50, 2, 2, 16};
  const std::string in = inputs(s, false);
  const int64_t at = ((1 * s.Sq + 33) * s.Hq + 1) * s.D + 5;  // batch 1, query 33, head 1
  const CheckReport r = run(in, outputs(in, s, false, {}, DType::f32, "nan.st", at));
  EXPECT_FALSE(r.pass());
  EXPECT_EQ(r.verdicts[0].nonfinite, 1);
  EXPECT_EQ(r.verdicts[0].first_bad_where, "batch 1, token 33");
}

// Unmasked, a query has no position: "query 16 (position 6)" named one. And a
// defaulted query offset (Sk - Sq < 0) was named as if typed: "--q-offset -10".
TEST_F(CheckAttention, LocationsAndMessagesSayOnlyWhatApplies) {
  const Shape s{1, 16, 32, 2, 2, 16};
  const std::string in = inputs(s, false);
  AttentionCheckOptions none;
  none.causal = false;
  const CheckReport r = run(in, outputs(in, s, false, {}, DType::f32, "causal.st"), none);  // a causal o, judged unmasked
  EXPECT_FALSE(r.pass());
  EXPECT_NE(r.verdicts[0].max_where.find("query "), std::string::npos) << r.verdicts[0].max_where;
  EXPECT_EQ(r.verdicts[0].max_where.find("position"), std::string::npos) << r.verdicts[0].max_where;
  const CheckReport c = run(in, outputs(in, s, false, [] { Candidate x; x.scale_factor = 2; return x; }(), DType::f32, "x2.st"));
  EXPECT_NE(c.verdicts[0].max_where.find("(position "), std::string::npos) << c.verdicts[0].max_where;
  const Shape more{1, 40, 30, 2, 2, 16};
  const std::string inm = inputs(more, false, "more.st");
  const auto d = yoco("check attention " + inm + " " + inm + " --o q");
  yoco_test::expect_input_error(d, {"more.st", "default query offset Sk - Sq = -10", "--q-offset P"}, "default offset");
  EXPECT_EQ(d.err.find("--q-offset -10"), std::string::npos) << d.err;
}

TEST_F(CheckAttention, BadInputIsAnInputErrorNamingFileAndTensor) {
  const Shape s{1, 32, 32, 4, 2, 16};
  const std::string in = inputs(s, false);
  const std::string out = outputs(in, s, false, {}, DType::f32);
  auto expect_error = [&](const std::string& i, const std::string& o, AttentionCheckOptions opt,
                          std::vector<std::string> needles) {
    try {
      run(i, o, opt);
      ADD_FAILURE() << "no error for " << needles[0];
    } catch (const InputError& e) {
      for (const auto& n : needles) EXPECT_NE(std::string(e.what()).find(n), std::string::npos) << e.what();
    }
  };
  // 3 query heads over 2 kv heads (the generator refuses to write it).
  std::vector<double> q3(static_cast<size_t>(32 * 3 * 16), 0.5), kv2(static_cast<size_t>(32 * 2 * 16), 0.5);
  const std::string in3 = path("in3.st"), o3 = path("o3.st");
  yoco::write_safetensors(in3, {{"q", {1, 32, 3, 16}, q3.data(), nullptr}, {"k", {1, 32, 2, 16}, kv2.data(), nullptr},
                                {"v", {1, 32, 2, 16}, kv2.data(), nullptr}},
                          DType::f32, {});
  yoco::write_safetensors(o3, {{"o", {1, 32, 3, 16}, q3.data(), nullptr}}, DType::f32, {});
  expect_error(in3, o3, {}, {"in3.st", "multiple of key/value heads"});
  expect_error(in, in, {}, {"in.st", "'o'"});  // no o in the inputs file
  // An integer o of q's shape: said to be the dtype, not the shape.
  std::vector<yoco::TensorToWrite> int_o{{"o", {1, 32, 4, 16}, q3.data(), nullptr}};
  q3.resize(static_cast<size_t>(32 * 4 * 16), 0.5);
  int_o[0].data64 = q3.data();
  yoco::write_safetensors(path("int_o.st"), int_o, DType::i32, {});
  expect_error(in, path("int_o.st"), {}, {"int_o.st", "'o'", "is i32: expected a float tensor"});
  AttentionCheckOptions wo;
  wo.window = 8;
  wo.causal = false;
  expect_error(in, out, wo, {"--window"});
  // Without the mask every query sees every key: an offset changed nothing, said nothing.
  AttentionCheckOptions offset_unmasked;
  offset_unmasked.q_offset = 3;
  offset_unmasked.causal = false;
  expect_error(in, out, offset_unmasked, {"--q-offset", "causal"});
  AttentionCheckOptions named;
  named.k = "keys";
  expect_error(in, out, named, {"in.st", "'keys'"});
  const Shape more{1, 40, 32, 2, 2, 16};
  const std::string inm = inputs(more, false, "more.st");
  expect_error(inm, outputs(inm, more, false, [] { Candidate c; c.causal = false; return c; }(), DType::f32, "om.st"), {},
               {"--q-offset"});
}

// Scores scaled past fp64 (1e308) give a reference of NaN, and no judgement:
// the check said PASS; it is bad input now, naming the inputs and the scale.
TEST_F(CheckAttention, AReferenceThatIsNotFiniteIsBadInputNotAPass) {
  const Shape s{1, 32, 32, 2, 2, 16};
  const std::string in = inputs(s, false);
  const std::string out = outputs(in, s, false, {}, DType::f32);
  AttentionCheckOptions huge;
  huge.scale = 1e308;
  try {
    run(in, out, huge);
    ADD_FAILURE() << "judged against a non-finite reference";
  } catch (const InputError& e) {
    for (const std::string& n : std::vector<std::string>{in, "reference of 'o'", "--scale", "scores scaled by 1e+308"})
      EXPECT_NE(std::string(e.what()).find(n), std::string::npos) << e.what();
  }
  const auto r = yoco("check attention " + in + " " + out + " --scale 1e308");
  yoco_test::expect_input_error(r, {in, "reference of 'o'"}, "--scale 1e308");
  EXPECT_EQ(r.out, "");
}

TEST_F(CheckAttention, CommandLineGeneratesAndJudges) {
  const std::string in = path("gen.st");
  const auto g = yoco("check attention --generate " + in + " --shape 1,16,64,4,2,32 --layout bhsd --seed 5");
  ASSERT_EQ(g.status, 0) << g.all();
  const Shape s{1, 16, 64, 4, 2, 32};
  const std::string good = outputs(in, s, true, {}, DType::bf16);
  const auto ok = yoco("check attention " + in + " " + good + " --layout bhsd --format json");
  EXPECT_EQ(ok.status, 0) << ok.all();
  EXPECT_NE(ok.out.find("\"within_tolerance\": true"), std::string::npos) << ok.out;
  const auto wrong_layout = yoco("check attention " + in + " " + good);  // read as [B, S, H, D]: shapes disagree
  EXPECT_EQ(wrong_layout.status, 2) << wrong_layout.all();
  const auto bad_shape = yoco("check attention --generate " + path("x.st") + " --shape 1,16,64,3,2,32");
  EXPECT_EQ(bad_shape.status, 2);
  EXPECT_NE(bad_shape.err.find("multiple"), std::string::npos) << bad_shape.err;
  // A window of 0 keys was taken for "no window"; refused (W >= 1), and W takes K/M as lengths do.
  yoco_test::expect_input_error(yoco("check attention " + in + " " + good + " --layout bhsd --window 0"),
                                {"--window", ">= 1", "0"}, "--window 0");
  const auto window_k = yoco("check attention " + in + " " + good + " --layout bhsd --window 1K");
  EXPECT_EQ(window_k.status, 0) << window_k.all();  // 1024 keys: wider than Sk, the same as none
  EXPECT_NE(window_k.out.find("window 1024"), std::string::npos) << window_k.out;
  const auto bad_mask = yoco("check attention " + in + " " + good + " --mask sliding");
  EXPECT_EQ(bad_mask.status, 2);
  EXPECT_NE(bad_mask.err.find("--mask"), std::string::npos) << bad_mask.err;
}

// A --q-scale whose q overflows the storage type wrote inf into q without a
// word; the file could then only be refused when judged. Refused before writing.
TEST_F(CheckAttention, AQScaleTheDtypeCannotHoldIsRefusedBeforeWriting) {
  const std::string f = path("q.st");
  for (const std::string& o : {std::string("--dtype f16 --q-scale 1e5"), std::string("--q-scale 1e300"),
                               std::string("--dtype f32 --q-scale 1e300")}) {
    const auto r = yoco("check attention --generate " + f + " --shape 1,2,4,1,1,4 " + o);
    yoco_test::expect_input_error(r, {"--q-scale"}, o);
    EXPECT_FALSE(std::filesystem::exists(f)) << o;
  }
  ASSERT_EQ(yoco("check attention --generate " + f + " --shape 1,2,4,1,1,4 --dtype f16 --q-scale 1e4").status, 0);
  std::vector<double> q(8);
  TensorFile::open(f)->read("q", 0, 8, q.data());
  for (double x : q) EXPECT_TRUE(std::isfinite(x)) << x;
}

}  // namespace
