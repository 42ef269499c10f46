#include "gret.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

#include "errors.hpp"
#include "memory.hpp"

namespace yoco {

const char* paradigm_name(GretParadigm p) {
  switch (p) {
    case GretParadigm::parallel: return "parallel";
    case GretParadigm::recurrent: return "recurrent";
    case GretParadigm::chunkwise: return "chunkwise";
  }
  return "?";
}

GretParadigm parse_paradigm(const std::string& s) {
  if (s == "parallel") return GretParadigm::parallel;
  if (s == "recurrent") return GretParadigm::recurrent;
  if (s == "chunkwise") return GretParadigm::chunkwise;
  throw InputError("--paradigm must be parallel, recurrent or chunkwise, got '" + s + "'");
}

namespace {

template <class T>
Mat<T> start_state(const Mat<T>* s0, int64_t dk, int64_t dv) {
  if (!s0) return Mat<T>::Zero(dk, dv);
  if (s0->rows() != dk || s0->cols() != dv) throw std::logic_error("gret: initial state has the wrong shape");
  return *s0;
}

template <class T>
void check_shapes(const Eigen::Ref<const Mat<T>>& q, const Eigen::Ref<const Mat<T>>& k,
                  const Eigen::Ref<const Mat<T>>& v, const Eigen::Ref<const Vec<T>>& g) {
  if (k.rows() != q.rows() || v.rows() != q.rows() || g.size() != q.rows() || k.cols() != q.cols())
    throw std::logic_error("gret: q, k, v, log_gamma disagree in shape");
}

// Decays and decayed scores below the smallest normal float are set to zero.
// They are below every normal term they are added to, and left subnormal they
// make each multiply that reads them take a microcode assist: on Intel cores
// that made the tiny presets' chunkwise prefill 6x slower (0.22 s against
// 0.036 s at 1K) and failed CI's timing gate. Hardware flush-to-zero gives the
// same values; doing it here keeps the reference's result independent of the
// thread's floating-point mode.
template <class T>
T flush_subnormal(T x) {
  return std::abs(x) < std::numeric_limits<T>::min() ? T(0) : x;
}

}  // namespace

template <class T>
GretResult<T> gret_parallel(const Eigen::Ref<const Mat<T>>& q, const Eigen::Ref<const Mat<T>>& k,
                            const Eigen::Ref<const Mat<T>>& v, const Eigen::Ref<const Vec<T>>& g,
                            const Mat<T>* s0) {
  check_shapes<T>(q, k, v, g);
  const int64_t n = q.rows();
  const Mat<T> S0 = start_state(s0, k.cols(), v.cols());
  ActivationGuard guard(n * n * static_cast<int64_t>(sizeof(T)));
  // Decay matrix, row by row from the diagonal leftwards: acc = sum_{t=j+1..i} g_t.
  Mat<T> dm = Mat<T>::Zero(n, n);
  for (int64_t i = 0; i < n; ++i) {
    T acc = 0;
    dm(i, i) = T(1);
    for (int64_t j = i - 1; j >= 0; --j) {
      acc += g(j + 1);
      const T e = std::exp(acc);
      if (e == T(0)) break;  // further terms only decay more
      dm(i, j) = e;
    }
  }
  // Decay of the initial state to each position: exp(sum_{t=0..i} g_t).
  Vec<T> to_start(n);
  T acc = 0;
  for (int64_t i = 0; i < n; ++i) {
    acc += g(i);
    to_start(i) = std::exp(acc);
  }
  GretResult<T> r;
  r.o = (q * k.transpose()).cwiseProduct(dm) * v;
  r.o.noalias() += to_start.asDiagonal() * (q * S0);
  if (n == 0) {
    r.state = S0;
  } else {
    const Vec<T> last = dm.row(n - 1).transpose();
    r.state = to_start(n - 1) * S0;
    r.state.noalias() += k.transpose() * last.asDiagonal() * v;
  }
  return r;
}

template <class T>
GretResult<T> gret_recurrent(const Eigen::Ref<const Mat<T>>& q, const Eigen::Ref<const Mat<T>>& k,
                             const Eigen::Ref<const Mat<T>>& v, const Eigen::Ref<const Vec<T>>& g,
                             const Mat<T>* s0) {
  check_shapes<T>(q, k, v, g);
  const int64_t n = q.rows();
  GretResult<T> r;
  r.state = start_state(s0, k.cols(), v.cols());
  r.o.resize(n, v.cols());
  for (int64_t t = 0; t < n; ++t) {
    r.state *= std::exp(g(t));
    r.state.noalias() += k.row(t).transpose() * v.row(t);
    r.o.row(t).noalias() = q.row(t) * r.state;
  }
  return r;
}

template <class T>
GretResult<T> gret_chunkwise(const Eigen::Ref<const Mat<T>>& q, const Eigen::Ref<const Mat<T>>& k,
                             const Eigen::Ref<const Mat<T>>& v, const Eigen::Ref<const Vec<T>>& g,
                             const Mat<T>* s0, int64_t chunk) {
  check_shapes<T>(q, k, v, g);
  if (chunk < 1) throw InputError("gRet chunk size must be >= 1, got " + std::to_string(chunk));
  const int64_t n = q.rows();
  GretResult<T> r;
  r.state = start_state(s0, k.cols(), v.cols());
  r.o.resize(n, v.cols());
  ActivationGuard guard(std::min(chunk, n) * std::min(chunk, n) * static_cast<int64_t>(sizeof(T)));
  const auto flush = [](T x) { return flush_subnormal(x); };  // inlined, unlike a function pointer
  for (int64_t s = 0; s < n; s += chunk) {
    const int64_t c = std::min(chunk, n - s);
    const auto qc = q.middleRows(s, c);
    const auto kc = k.middleRows(s, c);
    const auto vc = v.middleRows(s, c);
    // b_i = sum_{t=s..s+i} g_t, restarted at the chunk start.
    Eigen::Array<T, Eigen::Dynamic, 1> b(c);
    T acc = 0;
    for (int64_t i = 0; i < c; ++i) b(i) = (acc += g(s + i));
    // Inner-chunk decays exp(b_i - b_j), j <= i, and 0 above the diagonal (no
    // exp of a positive sum, so no overflow). Element by element rather than as
    // an Eigen expression: b.replicate(1, c) - b^T.replicate(c, 1) indexes with
    // a 64-bit division per element and unaryExpr(&flush_subnormal) calls
    // through a pointer, which together made this the larger part of
    // yoco-tiny's CPU prefill, by a factor that differs from one CPU model to
    // the next (the CI gate's 1K prefill ratio). The values move by an ulp at
    // most (glibc's expf here, Eigen's vectorised exp before).
    Mat<T> inner_decay(c, c);
    for (int64_t i = 0; i < c; ++i)
      for (int64_t j = 0; j < c; ++j) inner_decay(i, j) = j <= i ? flush_subnormal(std::exp(b(i) - b(j))) : T(0);
    const Mat<T> scores = (qc * kc.transpose()).cwiseProduct(inner_decay).unaryExpr(flush);
    auto oc = r.o.middleRows(s, c);
    oc.noalias() = scores * vc;
    oc.noalias() += b.exp().unaryExpr(flush).matrix().asDiagonal() * (qc * r.state);
    const T b_last = b(c - 1);
    const Vec<T> to_end = (b_last - b).exp().unaryExpr(flush).matrix();
    r.state *= flush_subnormal(std::exp(b_last));
    r.state.noalias() += kc.transpose() * to_end.asDiagonal() * vc;
  }
  return r;
}

template <class T>
GretResult<T> gret_run(GretParadigm p, const Eigen::Ref<const Mat<T>>& q, const Eigen::Ref<const Mat<T>>& k,
                       const Eigen::Ref<const Mat<T>>& v, const Eigen::Ref<const Vec<T>>& g, const Mat<T>* s0,
                       int64_t chunk) {
  switch (p) {
    case GretParadigm::parallel: return gret_parallel<T>(q, k, v, g, s0);
    case GretParadigm::recurrent: return gret_recurrent<T>(q, k, v, g, s0);
    case GretParadigm::chunkwise: return gret_chunkwise<T>(q, k, v, g, s0, chunk);
  }
  throw std::logic_error("gret_run: bad paradigm");
}

#define YOCO_INSTANTIATE_GRET(T)                                                                                   \
  template GretResult<T> gret_parallel<T>(const Eigen::Ref<const Mat<T>>&, const Eigen::Ref<const Mat<T>>&,        \
                                          const Eigen::Ref<const Mat<T>>&, const Eigen::Ref<const Vec<T>>&,        \
                                          const Mat<T>*);                                                          \
  template GretResult<T> gret_recurrent<T>(const Eigen::Ref<const Mat<T>>&, const Eigen::Ref<const Mat<T>>&,       \
                                           const Eigen::Ref<const Mat<T>>&, const Eigen::Ref<const Vec<T>>&,       \
                                           const Mat<T>*);                                                         \
  template GretResult<T> gret_chunkwise<T>(const Eigen::Ref<const Mat<T>>&, const Eigen::Ref<const Mat<T>>&,       \
                                           const Eigen::Ref<const Mat<T>>&, const Eigen::Ref<const Vec<T>>&,       \
                                           const Mat<T>*, int64_t);                                                \
  template GretResult<T> gret_run<T>(GretParadigm, const Eigen::Ref<const Mat<T>>&, const Eigen::Ref<const Mat<T>>&, \
                                     const Eigen::Ref<const Mat<T>>&, const Eigen::Ref<const Vec<T>>&,             \
                                     const Mat<T>*, int64_t);
YOCO_INSTANTIATE_GRET(float)
YOCO_INSTANTIATE_GRET(double)

}  // namespace yoco
