#pragma once
// FLOPs and bytes of one call of each op, the single definition shared by the
// CPU reference benchmarks and (later) the CUDA kernel benchmarks.
//
// FLOP convention (FlashAttention's, DESIGN.md §5):
//  - matrix products only, 2·m·n·k for an [m,k]·[k,n] product (a rank-1 outer
//    product is k = 1); softmax, exp, decay masks, silu, norms count zero;
//  - a causal product (query i only meets keys j <= i) counts half of the dense
//    product, whatever an implementation really skips: causal attention is
//    4·B·S²·H·Da / 2.
// Byte convention: every input and output tensor read or written exactly once
// (weights included); intermediates that a fused kernel keeps on chip (scores,
// the FFN hidden layer, the running gRet state) count zero. B/s is therefore a
// lower bound on real memory traffic, the same for every implementation.
// `eb` is the element size in bytes (4 for float, 2 for bf16).
#include <algorithm>
#include <cstdint>

#include "micro_counters.hpp"

namespace yoco::micro {

constexpr double gemm_flops(double m, double n, double k) { return 2.0 * m * n * k; }

// RMSNorm of [rows, d] with a weight of d: read x, write y, read w.
// rows = 4096, d = 4096, float: bytes = (2·4096·4096 + 4096)·4 = 134.2 MB.
constexpr Work rms_norm_work(int64_t rows, int64_t d, int64_t eb) {
  return {0.0, double(eb) * (2.0 * rows * d + d)};
}

// SwiGLU FFN W2 (silu(W1 x) ⊙ W3 x) on [T, d], W1, W3: [F, d], W2: [d, F].
// Three GEMMs of T·d·F: flops = 6·T·d·F. Bytes: x, y and the three weights.
// T = 256, d = 1024, F = 3072: flops = 6·256·1024·3072 = 4.832e9;
// float bytes = (2·256·1024 + 3·1024·3072)·4 = 39.85e6.
constexpr Work swiglu_ffn_work(int64_t tokens, int64_t d, int64_t ffn, int64_t eb) {
  return {3.0 * gemm_flops(tokens, ffn, d), double(eb) * (2.0 * tokens * d + 3.0 * d * ffn)};
}

// Query-key pairs one head of causal self-attention over S tokens computes,
// with window W (0 = none; a query sees itself and the W-1 previous keys).
// S²/2 for full causal (FlashAttention's count, not S(S+1)/2); the band
// S·W - W²/2 with a window, which is S²/2 again at W = S.
constexpr double causal_pairs(int64_t seq, int64_t window) {
  const double s = double(seq);
  if (window <= 0 || window >= seq) return s * s / 2.0;
  const double w = double(window);
  return s * w - w * w / 2.0;
}

// Causal GQA softmax self-attention, batch B, S tokens, H query heads, Hkv KV
// heads, head dim Da. S = Q Kᵀ and P V are 2·Da FLOPs per visible pair each.
// Bytes: q, o ([B,S,H·Da]) and k, v ([B,S,Hkv·Da]); GQA saves K/V bytes, not FLOPs.
// B = 1, S = 1024, H = 8, Da = 128, no window: flops = 4·1024²·8·128/2 = 2.147e9;
// Hkv = 2, float: bytes = (2·8 + 2·2)·1024·128·4 = 10.49e6.
constexpr Work attention_work(int64_t batch, int64_t seq, int64_t heads, int64_t kv_heads, int64_t head_dim,
                           int64_t window, int64_t eb) {
  const double flops = 4.0 * batch * heads * head_dim * causal_pairs(seq, window);
  const double bytes = double(eb) * batch * seq * head_dim * (2.0 * heads + 2.0 * kv_heads);
  return {flops, bytes};
}

// ---- gated retention, `heads` independent heads of n tokens, D_k = D_v = D ----
// The three paradigms compute one function by different algorithms, so each
// counts its own products (per head):
//   recurrent  per token k_tᵀ v_t (2·D²) and q_t S_t (2·D²):        4·n·D²
//   chunkwise  per chunk of c: Q Kᵀ and (·)V causal, 2·c²·D each
//              halved; Q S and Kᵀ V across chunks, 2·c·D² each:    2·D·Σc² + 4·n·D²
//              (= n·(2·c·D + 4·D²) when c divides n)
//   parallel   chunkwise with one chunk of n:                      2·n²·D + 4·n·D²
// The reference's parallel form multiplies the full n×n matrix (the decay
// mask zeroes the upper half after Q Kᵀ), so it executes 2·n²·D more than it
// is credited with; the counts are the algorithm's, not this implementation's.
// Its 4·n·D² are Q S0 (done even for S0 = 0) and the final state Kᵀ diag V.
// n = 4096, D = 128: recurrent 4·4096·128² = 0.268e9; chunkwise c = 256:
// 4096·(2·256·128 + 4·128²) = 0.537e9; parallel 2·4096²·128 + 0.268e9 = 4.563e9.
//
// Bytes per head: q, k, v, o (n·D each), the log-decays (n), the final state
// written (D²) and the initial state read if there is one (D²). The state
// between tokens/chunks is not counted: it stays on chip (64 KiB in float at
// D = 128, in L2 here, in registers/shared memory in a fused kernel).
constexpr double gret_bytes(int64_t n, int64_t d, int64_t heads, bool initial_state, int64_t eb) {
  const double state = double(d) * d * (initial_state ? 2.0 : 1.0);
  return double(eb) * heads * (4.0 * n * d + n + state);
}

constexpr Work gret_recurrent_work(int64_t n, int64_t d, int64_t heads, bool initial_state, int64_t eb) {
  return {double(heads) * n * 2.0 * gemm_flops(d, d, 1), gret_bytes(n, d, heads, initial_state, eb)};
}

constexpr Work gret_chunkwise_work(int64_t n, int64_t d, int64_t chunk, int64_t heads, bool initial_state,
                                int64_t eb) {
  const int64_t full = n / chunk, rest = n % chunk;
  const double sum_c2 = double(full) * chunk * chunk + double(rest) * rest;
  // Per chunk: two causal c×c×D products, halved = 2·c²·D; 4·c·D² across chunks.
  const double per_head = sum_c2 * gemm_flops(1, 1, d) + 2.0 * gemm_flops(n, d, d);
  return {heads * per_head, gret_bytes(n, d, heads, initial_state, eb)};
}

constexpr Work gret_parallel_work(int64_t n, int64_t d, int64_t heads, bool initial_state, int64_t eb) {
  return gret_chunkwise_work(n, d, std::max<int64_t>(n, 1), heads, initial_state, eb);
}

// The worked examples above, checked by the compiler (all values are integers,
// exact in double).
static_assert(swiglu_ffn_work(256, 1024, 3072, 4).flops == 4831838208.0);
static_assert(swiglu_ffn_work(256, 1024, 3072, 4).bytes == 39845888.0);
static_assert(attention_work(1, 1024, 8, 2, 128, 0, 4).flops == 2147483648.0);
static_assert(attention_work(1, 1024, 8, 2, 128, 0, 4).bytes == 10485760.0);
static_assert(attention_work(1, 1024, 8, 2, 128, 1024, 4).flops == attention_work(1, 1024, 8, 2, 128, 0, 4).flops);
static_assert(rms_norm_work(4096, 4096, 4).bytes == 134234112.0);
static_assert(gret_recurrent_work(4096, 128, 1, false, 4).flops == 268435456.0);
static_assert(gret_chunkwise_work(4096, 128, 256, 1, false, 4).flops == 536870912.0);
static_assert(gret_parallel_work(4096, 128, 1, false, 4).flops == 4563402752.0);

}  // namespace yoco::micro
