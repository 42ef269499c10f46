#include "transformer_context_parallel.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "inference_checks.hpp"
#include "partial_attention.hpp"

namespace yoco::dist {

namespace {
// A block of keys and values as doubles: k rows then v rows.
template <class T>
void pack(const Mat<T>& k, const Mat<T>& v, std::vector<double>& out) {
  for (const Mat<T>* m : {&k, &v})
    for (int64_t i = 0; i < m->rows(); ++i)
      for (int64_t e = 0; e < m->cols(); ++e) out.push_back(static_cast<double>((*m)(i, e)));
}
template <class T>
const double* unpack(const double* p, int64_t rows, int64_t cols, Mat<T>& k, Mat<T>& v) {
  k.resize(rows, cols);
  v.resize(rows, cols);
  for (Mat<T>* m : {&k, &v})
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t e = 0; e < cols; ++e) (*m)(i, e) = static_cast<T>(*p++);
  return p;
}
}  // namespace

template <class T>
ContextParallelTransformer<T>::ContextParallelTransformer(const TransformerModel<T>& model, Communicator& comm,
                                                          ShardPlan chunks)
    : model_(model), comm_(comm), chunks_(std::move(chunks)) {
  if (chunks_.ranks() != 2 * comm_.size())
    throw InputError("context parallelism over " + std::to_string(comm_.size()) + " ranks needs " +
                     std::to_string(2 * comm_.size()) + " chunks, the plan has " + std::to_string(chunks_.ranks()));
}

template <class T>
std::vector<int> ContextParallelTransformer<T>::chunks_of(int rank) const {
  return {rank, 2 * comm_.size() - 1 - rank};
}

template <class T>
std::vector<Mat<T>> ContextParallelTransformer<T>::layers(const TokenBatch& prompt, int64_t max_new_tokens) {
  // Every check that can fail runs on every rank before the first collective.
  check_prefill_args(prompt, max_new_tokens, prompt.length);
  const ModelConfig& cfg = model_.config();
  validate_tokens(cfg, prompt.ids);
  const int64_t B = prompt.batch, N = prompt.length, L = cfg.n_layers, H = cfg.n_attn_heads,
                Hkv = cfg.n_attn_kv_heads, Da = cfg.attn_head_dim(), kvw = cfg.kv_width();
  if (chunks_.end(chunks_.ranks() - 1) != N)
    throw InputError("the chunks cover " + std::to_string(chunks_.end(chunks_.ranks() - 1)) +
                     " positions, the prompt has " + std::to_string(N));
  const int R = comm_.size(), r = comm_.rank();
  batch_ = B;
  capacity_ = N + max_new_tokens;
  pieces_.clear();
  std::vector<Mat<T>> x;
  for (int c : chunks_of(r)) {
    Piece p;
    p.begin = chunks_.begin(c);
    p.n = chunks_.length(c);
    p.k.resize(L);
    p.v.resize(L);
    pieces_.push_back(std::move(p));
    x.push_back(model_.embed(prompt.slice(chunks_.begin(c), chunks_.length(c))));
  }
  const double scale = 1.0 / std::sqrt(static_cast<double>(Da));
  for (int64_t l = 0; l < L; ++l) {
    std::vector<Mat<T>> q(2);
    std::vector<AttentionAccumulator> acc;
    for (int i = 0; i < 2; ++i) {
      model_.attention_inputs(l, x[i], B, pieces_[i].n, pieces_[i].begin, q[i], pieces_[i].k[l], pieces_[i].v[l]);
      acc.emplace_back(B, pieces_[i].n, pieces_[i].begin, H, Da);
    }
    // Ring: at step s this rank holds the keys and values of rank (r - s) mod R.
    std::vector<double> block;
    for (int i = 0; i < 2; ++i) pack(pieces_[i].k[l], pieces_[i].v[l], block);
    for (int s = 0; s < R; ++s) {
      const int src = ((r - s) % R + R) % R;
      const double* p = block.data();
      for (int c : chunks_of(src)) {
        Mat<T> k, v;
        p = unpack(p, B * chunks_.length(c), kvw, k, v);
        for (int i = 0; i < 2; ++i) acc[i].add(q[i], k, v, chunks_.length(c), chunks_.begin(c), Hkv, scale);
      }
      if (s + 1 < R) {
        const int next_src = ((r - s - 1) % R + R) % R;
        int64_t rows = 0;
        for (int c : chunks_of(next_src)) rows += B * chunks_.length(c);
        std::vector<double> in(2 * rows * kvw);
        comm_.sendrecv(block.data(), static_cast<int64_t>(block.size() * sizeof(double)), (r + 1) % R, in.data(),
                       static_cast<int64_t>(in.size() * sizeof(double)), (r - 1 + R) % R, "ring_kv");
        block.swap(in);
      }
    }
    for (int i = 0; i < 2; ++i) x[i] = model_.layer_finish(l, x[i], acc[i].template result<T>());
  }
  return x;
}

