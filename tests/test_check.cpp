// `yoco check gret` (bench/check/): judges outputs against the fp64 reference.
// Each accepted case is a correct computation in some convention users have;
// each rejected case is one mistake a kernel makes, which the check must see.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "check_generate.hpp"
#include "cli_runner.hpp"
#include "cli_safetensors_bytes.hpp"
#include "dtype.hpp"
#include "errors.hpp"
#include "gret.hpp"
#include "gret_check.hpp"
#include "npy.hpp"
#include "safetensors.hpp"
#include "tensor_file.hpp"

namespace {

using yoco::DType;
using yoco::InputError;
using yoco::Mat;
using yoco::Vec;
using namespace yoco::check;

// A problem in fla's layout [B, T, H, D] with q, k, v rounded to bf16 and the
// log-decay logsigmoid(x) / 16 (the model's gate), per token and head.
struct Problem {
  int64_t B, T, H, D;
  std::vector<double> q, k, v, g, s0;  // s0: [B, H, D, D] as [K, V]
};

Problem make_problem(int64_t B, int64_t T, int64_t H, int64_t D, uint64_t seed, bool with_state) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> n01(0.0, 1.0);
  Problem p{B, T, H, D, {}, {}, {}, {}, {}};
  auto bf = [](double x) { return static_cast<double>(yoco::round_to_bf16(static_cast<float>(x))); };
  const int64_t n = B * T * H * D;
  for (int64_t i = 0; i < n; ++i) {
    p.q.push_back(bf(n01(rng)));
    p.k.push_back(bf(n01(rng)));
    p.v.push_back(bf(n01(rng)));
  }
  for (int64_t i = 0; i < B * T * H; ++i) {
    const double x = 2.0 * n01(rng);
    p.g.push_back(static_cast<float>((std::min(x, 0.0) - std::log1p(std::exp(-std::abs(x)))) / 16.0));
  }
  if (with_state)
    for (int64_t i = 0; i < B * H * D * D; ++i) p.s0.push_back(0.1 * n01(rng));
  return p;
}

size_t at(const Problem& p, int64_t b, int64_t t, int64_t h) { return static_cast<size_t>(((b * p.T + t) * p.H + h) * p.D); }

// How a candidate computes: every knob is one mistake (or one convention).
struct Candidate {
  double scale_factor = 1.0;      // on top of the right D^-1/2
  bool swap_heads = false;        // head h's output written for head h+1
  bool state_one_behind = false;  // the final state of token T-1 instead of T
  bool decay_late = false;        // token t decayed with g_{t-1}
  bool recurrent_f32 = false;     // the recurrent paradigm in fp32 (a correct computation)
};

struct Outputs {
  std::vector<double> o;   // [B, T, H, D]
  std::vector<double> st;  // [B, H, D, D] as [K, V]
};

Outputs compute(const Problem& p, const Candidate& c) {
  Outputs out{std::vector<double>(p.q.size()), std::vector<double>(static_cast<size_t>(p.B * p.H * p.D * p.D))};
  const double scale = c.scale_factor / std::sqrt(static_cast<double>(p.D));
  for (int64_t b = 0; b < p.B; ++b)
    for (int64_t h = 0; h < p.H; ++h) {
      Mat<double> q(p.T, p.D), k(p.T, p.D), v(p.T, p.D);
      Vec<double> lg(p.T);
      for (int64_t t = 0; t < p.T; ++t) {
        for (int64_t c2 = 0; c2 < p.D; ++c2) {
          q(t, c2) = p.q[at(p, b, t, h) + c2] * scale;
          k(t, c2) = p.k[at(p, b, t, h) + c2];
          v(t, c2) = p.v[at(p, b, t, h) + c2];
        }
        const int64_t tg = c.decay_late ? std::max<int64_t>(t - 1, 0) : t;
        lg(t) = p.g[static_cast<size_t>((b * p.T + tg) * p.H + h)];
      }
      Mat<double> s0 = Mat<double>::Zero(p.D, p.D);
      if (!p.s0.empty())
        s0 = Eigen::Map<const Mat<double>>(p.s0.data() + (b * p.H + h) * p.D * p.D, p.D, p.D);
      Mat<double> o, st;
      if (c.recurrent_f32) {
        const Mat<float> s0f = s0.cast<float>();
        const auto r = yoco::gret_recurrent<float>(q.cast<float>(), k.cast<float>(), v.cast<float>(),
                                                   lg.cast<float>(), &s0f);
        o = r.o.cast<double>();
        st = r.state.cast<double>();
      } else {
        const auto r = yoco::gret_chunkwise<double>(q, k, v, lg, &s0, 64);
        o = r.o;
        st = r.state;
        if (c.state_one_behind) st = yoco::gret_chunkwise<double>(q.topRows(p.T - 1), k.topRows(p.T - 1),
                                                                  v.topRows(p.T - 1), lg.head(p.T - 1), &s0, 64).state;
      }
      const int64_t ho = c.swap_heads ? (h + 1) % p.H : h;
      for (int64_t t = 0; t < p.T; ++t)
        for (int64_t c2 = 0; c2 < p.D; ++c2) out.o[at(p, b, t, ho) + c2] = o(t, c2);
      std::copy_n(st.data(), p.D * p.D, out.st.data() + (b * p.H + h) * p.D * p.D);
    }
  return out;
}

// A 1-D int64 .npy file (npy.hpp writes floats only).
void write_i64_npy(const std::string& file, const std::vector<double>& x) {
  std::string h = yoco::cli::npy_header(yoco::cli::NpyDType::f64, {static_cast<int64_t>(x.size())});
  h.replace(h.find("<f8"), 3, "<i8");
  for (const double v : x) {
    const auto i = static_cast<int64_t>(v);
    h.append(reinterpret_cast<const char*>(&i), sizeof i);
  }
  yoco_test::spit(file, h);
}

