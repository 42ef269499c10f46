// The YOCO runner's decode step (runner/yoco_cuda_model.hpp): its buffers looked up before the
// enqueue, the step captured once into a CUDA graph and replayed (or eager), and the eager step of one
// rank of a sharded sequence.
#include "runner/yoco_cuda_model.hpp"

#include <chrono>

#include "attention/cache_ops.hpp"
#include "errors.hpp"
#include "gret/gret_gate.hpp"
#include "inference_checks.hpp"
#include "ops/elementwise.hpp"

namespace yoco::cuda::yoco_runner {

StepBuffers YocoCudaModel::prepare_decode_buffers(int64_t batch) {
  // Every buffer the step touches, at its final size, before any capture.
  StepBuffers b;
  b.tokens = scratch_.i64("step tokens", batch);
  b.x = scratch_.f32("step residual", batch * d_);
  b.delta = scratch_.bf16("step delta", batch * d_);
  b.h = scratch_.bf16("step normed", batch * d_);
  b.q = scratch_.bf16("step q", batch * std::max(qw_, d_));
  b.o = scratch_.bf16("step attention", batch * std::max(qw_, d_));
  b.proj = scratch_.bf16("step self proj", batch * self_width());
  b.z = scratch_.f32("step gate logits", batch * Hs_);
  b.log_gamma = scratch_.f32("step log decay", batch * Hs_);
  b.kv_row = scratch_.bf16("step kv row", batch * 2 * kvw_);
  b.ffn_in = scratch_.bf16("step ffn in", batch * 2 * F_);
  b.ffn_hidden = scratch_.bf16("step ffn hidden", batch * F_);
  b.workspace = scratch_.f32("decode workspace", decode_workspace_size(batch));
  b.logits = scratch_.f32("logits", batch * V_);
  return b;
}

void YocoCudaModel::choose_decode_gemms(int64_t batch, const StepBuffers& b) {
  // A batch of kLargeRows or more is in the prefill's row class: its algorithm, checked for these sizes.
  if (gemm_.algorithms() != GemmAlgorithms::tuned || batch >= GemmTuner::kLargeRows) return;
  // Every output is one of the step's buffers, which the step about to be captured writes before it
  // reads them (the prefill's logits have been read by then: a step replaces them anyway).
  auto ahead = [&](const bf16* x, int64_t m, int64_t k, const bf16* w, int64_t n, void* y, cudaDataType_t type,
                   const char* what) {
    check_gemm(gemm_.choose_ahead(x, m, k, w, n, y, type, stream_), what);
  };
  if (Ls_ > 0) {
    const SelfLayerWeights& s = self_w_[0];
    ahead(b.h, batch, d_, s.proj, self_width(), b.proj, CUDA_R_16BF,
          "self-decoder fused projection (chosen ahead)");
    if (gret()) ahead(b.h, batch, d_, s.gate_logits, Hs_, b.z, CUDA_R_32F, "self-decoder gt_proj (chosen ahead)");
    ahead(b.o, batch, d_, s.out, d_, b.delta, CUDA_R_16BF, "self-decoder out_proj (chosen ahead)");
  }
  // The FFN as ffn() runs it: in blocks of ffn_block(batch) rows, the same shapes in both decoders.
  if (Ls_ > 0 || Lc_ > 0) {
    const FfnWeights& f = Ls_ > 0 ? self_w_[0].ffn : cross_w_[0].ffn;
    const int64_t m = ffn_block(batch);
    ahead(b.h, m, d_, f.w13, 2 * F_, b.ffn_in, CUDA_R_16BF, "ffn W1|W3 (chosen ahead)");
    ahead(b.ffn_hidden, m, F_, f.w2, d_, b.delta, CUDA_R_16BF, "ffn W2 (chosen ahead)");
  }
  ahead(b.h, batch, d_, wkv_, 2 * kvw_, b.kv_row, CUDA_R_16BF, "global K/V projection (chosen ahead)");
  if (Lc_ > 0) {
    const CrossLayerWeights& c = cross_w_[0];
    ahead(b.h, batch, d_, c.q, qw_, b.q, CUDA_R_16BF, "cross-decoder q_proj (chosen ahead)");
    ahead(b.o, batch, qw_, c.out, d_, b.delta, CUDA_R_16BF, "cross-decoder out_proj (chosen ahead)");
  }
  ahead(b.h, batch, d_, lm_head_, V_, b.logits, CUDA_R_32F, "LM head (chosen ahead)");
}

void YocoCudaModel::enqueue_decode_step(int64_t batch, const StepBuffers& b) {
  Residual r;
  r.rows = batch;
  r.x = b.x;
  r.delta = b.delta;
  enqueue_self_decoder_step(batch, b, r);
  cross_decoder_step(r, batch, b);
  check_cuda(launch_advance_positions(positions_.as<int64_t>(), lengths_.as<int64_t>(), batch, stream_),
             "advance positions");
}

void YocoCudaModel::enqueue_self_decoder_step(int64_t batch, const StepBuffers& b, Residual& r) {
  const int64_t SW = self_width();
  const int64_t* pos = positions_.as<int64_t>();
  bf16 *h = b.h, *proj = b.proj, *o = b.o, *qd = b.q;
  const double* f = self_freq_.as<double>();
  check_cuda(launch_embedding(b.tokens, batch, embed_, d_,
                              static_cast<float>(std::sqrt(static_cast<double>(d_))), r.x, stream_),
             "embedding");
  for (int64_t l = 0; l < Ls_; ++l) {
    norm(r, self_w_[l].mixer_norm, h);
    // The split step's state update of the layer before reads k, v and log γ from proj and lg: done before the
    // projection and the log-decay overwrite them (a no-op for the other steps). Never join right before a
    // programmatic dependent launch: how a join's edge combines with a programmatic one is not documented.
    check_cuda(update_branches_.join(stream_), "join the gRet state update");
    check_gemm(gemm_.linear(h, batch, d_, self_w_[l].proj, SW, proj, stream_), "self-decoder fused projection");
    check_cuda(launch_rope_at(proj, batch, SW, Hs_, D_, pos, 1, f, RopeLayout::interleaved, 1.0, stream_), "self-decoder RoPE q");
    if (gret()) {
      float *z = b.z, *lg = b.log_gamma;
      check_gemm(gemm_.linear_f32(h, batch, d_, self_w_[l].gate_logits, Hs_, z, stream_), "self-decoder gt_proj");
      check_cuda(launch_rope_at(proj + d_, batch, SW, Hs_, D_, pos, 1, f, RopeLayout::interleaved,
                                1.0 / std::sqrt(static_cast<double>(D_)), stream_),
                 "self-decoder RoPE k");
      check_cuda(launch_gret_log_decay(z, Hs_, batch, Hs_, static_cast<float>(cfg_.gate_logit_normalizer), lg, stream_),
                 "self-decoder log decay");
      // A programmatic dependent of the log-decay kernel where the step allows it: that kernel touches neither
      // the state nor the step's records.
      check_cuda(launch_gret_decode_norm_gate(decode_, proj, proj + d_, proj + 2 * d_, SW, lg, gret_state(l),
                                              gret_pending(l), proj + 3 * d_, SW, eps_, o, batch, Hs_, D_, stream_,
                                              /*overlap_previous=*/true, &update_branches_),
                 "self-decoder gRet step + norm + gate");
    } else {
      check_cuda(launch_rope_at(proj + d_, batch, SW, Hs_, D_, pos, 1, f, RopeLayout::interleaved, 1.0, stream_),
                 "self-decoder RoPE k");
      bf16* ring = swa_ring(l);
      check_cuda(launch_cache_write_rows(proj + d_, SW, batch, 1, 2 * d_, pos, ring, W_, 2 * d_, W_, stream_),
                 "self-decoder ring append");
      // FlashDecoding reads dense q rows.
      check_cuda(cudaMemcpy2DAsync(qd, d_ * 2, proj, SW * 2, d_ * 2, batch, cudaMemcpyDeviceToDevice, stream_),
                 "self-decoder q rows");
      check_cuda(launch_flash_decode(qd, ring, ring + d_, ring_lengths(), swa_decode_shape(batch), swa_splits_,
                                     b.workspace, o, stream_),
                 "self-decoder SWA FlashDecoding over the ring");
    }
    check_gemm(gemm_.linear(o, batch, d_, self_w_[l].out, d_, r.delta, stream_), "self-decoder out_proj");
    r.pending = true;
    norm(r, self_w_[l].ffn.final_norm, h);
    ffn(self_w_[l].ffn, h, batch, SublayerOut::into_delta(r), b.ffn_in, b.ffn_hidden);
    r.pending = true;
  }
  // The new token's K-hat / V-hat: one row per sequence appended to the global cache.
  norm(r, kv_norm_, h);
  bf16* kvrow = b.kv_row;
  check_gemm(gemm_.linear(h, batch, d_, wkv_, 2 * kvw_, kvrow, stream_),
             "global K/V projection");
  check_cuda(launch_rope_at(kvrow, batch, 2 * kvw_, Hkv_, Da_, pos, 1, cross_freq_.as<double>(), RopeLayout::interleaved,
                            1.0, stream_),
             "global K RoPE");
  check_cuda(launch_cache_write_rows(kvrow, 2 * kvw_, batch, 1, 2 * kvw_, append_rows(), kv_.as<bf16>(), rows_,
                                     2 * kvw_, 0, stream_),
             "global K/V append");
  // The last layer's split-step state update ran beside the lines above; the step (and a capture) ends joined.
  check_cuda(update_branches_.join(stream_), "join the gRet state update");
}

void YocoCudaModel::set_sharded_positions(int64_t pos, int64_t visible_rows) {
  check_cuda(launch_set_positions(positions_.as<int64_t>(), nullptr, batch_, pos, stream_), "positions");
  check_cuda(launch_set_positions(lengths_.as<int64_t>(), nullptr, batch_, visible_rows, stream_), "visible rows");
  check_cuda(launch_set_positions(append_rows_.as<int64_t>(), nullptr, batch_, pos - row0_, stream_), "append rows");
  check_cuda(launch_set_positions(ring_lengths_.as<int64_t>(), nullptr, batch_, pos + 1, stream_), "ring lengths");
}

void YocoCudaModel::take_shard(const char* what, int64_t length) {
  const Shard sh = checked_shard(*link_, what, length);
  drop_generation();
  shard_ = sh;
}

void YocoCudaModel::sharded_decode_step(const StepBuffers& b) {
  const int64_t pos = position_;
  const bool last = shard_.last();
  // The last rank appends the new row: it sees its rows up to it; the others all theirs.
  set_sharded_positions(pos, last ? pos - row0_ + 1 : shard_.length);
  Residual r;
  r.rows = batch_;
  r.x = b.x;
  r.delta = b.delta;
  if (last) enqueue_self_decoder_step(batch_, b, r);  // where the final states / windows are
  link_->hidden_from(shard_.ranks - 1, r.x, batch_ * d_, stream_);
  r.pending = false;
  cross_decoder_step(r, batch_, b);
}

void YocoCudaModel::decode_step(const std::vector<int64_t>& tokens) {
  if (batch_ == 0) throw InputError("decode step before any prefill: prefill a prompt first");
  check_decode_args(tokens, batch_, position_, capacity_);
  validate_tokens(cfg_, tokens);
  NvtxRange range("decode step");
  try {
    const StepBuffers b = prepare_decode_buffers(batch_);  // allocated at the prefill: lookups here
    upload_.upload(tokens.data(), batch_, b.tokens, stream_);
    if (link_) {
      const auto t0 = std::chrono::steady_clock::now();
      sharded_decode_step(b);
      last_enqueue_s_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      ++position_;
      return;
    }
    // The graph stays valid while the batch, the caches and the buffers do.
    const StepGraphKey key{generation_, scratch_.version(), batch_};
    // Before the capture, and outside the enqueue time.
    if (graphs_ && !graph_.holds(key)) choose_decode_gemms(batch_, b);
    const auto t0 = std::chrono::steady_clock::now();
    graph_.run(stream_, key, graphs_, [&] {
      try {
        enqueue_decode_step(batch_, b);
      } catch (...) {
        // A fork recorded in a capture being abandoned is not there to join. An eager one ran, and what
        // the stream does next (a prefill zeroing the states it updates) must wait for it.
        cudaStreamCaptureStatus capture = cudaStreamCaptureStatusActive;
        const bool eager = cudaStreamIsCapturing(stream_, &capture) == cudaSuccess &&
                           capture == cudaStreamCaptureStatusNone;
        if (!eager || update_branches_.join(stream_) != cudaSuccess) update_branches_.forget();
        throw;
      }
    });
    last_enqueue_s_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    ++position_;
  } catch (const DeviceOutOfMemory&) {
    drop_generation();  // the contract: caches dropped, the model usable
    scratch_.clear();
    throw;
  }
}

}  // namespace yoco::cuda::yoco_runner