template <class T>
Mat<T> ContextParallelTransformer<T>::prefill(const TokenBatch& prompt, int64_t max_new_tokens) {
  const std::vector<Mat<T>> x = layers(prompt, max_new_tokens);
  const ModelConfig& cfg = model_.config();
  const int64_t B = prompt.batch, N = prompt.length, L = cfg.n_layers, kvw = cfg.kv_width();
  const int r = comm_.rank();
  // The last position is the last row of chunk 2R - 1: rank 0's second piece.
  std::vector<double> buf(B * cfg.dim);
  if (r == 0)
    for (int64_t b = 0; b < B; ++b)
      for (int64_t e = 0; e < cfg.dim; ++e) buf[b * cfg.dim + e] = static_cast<double>(x[1](b * pieces_[1].n + pieces_[1].n - 1, e));
  comm_.broadcast(buf.data(), static_cast<int64_t>(buf.size() * sizeof(double)), 0, "last_hidden");
  Mat<T> last(B, cfg.dim);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t e = 0; e < cfg.dim; ++e) last(b, e) = static_cast<T>(buf[b * cfg.dim + e]);
  // Rank 0 keeps the generated tokens' keys and values.
  if (r == 0) {
    Piece g;
    g.begin = N;
    g.k.assign(L, Mat<T>(0, kvw));
    g.v.assign(L, Mat<T>(0, kvw));
    pieces_.push_back(std::move(g));
  }
  position_ = N;
  return model_.lm_head(last);
}

template <class T>
Mat<T> ContextParallelTransformer<T>::decode_step(const std::vector<int64_t>& tokens) {
  const ModelConfig& cfg = model_.config();
  const TokenBatch tb = check_decode_args(tokens, batch_, position_, capacity_);
  const int64_t B = batch_, pos = position_, H = cfg.n_attn_heads, Hkv = cfg.n_attn_kv_heads,
                Da = cfg.attn_head_dim();
  const double scale = 1.0 / std::sqrt(static_cast<double>(Da));
  const bool keeper = comm_.rank() == 0;  // holds the generated tokens' keys and values
  const int64_t gen = keeper ? pieces_.back().n : 0;
  Mat<T> x = model_.embed(tb);
  for (int64_t l = 0; l < cfg.n_layers; ++l) {
    Mat<T> q, k, v;
    model_.attention_inputs(l, x, B, 1, pos, q, k, v);
    if (keeper) {  // append one row per sequence to the generated piece ([batch * gen] sequence-major)
      Piece& g = pieces_.back();
      Mat<T> nk(B * (gen + 1), k.cols()), nv(B * (gen + 1), v.cols());
      for (int64_t b = 0; b < B; ++b) {
        nk.middleRows(b * (gen + 1), gen) = g.k[l].middleRows(b * gen, gen);
        nv.middleRows(b * (gen + 1), gen) = g.v[l].middleRows(b * gen, gen);
        nk.row(b * (gen + 1) + gen) = k.row(b);
        nv.row(b * (gen + 1) + gen) = v.row(b);
      }
      g.k[l] = std::move(nk);
      g.v[l] = std::move(nv);
    }
    AttentionAccumulator acc(B, 1, pos, H, Da);
    for (size_t i = 0; i < pieces_.size(); ++i) {
      const bool generated = keeper && i + 1 == pieces_.size();
      acc.add(q, pieces_[i].k[l], pieces_[i].v[l], generated ? gen + 1 : pieces_[i].n, pieces_[i].begin, Hkv, scale);
    }
    std::vector<double> mine, all;
    acc.partials(mine);
    all.resize(mine.size() * comm_.size());
    comm_.allgather(mine.data(), static_cast<int64_t>(mine.size() * sizeof(double)), all.data(), "decode_partial");
    x = model_.layer_finish(l, x, attention_combine<T>(all, comm_.size(), B, H, Da));
  }
  if (keeper) pieces_.back().n = gen + 1;
  position_ = pos + 1;
  return model_.lm_head(x);
}