class Check : public yoco_test::CliTest {
 protected:
  // Inputs as one f32 safetensors file (the values are bf16-representable).
  std::string write_inputs(const Problem& p, const std::string& name = "in.safetensors") {
    const std::string f = path(name);
    std::vector<yoco::TensorToWrite> t{{"q", {p.B, p.T, p.H, p.D}, p.q.data(), nullptr},
                                       {"k", {p.B, p.T, p.H, p.D}, p.k.data(), nullptr},
                                       {"v", {p.B, p.T, p.H, p.D}, p.v.data(), nullptr},
                                       {"g", {p.B, p.T, p.H}, p.g.data(), nullptr}};
    if (!p.s0.empty()) t.push_back({"initial_state", {p.B, p.H, p.D, p.D}, p.s0.data(), nullptr});
    yoco::write_safetensors(f, t, DType::f32, {});
    return f;
  }
  // The same inputs (no initial state) as a folder of f32 .npy files, made if missing.
  std::string write_inputs_npy(const Problem& p, const std::string& name) {
    const std::string in = path(name);
    std::filesystem::create_directories(in);
    using yoco::cli::NpyDType;
    using yoco::cli::write_npy;
    write_npy(in + "/q.npy", NpyDType::f32, {p.B, p.T, p.H, p.D}, p.q.data());
    write_npy(in + "/k.npy", NpyDType::f32, {p.B, p.T, p.H, p.D}, p.k.data());
    write_npy(in + "/v.npy", NpyDType::f32, {p.B, p.T, p.H, p.D}, p.v.data());
    write_npy(in + "/g.npy", NpyDType::f32, {p.B, p.T, p.H}, p.g.data());
    return in;
  }
  std::string write_outputs(const Problem& p, const Outputs& o, DType dtype, bool with_state,
                            const std::string& name = "out.safetensors") {
    const std::string f = path(name);
    std::vector<yoco::TensorToWrite> t{{"o", {p.B, p.T, p.H, p.D}, o.o.data(), nullptr}};
    if (with_state) t.push_back({"final_state", {p.B, p.H, p.D, p.D}, o.st.data(), nullptr});
    yoco::write_safetensors(f, t, dtype, {});
    return f;
  }
  GretCheckReport run(const std::string& in, const std::string& out, GretCheckOptions opt = {}) {
    opt.block_tokens = 128;  // several blocks per sequence: the streaming is what is tested
    return check_gret(*TensorFile::open(in), *TensorFile::open(out), opt);
  }
};

const TensorVerdict& verdict(const GretCheckReport& r, const std::string& name) {
  for (const auto& v : r.verdicts)
    if (v.name == name) return v;
  throw std::runtime_error("no verdict for " + name);
}

TEST_F(Check, AcceptsTheReferenceRoundedToBf16AndItsF32State) {
  const Problem p = make_problem(2, 300, 3, 32, 1, true);
  const Outputs o = compute(p, {});
  const std::string in = write_inputs(p);
  const GretCheckReport r = run(in, write_outputs(p, o, DType::bf16, false));
  EXPECT_TRUE(r.pass());
  const TensorVerdict& v = verdict(r, "o");
  EXPECT_EQ(v.dtype, "bf16");
  EXPECT_GT(v.rms_ratio, 0.0) << "bf16 rounding is an error the check sees";
  EXPECT_LT(v.rms_ratio, v.tolerance);
  EXPECT_EQ(v.first_bad_token, -1);
  const GretCheckReport rs = run(in, write_outputs(p, o, DType::f32, true, "out32.safetensors"));
  EXPECT_TRUE(rs.pass());
  EXPECT_LT(verdict(rs, "final_state").rms_ratio, 1e-6);
}

// The tolerance rule follows each output's own dtype: a bf16 final_state beside
// an f32 o was held to the fp32 rule (and failed for its rounding), an f64
// state beside an f16 o to the bf16 rule (a loose one). Each says its dtype.
TEST_F(Check, EachOutputIsHeldToTheRuleOfItsOwnDtype) {
  const Problem p = make_problem(1, 200, 2, 32, 21, true);
  const Outputs o = compute(p, {});
  const std::string in = write_inputs(p);
  auto mixed = [&](DType o_dtype, DType s_dtype, const std::string& name) {
    const std::string f = path(name);
    yoco::SafetensorsWriter w(f, {{"o", o_dtype, {p.B, p.T, p.H, p.D}}, {"final_state", s_dtype, {p.B, p.H, p.D, p.D}}},
                              {});
    w.append(o.o.data(), static_cast<int64_t>(o.o.size()));
    w.append(o.st.data(), static_cast<int64_t>(o.st.size()));
    w.commit();
    return f;
  };
  const GretCheckReport a = run(in, mixed(DType::f32, DType::bf16, "f32_bf16.st"));
  EXPECT_TRUE(verdict(a, "o").pass);
  EXPECT_TRUE(verdict(a, "final_state").pass)
      << verdict(a, "final_state").rms_ratio << " vs " << verdict(a, "final_state").tolerance;
  EXPECT_NE(verdict(a, "final_state").tolerance_from.find("bf16 tensor-core"), std::string::npos);
  EXPECT_NE(verdict(a, "final_state").tolerance_from.find("its dtype, bf16"), std::string::npos);
  EXPECT_NE(verdict(a, "o").tolerance_from.find("its dtype, f32"), std::string::npos);
  // An f64 state beside an f16 o: a 16-bit kernel's state has 16-bit operands
  // (fla: bf16 o, fp32 final_state), so the bf16 emulation's state, not rounded.
  const GretCheckReport b = run(in, mixed(DType::f16, DType::f64, "f16_f64.st"));
  EXPECT_TRUE(b.pass());
  EXPECT_NE(verdict(b, "final_state").tolerance_from.find("state not rounded"), std::string::npos);
  EXPECT_NE(verdict(b, "final_state").tolerance_from.find("its dtype, f64, beside an f16 o"), std::string::npos);
  EXPECT_NE(verdict(b, "o").tolerance_from.find("its dtype, f16"), std::string::npos);
  // Both f32/f64: the fp32 rule for each.
  const GretCheckReport c = run(in, mixed(DType::f32, DType::f64, "f32_f64.st"));
  EXPECT_TRUE(c.pass());
  EXPECT_NE(verdict(c, "final_state").tolerance_from.find("fp32 chunkwise"), std::string::npos);
  EXPECT_LT(verdict(c, "final_state").tolerance, 1e-4) << "the fp32 rule, not bf16's";
  // The CSV notes and the table say each tensor's rule.
  const auto csv = yoco("check gret " + in + " " + path("f32_bf16.st") + " --format csv");
  EXPECT_EQ(csv.status, 0) << csv.all();
  EXPECT_NE(csv.out.find("bf16; tolerance from 2x a bf16 tensor-core"), std::string::npos) << csv.out;
  const auto table = yoco("check gret " + in + " " + path("f32_bf16.st"));
  EXPECT_NE(table.out.find("tolerance of final_state: 2x a bf16"), std::string::npos) << table.out;
}

TEST_F(Check, AcceptsTheRecurrentParadigmInF32) {
  const Problem p = make_problem(1, 200, 2, 32, 2, true);
  Candidate c;
  c.recurrent_f32 = true;
  const GretCheckReport r = run(write_inputs(p), write_outputs(p, compute(p, c), DType::f32, true));
  EXPECT_TRUE(r.pass()) << verdict(r, "o").rms_ratio << " vs " << verdict(r, "o").tolerance;
}

