// The YOCO runner's cross-decoder (runner/yoco_cuda_model.hpp): its layers over the one global cache,
// and the step of one query per sequence (the prefill's early exit, every decode step) with the LM head.
#include "runner/yoco_cuda_model.hpp"

#include "attention/cache_ops.hpp"
#include "ops/elementwise.hpp"

namespace yoco::cuda::yoco_runner {

void YocoCudaModel::cross_decoder(Residual& r, bf16* h, bf16* q, bf16* a, bf16* ffn_in, bf16* ffn_hidden,
                                  const std::function<void(bf16* q, bf16* out)>& attend) {
  NvtxRange range("cross-decoder");
  for (int64_t l = 0; l < Lc_; ++l) {
    NvtxRange layer(cross_names_[l]);
    const CrossLayerWeights& w = cross_w_[l];
    norm(r, w.mixer_norm, h);
    check_gemm(gemm_.linear(h, r.rows, d_, w.q, qw_, q, stream_), "cross-decoder q_proj");
    attend(q, a);
    check_gemm(gemm_.linear(a, r.rows, qw_, w.out, d_, r.delta, stream_), "cross-decoder out_proj");
    r.pending = true;
    norm(r, w.ffn.final_norm, h);
    ffn(w.ffn, h, r.rows, SublayerOut::into_delta(r), ffn_in, ffn_hidden);
    r.pending = true;
  }
  norm(r, final_norm_, h);
}

void YocoCudaModel::cross_decoder_step(Residual& r, int64_t batch, const StepBuffers& b) {
  const DecodeAttentionShape shape = cross_decode_shape(batch);
  const bf16* k = kv_.as<bf16>();
  float* ws = b.workspace;
  bf16* h = b.h;
  float* logits = b.logits;
  cross_decoder(r, h, b.q, b.o, b.ffn_in, b.ffn_hidden, [&](bf16* qv, bf16* out) {
    check_cuda(launch_rope_at(qv, batch, qw_, H_, Da_, positions_.as<int64_t>(), 1, cross_freq_.as<double>(),
                              RopeLayout::interleaved, 1.0, stream_),
               "cross-decoder RoPE q");
    check_cuda(launch_flash_decode(qv, k, k + kvw_, lengths_.as<int64_t>(), shape, cross_splits_, ws, out, stream_),
               "cross-decoder FlashDecoding over the global cache");
    if (link_) {
      const DecodePartials parts = decode_partials(shape, cross_splits_, ws);
      link_->attention_across(parts.part_o, parts.part_lse, batch, H_, cross_splits_, Da_, out, "cross_partial",
                              stream_);
    }
  });
  check_gemm(gemm_.linear_f32(h, batch, d_, lm_head_, V_, logits, stream_), "LM head");
  logits_rows_ = batch;
}

}  // namespace yoco::cuda::yoco_runner
