#include "yoco_sharded.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "inference_checks.hpp"
#include "partial_attention.hpp"

namespace yoco::dist {

namespace {

// The self-decoder's exchange with the ranks before this one, over `comm`.
template <class T>
class ShardExchange final : public SequenceExchange<T> {
 public:
  ShardExchange(Communicator& comm, const ShardPlan& plan, const ModelConfig& cfg)
      : comm_(comm), plan_(plan), cfg_(cfg) {}

  void gret_states_in(int64_t layer, const std::vector<T>& log_decay, std::vector<Mat<T>>& states) const override {
    const int64_t pairs = static_cast<int64_t>(states.size()), D = cfg_.self_head_dim(), width = 1 + D * D;
    std::vector<double> mine(pairs * width), all(pairs * width * comm_.size());
    for (int64_t i = 0; i < pairs; ++i) {
      mine[i * width] = static_cast<double>(log_decay[i]);
      for (int64_t e = 0; e < D * D; ++e) mine[i * width + 1 + e] = static_cast<double>(states[i].data()[e]);
    }
    comm_.allgather(mine.data(), bytes(mine), all.data(), "gret_state");
    // S_in(r) = sum_{j < r} (decay of ranks j+1 .. r-1) S_loc(j), as a running scan in rank order.
    for (int64_t i = 0; i < pairs; ++i) {
      Mat<double> s = Mat<double>::Zero(D, D);
      for (int j = 0; j < comm_.rank(); ++j) {
        const double* p = &all[(j * pairs + i) * width];
        s = std::exp(p[0]) * s + Eigen::Map<const Mat<double>>(p + 1, D, D);
      }
      states[i] = s.template cast<T>();
    }
    (void)layer;
  }

  void swa_previous(int64_t layer, const Mat<T>& k, const Mat<T>& v, int64_t batch, int64_t n,
                    std::vector<Mat<T>>& prev_k, std::vector<Mat<T>>& prev_v) const override {
    const int64_t W1 = cfg_.window() - 1, d = cfg_.dim, width = batch * W1 * 2 * d;
    // This rank's last min(n, W - 1) rows of k and v per sequence, padded to W - 1.
    std::vector<double> mine(width, 0.0), all(width * comm_.size());
    const int64_t m = std::min(n, W1);
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t i = 0; i < m; ++i)
        for (int64_t e = 0; e < d; ++e) {
          const int64_t row = b * n + n - m + i;
          mine[((b * W1 + i) * 2 + 0) * d + e] = static_cast<double>(k(row, e));
          mine[((b * W1 + i) * 2 + 1) * d + e] = static_cast<double>(v(row, e));
        }
    if (W1 > 0) comm_.allgather(mine.data(), bytes(mine), all.data(), "swa_window");
    const int r = comm_.rank();
    const int64_t pos0 = plan_.begin(r), first = std::max<int64_t>(0, pos0 - W1);
    prev_k.assign(batch, Mat<T>(pos0 - first, d));
    prev_v.assign(batch, Mat<T>(pos0 - first, d));
    for (int j = 0; j < r; ++j) {
      const int64_t mj = std::min(plan_.length(j), W1), tail0 = plan_.end(j) - mj;  // rank j sent [tail0, end_j)
      for (int64_t t = std::max(first, tail0); t < plan_.end(j); ++t)
        for (int64_t b = 0; b < batch; ++b)
          for (int64_t e = 0; e < d; ++e) {
            const int64_t i = t - tail0;
            prev_k[b](t - first, e) = static_cast<T>(all[j * width + ((b * W1 + i) * 2 + 0) * d + e]);
            prev_v[b](t - first, e) = static_cast<T>(all[j * width + ((b * W1 + i) * 2 + 1) * d + e]);
          }
    }
    (void)layer;
  }