TEST_F(Check, AcceptsEveryLayoutFromANpyFolder) {
  const Problem p = make_problem(2, 130, 2, 16, 3, true);
  const Outputs o = compute(p, {});
  // [B, H, T, D] tensors and [V, K] states, as .npy files.
  auto bhtd = [&](const std::vector<double>& x, int64_t inner) {
    std::vector<double> y(x.size());
    for (int64_t b = 0; b < p.B; ++b)
      for (int64_t t = 0; t < p.T; ++t)
        for (int64_t h = 0; h < p.H; ++h)
          for (int64_t c = 0; c < inner; ++c)
            y[static_cast<size_t>(((b * p.H + h) * p.T + t) * inner + c)] =
                x[static_cast<size_t>(((b * p.T + t) * p.H + h) * inner + c)];
    return y;
  };
  auto vk = [&](const std::vector<double>& s) {
    std::vector<double> y(s.size());
    for (int64_t m = 0; m < p.B * p.H; ++m)
      for (int64_t i = 0; i < p.D; ++i)
        for (int64_t j = 0; j < p.D; ++j)
          y[static_cast<size_t>((m * p.D + j) * p.D + i)] = s[static_cast<size_t>((m * p.D + i) * p.D + j)];
    return y;
  };
  const std::string in = path("in_npy"), out = path("out_npy");
  std::filesystem::create_directories(in);
  std::filesystem::create_directories(out);
  using yoco::cli::NpyDType;
  using yoco::cli::write_npy;
  write_npy(in + "/q.npy", NpyDType::f32, {p.B, p.H, p.T, p.D}, bhtd(p.q, p.D).data());
  write_npy(in + "/k.npy", NpyDType::f32, {p.B, p.H, p.T, p.D}, bhtd(p.k, p.D).data());
  write_npy(in + "/v.npy", NpyDType::f32, {p.B, p.H, p.T, p.D}, bhtd(p.v, p.D).data());
  write_npy(in + "/g.npy", NpyDType::f32, {p.B, p.H, p.T}, bhtd(p.g, 1).data());
  write_npy(in + "/initial_state.npy", NpyDType::f64, {p.B, p.H, p.D, p.D}, vk(p.s0).data());
  write_npy(out + "/o.npy", NpyDType::f32, {p.B, p.H, p.T, p.D}, bhtd(o.o, p.D).data());
  write_npy(out + "/final_state.npy", NpyDType::f32, {p.B, p.H, p.D, p.D}, vk(o.st).data());
  GretCheckOptions opt;
  opt.layout = TokenLayout::bhtd;
  opt.state_layout = StateLayout::vk;
  const GretCheckReport r = run(in, out, opt);
  EXPECT_TRUE(r.pass()) << verdict(r, "o").rms_ratio << " " << verdict(r, "final_state").rms_ratio;
  // The same files read in the wrong layout: the shapes no longer agree.
  EXPECT_THROW(run(in, out, GretCheckOptions{}), InputError);
}

TEST_F(Check, PackedSequencesRestartFromTheirOwnState) {
  // Three sequences packed in batch 1: 70, 1 and 129 tokens.
  const std::vector<int64_t> lens{70, 1, 129};
  const int64_t H = 2, D = 16, T = 200;
  Problem all = make_problem(1, T, H, D, 4, false);
  std::vector<double> s0, o(all.q.size()), st;
  int64_t t0 = 0;
  std::vector<double> cu{0};
  for (size_t s = 0; s < lens.size(); ++s) {
    Problem one = all;
    one.T = lens[s];
    auto cut = [&](const std::vector<double>& x, int64_t inner) {
      return std::vector<double>(x.begin() + t0 * H * inner, x.begin() + (t0 + lens[s]) * H * inner);
    };
    one.q = cut(all.q, D);
    one.k = cut(all.k, D);
    one.v = cut(all.v, D);
    one.g = cut(all.g, 1);
    one.s0 = make_problem(1, 1, H, D, 40 + s, true).s0;
    const Outputs r = compute(one, {});
    std::copy(r.o.begin(), r.o.end(), o.begin() + t0 * H * D);
    s0.insert(s0.end(), one.s0.begin(), one.s0.end());
    st.insert(st.end(), r.st.begin(), r.st.end());
    t0 += lens[s];
    cu.push_back(static_cast<double>(t0));
  }
  const std::string in = path("packed"), out = path("packed_out"), wrong = path("packed_wrong");
  for (const auto& d : {in, out, wrong}) std::filesystem::create_directories(d);
  using yoco::cli::NpyDType;
  using yoco::cli::write_npy;
  write_npy(in + "/q.npy", NpyDType::f32, {1, T, H, D}, all.q.data());
  write_npy(in + "/k.npy", NpyDType::f32, {1, T, H, D}, all.k.data());
  write_npy(in + "/v.npy", NpyDType::f32, {1, T, H, D}, all.v.data());
  write_npy(in + "/g.npy", NpyDType::f32, {1, T, H}, all.g.data());
  write_npy(in + "/initial_state.npy", NpyDType::f64, {3, H, D, D}, s0.data());
  write_i64_npy(in + "/cu_seqlens.npy", cu);
  write_npy(out + "/o.npy", NpyDType::f32, {1, T, H, D}, o.data());
  write_npy(out + "/final_state.npy", NpyDType::f32, {3, H, D, D}, st.data());
  const GretCheckReport r = run(in, out);
  EXPECT_EQ(r.shape.back(), (std::pair<std::string, int64_t>("sequences", 3)));
  EXPECT_TRUE(r.pass()) << verdict(r, "o").rms_ratio << " " << verdict(r, "final_state").rms_ratio;
  // The final state of the wrong sequence (the last two swapped) fails.
  std::vector<double> swapped = st;
  std::swap_ranges(swapped.begin() + H * D * D, swapped.begin() + 2 * H * D * D, swapped.begin() + 2 * H * D * D);
  write_npy(wrong + "/o.npy", NpyDType::f32, {1, T, H, D}, o.data());
  write_npy(wrong + "/final_state.npy", NpyDType::f32, {3, H, D, D}, swapped.data());
  const GretCheckReport w = run(in, wrong);
  EXPECT_TRUE(verdict(w, "o").pass);
  EXPECT_FALSE(verdict(w, "final_state").pass);
}

// cu_seqlens was taken as f32 or bf16, and a fractional offset said "entry 1 is
// 30.500000". Offsets are integers (fla's int32/int64): a float tensor is
// refused for its dtype, and entries are printed as the integers they are.
TEST_F(Check, PackedOffsetsAreAnIntegerTensor) {
  const Problem p = make_problem(1, 64, 2, 16, 14, false);
  const std::string out = write_outputs(p, compute(p, {}), DType::f32, false);
  const std::string in = write_inputs_npy(p, "cu_in");
  using yoco::cli::NpyDType;
  using yoco::cli::write_npy;
  const std::vector<double> cu{0, 30.5, 64};
  write_npy(in + "/cu_seqlens.npy", NpyDType::f32, {3}, cu.data());
  const auto f = yoco("check gret " + in + " " + out);
  yoco_test::expect_input_error(f, {"cu_in", "'cu_seqlens'", "is f32", "integer tensor"}, "f32 offsets");
  write_i64_npy(in + "/cu_seqlens.npy", {0, 40, 30, 64});
  const auto r = yoco("check gret " + in + " " + out);
  yoco_test::expect_input_error(r, {"'cu_seqlens'", "must rise from 0 to T = 64 (entry 2 is 30)"}, "falling offsets");
}

