// The Transformer runner's prefill (the prompt in chunks, each chunk's queries at their absolute
// positions over the cache rows before them) and its full forward (baselines/transformer_cuda_runner.hpp).
#include "transformer_cuda_runner.hpp"

#include <limits>

#include "attention/cache_ops.hpp"
#include "errors.hpp"
#include "inference_checks.hpp"
#include "ops/elementwise.hpp"
#include "ops/gemm_swiglu_plan.hpp"
#include "runner/generation_bytes.hpp"
#include "token_batch.hpp"

namespace yoco::cuda::transformer_runner {

void TransformerCudaModel::take_ring_shard(const char* what, int64_t length) {
  const RingShard sh = checked_ring_shard(*link_, what, length);  // a refused prompt leaves the generation as it is
  drop_generation();
  ring_ = sh;
  row0_ = length - ring_.rows();
}

void TransformerCudaModel::prepare_decode_buffers(int64_t B, int64_t rows) {
  scratch_.i64("positions", B);
  scratch_.i64("lengths", B);
  scratch_.bf16("last rows", B * d_);
  scratch_.f32("logits", B * V_);
  // Splits: once per generation, for the longest length the caches can hold.
  const DecodeAttentionShape ds = decode_shape(B);
  int splits = std::max(1, choose_decode_splits(ds, rows, device_sm_count()));
  // Sharded, decode's attention always leaves split partials for the combine across ranks.
  if (link_) splits = std::max(splits, 2);
  if (splits != decode_splits_) ++cache_generation_;  // a launch shape of the decode graph
  decode_splits_ = splits;
  scratch_.bf16("decode q", B * qw_);
  scratch_.f32("flash-decode workspace", decode_workspace_floats(ds, decode_splits_));
  if (link_) scratch_.i64("decode write rows", B);
}

Activations TransformerCudaModel::prefill_activations(int64_t B, int64_t N, int64_t prefill_chunk) {
  const int64_t n_max = link_ ? ring_.rows() : cache_plan::prefill_tokens_per_sequence(prefill_chunk, B, N);
  // The FFN's W1|W3 output for every call of this generation that takes the pair (the
  // formula's ffn_w13_rows: prefill steps, the ragged last one, the decode steps' B rows).
  const int64_t w13 = static_cast<int64_t>(
      link_ ? ffn_w13_rows(cfg_, static_cast<double>(B), static_cast<double>(n_max), static_cast<double>(B * n_max), 0,
                           ffn_fused_, true)
            : ffn_w13_rows(cfg_, static_cast<double>(B), static_cast<double>(N), static_cast<double>(prefill_chunk), 0,
                           ffn_fused_, true));
  return activations(B * n_max, w13);
}

void TransformerCudaModel::reserve_generation(int64_t batch, int64_t length, int64_t max_new_tokens, int64_t prefill_chunk) {
  // As the YOCO runner's (cuda/runner/yoco_prefill.cpp): sharded, each prefill takes its shard and
  // drops the generation; a refused shape is the prefill's to refuse.
  if (link_ || !prefill_shape_valid(batch, length, max_new_tokens, prefill_chunk)) return;
  try {
    // In the prefill's order: the caches, the step's buffers, the chunk ranges, the decode step's.
    allocate_caches(batch, length + max_new_tokens);
    prefill_activations(batch, length, prefill_chunk);
    scratch_.i64("prefill q_start|q_len|write start", 3 * batch);
    prepare_decode_buffers(batch, length + max_new_tokens);
    // The host's buffers of a step's tokens and ranges, and their pinned staging.
    const int64_t n_max = cache_plan::prefill_tokens_per_sequence(prefill_chunk, batch, length);
    host_ids_.resize(static_cast<size_t>(batch * n_max));
    host_range_.resize(static_cast<size_t>(3 * batch));
    token_upload_.reserve(batch * n_max);
    range_upload_.reserve(3 * batch);
  } catch (const DeviceOutOfMemory&) {
    drop_generation();
    scratch_.clear();  // as prefill's: the next attempt starts from an empty arena
    throw;
  } catch (...) {
    drop_generation();
    throw;
  }
}

void TransformerCudaModel::prefill(const std::vector<int64_t>& tokens, int64_t batch, int64_t length,
                                   int64_t max_new_tokens, int64_t prefill_chunk) {
  // Messages and their order as the YOCO runner's (cuda/runner/yoco_prefill.cpp).
  if (batch < 1) throw InputError("prefill needs a batch of at least one sequence");
  check_token_count("prefill", tokens.size(), batch, length);
  TokenBatch shape_only;  // check_prefill_args reads the shape only
  shape_only.batch = batch;
  shape_only.length = length;
  check_prefill_args(shape_only, max_new_tokens, prefill_chunk);
  if (max_new_tokens > std::numeric_limits<int64_t>::max() - length)
    throw InputError("prompt + tokens to generate overflow");
  validate_tokens(cfg_, tokens);
  if (link_) take_ring_shard("prefill", length);

  NvtxRange range("prefill");
  const int64_t B = batch, N = length, capacity = N + max_new_tokens;
  // Sharded: this rank's two chunks as one step (ring attention in every
  // layer), its cache rows (the keeper's with room for the generated ones).
  const int64_t rows = link_ ? ring_.rows() + (ring_.keeper() ? max_new_tokens : 0) : capacity;
  // Each step: n_max tokens of every sequence, batch x n_max <= prefill_chunk.
  const int64_t n_max = link_ ? ring_.rows() : cache_plan::prefill_tokens_per_sequence(prefill_chunk, B, N);
  try {
    allocate_caches(B, rows);  // keeps the previous generation's of the same shape, else drops it first
    const Activations a = prefill_activations(B, N, prefill_chunk);
    int64_t* range_dev = link_ ? nullptr : scratch_.i64("prefill q_start|q_len|write start", 3 * B);
    prepare_decode_buffers(B, rows);
    int64_t* positions = scratch_.i64("positions", B);
    int64_t* lengths = scratch_.i64("lengths", B);
    bf16* last = scratch_.bf16("last rows", B * d_);
    float* logits = scratch_.f32("logits", B * V_);

    if (link_) {
      // The last position is on the keeper: its logits go to every rank.
      ring_chunk(a, B, tokens, N, Head::last_rows, last, logits);
      link_->hidden_from(ring::keeper(), logits, B * V_, stream_);
    }
    host_ids_.resize(static_cast<size_t>(B * n_max));
    host_range_.resize(static_cast<size_t>(3 * B));
    for (int64_t s = 0; !link_ && s < N; s += n_max) {
      NvtxRange chunk_range("prefill chunk");
      const int64_t n = std::min(n_max, N - s);
      for (int64_t b = 0; b < B; ++b) {
        std::copy_n(tokens.begin() + (b * N + s), n, host_ids_.begin() + b * n);
        host_range_[static_cast<size_t>(b)] = s;          // q_start
        host_range_[static_cast<size_t>(B + b)] = n;      // q_len
        host_range_[static_cast<size_t>(2 * B + b)] = s;  // the cache write's first row
      }
      token_upload_.upload(host_ids_.data(), B * n, a.tokens, stream_);
      range_upload_.upload(host_range_.data(), 3 * B, range_dev, stream_);
      const bool has_last = s + n == N;
      run_chunk(a, B, n, s, range_dev, range_dev + B, range_dev + 2 * B, has_last ? Head::last_rows : Head::none, last,
                logits);
    }
    check_cuda(launch_set_positions(positions, lengths, B, N, stream_), "set decode positions");
    batch_ = B;
    position_ = N;
    capacity_ = capacity;
  } catch (const DeviceOutOfMemory&) {
    drop_generation();
    scratch_.clear();  // the next attempt (e.g. a smaller batch) starts from an empty arena
    throw;
  } catch (...) {
    drop_generation();
    throw;
  }
}

std::vector<float> TransformerCudaModel::forward(const std::vector<int64_t>& tokens, int64_t batch, int64_t length) {
  if (batch < 1 || length < 1) throw InputError("forward needs at least one token");
  check_token_count("forward", tokens.size(), batch, length);
  validate_tokens(cfg_, tokens);
  if (link_) take_ring_shard("forward", length);

  NvtxRange range("forward");
  // Sharded: this rank's two chunks, ring attention in every layer, then
  // every rank's logits gathered.
  const int64_t B = batch, N = length, n = link_ ? ring_.rows() : N, R = B * n;
  std::vector<float> out;
  try {
    allocate_caches(B, n);  // drops any generation in progress; a cache of exactly this rank's tokens
    // One step of R rows (the forward): the W1|W3 output unless it fuses.
    const Activations a = activations(R, ffn_fused_ && gemm_swiglu::fused_on_every_block(R, 0, d_, F_) ? 0 : R);
    float* logits = scratch_.f32("logits", R * V_);
    if (link_) {
      ring_chunk(a, B, tokens, N, Head::all_rows, nullptr, logits);
      float* all = scratch_.f32("forward logits of every rank", B * N * V_);
      link_->gather_ring_rows(logits, all, B, V_ * 4, stream_);
      logits = all;
    } else {
      int64_t* range_dev = scratch_.i64("prefill q_start|q_len|write start", 3 * B);
      host_range_.assign(static_cast<size_t>(3 * B), 0);
      host_ids_.resize(static_cast<size_t>(R));
      for (int64_t b = 0; b < B; ++b) {
        host_range_[static_cast<size_t>(B + b)] = n;  // q_len; q_start and the cache write's first row are 0
        std::copy_n(tokens.begin() + b * N, n, host_ids_.begin() + b * n);
      }
      token_upload_.upload(host_ids_.data(), R, a.tokens, stream_);
      range_upload_.upload(host_range_.data(), 3 * B, range_dev, stream_);
      run_chunk(a, B, n, 0, range_dev, range_dev + B, range_dev + 2 * B, Head::all_rows, nullptr, logits);
    }
    out = download_floats(logits, B * N * V_, stream_);
  } catch (...) {
    drop_generation();
    scratch_.clear();
    throw;
  }
  drop_generation();
  scratch_.clear();  // [B N, V] logits and B N-row temporaries: not kept for later calls
  return out;
}

}  // namespace yoco::cuda::transformer_runner
