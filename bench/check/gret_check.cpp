#include "gret_check.hpp"

#include <algorithm>
#include <atomic>
#include <exception>
#include <mutex>
#include <system_error>
#include <thread>
#include <cmath>
#include <sstream>

#include "dtype.hpp"
#include "errors.hpp"
// gret_chunk_emulate: a bf16 tensor-core chunkwise computation on the host (the
// kernels' own mirror).
#include "gret/gret_chunk_emulation.hpp"
#include "tensor.hpp"

namespace yoco::check {

namespace {

// A value as a bf16 kernel reads or writes it (an object: Eigen's unaryExpr takes functors).
constexpr auto bf = [](double x) { return static_cast<double>(round_to_bf16(static_cast<float>(x))); };


[[noreturn]] void fail(const std::string& what) { throw InputError(what); }



// The problem's sizes, read from the tensors' shapes and checked against each other.
struct Dims {
  int64_t B = 0, T = 0, H = 0, D = 0;
  bool per_token_g = true;
  std::vector<int64_t> cu;  // sequence bounds: [0, T] per batch row, or cu_seqlens (B == 1)
  int64_t sequences() const { return cu.empty() ? B : static_cast<int64_t>(cu.size()) - 1; }
};

// A log-decay is finite and <= 0 (the decay exp(g) in (0, 1]): a positive one
// grows the state without bound, a NaN or -inf leaves no reference. Streamed
// once before the work, the first offender named by its index.
void check_log_decay(const TensorFile& f, const std::string& name) {
  const TensorInfo& t = f.info(name);
  const int64_t n = t.numel();
  constexpr int64_t kBlock = int64_t{1} << 20;
  std::vector<double> buf(static_cast<size_t>(std::min(n, kBlock)));
  for (int64_t first = 0; first < n; first += kBlock) {
    const int64_t m = std::min(kBlock, n - first);
    f.read(name, first, m, buf.data());
    for (int64_t i = 0; i < m; ++i) {
      const double x = buf[static_cast<size_t>(i)];
      if (std::isfinite(x) && x <= 0) continue;
      std::vector<int64_t> index(t.shape.size());
      for (int64_t r = first + i, k = static_cast<int64_t>(t.shape.size()) - 1; k >= 0; --k) {
        index[static_cast<size_t>(k)] = r % t.shape[static_cast<size_t>(k)];
        r /= t.shape[static_cast<size_t>(k)];
      }
      std::ostringstream v;
      v << x;
      // -inf is how some kernels spell a reset (decay 0); the check's reset is a sequence boundary.
      fail(f.path() + ": tensor '" + name + "' is a log-decay, finite and <= 0 everywhere; element " +
           shape_str(index) + " is " + v.str() +
           (std::isinf(x) && x < 0 ? " (for a reset, start a new sequence with cu_seqlens)" : ""));
    }
  }
}

Dims read_dims(const TensorFile& in, const TensorFile& out, const GretCheckOptions& opt) {
  require_float(in, opt.q);
  const TensorInfo& q = in.info(opt.q);
  if (q.shape.size() != 4 || !is_float_dtype(q.dtype))
    fail(in.path() + ": tensor '" + opt.q + "' must be a 4-D float tensor (" +
         (opt.layout == TokenLayout::bthd ? "[B, T, H, D]" : "[B, H, T, D]") + "), got " + q.dtype + " " +
         shape_str(q.shape));
  Dims d;
  d.B = q.shape[0];
  d.T = opt.layout == TokenLayout::bthd ? q.shape[1] : q.shape[2];
  d.H = opt.layout == TokenLayout::bthd ? q.shape[2] : q.shape[1];
  d.D = q.shape[3];
  if (d.B < 1 || d.T < 1 || d.H < 1 || d.D < 1)
    fail(in.path() + ": tensor '" + opt.q + "' has an empty dimension " + shape_str(q.shape));
  auto same_as_q = [&](const TensorFile& f, const std::string& name) {
    require_float(f, name);
    const TensorInfo& t = f.info(name);
    if (t.shape != q.shape || !is_float_dtype(t.dtype))
      fail(f.path() + ": tensor '" + name + "' is " + t.dtype + " " + shape_str(t.shape) + ", q is " +
           shape_str(q.shape) + " (k, v and o must have q's shape: value dims other than key dims are not supported)");
  };
  same_as_q(in, opt.k);
  same_as_q(in, opt.v);
  same_as_q(out, opt.o);
  if (in.has(opt.g) && in.has(opt.g_gamma))
    fail(in.path() + ": holds both '" + opt.g + "' (a log-decay per token and head) and '" + opt.g_gamma +
         "' (per head): give one or the other");
  if (in.has(opt.g)) {
    require_float(in, opt.g, "the log-decay");
    const TensorInfo& g = in.info(opt.g);
    const std::vector<int64_t> want =
        opt.layout == TokenLayout::bthd ? std::vector<int64_t>{d.B, d.T, d.H} : std::vector<int64_t>{d.B, d.H, d.T};
    if (g.shape != want || !is_float_dtype(g.dtype))
      fail(in.path() + ": tensor '" + opt.g + "' (the log-decay per token and head) is " + g.dtype + " " +
           shape_str(g.shape) + ", expected " + shape_str(want));
  } else if (in.has(opt.g_gamma)) {
    require_float(in, opt.g_gamma, "the log-decay");
    const TensorInfo& g = in.info(opt.g_gamma);
    if (g.shape != std::vector<int64_t>{d.H} || !is_float_dtype(g.dtype))
      fail(in.path() + ": tensor '" + opt.g_gamma + "' (a constant log-decay per head) is " + g.dtype + " " +
           shape_str(g.shape) + ", expected [" + std::to_string(d.H) + "]");
    d.per_token_g = false;
  } else {
    fail(in.path() + ": needs the log-decay, tensor '" + opt.g + "' (per token and head) or '" + opt.g_gamma +
         "' (per head)");
  }
  check_log_decay(in, d.per_token_g ? opt.g : opt.g_gamma);
  if (in.has(opt.cu_seqlens)) {
    const TensorInfo& c = in.info(opt.cu_seqlens);
    // Offsets are integers, as fla takes them (int32 or int64): a float tensor
    // is a mistake upstream even where its values happen to be whole.
    if (c.dtype != "i32" && c.dtype != "i64")
      fail(in.path() + ": tensor '" + opt.cu_seqlens + "' (offsets of packed sequences) is " + c.dtype +
           ": expected an integer tensor (i32 or i64)");
    if (c.shape.size() != 1 || c.shape[0] < 2)
      fail(in.path() + ": tensor '" + opt.cu_seqlens + "' must be 1-D with N + 1 >= 2 offsets, got " +
           shape_str(c.shape));
    if (d.B != 1)
      fail(in.path() + ": packed sequences ('" + opt.cu_seqlens + "') need batch 1, q has batch " +
           std::to_string(d.B));
    std::vector<double> cu(static_cast<size_t>(c.shape[0]));
    in.read(opt.cu_seqlens, 0, c.shape[0], cu.data());
    for (size_t i = 0; i < cu.size(); ++i) {
      const auto x = static_cast<int64_t>(cu[i]);
      if ((i == 0 && x != 0) || (i > 0 && x < d.cu.back()) ||
          (i + 1 == cu.size() && x != d.T))
        fail(in.path() + ": tensor '" + opt.cu_seqlens + "' must rise from 0 to T = " + std::to_string(d.T) +
             " (entry " + std::to_string(i) + " is " + std::to_string(x) + ")");
      d.cu.push_back(x);
    }
  }
  const std::vector<int64_t> state_shape{d.sequences(), d.H, d.D, d.D};
  if (in.has(opt.initial_state)) {
    require_float(in, opt.initial_state);
    const TensorInfo& s = in.info(opt.initial_state);
    if (s.shape != state_shape || !is_float_dtype(s.dtype))
      fail(in.path() + ": tensor '" + opt.initial_state + "' is " + s.dtype + " " + shape_str(s.shape) +
           ", expected " + shape_str(state_shape) + " (one state per sequence and head)");
  }
  if (out.has(opt.final_state)) {
    require_float(out, opt.final_state);
    const TensorInfo& s = out.info(opt.final_state);
    if (s.shape != state_shape || !is_float_dtype(s.dtype))
      fail(out.path() + ": tensor '" + opt.final_state + "' is " + s.dtype + " " + shape_str(s.shape) +
           ", expected " + shape_str(state_shape));
  }
  return d;
}

// A block of tokens [t0, t0 + L) of batch row b as [H][L][D] (or [H][L] for the
// decay), whatever the file's layout.
std::vector<double> read_block(const TensorFile& f, const std::string& name, const Dims& d, TokenLayout layout,
                               int64_t b, int64_t t0, int64_t L, int64_t inner) {
  std::vector<double> out(static_cast<size_t>(d.H * L * inner));
  if (layout == TokenLayout::bhtd) {
    for (int64_t h = 0; h < d.H; ++h)
      f.read(name, ((b * d.H + h) * d.T + t0) * inner, L * inner, out.data() + h * L * inner);
    return out;
  }
  std::vector<double> raw(out.size());
  f.read(name, (b * d.T + t0) * d.H * inner, L * d.H * inner, raw.data());
  for (int64_t t = 0; t < L; ++t)
    for (int64_t h = 0; h < d.H; ++h)
      std::copy_n(raw.data() + (t * d.H + h) * inner, inner, out.data() + (h * L + t) * inner);
  return out;
}

// The states of one sequence, [H] matrices [K, V], from a [N, H, D, D] tensor.
std::vector<Mat<double>> read_states(const TensorFile& f, const std::string& name, const Dims& d, int64_t s,
                                     StateLayout layout) {
  std::vector<Mat<double>> st;
  std::vector<double> raw(static_cast<size_t>(d.D * d.D));
  for (int64_t h = 0; h < d.H; ++h) {
    f.read(name, (s * d.H + h) * d.D * d.D, d.D * d.D, raw.data());
    Mat<double> m = Eigen::Map<const Mat<double>>(raw.data(), d.D, d.D);
    st.push_back(layout == StateLayout::kv ? m : Mat<double>(m.transpose()));
  }
  return st;
}

// f(h) for h in [0, H) on up to hardware_concurrency threads (the calling one
// included); the first exception is rethrown after all have finished.
template <class F>
void for_each_head(int64_t H, F&& f) {
  const int64_t workers = std::clamp<int64_t>(std::thread::hardware_concurrency(), 1, H);
  std::atomic<int64_t> next{0};
  std::exception_ptr error;
  std::mutex error_mutex;
  auto work = [&] {
    for (int64_t h; (h = next.fetch_add(1)) < H;) {
      try {
        f(h);
      } catch (...) {
        std::lock_guard<std::mutex> lock(error_mutex);
        if (!error) error = std::current_exception();
      }
    }
  };
  std::vector<std::thread> pool;
  try {
    for (int64_t w = 1; w < workers; ++w) pool.emplace_back(work);
  } catch (const std::system_error&) {
    // No more threads to be had: the ones started and this one do the work.
  }
  work();
  for (auto& t : pool) t.join();
  if (error) std::rethrow_exception(error);
}

bool low_precision(const std::string& dtype) { return dtype == "bf16" || dtype == "f16"; }

// Where a tensor's tolerance comes from: the rule for its own dtype (o and
// final_state may differ: a bf16 o beside an f32 state).
std::string derived_from(const std::string& dtype) {
  if (low_precision(dtype))
    return "2x a bf16 tensor-core chunkwise computation of the same inputs (fp32 accumulators and state, bf16 "
           "operands, output rounded to bf16): the rule for its dtype, " + dtype +
           (dtype == "f16" ? " (held to the bf16 rule)" : "");
  return "2x an fp32 chunkwise computation of the same inputs: the rule for its dtype, " + dtype;
}

}  // namespace

GretCheckReport check_gret(const TensorFile& in, const TensorFile& out, const GretCheckOptions& opt) {
  const Dims d = read_dims(in, out, opt);
  const int64_t N = d.sequences();
  const double scale = opt.scale ? *opt.scale : 1.0 / std::sqrt(static_cast<double>(d.D));
  // Each output is held to the rule of its own dtype: the bf16 tensor-core
  // emulation runs when one of them is 16-bit, the fp32 one when one is not.
  const std::string o_dtype = out.info(opt.o).dtype;
  const bool judge_state = out.has(opt.final_state);
  const std::string s_dtype = judge_state ? out.info(opt.final_state).dtype : o_dtype;
  // A kernel whose o is 16-bit computes its state with 16-bit operands too,
  // whatever dtype it stores the state in (fla: bf16 o, fp32 final_state): the
  // state's rule is the bf16 emulation then, its state rounded only when the
  // state itself is stored in 16 bits.
  const bool low_o = low_precision(o_dtype), low_s = low_precision(s_dtype);
  const bool run_tc = low_o || (judge_state && low_s), run_f32 = !low_o;
  // Whole chunks per block (the same arithmetic as one pass); by default about
  // 2 M values per tensor (16 MB in fp64), so that the buffers stay warm in
  // the allocator instead of being faulted in afresh at every block.
  const int64_t want = opt.block_tokens > 0 ? opt.block_tokens : (int64_t{1} << 21) / std::max<int64_t>(d.H * d.D, 1);
  const int64_t block = std::max<int64_t>(64, want / 64 * 64);

  std::vector<double> g_gamma;
  if (!d.per_token_g) {
    g_gamma.resize(static_cast<size_t>(d.H));
    in.read(opt.g_gamma, 0, d.H, g_gamma.data());
  }
  ErrorAccumulator acc_o(d.B * d.T), acc_s;

  int64_t tokens_done = 0;
  for (int64_t s = 0; s < N; ++s) {
    const int64_t b = d.cu.empty() ? s : 0;
    const int64_t ts = d.cu.empty() ? 0 : d.cu[static_cast<size_t>(s)];
    const int64_t te = d.cu.empty() ? d.T : d.cu[static_cast<size_t>(s + 1)];
    std::vector<Mat<double>> S = in.has(opt.initial_state) ? read_states(in, opt.initial_state, d, s, opt.state_layout)
                                                           : std::vector<Mat<double>>(d.H, Mat<double>::Zero(d.D, d.D));
    std::vector<Mat<double>> Se_tc = S, Se_f32 = S;  // the emulations' states
    for (int64_t t0 = ts; t0 < te; t0 += block) {
      const int64_t L = std::min(block, te - t0);
      if (opt.on_progress) opt.on_progress(tokens_done, d.B * d.T);
      tokens_done += L;
      const std::vector<double> qb = read_block(in, opt.q, d, opt.layout, b, t0, L, d.D);
      const std::vector<double> kb = read_block(in, opt.k, d, opt.layout, b, t0, L, d.D);
      const std::vector<double> vb = read_block(in, opt.v, d, opt.layout, b, t0, L, d.D);
      const std::vector<double> ob = read_block(out, opt.o, d, opt.layout, b, t0, L, d.D);
      const std::vector<double> gb =
          d.per_token_g ? read_block(in, opt.g, d, opt.layout, b, t0, L, 1) : std::vector<double>();
      // The heads are independent: the reference and the emulation of each
      // run on the worker threads; the comparison, cheap, runs after in
      // order, so the report does not depend on the thread count.
      std::vector<Mat<double>> ref_o(static_cast<size_t>(d.H)), emu_o(static_cast<size_t>(d.H));
      for_each_head(d.H, [&](int64_t h) {
        const double* qh = qb.data() + h * L * d.D;
        const Mat<double> q = Eigen::Map<const Mat<double>>(qh, L, d.D) * scale;
        const Mat<double> k = Eigen::Map<const Mat<double>>(kb.data() + h * L * d.D, L, d.D);
        const Mat<double> v = Eigen::Map<const Mat<double>>(vb.data() + h * L * d.D, L, d.D);
        Vec<double> lg(L);
        for (int64_t i = 0; i < L; ++i)
          lg(i) = d.per_token_g ? gb[static_cast<size_t>(h * L + i)] : g_gamma[static_cast<size_t>(h)];
        GretResult<double> r = gret_run<double>(opt.paradigm, q, k, v, lg, &S[h], 64);
        S[h] = std::move(r.state);
        ref_o[static_cast<size_t>(h)] = std::move(r.o);
        if (run_tc) {
          // A bf16 kernel reads q, k, v as bf16: round them first (the identity
          // for bf16 files), so that f32 inputs' rounding is in the tolerance.
          const Mat<double> qr = Eigen::Map<const Mat<double>>(qh, L, d.D).unaryExpr(bf) * scale;
          cuda::GretEmulation e = cuda::gret_chunk_emulate(qr, k.unaryExpr(bf), v.unaryExpr(bf), lg, &Se_tc[h], 64);
          if (low_o) emu_o[static_cast<size_t>(h)] = std::move(e.o);
          Se_tc[h] = std::move(e.state);
        }
        if (run_f32) {
          const Mat<float> sf = Se_f32[h].cast<float>();
          const GretResult<float> e =
              gret_chunkwise<float>(q.cast<float>(), k.cast<float>(), v.cast<float>(), lg.cast<float>(), &sf, 64);
          if (!low_o) emu_o[static_cast<size_t>(h)] = e.o.cast<double>();
          Se_f32[h] = e.state.cast<double>();
        }
      });
      for (int64_t h = 0; h < d.H; ++h) {
        const Mat<double>& ro = ref_o[static_cast<size_t>(h)];
        const Mat<double>& eo = emu_o[static_cast<size_t>(h)];
        const double* oh = ob.data() + h * L * d.D;
        for (int64_t i = 0; i < L; ++i) {
          const int64_t tok = b * d.T + t0 + i;
          for (int64_t c = 0; c < d.D; ++c)
            acc_o.add(oh[i * d.D + c], ro(i, c), eo(i, c), tok, [&] {
              std::ostringstream w;
              // In the words of the first bad token's place (batch, token): one line says both.
              w << "batch " << b << ", token " << (t0 + i) << ", head " << h << ", column " << c;
              if (!d.cu.empty()) w << " (sequence " << s << ")";
              return w.str();
            });
        }
      }
    }
    if (judge_state) {
      const std::vector<Mat<double>> got = read_states(out, opt.final_state, d, s, opt.state_layout);
      // A 16-bit state is the kernel's fp32 state rounded as it is written: the
      // emulation's is rounded to bf16 the same way (o's rule).
      for (int64_t h = 0; h < d.H; ++h)
        for (int64_t i = 0; i < d.D; ++i)
          for (int64_t j = 0; j < d.D; ++j)
            acc_s.add(got[h](i, j), S[h](i, j),
                      low_s ? bf(Se_tc[h](i, j)) : low_o ? Se_tc[h](i, j) : Se_f32[h](i, j), 0, [&] {
              std::ostringstream w;
              // Indexed as the file holds it.
              const bool kv = opt.state_layout == StateLayout::kv;
              w << "sequence " << s << ", head " << h << ", state [" << (kv ? i : j) << "][" << (kv ? j : i)
                << "] (as " << (kv ? "[K, V]" : "[V, K]") << ")";
              return w.str();
            });
    }
  }

  GretCheckReport rep;
  rep.kind = "gret";
  rep.shape = {{"B", d.B}, {"T", d.T}, {"H", d.H}, {"D", d.D}, {"sequences", N}};
  rep.batch = d.B;
  rep.tokens = d.T;
  {
    std::ostringstream c;
    c << "layout " << (opt.layout == TokenLayout::bthd ? "[B, T, H, D]" : "[B, H, T, D]") << ", state "
      << (opt.state_layout == StateLayout::kv ? "[K, V]" : "[V, K]") << ", q scaled by " << scale
      << (opt.scale ? "" : " (D^-1/2, the default)") << ", decay "
      << (d.per_token_g ? "g per token and head" : "g_gamma per head") << ", reference "
      << paradigm_name(opt.paradigm) << " in fp64" << (d.cu.empty() ? "" : ", packed sequences (cu_seqlens)");
    rep.conventions = c.str();
  }
  rep.verdicts.push_back(acc_o.verdict(opt.o, o_dtype, opt.tolerance, derived_from(o_dtype), d.H * d.D, d.T));
  if (judge_state)
    rep.verdicts.push_back(acc_s.verdict(
        opt.final_state, s_dtype, opt.tolerance,
        low_s || !low_o ? derived_from(s_dtype)
                        : "2x a bf16 tensor-core chunkwise computation of the same inputs (fp32 accumulators and "
                          "state, bf16 operands; the state not rounded): the rule for its dtype, " + s_dtype +
                              ", beside an " + o_dtype + " o (a 16-bit kernel's state has 16-bit operands)",
        1, 1));
  else
    rep.not_judged.push_back(opt.final_state + ": not judged (" + out.path() + " has no tensor '" + opt.final_state +
                             "')");
  std::ostringstream scaled;
  scaled << "q scaled by " << scale;
  refuse_unjudgeable(rep, in.path(), scaled.str());
  return rep;
}

}  // namespace yoco::check