// One mistake each: the check must fail it.
TEST_F(Check, RejectsEachMistake) {
  const Problem p = make_problem(1, 256, 3, 32, 5, true);
  const std::string in = write_inputs(p);
  struct Case {
    const char* what;
    Candidate c;
    const char* tensor;
  };
  Candidate swap, behind, late, no_scale, double_scale;
  swap.swap_heads = true;
  behind.state_one_behind = true;
  late.decay_late = true;
  no_scale.scale_factor = std::sqrt(32.0);  // scale 1: the D^-1/2 forgotten
  double_scale.scale_factor = 1.0 / std::sqrt(32.0);
  for (const Case& k : {Case{"another head's output", swap, "o"}, Case{"a state one step behind", behind, "final_state"},
                        Case{"the decay one step late", late, "o"}, Case{"a missing scale", no_scale, "o"},
                        Case{"a doubled scale", double_scale, "o"}}) {
    const GretCheckReport r = run(in, write_outputs(p, compute(p, k.c), DType::f32, true, std::string(k.what) + ".st"));
    EXPECT_FALSE(r.pass()) << k.what;
    EXPECT_FALSE(verdict(r, k.tensor).pass) << k.what;
  }
}

TEST_F(Check, AWrappedOffsetIsFoundWhereItStarts) {
  // Right up to a flattened element, garbage after it (an offset that wraps):
  // the first bad token is reported exactly.
  const Problem p = make_problem(2, 200, 2, 32, 6, false);
  Outputs o = compute(p, {});
  const int64_t first_bad = 1 * p.T + 137;  // batch 1, token 137
  std::mt19937 rng(9);
  std::uniform_real_distribution<double> junk(-1.0, 1.0);
  for (size_t i = static_cast<size_t>(first_bad * p.H * p.D); i < o.o.size(); ++i) o.o[i] = junk(rng);
  const GretCheckReport r = run(write_inputs(p), write_outputs(p, o, DType::bf16, false));
  const TensorVerdict& v = verdict(r, "o");
  EXPECT_FALSE(v.pass);
  EXPECT_EQ(v.first_bad_token, first_bad);
  EXPECT_EQ(v.first_bad_where, "batch 1, token 137");
  // The largest error in the same words (it said "sequence 1, ..., token ..."
  // beside "batch 1, token 137" on one line).
  EXPECT_EQ(v.max_where.rfind("batch ", 0), 0u) << v.max_where;
}

TEST_F(Check, OneNaNFails) {
  const Problem p = make_problem(1, 100, 2, 16, 7, false);
  Outputs o = compute(p, {});
  o.o[1234] = std::numeric_limits<double>::quiet_NaN();
  const GretCheckReport r = run(write_inputs(p), write_outputs(p, o, DType::f32, false));
  const TensorVerdict& v = verdict(r, "o");
  EXPECT_FALSE(v.pass);
  EXPECT_EQ(v.nonfinite, 1);
  EXPECT_EQ(v.first_bad_token, 1234 / (2 * 16));
}

// A final_state absent from OUTPUTS was silently not judged; a line says so.
// A long judgement shows progress as bench does (YOCO_PROGRESS=lines).
TEST_F(Check, WhatIsNotJudgedIsSaidAndALongJudgementShowsProgress) {
  const Problem p = make_problem(1, 64, 2, 16, 16, true);
  const std::string in = write_inputs(p);
  const std::string out = write_outputs(p, compute(p, {}), DType::f32, false);
  const auto r = yoco("check gret " + in + " " + out);
  EXPECT_EQ(r.status, 0) << r.all();
  EXPECT_NE(r.out.find("final_state: not judged (" + out + " has no tensor 'final_state')"), std::string::npos) << r.out;
  const auto j = yoco("check gret " + in + " " + out + " --format json");
  EXPECT_NE(j.out.find("\"not_judged\""), std::string::npos) << j.out;
  const auto both = yoco("check gret " + in + " " + write_outputs(p, compute(p, {}), DType::f32, true, "o2.st"));
  EXPECT_EQ(both.out.find("not judged"), std::string::npos) << both.out;
  // 4 M values of q: a progress line per block on stderr.
  const std::string big = path("big.st");
  ASSERT_EQ(yoco("check gret --generate " + big + " --shape 1,128K,2,16 --dtype f32").status, 0);
  const auto lines = shell("YOCO_PROGRESS=lines " + yoco_test::shell_quote(YOCO_CLI_PATH) + " check gret " +
                                      big + " " + big + " --o q --block-tokens 16K");
  EXPECT_EQ(lines.status, 1) << lines.all();  // q is no output of q
  EXPECT_NE(lines.err.find("judged 65536 of 131072 tokens"), std::string::npos) << lines.err;
  const auto quiet = yoco("check gret " + in + " " + out);
  EXPECT_EQ(quiet.err, "");  // --generate's values depend on the flat position, so the help says so (not "its [B, T, H, D] index").
  EXPECT_NE(yoco("check gret --help").out.find("row-major position in [B, T, H, D]"), std::string::npos);
}