template <class T>
Mat<T> ContextParallelTransformer<T>::forward(const TokenBatch& tokens) {
  const std::vector<Mat<T>> x = layers(tokens, 0);
  const ModelConfig& cfg = model_.config();
  const int R = comm_.size();
  const int64_t B = tokens.batch, N = tokens.length, V = cfg.vocab_size;
  int64_t most = 0;  // rows of a rank's two chunks, padded to the largest
  for (int j = 0; j < R; ++j) {
    int64_t rows = 0;
    for (int c : chunks_of(j)) rows += chunks_.length(c);
    most = std::max(most, rows);
  }
  std::vector<double> mine(B * most * V, 0.0), all(mine.size() * R);
  int64_t at = 0;
  for (int i = 0; i < 2; ++i) {
    const Mat<T> logits = model_.lm_head(x[i]);
    for (int64_t b = 0; b < B; ++b)
      for (int64_t t = 0; t < pieces_[i].n; ++t)
        for (int64_t e = 0; e < V; ++e) mine[(b * most + at + t) * V + e] = static_cast<double>(logits(b * pieces_[i].n + t, e));
    at += pieces_[i].n;
  }
  comm_.allgather(mine.data(), static_cast<int64_t>(mine.size() * sizeof(double)), all.data(), "logits");
  Mat<T> out(B * N, V);
  for (int j = 0; j < R; ++j) {
    int64_t off = 0;
    for (int c : chunks_of(j)) {
      for (int64_t b = 0; b < B; ++b)
        for (int64_t t = 0; t < chunks_.length(c); ++t)
          for (int64_t e = 0; e < V; ++e)
            out(b * N + chunks_.begin(c) + t, e) = static_cast<T>(all[((j * B + b) * most + off + t) * V + e]);
      off += chunks_.length(c);
    }
  }
  position_ = 0;  // no decoding from a forward
  batch_ = 0;
  return out;
}

template <class T>
void ContextParallelTransformer<T>::skip_positions(int64_t n) {
  if (batch_ == 0) throw std::logic_error("ContextParallelTransformer::skip_positions before prefill");
  if (n < 0 || position_ + n > capacity_)
    throw std::logic_error("ContextParallelTransformer::skip_positions past the capacity");
  if (comm_.rank() == 0) {  // the keeper: n zero rows a sequence appended to the generated piece
    Piece& g = pieces_.back();
    for (size_t l = 0; l < g.k.size(); ++l) {
      Mat<T> nk = Mat<T>::Zero(batch_ * (g.n + n), g.k[l].cols()), nv = nk;
      for (int64_t b = 0; b < batch_; ++b) {
        nk.middleRows(b * (g.n + n), g.n) = g.k[l].middleRows(b * g.n, g.n);
        nv.middleRows(b * (g.n + n), g.n) = g.v[l].middleRows(b * g.n, g.n);
      }
      g.k[l] = std::move(nk);
      g.v[l] = std::move(nv);
    }
    g.n += n;
  }
  position_ += n;
}

template <class T>
MemoryBreakdown ContextParallelTransformer<T>::memory() const {
  MemoryBreakdown m;
  m.weights = model_.weights().bytes();
  for (const Piece& p : pieces_)
    for (size_t l = 0; l < p.k.size(); ++l)
      m.kv_cache += static_cast<int64_t>((p.k[l].size() + p.v[l].size()) * sizeof(T));
  return m;
}

template class ContextParallelTransformer<float>;
template class ContextParallelTransformer<double>;

}  // namespace yoco::dist
