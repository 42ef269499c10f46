#pragma once
// One buffer for the working sets of a YOCO prefill step's sublayers (issue 34: the activations of
// a prefill step are what stands between yoco-3b's 1M-token memory and the paper's 12.4 GB).
// Within a self-decoder layer the mixer's buffers (the fused projection, the gate logits and
// log-decays, the mixer's output; SWA: the window) are dead once its output projection has run,
// and the FFN's (the W1|W3 output, the hidden rows) are born after that; after the last layer the
// global K/V's rows (batch > 1) follow both. So one buffer of the largest of the three serves all
// of them, carved at 256-byte offsets, where separate buffers held their sum: at yoco-3b's
// 32K-token step 1.0 GB less (0.54 GB with the FFN's up half fused). The runner
// (yoco_self_decoder.cpp, step_work) carves it and the memory formula
// (generation_bytes.hpp) counts it from these functions: one definition. Plain C++, integer bytes.
#include <algorithm>
#include <cstdint>

namespace yoco::cuda::sublayer {

inline constexpr int64_t kAlign = 256;  // every piece starts where cuBLAS, TMA and 16-byte accesses want it
inline constexpr int64_t aligned(int64_t bytes) { return (bytes + kAlign - 1) / kAlign * kAlign; }

// The mixer's pieces for `rows` rows (batch x n) of width d: gRet's q|k|v|g projection [rows, 4d]
// bf16, gate logits and log-decays [rows, Hs] fp32, output [rows, d] bf16; SWA's q|k|v projection
// [rows, 3d] bf16, output [rows, d] bf16 and its window [window_rows, 2d] bf16 (window_rows: the
// batch's rows of its widest step, batch x (W - 1 + n)).
struct Mixer {
  int64_t proj = 0, gate_logits = 0, log_decay = 0, out = 0, window = 0;  // byte offsets
  int64_t bytes = 0;                                                       // the end of the last piece
};
inline constexpr Mixer mixer(bool gret, int64_t rows, int64_t d, int64_t heads, int64_t window_rows) {
  Mixer m;
  int64_t at = aligned(rows * (gret ? 4 : 3) * d * 2);
  if (gret) {
    m.gate_logits = at;
    at += aligned(rows * heads * 4);
    m.log_decay = at;
    at += aligned(rows * heads * 4);
  }
  m.out = at;
  at += aligned(rows * d * 2);
  if (!gret) {
    m.window = at;
    at += aligned(window_rows * 2 * d * 2);
  }
  m.bytes = at;
  return m;
}

// The FFN's pieces: the W1|W3 output [w13_rows, 2F] bf16 (none when w13_rows is 0: every block
// takes the fused kernel) and the hidden rows [block_rows, F] bf16.
struct Ffn {
  int64_t w13 = 0, hidden = 0;  // byte offsets (w13 meaningless without rows)
  int64_t bytes = 0;
};
inline constexpr Ffn ffn(int64_t w13_rows, int64_t block_rows, int64_t F) {
  Ffn f;
  f.hidden = w13_rows > 0 ? aligned(w13_rows * 2 * F * 2) : 0;
  f.bytes = f.hidden + aligned(block_rows * F * 2);
  return f;
}

// The global K/V rows of a step projected for the whole batch [rows, 2 kvw] bf16 (0 rows: none).
inline constexpr int64_t kv_rows_bytes(int64_t rows, int64_t kvw) { return aligned(rows * 2 * kvw * 2); }

inline constexpr int64_t bytes(const Mixer& m, const Ffn& f, int64_t kv_rows) {
  return std::max({m.bytes, f.bytes, kv_rows});
}

}  // namespace yoco::cuda::sublayer