TEST_F(Check, BadFilesAreInputErrorsNamingFileAndTensor) {
  const Problem p = make_problem(1, 64, 2, 16, 8, false);
  const std::string in = write_inputs(p);
  const Outputs o = compute(p, {});
  auto expect_error = [&](const std::string& inputs, const std::string& outputs, std::vector<std::string> needles) {
    try {
      run(inputs, outputs);
      ADD_FAILURE() << "no error for " << needles[0];
    } catch (const InputError& e) {
      for (const auto& n : needles) EXPECT_NE(std::string(e.what()).find(n), std::string::npos) << e.what();
    }
  };
  // o of another shape
  Problem shorter = p;
  shorter.T = 63;
  shorter.q.resize(static_cast<size_t>(63 * 2 * 16));
  expect_error(in, write_outputs(shorter, Outputs{shorter.q, {}}, DType::f32, false, "short.st"), {"short.st", "'o'"});
  // a missing tensor
  const std::string no_g = path("no_g");
  std::filesystem::create_directories(no_g);
  yoco::cli::write_npy(no_g + "/q.npy", yoco::cli::NpyDType::f32, {1, 64, 2, 16}, p.q.data());
  expect_error(no_g, write_outputs(p, o, DType::f32, false), {"no_g", "'k'"});
  // a truncated safetensors file
  const std::string trunc = path("trunc.safetensors");
  const std::string whole = yoco_test::slurp(in);
  yoco_test::spit(trunc, whole.substr(0, whole.size() / 2));
  expect_error(trunc, write_outputs(p, o, DType::f32, false), {"trunc.safetensors"});
  // an integer q
  const std::string ints = path("ints");
  std::filesystem::create_directories(ints);
  std::string npy = yoco::cli::npy_header(yoco::cli::NpyDType::f32, {1, 64, 2, 16});
  const size_t d = npy.find("<f4");
  npy.replace(d, 3, "<i4");
  yoco_test::spit(ints + "/q.npy", npy + std::string(64 * 2 * 16 * 4, '\0'));
  expect_error(ints, write_outputs(p, o, DType::f32, false), {"ints", "'q'", "i32"});
  // An integer o of the right shape: the dtype is the problem, not a shape
  // ("'o' is i32 [1, 64, 2, 16], q is [1, 64, 2, 16]" said the shapes differ).
  const std::string int_o = path("int_o");
  std::filesystem::create_directories(int_o);
  yoco_test::spit(int_o + "/o.npy", npy + std::string(64 * 2 * 16 * 4, '\0'));
  expect_error(in, int_o, {"int_o", "'o'", "is i32: expected a float tensor"});
  try {
    run(in, int_o);
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()).find("q is"), std::string::npos) << e.what();
  }
}

// A tensor the check never reads (a uint64 .npy beside the inputs, a U8 mask in
// OUTPUTS) refused the whole check for its dtype; it is ignored now, and its
// dtype refused only when it is named.
TEST_F(Check, TensorsOfOtherDtypesAreIgnoredUnlessUsed) {
  const Problem p = make_problem(1, 64, 2, 16, 13, false);
  const std::string in = write_inputs_npy(p, "in_extra");
  using yoco::cli::NpyDType;
  std::string u8 = yoco::cli::npy_header(NpyDType::f32, {4});
  u8.replace(u8.find("<f4"), 3, "<u8");
  yoco_test::spit(in + "/ids.npy", u8 + std::string(32, '\0'));
  // OUTPUTS with a U8 tensor beside o.
  const std::string plain = write_outputs(p, compute(p, {}), DType::f32, false);
  yoco_test::StFile st = yoco_test::split_safetensors(yoco_test::slurp(plain));
  const uint64_t end = st.data.size();
  st.header["mask"] = {{"dtype", "U8"}, {"shape", {8}}, {"data_offsets", {end, end + 8}}};
  st.data += std::string(8, '\1');
  std::string h = st.header.dump();
  h += std::string((8 - h.size() % 8) % 8, ' ');
  std::string len(8, '\0');
  for (int i = 0; i < 8; ++i) len[i] = static_cast<char>((h.size() >> (8 * i)) & 0xff);
  const std::string out = path("out_u8.safetensors");
  yoco_test::spit(out, len + h + st.data);
  const auto ok = yoco("check gret " + in + " " + out);
  EXPECT_EQ(ok.status, 0) << ok.all();
  EXPECT_TRUE(run(in, out).pass());
  // Named, each is refused for its dtype, naming the file and the tensor.
  const auto ids = yoco("check gret " + in + " " + out + " --cu-seqlens ids");
  yoco_test::expect_input_error(ids, {"ids.npy", "'<u8'"}, "--cu-seqlens ids");
  const auto mask = yoco("check gret " + in + " " + out + " --final-state mask");
  yoco_test::expect_input_error(mask, {"out_u8.safetensors", "'mask'", "U8"}, "--final-state mask");
  const auto o = yoco("check gret " + in + " " + out + " --o mask");
  yoco_test::expect_input_error(o, {"out_u8.safetensors", "'mask'", "U8"}, "--o mask");
  // The others are still read and judged, their errors intact.
  const auto typo = yoco("check gret " + in + " " + out + " --o oo");
  yoco_test::expect_input_error(typo, {"no tensor 'oo'", "mask", "o)"}, "--o oo");
}

// A .npy header's shape that is not a list of sizes: letters or a number past
// 64 bits ended in "internal error: stoll" (exit 1); a negative dimension, or
// a product that wraps around 2^64, passed the size check and failed later
// allocating a vector of the wrapped count. Each is bad input naming the file.
TEST_F(Check, NpyShapesThatAreNotSizesAreInputErrorsNamingTheFile) {
  const std::string dir = path("bad_shapes");
  std::filesystem::create_directories(dir);
  int i = 0;
  for (const std::string shape : {"(abc, 2)", "(99999999999999999999, 4)", "(-1, 2)", "(2, 8.5)", "(2, 8",
                                  "(1, 4611686018427387905, 1, 4)", "(4611686018427387904, 4)"}) {
    const std::string dict = "{'descr': '<f4', 'fortran_order': False, 'shape': " + shape + ", }\n";
    const std::string h = std::string("\x93NUMPY\x01\x00", 8) + static_cast<char>(dict.size()) + '\0' + dict;
    const std::string f = dir + "/t" + std::to_string(i++) + ".npy";
    yoco_test::spit(f, h + std::string(64, '\0'));
    try {
      read_npy_header(f);
      ADD_FAILURE() << "no error for the shape " << shape;
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(f), std::string::npos) << shape << ": " << e.what();
      EXPECT_NE(std::string(e.what()).find("shape"), std::string::npos) << shape << ": " << e.what();
    } catch (const std::exception& e) {
      ADD_FAILURE() << "not an InputError for the shape " << shape << ": " << e.what();
    }
  }
}

// A version 2 or 3 header gives its length in 4 bytes. A corrupt one (here 4 GiB in a 20-byte file)
// made the reader take a buffer of that length before it found the file short: 4.3 GB resident for
// one bad file, or an allocation failure on a smaller machine. The length is checked first.
TEST_F(Check, ANpyHeaderLongerThanItsFileIsRefusedBeforeItIsRead) {
  const std::string length = "\xf0\xff\xff\xff";  // 4,294,967,280 bytes of header
  std::istringstream in(std::string("\x93NUMPY\x02\x00", 8) + length + "{'descr': ", std::ios::binary);
  try {
    parse_npy_header(in, 22, "corrupt.npy");
    ADD_FAILURE() << "no error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("corrupt.npy: truncated .npy header (4294967280 bytes of header in a file "
                                         "of 22)"),
              std::string::npos)
        << e.what();
  }
}

