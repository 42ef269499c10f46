#pragma once
// Host calls the CUDA runners make: kernel launches, cuBLAS calls, async
// copies and memsets, each of which costs the host a few microseconds to
// enqueue. On a large model the GPU is far behind the host and this cost
// hides; on a small one (or a prefill step of a few tokens per sequence) the
// GPU waits for the host, and the step takes calls x the host's cost of a
// call. One definition for the calibrated cost model
// (bench/analytic/calibrated_model.cpp: the host floor of a prefill, the host cost
// of a call fitted on the eager decode steps) and its tests, which hold the
// decode counts against the CUPTI launch counts of the committed sweep. Plain
// C++ (no CUDA), in double. Keep in step with the YOCO runner, cuda/runner/yoco_*.cpp
// (allocate_generation, self_decoder_chunk and the mixers, prefill,
// enqueue_decode_step, cross_decoder_step) and
// the Transformer runner, baselines/transformer_*.cpp (allocate_caches, run_layers,
// run_chunk, prefill, decode_step).
//
// Counted as the host makes them: a cuBLAS GEMM is one call (cuBLAS may add
// a split-K reduction kernel of its own: CUPTI counts it, the host does not
// launch it), FlashDecoding is two launches (split and combine; one when a
// single split covers the cache), gRet chunk's launches are its plan's (one
// kernel, or state pass + scan + fused pass over segments) and the norm +
// gate kernel after them unless the plan fuses it (gret_chunk_fuses_norm_gate).
// The decode counts are the default (eager) gRet step's: the split step
// (YOCO_GRET_DECODE=split) adds a state update a gRet layer, forked and
// joined with event records and waits.
#include "config.hpp"

