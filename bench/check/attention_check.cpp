#include "attention_check.hpp"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "dtype.hpp"
#include "errors.hpp"
#include "ops.hpp"
#include "tensor.hpp"

namespace yoco::check {

namespace {

[[noreturn]] void fail(const std::string& what) { throw InputError(what); }



struct Dims {
  int64_t B = 0, Sq = 0, Sk = 0, Hq = 0, Hkv = 0, D = 0;
};

// Tensor `name` as [B, S, H, D] whatever the file's layout: its S and H.
std::pair<int64_t, int64_t> seq_heads(const TensorFile& f, const std::string& name, bool bhsd, const char* role) {
  require_float(f, name, role);
  const TensorInfo& t = f.info(name);
  if (t.shape.size() != 4 || !is_float_dtype(t.dtype))
    fail(f.path() + ": tensor '" + name + "' (" + role + ") must be a 4-D float tensor " +
         (bhsd ? "[B, H, S, D]" : "[B, S, H, D]") + ", got " + t.dtype + " " + shape_str(t.shape));
  return bhsd ? std::pair(t.shape[2], t.shape[1]) : std::pair(t.shape[1], t.shape[2]);
}

// Rows [s0, s0 + n) of heads [h0, h0 + nh) of a [B, S, H, D] (or [B, H, S, D])
// tensor, batch row b, as [n, nh * D] (heads side by side, as the reference
// takes them).
Mat<double> read_rows(const TensorFile& f, const std::string& name, bool bhsd, int64_t b, int64_t S, int64_t H,
                      int64_t D, int64_t s0, int64_t n, int64_t h0, int64_t nh) {
  Mat<double> out(n, nh * D);
  std::vector<double> buf;
  if (bhsd) {
    buf.resize(static_cast<size_t>(n * D));
    for (int64_t h = 0; h < nh; ++h) {
      f.read(name, ((b * H + h0 + h) * S + s0) * D, n * D, buf.data());
      for (int64_t i = 0; i < n; ++i) std::copy_n(buf.data() + i * D, D, out.data() + i * nh * D + h * D);
    }
  } else {
    buf.resize(static_cast<size_t>(n * H * D));
    f.read(name, (b * S + s0) * H * D, n * H * D, buf.data());
    for (int64_t i = 0; i < n; ++i) std::copy_n(buf.data() + (i * H + h0) * D, nh * D, out.data() + i * nh * D);
  }
  return out;
}

// What a bf16 flash-attention kernel computes from the same (already rounded)
// inputs: fp32 scores, max and sum; P rounded to the output's 16-bit type
// before P V; fp32 accumulation; the output rounded. `round16` is false for
// fp32 outputs: then an fp32 computation throughout.
Mat<double> emulate(const Mat<double>& q, const Mat<double>& k, const Mat<double>& v, int64_t nh, int64_t D,
                    int64_t q_pos0, int64_t window, bool causal, double scale, const std::string& out_dtype) {
  const int64_t n = q.rows(), m = k.rows();
  const bool r16 = out_dtype == "bf16" || out_dtype == "f16";
  auto round16 = [&](float x) { return out_dtype == "f16" ? f16_bits_to_float(float_to_f16_bits(x)) : round_to_bf16(x); };
  const Mat<float> kf = k.cast<float>(), vf = v.cast<float>();
  Mat<double> o(n, nh * D);
  std::vector<float> p;
  for (int64_t h = 0; h < nh; ++h) {
    const Mat<float> qh = q.middleCols(h * D, D).cast<float>();
    const Mat<float> s = (qh * kf.transpose()) * static_cast<float>(scale);
    for (int64_t i = 0; i < n; ++i) {
      const int64_t pos = q_pos0 + i;
      const int64_t hi = causal ? std::min<int64_t>(m, pos + 1) : m;
      const int64_t lo = causal && window > 0 ? std::max<int64_t>(0, pos - window + 1) : 0;
      Eigen::Matrix<float, 1, Eigen::Dynamic> acc = Eigen::Matrix<float, 1, Eigen::Dynamic>::Zero(D);
      if (hi <= lo) {
        o.block(i, h * D, 1, D).setZero();
        continue;
      }
      float mx = -INFINITY;
      for (int64_t j = lo; j < hi; ++j) mx = std::max(mx, s(i, j));
      float l = 0;
      for (int64_t j = lo; j < hi; ++j) {
        const float e = std::exp(s(i, j) - mx);
        l += e;
        acc += (r16 ? round16(e) : e) * vf.row(j);
      }
      for (int64_t c = 0; c < D; ++c) {
        const float x = acc(c) / l;
        o(i, h * D + c) = r16 ? round16(x) : x;
      }
    }
  }
  return o;
}

}  // namespace

CheckReport check_attention(const TensorFile& in, const TensorFile& out, const AttentionCheckOptions& opt) {
  Dims d;
  const TensorInfo& qi = in.info(opt.q);
  std::tie(d.Sq, d.Hq) = seq_heads(in, opt.q, opt.bhsd, "queries");
  std::tie(d.Sk, d.Hkv) = seq_heads(in, opt.k, opt.bhsd, "keys");
  d.B = qi.shape[0];
  d.D = qi.shape[3];
  const TensorInfo& ki = in.info(opt.k);
  if (ki.shape[0] != d.B || ki.shape[3] != d.D)
    fail(in.path() + ": tensor '" + opt.k + "' is " + shape_str(ki.shape) + ", q is " + shape_str(qi.shape) +
         " (batch and head dim must agree)");
  require_float(in, opt.v, "values");
  if (in.info(opt.v).shape != ki.shape || !is_float_dtype(in.info(opt.v).dtype))
    fail(in.path() + ": tensor '" + opt.v + "' is " + in.info(opt.v).dtype + " " + shape_str(in.info(opt.v).shape) +
         ", k is " + shape_str(ki.shape) + " (v must have k's shape)");
  if (d.B < 1 || d.Sq < 1 || d.Sk < 1 || d.Hq < 1 || d.Hkv < 1 || d.D < 1)
    fail(in.path() + ": an empty dimension: q " + shape_str(qi.shape) + ", k " + shape_str(ki.shape));
  if (d.Hq % d.Hkv != 0)
    fail(in.path() + ": q has " + std::to_string(d.Hq) + " heads, k " + std::to_string(d.Hkv) +
         ": query heads must be a multiple of key/value heads (GQA)");
  require_float(out, opt.o, "the output");
  const TensorInfo& oi = out.info(opt.o);
  if (oi.shape != qi.shape || !is_float_dtype(oi.dtype))
    fail(out.path() + ": tensor '" + opt.o + "' is " + oi.dtype + " " + shape_str(oi.shape) + ", q is " +
         shape_str(qi.shape) + " (o must have q's shape)");
  if (opt.window > 0 && !opt.causal) fail("--window needs the causal mask (--mask causal)");
  // Unmasked, every query sees every key: an offset would be ignored without a word.
  if (opt.q_offset && !opt.causal) fail("--q-offset needs the causal mask (--mask causal)");
  const int64_t q_offset = opt.q_offset ? *opt.q_offset : d.Sk - d.Sq;
  if (opt.causal && q_offset < 0) {
    if (opt.q_offset) fail("--q-offset " + std::to_string(q_offset) + ": the first query must sit at a key position >= 0");
    // Not typed: said as the default it is, not as an option given.
    fail(in.path() + ": q has " + std::to_string(d.Sq) + " queries, k " + std::to_string(d.Sk) +
         " keys: the default query offset Sk - Sq = " + std::to_string(q_offset) +
         " is negative; give --q-offset P (P >= 0) or --mask none");
  }
  const double scale = opt.scale ? *opt.scale : 1.0 / std::sqrt(static_cast<double>(d.D));
  const int64_t group = d.Hq / d.Hkv;
  // Queries per block: the score block [n, Sk] stays near 64 M values.
  const int64_t block = std::clamp<int64_t>((int64_t{1} << 26) / std::max<int64_t>(d.Sk * group, 1), 1, 256);

  ErrorAccumulator acc(d.B * d.Sq);
  for (int64_t b = 0; b < d.B; ++b)
    for (int64_t kh = 0; kh < d.Hkv; ++kh) {
      const Mat<double> K = read_rows(in, opt.k, opt.bhsd, b, d.Sk, d.Hkv, d.D, 0, d.Sk, kh, 1);
      const Mat<double> V = read_rows(in, opt.v, opt.bhsd, b, d.Sk, d.Hkv, d.D, 0, d.Sk, kh, 1);
      for (int64_t i0 = 0; i0 < d.Sq; i0 += block) {
        const int64_t n = std::min(block, d.Sq - i0);
        const Mat<double> Q = read_rows(in, opt.q, opt.bhsd, b, d.Sq, d.Hq, d.D, i0, n, kh * group, group);
        const Mat<double> O = read_rows(out, opt.o, opt.bhsd, b, d.Sq, d.Hq, d.D, i0, n, kh * group, group);
        // Without the causal mask every query sees every key: the reference's
        // causal rule with the queries placed after the last key.
        const int64_t pos0 = opt.causal ? q_offset + i0 : d.Sk;
        const Mat<double> ref = attention<double>(Q, K, V, group, 1, d.D, pos0, 0, opt.window, scale);
        const Mat<double> emu = emulate(Q, K, V, group, d.D, q_offset + i0, opt.window, opt.causal, scale, oi.dtype);
        for (int64_t i = 0; i < n; ++i)
          for (int64_t c = 0; c < group * d.D; ++c)
            acc.add(O(i, c), ref(i, c), emu(i, c), b * d.Sq + i0 + i, [&] {
              std::ostringstream w;
              w << "batch " << b << ", head " << (kh * group + c / d.D) << ", query " << (i0 + i);
              if (opt.causal) w << " (position " << (q_offset + i0 + i) << ")";  // unmasked, positions mean nothing
              w << ", column " << (c % d.D);
              return w.str();
            });
      }
    }

  CheckReport rep;
  rep.kind = "attention";
  rep.shape = {{"B", d.B}, {"Sq", d.Sq}, {"Sk", d.Sk}, {"Hq", d.Hq}, {"Hkv", d.Hkv}, {"D", d.D}};
  rep.batch = d.B;
  rep.tokens = d.Sq;
  std::ostringstream c;
  c << "layout " << (opt.bhsd ? "[B, H, S, D] (SDPA)" : "[B, S, H, D] (FlashAttention)") << ", "
    << (opt.causal ? "causal" : "no mask");
  if (opt.window > 0) c << ", window " << opt.window << " (keys p - " << opt.window << " < j <= p)";
  if (opt.causal) c << ", query 0 at key position " << q_offset << (opt.q_offset ? "" : " (Sk - Sq)");
  c << ", scores scaled by " << scale << (opt.scale ? "" : " (D^-1/2)") << ", GQA group " << group
    << ", reference in fp64";
  rep.conventions = c.str();
  const bool low = oi.dtype == "bf16" || oi.dtype == "f16";
  const std::string from = low ? "2x a " + oi.dtype +
                                     " flash-attention computation of the same inputs (fp32 scores and sums, P "
                                     "rounded to " + oi.dtype + ", fp32 accumulation, output rounded): the rule "
                                     "for its dtype, " + oi.dtype
                               : "2x an fp32 computation of the same inputs: the rule for its dtype, " + oi.dtype;
  rep.verdicts.push_back(acc.verdict(opt.o, oi.dtype, opt.tolerance, from, d.Hq * d.D, d.Sq));
  std::ostringstream scaled;
  scaled << "scores scaled by " << scale;
  refuse_unjudgeable(rep, in.path(), scaled.str());
  return rep;
}

}  // namespace yoco::check