TEST_F(Check, CommandLineExitCodesAndFormats) {
  const Problem p = make_problem(1, 96, 2, 16, 9, false);
  const std::string in = write_inputs(p);
  const std::string good = write_outputs(p, compute(p, {}), DType::bf16, false);
  Candidate swap;
  swap.swap_heads = true;
  const std::string bad = write_outputs(p, compute(p, swap), DType::bf16, false, "bad.st");
  const auto ok = yoco("check gret " + in + " " + good);
  EXPECT_EQ(ok.status, 0) << ok.all();
  EXPECT_NE(ok.out.find("PASS"), std::string::npos) << ok.out;
  const auto no = yoco("check gret " + in + " " + bad + " --format json");
  EXPECT_EQ(no.status, 1) << no.all();
  EXPECT_NE(no.out.find("\"within_tolerance\": false"), std::string::npos) << no.out;
  const auto csv = yoco("check gret " + in + " " + good + " --format csv");
  EXPECT_EQ(csv.status, 0);
  EXPECT_NE(csv.out.find("check_gret:o,rms_error_ratio"), std::string::npos) << csv.out;
  // A single .npy file where a folder is expected: its magic was read as a
  // safetensors header length ("header length 379676406402707 exceeds ...").
  const std::string one = path("o_only.npy");
  yoco::cli::write_npy(one, yoco::cli::NpyDType::f32, {1, 96, 2, 16}, p.q.data());
  const auto npy = yoco("check gret " + in + " " + one);
  yoco_test::expect_input_error(npy, {"o_only.npy", "a single .npy file", "pass the folder holding it"}, "one .npy");
  EXPECT_EQ(npy.err.find("header length"), std::string::npos) << npy.err;
  const auto missing = yoco("check gret " + in + " " + path("nothing.st"));
  EXPECT_EQ(missing.status, 2);
  EXPECT_NE(missing.err.find("nothing.st"), std::string::npos) << missing.err;
  const auto opt = yoco("check gret " + in + " " + good + " --layout btdh");
  EXPECT_EQ(opt.status, 2);
  EXPECT_NE(opt.err.find("--layout"), std::string::npos) << opt.err;
}

// The help says g is a log-decay, <= 0: a positive g (growing state) was judged
// anyway, and a NaN or -inf one ended as "reference not finite". Each is
// refused naming the tensor and the first offending index; g beside g_gamma
// (one was silently ignored) is refused too.
TEST_F(Check, AGateThatIsNotALogDecayOrIsGivenTwiceIsBadInput) {
  const Problem p = make_problem(1, 64, 2, 16, 12, false);
  const std::string out = write_outputs(p, compute(p, {}), DType::f32, false);
  for (const double bad : {0.25, std::numeric_limits<double>::quiet_NaN(), -std::numeric_limits<double>::infinity()}) {
    Problem q = p;
    q.g[static_cast<size_t>(5 * p.H + 1)] = bad;  // batch 0, token 5, head 1
    const auto r = yoco("check gret " + write_inputs(q, "gbad.st") + " " + out);
    yoco_test::expect_input_error(r, {"gbad.st", "'g'", "<= 0", "[0, 5, 1]"}, std::to_string(bad));
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    // -inf is some kernels' reset: the message says how this check spells one.
    EXPECT_EQ(r.err.find("cu_seqlens") != std::string::npos, std::isinf(bad)) << r.err;
  }
  const std::string both = path("both.st");
  const std::vector<double> gg{-0.1, -0.2};
  yoco::write_safetensors(both,
                          {{"q", {p.B, p.T, p.H, p.D}, p.q.data(), nullptr}, {"k", {p.B, p.T, p.H, p.D}, p.k.data(), nullptr},
                           {"v", {p.B, p.T, p.H, p.D}, p.v.data(), nullptr}, {"g", {p.B, p.T, p.H}, p.g.data(), nullptr},
                           {"g_gamma", {p.H}, gg.data(), nullptr}},
                          DType::f32, {});
  yoco_test::expect_input_error(yoco("check gret " + both + " " + out), {"both.st", "'g'", "'g_gamma'", "one or the other"},
                                "g and g_gamma");
  const std::vector<double> gpos{-0.1, 0.5};
  const std::string gamma = path("gamma.st");
  yoco::write_safetensors(gamma,
                          {{"q", {p.B, p.T, p.H, p.D}, p.q.data(), nullptr}, {"k", {p.B, p.T, p.H, p.D}, p.k.data(), nullptr},
                           {"v", {p.B, p.T, p.H, p.D}, p.v.data(), nullptr}, {"g_gamma", {p.H}, gpos.data(), nullptr}},
                          DType::f32, {});
  yoco_test::expect_input_error(yoco("check gret " + gamma + " " + out), {"gamma.st", "'g_gamma'", "[1] is 0.5"},
                                "positive g_gamma");
}

// An optional tensor named on the command line is one the user means to be
// read: --final-state finl_state (a typo) passed without judging any state,
// --initial-state s0 ran from zero states, --g took g_gamma's place.
TEST_F(Check, AnOptionalTensorNamedButAbsentIsBadInput) {
  const Problem p = make_problem(1, 64, 2, 16, 11, false);
  const std::string in = write_inputs(p);
  const std::string out = write_outputs(p, compute(p, {}), DType::f32, false);
  ASSERT_EQ(yoco("check gret " + in + " " + out).status, 0);
  for (const auto& [option, file] : std::vector<std::pair<std::string, std::string>>{
           {"--final-state", out}, {"--initial-state", in}, {"--cu-seqlens", in}, {"--g-gamma", in}}) {
    const auto r = yoco("check gret " + in + " " + out + " " + option + " typo");
    EXPECT_EQ(r.status, 2) << option << ": " << r.all();
    EXPECT_NE(r.err.find(file + ": no tensor 'typo'"), std::string::npos) << option << ": " << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  }
}

// A --scale that overflows the fp64 reference (1e308) leaves nothing to judge
// against, yet the check said ratio 0 and PASS; one that overflows only the
// fp32 emulation (1e40) made the tolerance non-finite, passing anything. Both
// are bad input now, one line naming the inputs; --tolerance judges the second.
TEST_F(Check, AnOverflowingReferenceOrToleranceIsBadInputNotAPass) {
  const Problem p = make_problem(1, 96, 2, 16, 9, false);
  const std::string in = write_inputs(p);
  const std::string good = write_outputs(p, compute(p, {}), DType::f32, false);
  for (const std::string scale : {"1e308", "1e200"}) {
    const auto r = yoco("check gret " + in + " " + good + " --scale " + scale);
    yoco_test::expect_input_error(r, {in, "reference of 'o'", "--scale", "q scaled by 1e+"}, "--scale " + scale);
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_EQ(r.out, "") << "no verdict on nothing";
  }
  const auto emu = yoco("check gret " + in + " " + good + " --scale 1e40");
  yoco_test::expect_input_error(emu, {in, "'o'", "emulation", "--tolerance"}, "--scale 1e40");
  const auto judged = yoco("check gret " + in + " " + good + " --scale 1e40 --tolerance 0.01");
  EXPECT_EQ(judged.status, 1) << judged.all();  // the candidate's scale is D^-1/2: a FAIL, judged
  GretCheckOptions opt;
  opt.scale = 1e308;
  EXPECT_THROW(run(in, good, opt), InputError);
}

}  // namespace