namespace yoco::cuda {

struct RunnerLaunches {
  double prefill_step = 0;  // each prefill step (batch x n tokens)
  double prefill_once = 0;  // once a prefill: the generation's memsets, the last positions' head
  double decode_step = 0;   // one decode step (what a CUDA graph replays)
};

inline constexpr double kFlashDecodeLaunches = 2;  // split + combine (the caches of the sweep need splits)

// Whether YOCO's runner projects a prefill step's global K/V for the whole
// batch at once (GlobalKvProjection::batched, runner_support.hpp) unless told
// otherwise: the one definition the runner and the cost model share.
inline constexpr bool kBatchedGlobalKvByDefault = true;
// Whether YOCO's prefill step writes its sublayers' output (delta) into the
// normed rows' buffer rather than a buffer of its own (2d bytes a row; since
// 2026-11-27: runs before kept both, and their memory rows do not say so).
inline constexpr bool kDeltaInNormedRows = true;
// Whether YOCO's prefill step carves its sublayers' working sets (the mixer's,
// the FFN's, the global K/V rows) from one buffer of the largest rather than
// a buffer each (runner/sublayer_buffers.hpp; YOCO_SUBLAYER_BUFFERS=apart for
// the old layout). Memory rows say kSharedSublayerNote or kApartSublayerNote;
// rows made before the choice (2026-11-27, fourth session) say neither and
// held a buffer each.
inline constexpr bool kSharedSublayerBuffers = true;
inline constexpr const char* kSharedSublayerNote = "one buffer for the prefill's sublayers";
inline constexpr const char* kApartSublayerNote = "a buffer each for the prefill's sublayers";
// Whether the runners run the FFN's up half as one kernel (ops/gemm_swiglu.hpp)
// unless told otherwise (YOCO_FFN_FUSED, runner_support.hpp): not until it has
// run on a GPU and kept cuBLAS's pace. Rows made with it say kFfnUpFusedNote.
inline constexpr bool kFfnUpFusedByDefault = false;
// Which fused kernel an unset YOCO_FFN_FUSED means where kFfnUpFusedByDefault is true: its CTA pairs
// (GemmSwigluCtas::pair) or one CTA a tile. Off until the pairs have run (RUNS.md's rule).
inline constexpr bool kFfnUpPairsByDefault = false;
inline constexpr const char* kFfnUpFusedNote = "FFN up half fused";
// ... and with YOCO_FFN_FUSED=pairs, this right after it (the same memory and launches: the calibrated
// model prices both alike; the measured rows tell them apart).
inline constexpr const char* kFfnUpInCtaPairsNote = " in CTA pairs";
// Whether the runners' GEMMs take each shape's fastest cuBLASLt algorithm, timed at first use
// (ops/gemm_tuner.hpp), unless told otherwise (YOCO_GEMM_ALGO, runner_support.hpp): not until bench
// family `gemm_shapes` has shown a candidate beating cublasGemmEx's choice on the runners' shapes.
// Rows made with it say kGemmTunedNote.
inline constexpr bool kGemmTunedByDefault = false;
inline constexpr const char* kGemmTunedNote = "GEMM algorithms tuned at first use";
// Whether the sublayer outputs are added to the fp32 residual by their output projections' GEMMs (beta 1) rather than written as a bf16 delta for the next add + RMSNorm to add
// (YOCO_RESIDUAL_IN_GEMM, runner_support.hpp): the same bytes, 6 of the 14 an element moved into the
// GEMMs' epilogues, where a compute-bound GEMM may hide them; and one bf16 rounding fewer. Not until
// bench family `gemm_shapes` has shown the GEMM hides them. YOCO's self-decoder prefill and all of
// the Transformer's layers, its decode step included. Rows made with it say kResidualInGemmNote.
inline constexpr bool kResidualInGemmByDefault = false;
inline constexpr const char* kResidualInGemmNote = "residual added in the GEMMs' epilogue";
// Whether a layer's fp32 residual is stored once, after its FFN, rather than after each sublayer
// (YOCO_RESIDUAL_PER_LAYER, runner_support.hpp; ops/elementwise.hpp, launch_rms_norm_of_sum and
// launch_add2_rms_norm): the norm between the sublayers reads residual + the mixer's delta and stores
// nothing back, the layer's last norm adds both deltas. 22 bytes an element a layer instead of 24, the
// same bits. YOCO's self-decoder prefill where its FFN runs whole and unfused (the FFN's input then
// sits in the hidden rows' buffer and W2's output in the W1|W3 output's: no new memory), and every
// layer of the Transformer whose attention output is as wide as d (W2's output goes there). Not with
// the residual in the GEMMs. Not until the GPU suite has shown the prefill faster with it. Rows made
// with it say kResidualPerLayerNote.
inline constexpr bool kResidualPerLayerByDefault = false;
inline constexpr const char* kResidualPerLayerNote = "residual stored once a layer";
// Whether the runners' GEMMs of 4 rows or fewer (the decode step's, at batch 1-4) take ops/gemv.hpp's
// kernel instead of cublasGemmEx (YOCO_GEMV, runner_support.hpp): not until it has passed its GPU test
// (tests/cuda/test_gemv.cpp) and bench family `gemm_shapes` has shown it streaming the decode shapes'
// weights faster than cuBLAS (27-68% of copy at m 1, H200 run-04). Rows made with it say kGemvNote.
inline constexpr bool kGemvByDefault = false;
inline constexpr const char* kGemvNote = "GEMMs of 4 rows or fewer as a GEMV";
// The words before N in a YOCO row whose runner ran its prefill FFN in row
// blocks of N (YOCO_FFN_ROWS=N, runner_support.hpp); rows without them ran
// each step's FFN whole.
inline constexpr const char* kFfnRowBlocksNote = "FFN in row blocks of ";

// YOCO. gret_chunk_launches: the chunk launch's kernels for a prefill step of
// the plan the library picks (1, or 3 with segments, plus the norm + gate
// kernel unless the plan fuses it: gret_chunk_fuses_norm_gate); unused for SWA.
// batched_global_kv: GlobalKvProjection::batched (one GEMM for the batch).
// FfnFused: which FFN calls take the fused W1|W3 + SwiGLU kernel (one launch
// fewer: ops/ffn_up.hpp): a prefill step's, and those of B rows (the decode
// step, the early exit's cross-decoder).
struct FfnFused {
  bool prefill_step = false, batch_rows = false;
};
inline RunnerLaunches yoco_runner_launches(const ModelConfig& c, double batch, double gret_chunk_launches,
                                           bool batched_global_kv = kBatchedGlobalKvByDefault, FfnFused fused = {}) {
  const double Ls = static_cast<double>(c.n_self_layers()), Lc = static_cast<double>(c.n_cross_layers());
  const bool gret = c.self_decoder() == SelfDecoderKind::gret;
  // ffn: W1|W3 GEMM, SwiGLU, W2 GEMM (W1|W3 with SwiGLU, W2 where fused); a
  // sublayer's add + RMSNorm before it.
  const double ffn = fused.prefill_step ? 2 : 3, ffn_b = fused.batch_rows ? 2 : 3, norm = 1;
  RunnerLaunches n;
  // gRet mixer: q|k|v|g GEMM, gt_proj GEMM, RoPE of q and k (one pass), log
  // decay, the chunk launch (its kernels and norm + gate, unless the plan
  // fuses it, which no planner does: gret_chunk_launches), out_proj. SWA: q|k|v GEMM, RoPE of q and k,
  // three position setters, ring gather, the chunk's keys into the window,
  // flash prefill, ring update, out_proj. (Until 2026-11-27 q and k were two
  // RoPE launches and norm + gate always one more: the sweep's runs.)
  const double self_mixer = gret ? 5 + gret_chunk_launches : 10;
  // upload of the tokens, embedding; the self-decoder; kv norm; per sequence
  // the global K/V GEMM and K's RoPE (batched, past one sequence: one GEMM,
  // RoPE, the chunk's start, the rows into the cache).
  const double global_kv = batched_global_kv && batch > 1 ? 4 : 2 * batch;
  n.prefill_step = 2 + Ls * (norm + self_mixer + norm + ffn) + 1 + global_kv;
  // allocate_generation: two memsets, the positions; M's last rows, positions
  // twice; the cross-decoder step (q_proj, RoPE, FlashDecoding, out_proj per
  // layer), the final norm and the LM head.
  const double cross_step = Lc * (norm + 2 + kFlashDecodeLaunches + 1 + norm + ffn_b) + 2;
  n.prefill_once = 3 + 3 + cross_step;
  // Decode: embedding; per self layer the fused projection, RoPE q, then gRet
  // (gt_proj, RoPE k, log decay, the step) or SWA (RoPE k, ring append, q rows,
  // FlashDecoding), out_proj; the global K/V row (norm, GEMM, RoPE, append);
  // the cross-decoder step; advance positions.
  const double self_step = gret ? 4 : 3 + kFlashDecodeLaunches;
  n.decode_step = 1 + Ls * (norm + 2 + self_step + 1 + norm + ffn_b) + 4 + cross_step + 1;
  return n;
}

// The GQA Transformer.
inline RunnerLaunches transformer_runner_launches(const ModelConfig& c, FfnFused fused = {}) {
  const double L = static_cast<double>(c.n_layers);
  RunnerLaunches n;
  // Two uploads (tokens, query ranges), embedding; per layer norm, QKV GEMM,
  // RoPE on q and k, cache write, flash prefill, o_proj, norm, W1|W3, SwiGLU, W2
  // (W1|W3 with SwiGLU where fused).
  n.prefill_step = 3 + L * (fused.prefill_step ? 9 : 10);
  // A memset per layer's cache; the last step's final norm, last-row gather and
  // LM head; the decode positions.
  n.prefill_once = L + 3 + 1;
  // Embedding; per layer norm, QKV GEMM, RoPE, cache write, dense q copy,
  // FlashDecoding, o_proj, norm, W1|W3, SwiGLU, W2; final norm, LM head, advance.
  n.decode_step = 1 + L * ((fused.batch_rows ? 9 : 10) + kFlashDecodeLaunches) + 3;
  return n;
}

inline RunnerLaunches runner_launches(const ModelConfig& c, double batch, double gret_chunk_launches,
                                      bool batched_global_kv = kBatchedGlobalKvByDefault, FfnFused fused = {}) {
  return c.is_yoco() ? yoco_runner_launches(c, batch, gret_chunk_launches, batched_global_kv, fused)
                     : transformer_runner_launches(c, fused);
}

}  // namespace yoco::cuda
