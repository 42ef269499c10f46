// The YOCO runner's prefill step through the self-decoder (runner/yoco_cuda_model.hpp): the norms,
// the gRet or SWA mixer, the FFN in row blocks, a step's working set carved from one buffer, and the
// global K/V of the step's tokens written into the cache.
#include "runner/yoco_cuda_model.hpp"

#include "attention/cache_ops.hpp"
#include "gret/gret_chunk.hpp"
#include "gret/gret_gate.hpp"
#include "ops/elementwise.hpp"
#include "ops/ffn_up.hpp"

namespace yoco::cuda::yoco_runner {

void YocoCudaModel::norm(Residual& r, const bf16* w, bf16* out) {
  if (r.pending && r.second)
    check_cuda(launch_add2_rms_norm(r.x, r.delta, r.second, w, r.rows, d_, eps_, out, stream_),
               "add both sublayers + RMSNorm");
  else if (r.pending)
    check_cuda(launch_add_rms_norm(r.x, r.delta, w, r.rows, d_, eps_, out, stream_), "add + RMSNorm");
  else check_cuda(launch_rms_norm(r.x, w, r.rows, d_, eps_, out, stream_), "RMSNorm");
  r.pending = false;
  r.second = nullptr;
}

void YocoCudaModel::project_out(const bf16* a, int64_t rows, int64_t k, const bf16* w, const SublayerOut& out,
                                int64_t row0, const std::string& what) {
  if (out.residual) check_gemm(gemm_.accumulate_f32(a, rows, k, w, d_, out.residual + row0 * d_, stream_), what);
  else check_gemm(gemm_.linear(a, rows, k, w, d_, out.delta + row0 * d_, stream_), what);
}

void YocoCudaModel::ffn(const FfnWeights& w, const bf16* h, int64_t rows, const SublayerOut& out, bf16* h13,
                        bf16* a) {
  const int64_t block = ffn_block(rows);
  for (int64_t r0 = 0; r0 < rows; r0 += block) {
    const int64_t n = std::min(block, rows - r0);
    // h13 holds a block's rows (StepWork::w13, the step buffers' batch), or is null where the step fuses.
    check_gemm(ffn_up_swiglu(gemm_, h + r0 * d_, n, d_, w.w13, F_, h13, h13 ? block : 0, a, ffn_fused_, stream_, ffn_ctas_),
               "ffn W1|W3 + SwiGLU");
    project_out(a, n, F_, w.w2, out, r0, "ffn W2");
  }
}

YocoCudaModel::StepWork YocoCudaModel::step_work(int64_t batch, int64_t n) {
  const int64_t R = batch * n, block = ffn_block(R), w13_rows = ffn_w13_rows(R);
  const int64_t window_rows = gret() ? 0 : batch * (W_ - 1 + n);
  const int64_t kv_rows = batch > 1 && global_kv_ == GlobalKvProjection::batched ? R : 0;
  StepWork w;
  if (!shared_sublayers_) {  // a buffer each, by name (the layout before 2026-11-27)
    w.proj = scratch_.bf16("self qkvg", R * self_width());
    if (gret()) {
      w.gate_logits = scratch_.f32("self gate logits", R * Hs_);
      w.log_decay = scratch_.f32("self log decay", R * Hs_);
    } else {
      w.window = scratch_.bf16("swa window", window_rows * 2 * d_);
    }
    w.out = scratch_.bf16("self mixer out", R * d_);
    if (w13_rows > 0) w.w13 = scratch_.bf16("ffn in", w13_rows * 2 * F_);
    w.hidden = scratch_.bf16("ffn hidden", block * F_);
    if (kv_rows > 0) w.kv_rows = scratch_.bf16("global K/V rows", kv_rows * 2 * kvw_);
    return w;
  }
  const sublayer::Mixer m = sublayer::mixer(gret(), R, d_, Hs_, window_rows);
  const sublayer::Ffn f = sublayer::ffn(w13_rows, block, F_);
  auto* base = static_cast<unsigned char*>(
      scratch_.get("sublayers", sublayer::bytes(m, f, sublayer::kv_rows_bytes(kv_rows, kvw_))));
  w.proj = reinterpret_cast<bf16*>(base + m.proj);
  if (gret()) {
    w.gate_logits = reinterpret_cast<float*>(base + m.gate_logits);
    w.log_decay = reinterpret_cast<float*>(base + m.log_decay);
  } else {
    w.window = reinterpret_cast<bf16*>(base + m.window);
  }
  w.out = reinterpret_cast<bf16*>(base + m.out);
  if (w13_rows > 0) w.w13 = reinterpret_cast<bf16*>(base + f.w13);
  w.hidden = reinterpret_cast<bf16*>(base + f.hidden);
  if (kv_rows > 0) w.kv_rows = reinterpret_cast<bf16*>(base);
  return w;
}

GretChunkShape YocoCudaModel::gret_step_shape(int64_t batch, int64_t n) const {
  GretChunkShape shape;
  shape.batch = batch;
  shape.heads = Hs_;
  shape.head_dim = D_;
  shape.seq_len = n;
  shape.row_stride = self_width();
  return shape;
}

void YocoCudaModel::reserve_step_buffers(int64_t batch, int64_t n) {
  // self_decoder_chunk's requests and its mixers', in their order (the GPU test
  // AReservedGenerationIsKeptByItsPrefill fails where one is missing here).
  const int64_t R = batch * n;
  scratch_.f32("residual", R * d_);
  scratch_.bf16("normed", R * d_);
  step_work(batch, n);
  if (gret()) {
    const GretChunkShape shape = gret_step_shape(batch, n);
    const size_t ws_bytes =
        gret_chunk_workspace_bytes(shape, select_gret_chunk(shape, device_sm_count(), chunk_variant_));
    if (ws_bytes) scratch_.get("gret chunk workspace", static_cast<int64_t>(ws_bytes));
  } else {
    scratch_.i64("swa window start", batch);
    scratch_.i64("chunk start", batch);
    scratch_.i64("chunk length", batch);
  }
  if (batch > 1 && global_kv_ == GlobalKvProjection::batched) scratch_.i64("chunk start", batch);
}

void YocoCudaModel::gret_mixer_chunk(int64_t l, const bf16* h, int64_t batch, int64_t n, int64_t s,
                                     const StepWork& w, const SublayerOut& out) {
  const std::string p = self_prefix(l) + "mixer.";
  const int64_t R = batch * n, SW = self_width();
  bf16* qkvg = w.proj;
  float* z = w.gate_logits;
  float* lg = w.log_decay;
  bf16* o = w.out;
  check_gemm(gemm_.linear(h, R, d_, self_w_[l].proj, SW, qkvg, stream_), p + "q|k|v|g");
  // z in fp32: a bf16 z would shift log gamma by up to ~1.7 % (cuda/gret/gret_gate.hpp).
  check_gemm(gemm_.linear_f32(h, R, d_, self_w_[l].gate_logits, Hs_, z, stream_), p + "gt_proj");
  const double* f = self_freq_.as<double>();
  // q and k adjacent in each row: one pass, k scaled by D^-1/2 after its rotation.
  check_cuda(launch_rope(qkvg, R, SW, 2 * Hs_, D_, s, n, f, RopeLayout::interleaved, stream_,
                         1.0 / std::sqrt(static_cast<double>(D_)), /*unscaled_heads=*/Hs_),
             p + "RoPE q, k");
  check_cuda(launch_gret_log_decay(z, Hs_, R, Hs_, static_cast<float>(cfg_.gate_logit_normalizer), lg, stream_),
             p + "log decay");
  const GretChunkShape shape = gret_step_shape(batch, n);
  const GretChunkPlan plan = select_gret_chunk(shape, device_sm_count(), chunk_variant_);
  const size_t ws_bytes = gret_chunk_workspace_bytes(shape, plan);
  void* ws = ws_bytes ? scratch_.get("gret chunk workspace", static_cast<int64_t>(ws_bytes)) : nullptr;
  // The per-head norm and gate are part of the launch that writes the final o (kernel 6's epilogue, else a
  // kernel after the chunk).
  const GretNormGate norm_gate{qkvg + 3 * d_, SW, eps_};
  check_cuda(launch_gret_chunk(qkvg, qkvg + d_, qkvg + 2 * d_, lg, gret_state(l), o, shape, plan, ws, ws_bytes, stream_,
                               link_ ? nullptr : &norm_gate),
             p + "gRet chunk + norm + gate");
  // Sharded: the chunk kernel ran from a zero state; with the state entering
  // this shard (the scan over the lower ranks) it runs again, and its outputs
  // and final state are the unsharded ones. (A correction of o by exp(G_t) q_t
  // S_in would save this second pass: cuda/runner/NOTES-runners.md.)
  if (link_) {
    if (link_->gret_state_in(l, gret_state(l), lg, batch, n, Hs_, D_, stream_))
      check_cuda(launch_gret_chunk(qkvg, qkvg + d_, qkvg + 2 * d_, lg, gret_state(l), o, shape, plan, ws, ws_bytes,
                                   stream_, &norm_gate),
                 p + "gRet chunk + norm + gate from the incoming state");
    else
      check_cuda(launch_gret_norm_gate(o, norm_gate.g, SW, R, Hs_, D_, eps_, o, stream_), p + "norm + gate");
  }
  project_out(o, R, d_, self_w_[l].out, out, 0, p + "out_proj");
}

void YocoCudaModel::swa_mixer_chunk(int64_t l, const bf16* h, int64_t batch, int64_t n, int64_t s,
                                    const StepWork& w, const SublayerOut& out) {
  const std::string p = self_prefix(l) + "mixer.";
  const int64_t R = batch * n, SW = self_width();
  bf16* qkv = w.proj;
  bf16* o = w.out;
  check_gemm(gemm_.linear(h, R, d_, self_w_[l].proj, SW, qkv, stream_), p + "q|k|v");
  const double* f = self_freq_.as<double>();
  check_cuda(launch_rope(qkv, R, SW, 2 * Hs_, D_, s, n, f, RopeLayout::interleaved, stream_), p + "RoPE q, k");
  // The window a chunk's queries see: the ring's last W-1 positions before s,
  // unrolled in order, then the chunk's own keys. Masks are relative, so the
  // window buffer's row r stands for position first + r.
  const int64_t first = std::max<int64_t>(0, s - (W_ - 1)), prev = s - first, rows = prev + n;
  bf16* win = w.window;  // [batch, rows, 2d] of its [batch, W - 1 + n, 2d]
  int64_t* prev_dev = scratch_.i64("swa window start", batch);
  int64_t* chunk_start = scratch_.i64("chunk start", batch);
  int64_t* chunk_len = scratch_.i64("chunk length", batch);
  // Set by kernels: a pageable copy here would wait for the stream inside the timed prefill.
  check_cuda(launch_set_positions(prev_dev, nullptr, batch, prev, stream_), "window start");
  check_cuda(launch_set_positions(chunk_start, nullptr, batch, s, stream_), "chunk start");
  check_cuda(launch_set_positions(chunk_len, nullptr, batch, n, stream_), "chunk length");
  bf16* ring = swa_ring(l);
  // Sharded: the window before this shard's first position comes from the lower ranks, into the ring's slots.
  if (link_ && s == shard_.begin) link_->swa_window_in(l, qkv + d_, SW, batch, n, d_, W_, ring, stream_);
  check_cuda(launch_ring_gather(ring, 2 * d_, W_, batch, first, prev, 2 * d_, win, rows, 2 * d_, stream_),
             p + "window from the ring");
  check_cuda(launch_cache_write_rows(qkv + d_, SW, batch, n, 2 * d_, prev_dev, win, rows, 2 * d_, 0, stream_),
             p + "window: the chunk's keys");
  const PrefillAttentionShape a = attention_shape(batch, Hs_, Hs_, D_, n, rows, SW, 2 * d_, W_);
  check_cuda(launch_flash_prefill(qkv, win, win + d_, prev_dev, chunk_len, a, o, nullptr, stream_), p + "SWA attention");
  // Then the ring takes the chunk's last W positions (after the gather read it).
  check_cuda(launch_cache_write_rows(qkv + d_, SW, batch, n, 2 * d_, chunk_start, ring, W_, 2 * d_, W_, stream_),
             p + "ring update");
  project_out(o, R, d_, self_w_[l].out, out, 0, p + "out_proj");
}

void YocoCudaModel::self_decoder_chunk(const int64_t* tokens, int64_t batch, int64_t n, int64_t s) {
  const int64_t R = batch * n;
  Residual r;
  r.rows = R;
  r.x = scratch_.f32("residual", R * d_);
  // The sublayers' output (delta) shares the normed rows' buffer (issue 34:
  // 2d bytes a row off the step's working set, 0.2 GB at yoco-3b's 32K
  // chunk). Safe because each sublayer has read all of h before it writes
  // delta (the mixers' projections and the FFN's W1|W3 of a row block come
  // before their out_proj / W2 of those rows), and the add + RMSNorm that
  // reads delta and writes h reads a row whole before its block barrier and
  // writes it after (cuda/ops/elementwise.cu: rms_norm_kernel and rms_norm_cached_kernel alike).
  bf16* h = scratch_.bf16("normed", R * d_);
  static_assert(kDeltaInNormedRows, "the memory formula (generation_bytes.hpp) follows this layout");
  r.delta = h;
  const StepWork work = step_work(batch, n);
  // Each sublayer's output: into delta, or added to the residual by its output projection's GEMM.
  const SublayerOut out = residual_in_gemm_ ? SublayerOut{nullptr, r.x} : SublayerOut::into_delta(r);
  // The residual stored once a layer (YOCO_RESIDUAL_PER_LAYER, launch_count.hpp): the mixer's delta
  // stays in the normed rows through the FFN, the FFN's input goes into the hidden rows' buffer (the
  // W1|W3 GEMM reads it, then SwiGLU overwrites it) and W2 writes into the W1|W3 output's (dead after
  // SwiGLU). So only where the FFN runs whole, unfused (a fused block would read its input from the
  // buffer it writes), and the two buffers hold [R, d]: no new memory. Not with YOCO_FFN_ROWS set at all
  // (even where a step fits one block), so that the rows' notes and the cost model can say where it ran.
  const bool per_layer = residual_per_layer_ && !residual_in_gemm_ && !ffn_fused_ && ffn_rows_ == 0 &&
                         ffn_block(R) == R && ffn_w13_rows(R) == R && work.w13 && work.hidden && F_ >= d_;
  bf16* const ffn_in = per_layer ? work.hidden : h;
  const SublayerOut ffn_out = per_layer ? SublayerOut{work.w13, nullptr} : out;
  check_cuda(launch_embedding(tokens, R, embed_, d_,
                              static_cast<float>(std::sqrt(static_cast<double>(d_))), r.x, stream_),
             "embedding");
  {
    NvtxRange range("self-decoder");
    for (int64_t l = 0; l < Ls_; ++l) {
      NvtxRange layer(self_names_[l]);
      norm(r, self_w_[l].mixer_norm, h);
      if (gret()) gret_mixer_chunk(l, h, batch, n, s, work, out);
      else swa_mixer_chunk(l, h, batch, n, s, work, out);
      r.pending = out.residual == nullptr;
      if (per_layer) {
        check_cuda(launch_rms_norm_of_sum(r.x, r.delta, self_w_[l].ffn.final_norm, R, d_, eps_, ffn_in, stream_),
                   "RMSNorm of residual + mixer output");
        ++sums_peeked_;
      } else {
        norm(r, self_w_[l].ffn.final_norm, h);
      }
      ffn(self_w_[l].ffn, ffn_in, R, ffn_out, work.w13, work.hidden);
      r.pending = out.residual == nullptr;
      if (per_layer) r.second = ffn_out.delta;
    }
  }
  NvtxRange range("global K/V");
  norm(r, kv_norm_, h);  // leaves M in r.x
  const bf16* wkv = wkv_;  // [Wk; Wv]
  if (batch > 1 && global_kv_ == GlobalKvProjection::batched) {
    // One GEMM for the batch's rows, RoPE on K (position s + row % n), then
    // each sequence's n rows into its cache at s: 4 launches, not 2 a sequence.
    bf16* rows = work.kv_rows;
    int64_t* start = scratch_.i64("chunk start", batch);
    check_gemm(gemm_.linear(h, R, d_, wkv, 2 * kvw_, rows, stream_), "global K/V projection (batch)");
    check_cuda(launch_rope(rows, R, 2 * kvw_, Hkv_, Da_, s, n, cross_freq_.as<double>(), RopeLayout::interleaved, stream_),
               "global K RoPE (batch)");
    check_cuda(launch_set_positions(start, nullptr, batch, s - row0_, stream_), "chunk start");
    check_cuda(launch_cache_write_rows(rows, 2 * kvw_, batch, n, 2 * kvw_, start, kv_.as<bf16>(), rows_, 2 * kvw_, 0,
                                       stream_),
               "global K/V rows into the cache");
    return;
  }
  // One GEMM per sequence, straight into its cache rows (batch 1: no copy).
  for (int64_t b = 0; b < batch; ++b) {
    bf16* dst = kv_.as<bf16>() + (b * rows_ + s - row0_) * 2 * kvw_;
    check_gemm(gemm_.linear(h + b * n * d_, n, d_, wkv, 2 * kvw_, dst, stream_), "global K/V projection");
    check_cuda(launch_rope(dst, n, 2 * kvw_, Hkv_, Da_, s, n, cross_freq_.as<double>(), RopeLayout::interleaved, stream_),
               "global K RoPE");
  }
}

}  // namespace yoco::cuda::yoco_runner