namespace {

// A correct candidate for a generated file: per sequence and head, the fp32
// chunkwise computation (the tolerance's own emulation for f32 outputs), in
// the file's [B, T, H, D] layout; tokens from `wrap_at` on repeat the outputs
// 2^17 tokens earlier, as an index that wraps would.
std::string fp32_candidate(const std::string& in_path, const std::string& out_path, int64_t wrap_at = -1) {
  const auto in = TensorFile::open(in_path);
  const auto& sh = in->info("q").shape;
  const int64_t B = sh[0], T = sh[1], H = sh[2], D = sh[3];
  std::vector<double> q(static_cast<size_t>(B * T * H * D)), k(q.size()), v(q.size()), g(static_cast<size_t>(B * T * H));
  in->read("q", 0, static_cast<int64_t>(q.size()), q.data());
  in->read("k", 0, static_cast<int64_t>(k.size()), k.data());
  in->read("v", 0, static_cast<int64_t>(v.size()), v.data());
  in->read("g", 0, static_cast<int64_t>(g.size()), g.data());
  std::vector<int64_t> cu{0, T};
  if (in->has("cu_seqlens")) {
    std::vector<double> c(static_cast<size_t>(in->info("cu_seqlens").shape[0]));
    in->read("cu_seqlens", 0, static_cast<int64_t>(c.size()), c.data());
    cu.assign(c.begin(), c.end());
  }
  const int64_t N = static_cast<int64_t>(cu.size()) - 1;
  std::vector<double> s0;
  if (in->has("initial_state")) {
    s0.resize(static_cast<size_t>((B > 1 ? B : N) * H * D * D));
    in->read("initial_state", 0, static_cast<int64_t>(s0.size()), s0.data());
  }
  std::vector<float> o(q.size());
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(D)));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t s = 0; s < N; ++s)
      for (int64_t h = 0; h < H; ++h) {
        const int64_t t0 = cu[static_cast<size_t>(s)], L = cu[static_cast<size_t>(s + 1)] - t0;
        Mat<float> qh(L, D), kh(L, D), vh(L, D);
        Vec<float> lg(L);
        for (int64_t t = 0; t < L; ++t) {
          const size_t base = static_cast<size_t>(((b * T + t0 + t) * H + h) * D);
          for (int64_t c = 0; c < D; ++c) {
            qh(t, c) = static_cast<float>(static_cast<float>(q[base + c]) * scale);
            kh(t, c) = static_cast<float>(k[base + c]);
            vh(t, c) = static_cast<float>(v[base + c]);
          }
          lg(t) = static_cast<float>(g[static_cast<size_t>((b * T + t0 + t) * H + h)]);
        }
        Mat<float> st = Mat<float>::Zero(D, D);
        if (!s0.empty())
          st = Eigen::Map<const Mat<double>>(s0.data() + ((B > 1 ? b : s) * H + h) * D * D, D, D).cast<float>();
        const auto r = yoco::gret_chunkwise<float>(qh, kh, vh, lg, &st, 64);
        for (int64_t t = 0; t < L; ++t)
          for (int64_t c = 0; c < D; ++c) o[static_cast<size_t>(((b * T + t0 + t) * H + h) * D + c)] = r.o(t, c);
      }
  if (wrap_at >= 0)
    for (int64_t t = wrap_at; t < B * T; ++t)
      std::copy_n(o.begin() + (t - (int64_t{1} << 17)) * H * D, H * D, o.begin() + t * H * D);
  yoco::SafetensorsWriter w(out_path, {{"o", DType::f32, sh}}, {});
  w.append(o.data(), static_cast<int64_t>(o.size()));
  w.commit();
  return out_path;
}

TEST_F(Check, GeneratedFilesHoldOneProblemInEveryLayoutAndDtype) {
  GretGenerateOptions g;
  g.B = 2, g.T = 70, g.H = 3, g.D = 16, g.seed = 11, g.dtype = DType::f32;
  generate_gret_inputs(path("a.st"), g);
  g.bhtd = true;
  g.dtype = DType::bf16;
  generate_gret_inputs(path("b.st"), g);
  const auto a = TensorFile::open(path("a.st")), b = TensorFile::open(path("b.st"));
  EXPECT_EQ(b->info("q").shape, (std::vector<int64_t>{2, 3, 70, 16}));
  EXPECT_EQ(b->info("q").dtype, "bf16");
  std::vector<double> qa(2 * 70 * 3 * 16), qb(qa.size()), ga(2 * 70 * 3), gb(ga.size());
  a->read("q", 0, static_cast<int64_t>(qa.size()), qa.data());
  b->read("q", 0, static_cast<int64_t>(qb.size()), qb.data());
  a->read("g", 0, static_cast<int64_t>(ga.size()), ga.data());
  b->read("g", 0, static_cast<int64_t>(gb.size()), gb.data());
  double sum2 = 0;
  for (int64_t bb = 0; bb < 2; ++bb)
    for (int64_t t = 0; t < 70; ++t)
      for (int64_t h = 0; h < 3; ++h) {
        EXPECT_EQ(gb[static_cast<size_t>((bb * 3 + h) * 70 + t)], ga[static_cast<size_t>((bb * 70 + t) * 3 + h)]);
        EXPECT_LT(ga[static_cast<size_t>((bb * 70 + t) * 3 + h)], 0.0);  // a decay
        for (int64_t d = 0; d < 16; ++d) {
          const double x = qa[static_cast<size_t>(((bb * 70 + t) * 3 + h) * 16 + d)];
          sum2 += x * x;
          EXPECT_EQ(qb[static_cast<size_t>(((bb * 3 + h) * 70 + t) * 16 + d)],
                    yoco::round_to_bf16(static_cast<float>(x)));
        }
      }
  EXPECT_NEAR(sum2 / static_cast<double>(qa.size()), 1.0, 0.1);  // unit variance
}