 private:
  static int64_t bytes(const std::vector<double>& v) { return static_cast<int64_t>(v.size() * sizeof(double)); }
  Communicator& comm_;
  const ShardPlan& plan_;
  const ModelConfig& cfg_;
};

}  // namespace

template <class T>
ShardedYoco<T>::ShardedYoco(const YocoModel<T>& model, Communicator& comm, ShardPlan plan)
    : model_(model), comm_(comm), plan_(std::move(plan)) {
  if (plan_.ranks() != comm_.size())
    throw InputError("the shard plan has " + std::to_string(plan_.ranks()) + " ranks, the communicator " +
                     std::to_string(comm_.size()));
}

template <class T>
Mat<T> ShardedYoco<T>::cross_decoder(Mat<T> x, int64_t pos) {
  const ModelConfig& cfg = model_.config();
  const int64_t H = cfg.n_attn_heads, Da = cfg.attn_head_dim();
  std::vector<const Mat<T>*> kp(batch_), vp(batch_);
  for (int64_t b = 0; b < batch_; ++b) {
    kp[b] = &cache_.k_hat[b];
    vp[b] = &cache_.v_hat[b];
  }
  const double scale = 1.0 / std::sqrt(static_cast<double>(Da));
  for (int64_t l = 0; l < cfg.n_cross_layers(); ++l) {
    const Mat<T> q = model_.cross_query(l, x, batch_, 1, pos);
    std::vector<double> mine;
    attention_partial<T>(q, kp, vp, local_rows_, H, cfg.n_attn_kv_heads, Da, scale, mine);
    std::vector<double> all(mine.size() * comm_.size());
    comm_.allgather(mine.data(), static_cast<int64_t>(mine.size() * sizeof(double)), all.data(), "cross_partial");
    x = model_.cross_finish(l, x, attention_combine<T>(all, comm_.size(), batch_, H, Da));
  }
  return model_.lm_head(x);
}

template <class T>
Mat<T> ShardedYoco<T>::shard_self_decoder(const TokenBatch& prompt, int64_t extra_rows, YocoCache<T>& cache) {
  const ModelConfig& cfg = model_.config();
  const int64_t B = prompt.batch, N = prompt.length;
  if (plan_.end(plan_.ranks() - 1) != N)
    throw InputError("the shard plan covers " + std::to_string(plan_.end(plan_.ranks() - 1)) +
                     " positions, the prompt has " + std::to_string(N));
  const int r = comm_.rank();
  const int64_t pos0 = plan_.begin(r), n = plan_.length(r);
  cache = YocoCache<T>{};
  cache.batch = B;
  cache.capacity = N + extra_rows;
  const int64_t Ls = cfg.n_self_layers(), D = cfg.self_head_dim(), Hs = cfg.n_self_heads;
  if (cfg.self_decoder() == SelfDecoderKind::gret) {
    cache.gret_state.assign(Ls, std::vector<Mat<T>>(B * Hs, Mat<T>::Zero(D, D)));
  } else {
    cache.swa_k.assign(Ls, std::vector<Mat<T>>(B, Mat<T>::Zero(cfg.window(), cfg.dim)));
    cache.swa_v = cache.swa_k;
  }
  const int64_t rows_cap = n + (last_rank() ? extra_rows : 0);
  cache.k_hat.assign(B, Mat<T>::Zero(rows_cap, cfg.kv_width()));
  cache.v_hat.assign(B, Mat<T>::Zero(rows_cap, cfg.kv_width()));

  const ShardExchange<T> exchange(comm_, plan_, cfg);
  Mat<T> x = model_.embed(prompt.slice(pos0, n));
  for (int64_t l = 0; l < Ls; ++l)
    x = model_.self_layer(l, x, B, n, pos0, GretParadigm::chunkwise, &cache, &exchange);
  Mat<T> k, v;
  model_.global_kv(x, B, n, pos0, k, v);
  for (int64_t b = 0; b < B; ++b) {
    cache.k_hat[b].topRows(n) = k.middleRows(b * n, n);
    cache.v_hat[b].topRows(n) = v.middleRows(b * n, n);
  }
  return x;
}

