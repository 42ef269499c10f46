// The Transformer runner's sharded prefill (baselines/transformer_cuda_runner.hpp): a rank's two
// chunks of the prompt through every layer, each layer's attention by ring attention with causal load
// balancing (cuda/attention/ring_plan.hpp), the partials merged in fp32.
#include "transformer_cuda_runner.hpp"

#include "attention/attention_merge.hpp"
#include "attention/cache_ops.hpp"
#include "attention/ring_plan.hpp"
#include "ops/elementwise.hpp"

namespace yoco::cuda::transformer_runner {

void TransformerCudaModel::ring_chunk(const Activations& a, int64_t B, const std::vector<int64_t>& tokens, int64_t N,
                                      Head head, bf16* last, float* logits) {
  const int R = ring_.ranks, r = ring_.rank, C = 2 * R;
  const int64_t n0 = ring_.piece_length(0), n1 = ring_.piece_length(1), rows = B * (n0 + n1);
  const int64_t np[2] = {n0, n1}, row_off[2] = {0, B * n0};  // a piece's rows and its first activation row
  // Token ids piece-major.
  host_ids_.resize(static_cast<size_t>(rows));
  for (int p = 0; p < 2; ++p)
    for (int64_t b = 0; b < B; ++b)
      std::copy_n(tokens.begin() + (b * N + ring_.piece_begin(p)), np[p], host_ids_.begin() + row_off[p] + b * np[p]);
  token_upload_.upload(host_ids_.data(), rows, a.tokens, stream_);
  // [B] arrays on the device: slot p the piece's q_len, 2 + p its first cache
  // row, 4 + p C + c its queries' q_start over key chunk c (ring_plan.hpp).
  const int64_t slots = 4 + 2 * C;
  host_range_.assign(static_cast<size_t>(slots * B), 0);
  auto fill = [&](int64_t slot, int64_t value) {
    std::fill_n(host_range_.begin() + slot * B, B, value);
  };
  for (int p = 0; p < 2; ++p) {
    fill(p, np[p]);
    fill(2 + p, p == 0 ? 0 : n0);
    for (int c = 0; c <= ring_.chunk(p); ++c)
      fill(4 + p * C + c, ring::relative_q_start(ring_.piece_begin(p), ring_.chunk_begin(c)));
  }
  int64_t* table = scratch_.i64("ring q_len|write start|q_start", slots * B);
  range_upload_.upload(host_range_.data(), slots * B, table, stream_);

  int64_t most = 0, n_most = std::max(n0, n1);
  for (int j = 0; j < R; ++j) most = std::max(most, ring_.rows_of(j));
  const int64_t kv_row = 2 * kvw_;
  bf16* block[2] = {scratch_.bf16("ring K|V a", B * most * kv_row), scratch_.bf16("ring K|V b", B * most * kv_row)};
  bf16* part_o = scratch_.bf16("ring partial out", B * n_most * qw_);
  float* part_lse = scratch_.f32("ring partial lse", B * H_ * n_most);
  float* acc_o = scratch_.f32("ring running out", rows * qw_);
  float* acc_lse = scratch_.f32("ring running lse", B * H_ * (n0 + n1));

  check_cuda(launch_embedding(a.tokens, rows, embedding_, d_, 1.0f, a.residual, stream_), "embedding");
  run_layers(a, rows, [&](bf16* cache) {
    for (int p = 0; p < 2; ++p) {
      bf16* qkv = a.qkv + row_off[p] * qkv_w_;
      check_cuda(launch_rope(qkv, B * np[p], qkv_w_, H_ + Hkv_, Da_, ring_.piece_begin(p), np[p], rope_.as<double>(),
                             RopeLayout::half_split, stream_),
                 "RoPE on q and k");
      check_cuda(launch_cache_write_rows(qkv + qw_, qkv_w_, B, np[p], kv_row, table + (2 + p) * B, cache, cache_rows_,
                                         kv_row, 0, stream_),
                 "KV cache write");
      // This rank's block for the ring: its pieces' k | v rows, dense.
      check_cuda(cudaMemcpy2DAsync(block[0] + row_off[p] * kv_row, static_cast<size_t>(kv_row) * sizeof(bf16),
                                   qkv + qw_, static_cast<size_t>(qkv_w_) * sizeof(bf16),
                                   static_cast<size_t>(kv_row) * sizeof(bf16), static_cast<size_t>(B * np[p]),
                                   cudaMemcpyDeviceToDevice, stream_),
                 "the ring block");
    }
    bool first[2] = {true, true};
    int held = 0;  // which of the two blocks holds this step's keys and values
    for (int step = 0; step < R; ++step) {
      const int src = ring::source_at(r, step, R);
      int64_t key_row = 0;  // the key chunk's first row in the block
      for (int kp = 0; kp < 2; ++kp) {
        const int c = ring::chunk_of(src, kp, R);
        const int64_t nc = ring_.chunk_length(c);
        const bf16* keys = block[held] + key_row * kv_row;
        key_row += B * nc;
        for (int p = 0; p < 2; ++p) {
          const ring::Block kind = ring::block_kind(ring_.chunk(p), c);
          if (kind == ring::Block::skip) continue;
          PrefillAttentionShape shape;
          shape.batch = B;
          shape.n_heads = H_;
          shape.n_kv_heads = Hkv_;
          shape.head_dim = Da_;
          shape.q_rows = np[p];
          shape.capacity = nc;
          shape.q_stride = qkv_w_;
          shape.kv_stride = kv_row;
          shape.window = 0;
          shape.scale = attn_scale_;
          const bf16* q = a.qkv + row_off[p] * qkv_w_;
          const int64_t* q_start = table + (4 + p * C + c) * B;
          const int64_t* q_len = table + p * B;
          // The diagonal keeps the contract of every variant; a wholly visible earlier chunk has
          // queries past its rows, which v1 serves (flash_prefill.hpp).
          check_cuda(kind == ring::Block::diagonal
                         ? launch_flash_prefill(q, keys, keys + kvw_, q_start, q_len, shape, part_o, part_lse, stream_)
                         : launch_flash_prefill_v1(q, keys, keys + kvw_, q_start, q_len, shape, part_o, part_lse,
                                                   stream_),
                     "ring attention block");
          check_cuda(launch_attention_merge(part_o, part_lse, B, np[p], H_, Da_, first[p], acc_o + row_off[p] * qw_,
                                            acc_lse + H_ * row_off[p], a.attn + row_off[p] * qw_, stream_),
                     "ring attention merge");
          first[p] = false;
        }
      }
      if (step + 1 < R) {
        const int next = ring::source_at(r, step + 1, R);
        link_->ring_pass(block[held], B * ring_.rows_of(src) * kv_row * 2, block[1 - held],
                         B * ring_.rows_of(next) * kv_row * 2, stream_);
        held = 1 - held;
      }
    }
  });
  // The last position: piece 1's last row on the keeper (the others' rows there are no use).
  lm_head(a, B, rows, head, row_off[1] + n1 - 1, n1, last, logits);
}

}  // namespace yoco::cuda::transformer_runner