// --state-layout vk read the initial state as [V, K], but --generate refused the
// option and always wrote [K, V]; locations said "(as [K, V])" under vk too.
// The generator writes the same states transposed, and locations index the
// state as the file holds it.
TEST_F(Check, TheStateLayoutIsHonouredWrittenAndInLocations) {
  const std::string kv = path("kv.st"), vk = path("vk.st");
  ASSERT_EQ(yoco("check gret --generate " + kv + " --shape 2,64,2,16 --with-state").status, 0);
  const auto g = yoco("check gret --generate " + vk + " --shape 2,64,2,16 --with-state --state-layout vk");
  ASSERT_EQ(g.status, 0) << g.all();
  const auto a = TensorFile::open(kv), b = TensorFile::open(vk);
  std::vector<double> sa(2 * 2 * 16 * 16), sb(sa.size()), qa(2 * 64 * 2 * 16), qb(qa.size());
  a->read("initial_state", 0, static_cast<int64_t>(sa.size()), sa.data());
  b->read("initial_state", 0, static_cast<int64_t>(sb.size()), sb.data());
  for (int64_t m = 0; m < 4; ++m)
    for (int64_t i = 0; i < 16; ++i)
      for (int64_t j = 0; j < 16; ++j)
        ASSERT_EQ(sb[static_cast<size_t>((m * 16 + j) * 16 + i)], sa[static_cast<size_t>((m * 16 + i) * 16 + j)]);
  a->read("q", 0, static_cast<int64_t>(qa.size()), qa.data());
  b->read("q", 0, static_cast<int64_t>(qb.size()), qb.data());
  EXPECT_EQ(qa, qb);
  // A final state [V, K] with one entry wrong: the location is its [V][K] index.
  const Problem p = make_problem(1, 64, 2, 16, 15, true);
  const Outputs o = compute(p, {});
  std::vector<double> st_vk(o.st.size());
  for (int64_t m = 0; m < p.B * p.H; ++m)
    for (int64_t i = 0; i < p.D; ++i)
      for (int64_t j = 0; j < p.D; ++j)
        st_vk[static_cast<size_t>((m * p.D + j) * p.D + i)] = o.st[static_cast<size_t>((m * p.D + i) * p.D + j)];
  Problem pv = p;  // initial state as [V, K] too
  for (int64_t m = 0; m < p.B * p.H; ++m)
    for (int64_t i = 0; i < p.D; ++i)
      for (int64_t j = 0; j < p.D; ++j)
        pv.s0[static_cast<size_t>((m * p.D + j) * p.D + i)] = p.s0[static_cast<size_t>((m * p.D + i) * p.D + j)];
  st_vk[static_cast<size_t>((1 * p.D + 3) * p.D + 7)] += 100.0;  // head 1, file index [3][7]: K 7, V 3
  Outputs ov{o.o, st_vk};
  GretCheckOptions opt;
  opt.state_layout = StateLayout::vk;
  const GretCheckReport r = run(write_inputs(pv, "in_vk.st"), write_outputs(p, ov, DType::f32, true, "out_vk.st"), opt);
  EXPECT_TRUE(verdict(r, "o").pass);
  EXPECT_EQ(verdict(r, "final_state").max_where, "sequence 0, head 1, state [3][7] (as [V, K])");
}

TEST_F(Check, GeneratedPackedFileWithStatesIsJudgedEndToEnd) {
  // The README's flow: generate, run a kernel (here fp32 chunkwise), check. The
  // generated cu_seqlens is an I64 safetensors tensor.
  const std::string in = path("packed.st");
  const auto g = yoco("check gret --generate " + in + " --shape 1,300,2,32 --dtype f32 --with-state --packed 0,100,101,300");
  ASSERT_EQ(g.status, 0) << g.all();
  EXPECT_EQ(TensorFile::open(in)->info("cu_seqlens").dtype, "i64");
  const std::string out = fp32_candidate(in, path("packed_out.st"));
  const auto ok = yoco("check gret " + in + " " + out);
  EXPECT_EQ(ok.status, 0) << ok.all();
  EXPECT_NE(ok.out.find("sequences 3"), std::string::npos) << ok.out;
  const auto bad = yoco("check gret --generate " + path("x.st") + " --shape 2,300,2,32 --packed 0,300");
  EXPECT_EQ(bad.status, 2);
  EXPECT_NE(bad.err.find("batch 1"), std::string::npos) << bad.err;
}

// The generator's offsets are --packed: its errors name that option, not
// --cu-seqlens (the judging mode's tensor name, refused in this mode).
TEST_F(Check, PackedOffsetErrorsNameThePackedOption) {
  for (const std::string& args : {std::string(" --shape 2,300,2,32 --packed 0,300"),
                                  std::string(" --shape 1,300,2,32 --packed 0,200,100,300"),
                                  std::string(" --shape 1,300,2,32 --packed 0,200"),
                                  // Digits only, as every count: "+2" was read as 2, " 1e2" as 1.
                                  std::string(" --shape 1,300,2,32 --packed 0,+2,300"),
                                  std::string(" --shape 1,300,2,32 --packed 0,1e2,300")}) {
    const auto r = yoco("check gret --generate " + path("x.st") + args);
    yoco_test::expect_input_error(r, {"--packed"}, args);
    EXPECT_EQ(r.err.find("--cu-seqlens"), std::string::npos) << r.err;
  }
}

// A --gate-scale past f32 wrote g (or g_gamma) of -inf without a word; the file
// could then only be refused when judged. Refused before writing.
TEST_F(Check, AGateScaleF32CannotHoldIsRefusedBeforeWriting) {
  const std::string f = path("g.st");
  for (const std::string& o : {std::string(""), std::string(" --constant-decay")}) {
    const auto r = yoco("check gret --generate " + f + " --shape 1,4,1,4 --gate-scale 1e300" + o);
    yoco_test::expect_input_error(r, {"--gate-scale"}, o);
    EXPECT_FALSE(std::filesystem::exists(f)) << o;
  }
  EXPECT_EQ(yoco("check gret --generate " + f + " --shape 1,4,1,4 --gate-scale 1e30").status, 0);
}

// Past 2^31 elements is where int32 offsets wrap (fla #1080 at ~1M tokens x 24
// x 128); 256K tokens stand in for it in the default suite, with the wrap
// placed 2^17 tokens back, so the first bad token must be found exactly.
TEST_F(Check, AWrapAt256KTokensIsFoundExactly) {
  GretGenerateOptions g;
  g.T = (int64_t{1} << 18) + 64, g.H = 1, g.D = 16, g.dtype = DType::f32;
  const std::string in = path("long.st");
  generate_gret_inputs(in, g);
  GretCheckOptions opt;
  const auto good = check_gret(*TensorFile::open(in), *TensorFile::open(fp32_candidate(in, path("long_ok.st"))), opt);
  EXPECT_TRUE(good.pass()) << good.verdicts[0].rms_ratio << " " << good.verdicts[0].tolerance;
  EXPECT_EQ(good.verdicts[0].first_bad_token, -1) << good.verdicts[0].first_bad_where;
  const int64_t wrap = 200003;
  const auto bad =
      check_gret(*TensorFile::open(in), *TensorFile::open(fp32_candidate(in, path("long_bad.st"), wrap)), opt);
  EXPECT_FALSE(bad.pass());
  EXPECT_EQ(bad.verdicts[0].first_bad_token, wrap);
}

}  // namespace
