// The Transformer runner's decode step (baselines/transformer_cuda_runner.hpp): captured once into a
// CUDA graph and replayed (or eager), and the eager step of one rank of a sharded sequence.
#include "transformer_cuda_runner.hpp"

#include <chrono>

#include "attention/attention_merge.hpp"
#include "attention/cache_ops.hpp"
#include "errors.hpp"
#include "inference_checks.hpp"
#include "ops/elementwise.hpp"
#include "ops/gemm_swiglu_plan.hpp"

namespace yoco::cuda::transformer_runner {

void TransformerCudaModel::decode_step(const std::vector<int64_t>& tokens) {
  if (batch_ == 0) throw InputError("decode step before any prefill: prefill a prompt first");
  check_decode_args(tokens, batch_, position_, capacity_);
  validate_tokens(cfg_, tokens);
  NvtxRange range("decode step");
  try {
    if (link_) {
      const auto t0 = std::chrono::steady_clock::now();
      sharded_decode_step(tokens);
      last_enqueue_s_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    } else {
      graph_decode_step(tokens);
    }
    ++position_;
  } catch (const DeviceOutOfMemory&) {
    drop_generation();
    scratch_.clear();
    throw;
  } catch (...) {
    drop_generation();  // the device positions may or may not have advanced
    throw;
  }
}

void TransformerCudaModel::graph_decode_step(const std::vector<int64_t>& tokens) {
  const int64_t B = batch_;
  // Every buffer the step uses exists before the capture (same sizes as the
  // prefill's or smaller: nothing is allocated here after the first step).
  const DecodeBuffers d = decode_buffers(B);
  const Activations& a = d.a;
  int64_t *positions = d.positions, *lengths = d.lengths;
  float* logits = d.logits;

  token_upload_.upload(tokens.data(), B, a.tokens, stream_);  // outside the graph: new ids every step

  auto enqueue = [&] {
    check_cuda(launch_embedding(a.tokens, B, embedding_, d_, 1.0f, a.residual, stream_), "embedding");
    run_layers(a, B, [&](bf16* cache) {
      decode_rope_and_q(d, B);
      check_cuda(launch_cache_write_rows(a.qkv + qw_, qkv_w_, B, 1, 2 * kvw_, positions, cache, cache_rows_,
                                         2 * kvw_, 0, stream_),
                 "KV cache write");
      check_cuda(launch_flash_decode(d.q, cache, cache + kvw_, lengths, d.ds, d.splits, d.workspace, a.attn, stream_),
                 "flash decode attention");
    });
    residual_norm(a, final_norm_, B, "FFN residual + final norm");
    check_gemm(gemm_.linear_f32(a.normed, B, d_, output_, V_, logits, stream_), "LM head");
    check_cuda(launch_advance_positions(positions, lengths, B, stream_), "advance decode positions");
  };

  // Pointers and launch shapes come from the caches (generation: batch,
  // capacity, splits) and the scratch buffers (version).
  const StepGraphKey key{cache_generation_, scratch_.version(), B};
  // Before the capture, and outside the enqueue time.
  if (graphs_ && !graph_.holds(key)) choose_decode_gemms(a, B, logits);
  const auto t0 = std::chrono::steady_clock::now();
  graph_.run(stream_, key, graphs_, enqueue);
  last_enqueue_s_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

DecodeBuffers TransformerCudaModel::decode_buffers(int64_t B) {
  DecodeBuffers d;
  // B rows: the fused kernel where they are enough, else the prefill's W1|W3 buffer (>= B rows).
  d.a = activations(B, ffn_fused_ && gemm_swiglu::fused_on_every_block(B, 0, d_, F_) ? 0 : B);
  d.positions = scratch_.i64("positions", B);
  d.lengths = scratch_.i64("lengths", B);
  d.q = scratch_.bf16("decode q", B * qw_);
  d.logits = scratch_.f32("logits", B * V_);
  d.ds = decode_shape(B);
  d.splits = decode_splits_;
  d.workspace = scratch_.f32("flash-decode workspace", decode_workspace_floats(d.ds, d.splits));
  return d;
}

void TransformerCudaModel::choose_decode_gemms(const Activations& a, int64_t B, float* logits) {
  // A batch of kLargeRows or more is in the prefill's row class: its algorithm, checked for these sizes.
  if (gemm_.algorithms() != GemmAlgorithms::tuned || layers_.empty() || B >= GemmTuner::kLargeRows) return;
  // Every output is written by the step about to be captured before it reads it (the prefill's logits
  // have been read by then: a step replaces them anyway).
  const LayerWeights& w = layers_.front();
  auto ahead = [&](const bf16* x, int64_t k, const bf16* wt, int64_t n, void* y, cudaDataType_t type,
                   const char* what) {
    check_gemm(gemm_.choose_ahead(x, B, k, wt, n, y, type, stream_), what);
  };
  ahead(a.normed, d_, w.wqkv, qkv_w_, a.qkv, CUDA_R_16BF, "QKV projection (chosen ahead)");
  // With the residual added by the GEMMs, wo and W2 accumulate through cublasGemmEx: nothing to choose.
  if (!residual_in_gemm_)
    ahead(a.attn, qw_, w.wo, d_, a.delta, CUDA_R_16BF, "attention output projection (chosen ahead)");
  if (a.h13) ahead(a.normed, d_, w.w13, 2 * F_, a.h13, CUDA_R_16BF, "FFN W1|W3 (chosen ahead)");
  if (!residual_in_gemm_) ahead(a.act, F_, w.w2, d_, ffn_out(a), CUDA_R_16BF, "FFN W2 (chosen ahead)");
  ahead(a.normed, d_, output_, V_, logits, CUDA_R_32F, "LM head (chosen ahead)");
}

void TransformerCudaModel::decode_rope_and_q(const DecodeBuffers& d, int64_t B) {
  check_cuda(launch_rope_at(d.a.qkv, B, qkv_w_, H_ + Hkv_, Da_, d.positions, 1, rope_.as<double>(),
                            RopeLayout::half_split, 1.0, stream_),
             "RoPE on q and k");
  check_cuda(cudaMemcpy2DAsync(d.q, static_cast<size_t>(qw_) * sizeof(bf16), d.a.qkv,
                               static_cast<size_t>(qkv_w_) * sizeof(bf16), static_cast<size_t>(qw_) * sizeof(bf16),
                               static_cast<size_t>(B), cudaMemcpyDeviceToDevice, stream_),
             "copy q to a dense buffer");
}

void TransformerCudaModel::sharded_decode_step(const std::vector<int64_t>& tokens) {
  const int64_t B = batch_, pos = position_;
  const bool keeper = ring_.keeper();
  const DecodeBuffers d = decode_buffers(B);
  const Activations& a = d.a;
  int64_t* write_rows = scratch_.i64("decode write rows", B);
  // RoPE at the absolute position; the keeper appends the new key and value
  // (its local row) and sees its rows up to it, the others all theirs.
  check_cuda(launch_set_positions(d.positions, nullptr, B, pos, stream_), "set decode positions");
  check_cuda(launch_set_positions(d.lengths, nullptr, B, keeper ? pos - row0_ + 1 : ring_.rows(), stream_),
             "set visible rows");
  check_cuda(launch_set_positions(write_rows, nullptr, B, pos - row0_, stream_), "set the append row");
  token_upload_.upload(tokens.data(), B, a.tokens, stream_);
  // Every rank runs the layers on the new token (the same inputs, the same
  // kernels: the same hidden states); only the attention is split.
  check_cuda(launch_embedding(a.tokens, B, embedding_, d_, 1.0f, a.residual, stream_), "embedding");
  run_layers(a, B, [&](bf16* cache) {
    decode_rope_and_q(d, B);
    if (keeper)
      check_cuda(launch_cache_write_rows(a.qkv + qw_, qkv_w_, B, 1, 2 * kvw_, write_rows, cache, cache_rows_, 2 * kvw_,
                                         0, stream_),
                 "KV cache write");
    check_cuda(launch_flash_decode(d.q, cache, cache + kvw_, d.lengths, d.ds, d.splits, d.workspace, a.attn, stream_),
               "flash decode attention over this rank's rows");
    const DecodePartials parts = decode_partials(d.ds, d.splits, d.workspace);
    link_->attention_across(parts.part_o, parts.part_lse, B, H_, d.splits, Da_, a.attn, "decode_partial", stream_);
  });
  residual_norm(a, final_norm_, B, "FFN residual + final norm");
  check_gemm(gemm_.linear_f32(a.normed, B, d_, output_, V_, d.logits, stream_), "LM head");
}

}  // namespace yoco::cuda::transformer_runner