template <class T>
Mat<T> ShardedYoco<T>::prefill(const TokenBatch& prompt, int64_t max_new_tokens) {
  // Every check that can fail runs on every rank before the first collective:
  // a rank that threw alone would leave the others waiting in it.
  check_prefill_args(prompt, max_new_tokens, prompt.length);
  const ModelConfig& cfg = model_.config();
  validate_tokens(cfg, prompt.ids);
  const int64_t B = prompt.batch, N = prompt.length, n = plan_.length(comm_.rank());
  batch_ = B;
  // This shard's rows of the global cache; the last rank's also the generated ones.
  const Mat<T> x = shard_self_decoder(prompt, max_new_tokens, cache_);
  local_rows_ = n;
  // The last position's hidden state, from the last rank to every rank.
  Mat<T> last(B, cfg.dim);
  std::vector<double> buf(B * cfg.dim);
  if (last_rank())
    for (int64_t b = 0; b < B; ++b)
      for (int64_t e = 0; e < cfg.dim; ++e) buf[b * cfg.dim + e] = static_cast<double>(x(b * n + n - 1, e));
  comm_.broadcast(buf.data(), static_cast<int64_t>(buf.size() * sizeof(double)), comm_.size() - 1, "last_hidden");
  for (int64_t b = 0; b < B; ++b)
    for (int64_t e = 0; e < cfg.dim; ++e) last(b, e) = static_cast<T>(buf[b * cfg.dim + e]);
  position_ = N;
  cache_.position = N;
  return cross_decoder(last, N - 1);
}

template <class T>
Mat<T> ShardedYoco<T>::decode_step(const std::vector<int64_t>& tokens) {
  const ModelConfig& cfg = model_.config();
  const TokenBatch tb = check_decode_args(tokens, batch_, position_, cache_.capacity);
  validate_tokens(cfg, tokens);  // on every rank: only the last one embeds them
  const int64_t pos = position_;
  std::vector<double> buf(batch_ * cfg.dim);
  if (last_rank()) {
    // The self-decoder where the final states are; the new global row on this shard.
    Mat<T> x = model_.embed(tb);
    for (int64_t l = 0; l < cfg.n_self_layers(); ++l)
      x = model_.self_layer(l, x, batch_, 1, pos, GretParadigm::recurrent, &cache_);
    Mat<T> k, v;
    model_.global_kv(x, batch_, 1, pos, k, v);
    for (int64_t b = 0; b < batch_; ++b) {
      cache_.k_hat[b].row(local_rows_) = k.row(b);
      cache_.v_hat[b].row(local_rows_) = v.row(b);
      for (int64_t e = 0; e < cfg.dim; ++e) buf[b * cfg.dim + e] = static_cast<double>(x(b, e));
    }
    ++local_rows_;
  }
  comm_.broadcast(buf.data(), static_cast<int64_t>(buf.size() * sizeof(double)), comm_.size() - 1, "last_hidden");
  Mat<T> x(batch_, cfg.dim);
  for (int64_t b = 0; b < batch_; ++b)
    for (int64_t e = 0; e < cfg.dim; ++e) x(b, e) = static_cast<T>(buf[b * cfg.dim + e]);
  position_ = pos + 1;
  cache_.position = position_;
  return cross_decoder(x, pos);
}

