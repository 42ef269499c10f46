// The YOCO runner's prefill (chunks of the prompt through the self-decoder, then the cross-decoder for
// the last position only: the early exit) and its full forward (every position through both), on one
// GPU or on one rank of a sharded sequence (runner/yoco_cuda_model.hpp).
#include "runner/yoco_cuda_model.hpp"

#include <climits>

#include "attention/cache_ops.hpp"
#include "attention/cache_plan.hpp"
#include "errors.hpp"
#include "inference_checks.hpp"
#include "ops/elementwise.hpp"

namespace yoco::cuda::yoco_runner {

void YocoCudaModel::reserve_generation(int64_t batch, int64_t length, int64_t max_new_tokens, int64_t prefill_chunk) {
  // Sharded, each prefill takes its shard and drops the generation; a refused shape is the prefill's to refuse.
  if (link_ || !prefill_shape_valid(batch, length, max_new_tokens, prefill_chunk)) return;
  try {
    // What prefill allocates, in its order: a prefill of this shape then keeps it all. Its steps: the
    // full one and the ragged last one (the chunk kernel's plan, and so its workspace, follows the rows).
    allocate_generation(batch, length + max_new_tokens, length + max_new_tokens);
    prepare_decode_buffers(batch);
    const int64_t chunk = cache_plan::prefill_tokens_per_sequence(prefill_chunk, batch, length);
    scratch_.i64("tokens", batch * chunk);
    host_ids_.resize(static_cast<size_t>(batch * chunk));
    upload_.reserve(batch * chunk);
    reserve_step_buffers(batch, chunk);
    reserve_step_buffers(batch, length - ((length - 1) / chunk) * chunk);
    capacity_ = 0;  // reserved, not prefilled: no decode step may run on it
  } catch (const DeviceOutOfMemory&) {
    drop_generation();
    scratch_.clear();  // as prefill's: the next attempt starts from an empty arena
    throw;
  } catch (...) {
    drop_generation();
    throw;
  }
}

void YocoCudaModel::prefill(const std::vector<int64_t>& tokens, int64_t batch, int64_t length, int64_t max_new_tokens,
                            int64_t prefill_chunk) {
  if (batch < 1) throw InputError("prefill needs a batch of at least one sequence");
  check_token_count("prefill", tokens.size(), batch, length);
  TokenBatch tb;
  tb.batch = batch;
  tb.length = length;
  check_prefill_args(tb, max_new_tokens, prefill_chunk);
  if (max_new_tokens > INT64_MAX - length) throw InputError("prompt + tokens to generate overflow");
  validate_tokens(cfg_, tokens);
  if (link_) {
    take_shard("prefill", length);
    row0_ = shard_.begin;  // this rank's cache rows start at its first position
  }
  NvtxRange range("prefill");
  try {
    // Sharded: this rank's positions, as one step (each layer meets the other
    // ranks' finished shards), its rows of the global K/V (the last rank's
    // with room for the generated ones).
    const int64_t begin = link_ ? row0_ : 0, end = link_ ? row0_ + shard_.length : length, held = end - begin;
    const int64_t rows = link_ ? held + (shard_.last() ? max_new_tokens : 0) : length + max_new_tokens;
    allocate_generation(batch, length + max_new_tokens, rows);
    // The decode step's buffers now, so that an out-of-memory shows at the
    // prefill and the first step allocates nothing.
    const StepBuffers step = prepare_decode_buffers(batch);
    const int64_t chunk = link_ ? held : cache_plan::prefill_tokens_per_sequence(prefill_chunk, batch, length);
    int64_t* tok = scratch_.i64("tokens", batch * chunk);
    host_ids_.resize(static_cast<size_t>(batch * chunk));
    int64_t* ids = host_ids_.data();
    for (int64_t s = begin; s < end; s += chunk) {
      NvtxRange c("prefill chunk at " + std::to_string(s));
      const int64_t n = std::min(chunk, end - s);
      for (int64_t b = 0; b < batch; ++b)
        std::copy_n(tokens.begin() + b * length + s, n, ids + b * n);
      upload_.upload(ids, batch * n, tok, stream_);
      self_decoder_chunk(tok, batch, n, s);
    }
    // Early exit: the cross-decoder for the last position of each sequence only.
    const int64_t n_last = held - ((held - 1) / chunk) * chunk;
    Residual r;
    r.rows = batch;
    r.x = step.x;
    r.delta = step.delta;
    if (!link_ || shard_.last())
      check_cuda(cudaMemcpy2DAsync(r.x, d_ * 4, scratch_.f32("residual", 0) + (n_last - 1) * d_, n_last * d_ * 4,
                                   d_ * 4, batch, cudaMemcpyDeviceToDevice, stream_),
                 "last positions of M");
    if (link_) {
      link_->hidden_from(shard_.ranks - 1, r.x, batch * d_, stream_);
      set_sharded_positions(length - 1, held);  // every row a rank holds is before the last position
    } else {
      check_cuda(launch_set_positions(positions_.as<int64_t>(), lengths_.as<int64_t>(), batch, length - 1, stream_),
                 "positions");
    }
    cross_decoder_step(r, batch, step);
    if (!link_)
      check_cuda(launch_set_positions(positions_.as<int64_t>(), lengths_.as<int64_t>(), batch, length, stream_),
                 "positions");
    position_ = length;
  } catch (const DeviceOutOfMemory&) {
    drop_generation();
    scratch_.clear();  // the next attempt (a smaller batch) starts from an empty arena
    throw;
  } catch (...) {
    drop_generation();  // no half-made generation may be decoded
    throw;
  }
}

std::vector<float> YocoCudaModel::forward(const std::vector<int64_t>& tokens, int64_t batch, int64_t length) {
  if (batch < 1 || length < 1) throw InputError("forward needs at least one token");
  check_token_count("forward", tokens.size(), batch, length);
  validate_tokens(cfg_, tokens);
  if (link_) {
    take_shard("forward", length);
    row0_ = 0;  // the whole global K/V gathers here: rows are positions
  }
  // Sharded: this rank's positions [begin, begin + n) through the model, the
  // global K/V of every rank gathered once for all cross layers (paper
  // appendix A), then every rank's logits gathered.
  const int64_t begin = link_ ? shard_.begin : 0, n = link_ ? shard_.length : length;
  NvtxRange range("forward");
  std::vector<float> out;
  try {
    allocate_generation(batch, length, length);
    const int64_t R = batch * n;
    int64_t* tok = scratch_.i64("tokens", R);
    std::vector<int64_t> ids(static_cast<size_t>(R));
    for (int64_t b = 0; b < batch; ++b) std::copy_n(tokens.begin() + b * length + begin, n, ids.begin() + b * n);
    upload_.upload(ids.data(), R, tok, stream_);
    self_decoder_chunk(tok, batch, n, begin);
    const int64_t kv_row = 2 * kvw_ * 2;  // bytes of a K-hat | V-hat row
    if (link_)
      link_->gather_rows(kv_.as<bf16>() + begin * 2 * kvw_, length, kv_.as<bf16>(), length, batch, kv_row, "kv_gather",
                         stream_);
    // The cross-decoder over every position (no early exit): causal flash
    // attention of all queries over the global cache.
    Residual r;
    r.rows = R;
    r.x = scratch_.f32("residual", R * d_);
    r.delta = scratch_.bf16("delta", R * d_);
    bf16* h = scratch_.bf16("normed", R * d_);
    bf16* q = scratch_.bf16("cross q", R * qw_);
    bf16* a = scratch_.bf16("cross attention", R * qw_);
    int64_t* zero = scratch_.i64("chunk start", batch);
    int64_t* len = scratch_.i64("chunk length", batch);
    check_cuda(launch_set_positions(zero, nullptr, batch, begin, stream_), "query start");
    check_cuda(launch_set_positions(len, nullptr, batch, n, stream_), "query length");
    const PrefillAttentionShape s = attention_shape(batch, H_, Hkv_, Da_, n, length, qw_, 2 * kvw_, 0);
    const bf16* k = kv_.as<bf16>();
    const StepWork work = step_work(batch, n);  // the self-decoder's, free again: its FFN pieces
    cross_decoder(r, h, q, a, work.w13, work.hidden, [&](bf16* qv, bf16* out) {
      check_cuda(launch_rope(qv, R, qw_, H_, Da_, begin, n, cross_freq_.as<double>(), RopeLayout::interleaved, stream_),
                 "cross-decoder RoPE q");
      check_cuda(launch_flash_prefill(qv, k, k + kvw_, zero, len, s, out, nullptr, stream_), "cross attention");
    });
    float* logits = scratch_.f32("forward logits", R * V_);
    check_gemm(gemm_.linear_f32(h, R, d_, lm_head_, V_, logits, stream_), "LM head");
    if (link_) {
      float* all = scratch_.f32("forward logits of every rank", batch * length * V_);
      link_->gather_rows(logits, n, all, length, batch, V_ * 4, "logits", stream_);
      logits = all;
    }
    out = download_floats(logits, batch * length * V_, stream_);
  } catch (const DeviceOutOfMemory&) {
    drop_generation();
    scratch_.clear();
    throw;
  } catch (...) {
    drop_generation();
    throw;
  }
  drop_generation();
  scratch_.clear();  // a forward's buffers scale with its length: give them back
  return out;
}

}  // namespace yoco::cuda::yoco_runner
