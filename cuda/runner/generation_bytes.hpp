#pragma once
// Device bytes of a generation on the CUDA runners, by the runners' own
// buffers: the bf16 weights, caches for prompt + gen tokens of `batch`
// sequences, the activation buffers of a prefill step and of the decode step,
// the cuBLAS workspace. One definition for three users: the runners'
// yoco_generation_device_bytes / transformer_generation_device_bytes (what the
// sweep compares with the free memory before a point), and the calibrated
// cost model (bench/analytic/calibrated_model.cpp: memory as the runners allocate
// it, for any preset, length and batch). Plain C++ (no CUDA), in double so that
// no size overflows. Keep in step with the buffers of
// the YOCO runner, cuda/runner/yoco_*.cpp (allocate_generation, prepare_decode_buffers,
// self_decoder_chunk and the mixers, cross_decoder_step) and of
// the Transformer runner, baselines/transformer_*.cpp (activations(), prefill()).
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "config.hpp"
#include "ops/gemm_swiglu_plan.hpp"
#include "param_layout.hpp"
#include "runner/launch_count.hpp"
#include "runner/sublayer_buffers.hpp"

namespace yoco::cuda {

inline constexpr int64_t kCublasWorkspaceBytes = int64_t{32} << 20;  // each runner's, in its arena

struct GenerationBytes {
  double weights = 0;      // bf16 parameters
  double caches = 0;       // KV caches (the Transformer's every layer, YOCO's one global cache)
  double state = 0;        // YOCO's self-decoder: gRet states (+ a deferred step's records) or SWA windows
  double activations = 0;  // a prefill step's and the decode step's buffers, workspaces, cuBLAS's
  double total() const { return weights + caches + state + activations; }
};

// Rows of each sequence a prefill step takes: batch x n <= chunk, n >= 1.
inline double prefill_rows_per_sequence(double batch, double prompt, double chunk) {
  return std::min(prompt, std::max(1.0, std::floor(chunk / batch)));
}

// The gRet chunk kernel's workspace a prefill keeps: `workspace_of(rows)` for a
// step of that many rows a sequence, the largest of the full steps' and the
// shorter last one's. The plan follows the rows, and a ragged last step's
// plan may want more (yoco-3b's shapes do not; 4 heads of 128 on 132 SMs at a
// 32,768-row step do); the runner's scratch keeps the largest, and
// reserve_generation allocates both.
template <class WorkspaceOf>
double gret_prefill_workspace_bytes(double batch, double prompt, double chunk, WorkspaceOf&& workspace_of) {
  const double n = prefill_rows_per_sequence(batch, prompt, chunk), last = std::fmod(prompt, n);
  const double full = static_cast<double>(workspace_of(n));
  return last >= 1 ? std::max(full, static_cast<double>(workspace_of(last))) : full;
}

// Rows of the FFN's W1|W3 output ([rows, 2F] bf16) a generation keeps: the
// most rows of any FFN call that takes the pair (ops/ffn_up.hpp) -- a
// prefill step's FFN block (the full steps and the shorter last one), unless
// every block of that step takes the fused kernel (`fused`: asked for and the
// device runs it; gemm_swiglu::fused_on_every_block), and where the decode
// step shares the prefill's buffers (the Transformer's runner) its `batch`
// rows unless they fuse. The runners allocate by the same rule, step by step
// (the scratch keeps the largest).
inline double ffn_w13_rows(const ModelConfig& c, double batch, double prompt, double chunk, double ffn_rows,
                           bool fused, bool decode_shares) {
  const double n = prefill_rows_per_sequence(batch, prompt, chunk);
  auto takes_pair = [&](double rows) -> double {
    if (rows < 1) return 0;
    const double block = ffn_rows > 0 ? std::min(rows, ffn_rows) : rows;
    const bool all_fused =
        fused && gemm_swiglu::fused_on_every_block(static_cast<int64_t>(std::min(rows, 1e15)),
                                                   static_cast<int64_t>(std::min(ffn_rows, 1e15)), c.dim, c.hidden_dim);
    return all_fused ? 0 : block;
  };
  double r = std::max(takes_pair(batch * n), takes_pair(batch * std::fmod(prompt, n)));
  if (decode_shares) r = std::max(r, takes_pair(batch));
  return r;
}

// YOCO (gRet or SWA self-decoder). gret_chunk_workspace: the chunk kernel's
// workspace for a prefill step (gret_chunk_workspace_bytes of the plan the
// library picks on the device); gret_pending_per_layer: the decode step's
// records beside each state (gret_decode_state_extra_bytes; 0 for the eager
// step, the default). Both 0 for SWA. batched_global_kv: the prefill step's
// global K/V projected for the whole batch at once into a rows buffer, then
// written into each sequence's cache (GlobalKvProjection::batched, batch > 1).
// ffn_rows: the FFN's row block (ffn_row_block_from_env; 0: the whole step).
// delta_in_normed: the runner's layout (launch_count.hpp, kDeltaInNormedRows;
// false prices runs made before it). ffn_up_fused: the runner asked for the
// fused W1|W3 + SwiGLU kernel on a device it runs on (ops/ffn_up.hpp): the
// W1|W3 output is ffn_w13_rows' (none where every step fuses).
// shared_sublayers: one buffer for a step's mixer, FFN and global K/V rows
// (kSharedSublayerBuffers, runner/sublayer_buffers.hpp: the largest of them, at
// the full step or the shorter last one, whichever needs more), else a buffer each.
inline GenerationBytes yoco_generation_bytes(const ModelConfig& c, double batch, double prompt, double gen,
                                             double chunk, double gret_chunk_workspace, double gret_pending_per_layer,
                                             bool batched_global_kv = kBatchedGlobalKvByDefault,
                                             double ffn_rows = 0, bool delta_in_normed = kDeltaInNormedRows,
                                             bool ffn_up_fused = false,
                                             bool shared_sublayers = kSharedSublayerBuffers) {
  const bool gret = c.self_decoder() == SelfDecoderKind::gret;
  const double d = static_cast<double>(c.dim), F = static_cast<double>(c.hidden_dim),
               V = static_cast<double>(c.vocab_size), Hs = static_cast<double>(c.n_self_heads),
               D = static_cast<double>(c.self_head_dim()), qw = static_cast<double>(c.q_width()),
               kvw = static_cast<double>(c.kv_width()), W = static_cast<double>(c.window()),
               Ls = static_cast<double>(c.n_self_layers());
  const double n = prefill_rows_per_sequence(batch, prompt, chunk), rows = batch * n, SW = (gret ? 4 : 3) * d;
  // residual, normed (and the sublayers' delta, in the normed rows or beside:
  // kDeltaInNormedRows); fused projection, mixer output; token ids; the FFN's
  // W1|W3 output and hidden for a block of rows.
  double per_row = 4 * d + (delta_in_normed ? 0 : 2 * d) + 2 * d + 2 * SW + 2 * d + 8;
  double extra = (ffn_rows > 0 ? std::min(rows, ffn_rows) : rows) * 2 * F +
                 ffn_w13_rows(c, batch, prompt, chunk, ffn_rows, ffn_up_fused, false) * 4 * F;
  if (gret) {
    per_row += 8 * Hs;  // gate logits and log-decays, fp32
    extra += gret_chunk_workspace;
  } else {
    extra += batch * (W - 1 + n) * 2 * d * 2 + 24 * batch;  // the window buffer, chunk start/length
  }
  if (batched_global_kv && batch > 1) extra += rows * 2 * kvw * 2 + (gret ? 8 * batch : 0);  // rows; chunk start
  if (shared_sublayers) {
    // The same rows and small buffers; the mixer's, the FFN's and the K/V rows' pieces in one buffer.
    per_row = 4 * d + (delta_in_normed ? 0 : 2 * d) + 2 * d + 8;
    // (Clamped where int64 byte counts of a piece stay far from overflow; no real step comes near.)
    const auto i64 = [](double x) { return static_cast<int64_t>(std::min(x, 1e12)); };
    auto step_bytes = [&](double steps_n) -> double {
      const double R = batch * steps_n;
      if (R < 1) return 0;
      const double block = ffn_rows > 0 ? std::min(R, ffn_rows) : R;
      const bool all_fused = ffn_up_fused && gemm_swiglu::fused_on_every_block(i64(R), i64(ffn_rows), c.dim, c.hidden_dim);
      const sublayer::Mixer m =
          sublayer::mixer(gret, i64(R), c.dim, c.n_self_heads, gret ? 0 : i64(batch * (W - 1 + steps_n)));
      const sublayer::Ffn f = sublayer::ffn(all_fused ? 0 : i64(block), i64(block), c.hidden_dim);
      const int64_t kv = batched_global_kv && batch > 1 ? sublayer::kv_rows_bytes(i64(R), c.kv_width()) : 0;
      return static_cast<double>(sublayer::bytes(m, f, kv));
    };
    extra = std::max(step_bytes(n), step_bytes(std::fmod(prompt, n))) +
            (gret ? gret_chunk_workspace : 24 * batch) + (batched_global_kv && batch > 1 && gret ? 8 * batch : 0);
  }
  // The decode step's buffers (and the early exit's): B rows of everything, logits, split-KV partials.
  const double step =
      batch * (4 * d + 2 * d * 2 + 2 * 2 * std::max(qw, d) + 2 * SW + 8 * Hs + 4 * kvw + 6 * F + 4 * V + 8) +
      4 * batch * 128 * (std::max(qw, d) + 2 * std::max(static_cast<double>(c.n_attn_heads), Hs));
  GenerationBytes g;
  g.weights = 2.0 * static_cast<double>(param_count(c));
  g.caches = batch * (prompt + gen) * 2 * kvw * 2;
  g.state = gret ? Ls * (batch * Hs * D * D * 4 + gret_pending_per_layer) : Ls * batch * W * 2 * d * 2;
  g.activations = 16 * batch + rows * per_row + extra + step + static_cast<double>(kCublasWorkspaceBytes);
  return g;
}

// The GQA Transformer baseline.
// ffn_up_fused: as for YOCO (the decode step shares the prefill's FFN buffers here).
inline GenerationBytes transformer_generation_bytes(const ModelConfig& c, double batch, double prompt, double gen,
                                                    double chunk, bool ffn_up_fused = false) {
  const double d = static_cast<double>(c.dim), F = static_cast<double>(c.hidden_dim),
               V = static_cast<double>(c.vocab_size), qw = static_cast<double>(c.q_width()),
               kvw = static_cast<double>(c.kv_width()), L = static_cast<double>(c.n_layers);
  const double rows = batch * prefill_rows_per_sequence(batch, prompt, chunk);
  const double per_row = 4 * d + 2 * d + 2 * (qw + 2 * kvw) + 2 * qw + 2 * d + 2 * F + 8;
  const double w13 = ffn_w13_rows(c, batch, prompt, chunk, 0, ffn_up_fused, true) * 4 * F;
  // The decode step's own: last rows, logits, dense q, split-KV partials (<= 128 splits of H x (Da + 2) floats).
  const double step = batch * (2 * d + 4 * V + 2 * qw + 4 * 128 * (qw + 2.0 * c.n_attn_heads)) + 16 * batch;
  GenerationBytes g;
  g.weights = 2.0 * static_cast<double>(param_count(c));
  g.caches = L * batch * (prompt + gen) * 2 * kvw * 2;
  g.activations = rows * per_row + w13 + step + static_cast<double>(kCublasWorkspaceBytes);
  return g;
}

}  // namespace yoco::cuda