template <class T>
Mat<T> ShardedYoco<T>::forward(const TokenBatch& tokens) {
  if (tokens.batch < 1 || tokens.length < 1) throw InputError("forward needs at least one token");
  const ModelConfig& cfg = model_.config();
  validate_tokens(cfg, tokens.ids);
  const int R = comm_.size(), r = comm_.rank();
  const int64_t B = tokens.batch, N = tokens.length, pos0 = plan_.begin(r), n = plan_.length(r),
                kvw = cfg.kv_width(), V = cfg.vocab_size;
  int64_t most = 0;
  for (int j = 0; j < R; ++j) most = std::max(most, plan_.length(j));
  YocoCache<T> cache;
  Mat<T> x = shard_self_decoder(tokens, 0, cache);
  // The global K-hat / V-hat, gathered once: [B, most, 2 kvw] a rank (padded).
  const int64_t width = B * most * 2 * kvw;
  std::vector<double> mine(width, 0.0), all(width * R);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t i = 0; i < n; ++i)
      for (int64_t e = 0; e < kvw; ++e) {
        mine[((b * most + i) * 2 + 0) * kvw + e] = static_cast<double>(cache.k_hat[b](i, e));
        mine[((b * most + i) * 2 + 1) * kvw + e] = static_cast<double>(cache.v_hat[b](i, e));
      }
  comm_.allgather(mine.data(), static_cast<int64_t>(mine.size() * sizeof(double)), all.data(), "kv_gather");
  std::vector<Mat<T>> ks(B, Mat<T>(pos0 + n, kvw)), vs(B, Mat<T>(pos0 + n, kvw));
  std::vector<const Mat<T>*> kp(B), vp(B);
  for (int j = 0; j <= r; ++j)
    for (int64_t b = 0; b < B; ++b)
      for (int64_t i = 0; i < plan_.length(j); ++i)
        for (int64_t e = 0; e < kvw; ++e) {
          ks[b](plan_.begin(j) + i, e) = static_cast<T>(all[j * width + ((b * most + i) * 2 + 0) * kvw + e]);
          vs[b](plan_.begin(j) + i, e) = static_cast<T>(all[j * width + ((b * most + i) * 2 + 1) * kvw + e]);
        }
  for (int64_t b = 0; b < B; ++b) kp[b] = &ks[b], vp[b] = &vs[b];
  for (int64_t l = 0; l < cfg.n_cross_layers(); ++l) x = model_.cross_layer(l, x, B, n, pos0, kp, vp, pos0 + n);
  const Mat<T> local = model_.lm_head(x);
  // Every rank's logits ([B, most, V] a rank, padded) into [B * N, V] rows b * N + t.
  std::vector<double> lmine(B * most * V, 0.0), lall(B * most * V * R);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t i = 0; i < n; ++i)
      for (int64_t e = 0; e < V; ++e) lmine[(b * most + i) * V + e] = static_cast<double>(local(b * n + i, e));
  comm_.allgather(lmine.data(), static_cast<int64_t>(lmine.size() * sizeof(double)), lall.data(), "logits");
  Mat<T> out(B * N, V);
  for (int j = 0; j < R; ++j)
    for (int64_t b = 0; b < B; ++b)
      for (int64_t i = 0; i < plan_.length(j); ++i)
        for (int64_t e = 0; e < V; ++e)
          out(b * N + plan_.begin(j) + i, e) = static_cast<T>(lall[(j * B * most + b * most + i) * V + e]);
  return out;
}

template <class T>
void ShardedYoco<T>::skip_positions(int64_t n) {
  if (batch_ == 0) throw std::logic_error("ShardedYoco::skip_positions before prefill");
  if (n < 0 || position_ + n > cache_.capacity) throw std::logic_error("ShardedYoco::skip_positions past the capacity");
  position_ += n;
  cache_.position = position_;
  if (last_rank()) local_rows_ += n;  // the skipped rows stay zero: timing only
}

template <class T>
MemoryBreakdown ShardedYoco<T>::memory() const {
  MemoryBreakdown m;
  m.weights = model_.weights().bytes();
  m.kv_cache = cache_.kv_cache_bytes();
  m.state = cache_.state_bytes();
  return m;
}

template class ShardedYoco<float>;
template class ShardedYoco<double>;

}  // namespace yoco::dist
