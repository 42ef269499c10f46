#include "cost_model.hpp"

#include <algorithm>
#include <cmath>
#include <optional>
#include <tuple>
#include <utility>

#include "errors.hpp"
#include "param_layout.hpp"

namespace yoco::cost {

const char* part_name(Part p) {
  static const char* names[kParts] = {"gemm", "attention", "gret", "norms", "lm_head"};
  return names[static_cast<int>(p)];
}

Work PhaseWork::total() const {
  Work t;
  for (const auto& w : parts) t += w;
  return t;
}

namespace {

// Parameter elements by where they are used, from the reference's layout so
// that the cost model and the weights cannot disagree.
struct WeightGroups {
  double self_gemm = 0;         // YOCO self-decoder projections and FFNs
  double cross_kv_gemm = 0;     // YOCO shared K/V projection
  double cross_layer_gemm = 0;  // YOCO cross-decoder layers
  double layer_gemm = 0;        // Transformer layers
  double embedding = 0, lm_head = 0, norms = 0;
  double gemm() const { return self_gemm + cross_kv_gemm + cross_layer_gemm + layer_gemm; }
};

WeightGroups layout_weight_groups(const ModelConfig& cfg) {
  WeightGroups g;
  for (const auto& p : param_layout(cfg)) {
    const double n = static_cast<double>(p.numel());
    const std::string& s = p.name;
    if (p.shape.size() == 1) g.norms += n;
    else if (s == "embed_tokens.weight" || s == "tok_embeddings.weight") g.embedding += n;
    else if (s == "output_projection.weight" || s == "output.weight") g.lm_head += n;
    else if (s.starts_with("self_decoder.")) g.self_gemm += n;
    else if (s == "cross_decoder.k_proj.weight" || s == "cross_decoder.v_proj.weight") g.cross_kv_gemm += n;
    else if (s.starts_with("cross_decoder.layers.")) g.cross_layer_gemm += n;
    else g.layer_gemm += n;
  }
  return g;
}

// The same, remembered for the last shape asked about: a throughput point
// costs one decode step per generated token (up to 2^20), and building the
// layout (a few strings per tensor) each time made that loop 100x slower than
// its arithmetic. The key is every field param_layout reads.
WeightGroups weight_groups(const ModelConfig& cfg) {
  using Key = std::tuple<ModelType, bool, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t>;
  const Key key{cfg.model_type,   cfg.sliding_window.has_value(), cfg.dim,          cfg.n_layers,
                cfg.hidden_dim,   cfg.vocab_size,                 cfg.n_self_heads, cfg.n_attn_heads,
                cfg.n_attn_kv_heads, cfg.head_dim};
  thread_local std::optional<std::pair<Key, WeightGroups>> last;
  if (!last || last->first != key) last.emplace(key, layout_weight_groups(cfg));
  return last->second;
}

// The shape numbers every formula below uses, as doubles (no overflow at 1M
// tokens × batch × width).
struct Shape {
  double d, F, V, L, Ls, Lc, Hs, D, H, Da, qw, kvw, W;
  bool yoco, gret;
  explicit Shape(const ModelConfig& c)
      : d(c.dim), F(c.hidden_dim), V(c.vocab_size), L(c.n_layers), Ls(c.n_self_layers()), Lc(c.n_cross_layers()),
        Hs(c.is_yoco() ? c.n_self_heads : 0), D(c.is_yoco() ? c.self_head_dim() : 0), H(c.n_attn_heads),
        Da(c.attn_head_dim()), qw(c.q_width()), kvw(c.kv_width()), W(c.window()), yoco(c.is_yoco()),
        gret(c.is_yoco() && c.self_decoder() == SelfDecoderKind::gret) {}
};

struct Bytes {
  double w, kv, act, state, logits;
  explicit Bytes(const Storage& s)
      : w(storage_bytes(s.weights)), kv(storage_bytes(s.kv_cache)), act(storage_bytes(s.activations)),
        state(storage_bytes(s.state)), logits(storage_bytes(s.logits)) {}
};

// Activation elements one token moves through the GEMMs of one layer (inputs
// read, outputs written), without the K/V written to a cache.
double self_layer_gemm_io(const Shape& s) {
  const double ffn = (s.d + 2 * s.F) + (s.F + s.d);
  if (s.gret) return (s.d + 4 * s.d + s.Hs) + (s.d + s.d) + ffn;  // fused QKVG+gate logits, out
  return (s.d + 3 * s.d) + (s.d + s.d) + ffn;                    // SWA: fused QKV, out
}
double attn_layer_gemm_io(const Shape& s) {  // Transformer / cross layer: q (and k, v), out, FFN
  return s.d + s.qw + (s.qw + s.d) + (s.d + 2 * s.F) + (s.F + s.d);
}
// Elementwise traffic per token of one layer: two fused residual+RMSNorm (read
// x and the branch output, write x and the normed x), RoPE in place, SwiGLU,
// and for gRet the per-head norm with the silu gate. At prefill it is a pass
// of its own after the chunk that reads o and g and writes o (3 d): kernel 6
// can apply it in its epilogue (only g read), but run-17 measured that launch
// slower than the chunk and the norm + gate kernel after it, so no planner
// fuses it (cuda/gret/gret_plan.hpp, fuse_norm_gate). At decode the step
// fused with it (launch_gret_recurrent_step_norm_gate) reads g only (1 d).
enum class Phase { prefill, decode };
double self_layer_elementwise(const Shape& s, Phase phase) {
  const double base = 8 * s.d + 2 * (2 * s.d) + 3 * s.F;
  return s.gret ? base + (phase == Phase::prefill ? 3 : 1) * s.d : base;
}
double attn_layer_elementwise(const Shape& s, bool rope_on_kv) {
  return 8 * s.d + 2 * s.qw + (rope_on_kv ? 2 * s.kvw : 0) + 3 * s.F;
}

// Keys seen by queries [s, s + c) of a causal band of width W (0 = unbounded),
// summed over the queries.
double band_keys(double s0, double c, double W) {
  if (W <= 0) return c * s0 + c * (c + 1) / 2;
  double keys = 0;
  // Queries whose band is still growing see i + 1 keys; the rest see W.
  const double grow_end = std::min(s0 + c, W);  // queries [s0, grow_end) have i + 1 < = W
  if (grow_end > s0) keys += (grow_end - s0) * (s0 + grow_end + 1) / 2;
  const double full = s0 + c - std::max(grow_end, s0);
  keys += full * W;
  return keys;
}

// The padding of a chunk of c query rows computed in tiles of T rows: its
// last tile's rows past c, each multiplying the keys the tile's valid rows
// reach (all `keys_before_end` before the chunk's end, or the window and the
// tile's valid rows but its first under a window W > 0).
struct TilePadding {
  double rows = 0, last_valid = 0;
  TilePadding(double c, double T) {
    const double tiles = std::ceil(c / T);
    rows = tiles * T - c;
    last_valid = c - (tiles - 1) * T;
  }
  double keys_seen(double keys_before_end, double W) const {
    return W > 0 ? std::min(keys_before_end, W + last_valid - 1) : keys_before_end;
  }
};

bool fused_ffn_up(const KernelView& k, double rows) {
  return k.ffn_up_fused_from_rows > 0 && rows >= static_cast<double>(k.ffn_up_fused_from_rows);
}

}  // namespace

int64_t prefill_tokens_in_flight(int64_t batch, int64_t prompt, int64_t prefill_chunk) {
  return batch * std::min(prompt, prefill_chunk);
}

double kv_cache_bytes_per_token(const ModelConfig& cfg, const Storage& st) {
  const Shape s(cfg);
  const double per_layer = 2 * s.kvw * storage_bytes(st.kv_cache);
  return s.yoco ? per_layer : s.L * per_layer;
}

MemoryCost memory_cost(const ModelConfig& cfg, const Storage& st, int64_t batch, int64_t capacity,
                       int64_t prefill_tokens) {
  const Shape s(cfg);
  const Bytes b(st);
  const double B = static_cast<double>(batch), m = static_cast<double>(prefill_tokens);
  MemoryCost mc;
  mc.weights = static_cast<double>(param_count(cfg)) * b.w;
  mc.kv_cache = kv_cache_bytes_per_token(cfg, st) * static_cast<double>(capacity) * B;
  if (s.gret) mc.state = s.Ls * B * s.Hs * s.D * s.D * b.state;
  else if (s.yoco) mc.state = s.Ls * B * 2 * s.W * s.d * b.kv;  // SWA ring buffers
  // Peak temporaries per token: the mixer or the FFN of one layer, whichever is larger.
  const double ffn = 3 * s.d + 2 * s.F;  // x, normed x, fused W1/W3 output, FFN output
  double mixer;
  if (s.yoco) mixer = s.gret ? 7 * s.d + s.Hs : 6 * s.d;  // x, normed x, q k v (g, gate), o
  else mixer = 2 * s.d + 2 * s.qw + 2 * s.kvw;            // x, normed x, q, k, v, o
  mc.activations = m * std::max(mixer, ffn) * b.act + B * s.V * b.logits;
  return mc;
}

namespace {

// The work of one prefill step: query rows [start, start + c) of each of the
// batch's sequences through the whole stack (the early exit and the LM head
// are prefill_work's, once per prefill).
PhaseWork prefill_step(const ModelConfig& cfg, const Shape& s, const Bytes& b, const WeightGroups& g, double B,
                       double start, double c, const KernelView& kernels) {
  PhaseWork w;
  Work& gemm = w[Part::gemm];
  Work& attn = w[Part::attention];
  Work& gret = w[Part::gret];
  Work& ew = w[Part::norms];
  const double m = B * c;  // tokens in this chunk step
  const TilePadding pad(c, static_cast<double>(kernels.attention_tile_rows));
  // The FFN's up half fused saves, per token and layer, the GEMM's second F
  // of output and the SwiGLU pass (3F).
  const double ffn_saved = fused_ffn_up(kernels, m) ? s.F : 0;
  if (s.yoco) {
    // Self-decoder over the chunk; weights read once per chunk step.
    gemm.flops += 2 * m * g.self_gemm;
    gemm.bytes += g.self_gemm * b.w + s.Ls * m * (self_layer_gemm_io(s) - ffn_saved) * b.act;
    // The residual stored once a layer saves an element's write a layer (the runner's rule: KernelView).
    const double once = kernels.residual_per_layer && ffn_saved == 0 && s.F >= s.d ? s.d : 0;
    ew.bytes += s.Ls * m * (self_layer_elementwise(s, Phase::prefill) - 3 * ffn_saved - once) * b.act;
    if (s.gret) {
      // The step's gRet chunks: the full ones alike, then the rest. Counted,
      // not looped over: a config may say gret_chunk_size 1, and a loop per
      // chunk would then run once per token of the prompt.
      const double cc_full = static_cast<double>(cfg.gret_chunk_size);
      const double full_chunks = std::floor(c / cc_full), rest = c - full_chunks * cc_full;
      // Intra-chunk causal (half of 4·cc²·D) + q·S and the state update (2·cc·D² each).
      auto chunk_flops = [&](double cc) { return s.Ls * B * s.Hs * (2 * cc * cc * s.D + 4 * cc * s.D * s.D); };
      gret.flops += full_chunks * chunk_flops(cc_full) + (rest > 0 ? chunk_flops(rest) : 0);
      gret.bytes += s.Ls * (m * (4 * s.d * b.act + s.Hs * 4) + 2 * B * s.Hs * s.D * s.D * b.state);
    } else {
      attn.flops += s.Ls * 4 * B * s.Hs * s.D * (band_keys(start, c, s.W) + pad.rows * pad.keys_seen(start + c, s.W));
      attn.bytes += s.Ls * (4 * m * s.d * b.act + B * std::min(s.W, start) * 2 * s.d * b.kv);
    }
    // Shared K/V of the chunk: RMSNorm_kv, projection, RoPE on K, into the cache.
    gemm.flops += 2 * m * g.cross_kv_gemm;
    gemm.bytes += g.cross_kv_gemm * b.w + m * (s.d * b.act + 2 * s.kvw * b.kv);
    ew.bytes += m * (2 * s.d * b.act + 2 * s.kvw * b.kv);
  } else {
    gemm.flops += 2 * m * g.layer_gemm;
    gemm.bytes += g.layer_gemm * b.w + s.L * m * ((attn_layer_gemm_io(s) - ffn_saved) * b.act + 2 * s.kvw * b.kv);
    const double once = kernels.residual_per_layer && s.qw >= s.d ? s.d : 0;  // as YOCO's above
    ew.bytes += s.L * m * ((attn_layer_elementwise(s, false) - 3 * ffn_saved - once) * b.act + 2 * s.kvw * b.kv);
    attn.flops += s.L * 4 * B * s.H * s.Da * (c * start + c * c / 2 + pad.rows * pad.keys_seen(start + c, 0));
    attn.bytes += s.L * (2 * m * s.qw * b.act + B * (start + c) * 2 * s.kvw * b.kv);
  }
  return w;
}

// into += n * w (n >= 0).
void add_times(PhaseWork& into, const PhaseWork& w, double n) {
  for (int i = 0; i < kParts; ++i) {
    into.parts[i].flops += n * w.parts[i].flops;
    into.parts[i].bytes += n * w.parts[i].bytes;
  }
}

// The full steps k in [k0, k1) (start k·C, C rows each), where a step's work
// is affine in its start: f(k0) n times plus n(n-1)/2 times the growth per
// step. Summed rather than stepped through, so that a long prompt in small
// steps (2^40 tokens, chunk 1) costs no more than a short one.
template <class Step>
void add_affine_steps(PhaseWork& into, const Step& step, int64_t k0, int64_t k1) {
  const int64_t n = k1 - k0;
  if (n <= 0) return;
  const PhaseWork first = step(k0);
  add_times(into, first, static_cast<double>(n));
  if (n == 1) return;
  PhaseWork growth = step(k0 + 1);
  add_times(growth, first, -1.0);
  add_times(into, growth, static_cast<double>(n) * static_cast<double>(n - 1) / 2);
}

}  // namespace

PhaseWork prefill_work(const ModelConfig& cfg, const Storage& st, int64_t batch, int64_t prompt,
                       int64_t prefill_chunk, const KernelView& kernels) {
  if (prompt < 1 || prefill_chunk < 1 || batch < 1 || kernels.attention_tile_rows < 1)
    throw InputError("prefill_work: prompt, chunk, batch and tile rows must be >= 1");
  const Shape s(cfg);
  const Bytes b(st);
  const WeightGroups g = weight_groups(cfg);
  const double B = static_cast<double>(batch), N = static_cast<double>(prompt), C = static_cast<double>(prefill_chunk);
  PhaseWork w;
  Work& gemm = w[Part::gemm];
  Work& attn = w[Part::attention];
  Work& ew = w[Part::norms];

  ew.bytes += B * N * s.d * (b.w + b.act);  // embedding gather (× sqrt(d) fused)
  // The steps: `full` of C rows, then the rest. A step's work is affine in its
  // start (the Transformer's keys grow with it, gRet's state does not), except
  // a sliding window's band: it grows while the step ends at or before W and is
  // full from a step starting at W on, with at most one step between.
  const int64_t full = prompt / prefill_chunk, rest = prompt % prefill_chunk;
  auto step = [&](int64_t k) { return prefill_step(cfg, s, b, g, B, static_cast<double>(k) * C, C, kernels); };
  const bool window = s.yoco && !s.gret && s.W > 0;
  const auto growing_end = window ? static_cast<int64_t>(std::min(static_cast<double>(full), std::floor(s.W / C))) : full;
  const auto full_from = window ? static_cast<int64_t>(std::min(static_cast<double>(full), std::ceil(s.W / C))) : full;
  add_affine_steps(w, step, 0, growing_end);
  add_affine_steps(w, step, growing_end, full_from);
  add_affine_steps(w, step, full_from, full);
  if (rest > 0) add_times(w, prefill_step(cfg, s, b, g, B, static_cast<double>(full) * C, static_cast<double>(rest), kernels), 1.0);
  if (s.yoco) {
    // Early exit: the cross-decoder runs for the last position of each sequence only.
    const double exit_saved = fused_ffn_up(kernels, B) ? s.F : 0;  // B rows: fused only for a large batch
    gemm.flops += 2 * B * g.cross_layer_gemm;
    gemm.bytes += g.cross_layer_gemm * b.w + s.Lc * B * (attn_layer_gemm_io(s) - exit_saved) * b.act;
    ew.bytes += s.Lc * B * (attn_layer_elementwise(s, false) - 3 * exit_saved) * b.act;
    attn.flops += s.Lc * 4 * B * N * s.H * s.Da;
    attn.bytes += s.Lc * (2 * B * s.qw * b.act + B * N * 2 * s.kvw * b.kv);
  }
  ew.bytes += B * 2 * s.d * b.act;  // final norm of the last positions
  Work& head = w[Part::lm_head];
  head.flops += 2 * B * s.d * s.V;
  head.bytes += g.lm_head * b.w + B * (s.d * b.act + s.V * b.logits);
  return w;
}

PhaseWork decode_work(const ModelConfig& cfg, const Storage& st, int64_t batch, int64_t context,
                      const KernelView& kernels) {
  if (batch < 1 || context < 0) throw InputError("decode_work: batch must be >= 1 and context >= 0");
  const Shape s(cfg);
  const Bytes b(st);
  const WeightGroups g = weight_groups(cfg);
  const double B = static_cast<double>(batch), keys = static_cast<double>(context) + 1;
  const double ffn_saved = fused_ffn_up(kernels, B) ? s.F : 0;  // as in prefill_work
  PhaseWork w;
  Work& gemm = w[Part::gemm];
  Work& attn = w[Part::attention];
  Work& ew = w[Part::norms];
  // Every projection runs once for the new token of each sequence; weights are
  // read once per step for the whole batch.
  gemm.flops = 2 * B * g.gemm();
  gemm.bytes = g.gemm() * b.w;
  ew.bytes = B * s.d * (b.w + b.act) + B * 2 * s.d * b.act;  // embedding gather, final norm
  if (s.yoco) {
    gemm.bytes += B * (s.Ls * self_layer_gemm_io(s) + s.Lc * attn_layer_gemm_io(s) + s.d - s.L * ffn_saved) * b.act +
                  B * 2 * s.kvw * b.kv;
    ew.bytes += B * (s.Ls * self_layer_elementwise(s, Phase::decode) + s.Lc * attn_layer_elementwise(s, false) +
                     2 * s.d - 3 * s.L * ffn_saved) * b.act +
                B * 2 * s.kvw * b.kv;
    if (s.gret) {
      Work& gret = w[Part::gret];
      gret.flops = s.Ls * 4 * B * s.Hs * s.D * s.D;
      gret.bytes = s.Ls * B * (2 * s.Hs * s.D * s.D * b.state + 4 * s.d * b.act + s.Hs * 4);
    } else {
      const double band = std::min(keys, s.W);
      attn.flops += s.Ls * 4 * B * s.Hs * s.D * band;
      attn.bytes += s.Ls * B * (2 * s.d * b.act + band * 2 * s.d * b.kv);
    }
    attn.flops += s.Lc * 4 * B * s.H * s.Da * keys;
    attn.bytes += s.Lc * B * (2 * s.qw * b.act + keys * 2 * s.kvw * b.kv);
  } else {
    gemm.bytes += B * s.L * ((attn_layer_gemm_io(s) - ffn_saved) * b.act + 2 * s.kvw * b.kv);
    // The Transformer's decode step runs the same layers as its prefill (YOCO's keeps the old path).
    const double once = kernels.residual_per_layer && s.qw >= s.d ? s.d : 0;
    ew.bytes += B * s.L * ((attn_layer_elementwise(s, false) - 3 * ffn_saved - once) * b.act + 2 * s.kvw * b.kv);
    attn.flops += s.L * 4 * B * s.H * s.Da * keys;
    attn.bytes += s.L * B * (2 * s.qw * b.act + keys * 2 * s.kvw * b.kv);
  }
  Work& head = w[Part::lm_head];
  head.flops = 2 * B * s.d * s.V;
  head.bytes = g.lm_head * b.w + B * (s.d * b.act + s.V * b.logits);
  return w;
}

double roofline_time(const Work& w, const DeviceSpec& dev) {
  return std::max(w.flops / dev.peak_flops, w.bytes / dev.bandwidth);
}

double roofline_time(const PhaseWork& w, const DeviceSpec& dev) {
  double t = 0;
  for (const auto& p : w.parts) t += roofline_time(p, dev);
  return t;
}

ThroughputCost throughput_cost(const ModelConfig& cfg, const Storage& st, const DeviceSpec& dev, int64_t seq_len,
                               int64_t gen, int64_t batch, int64_t prefill_chunk, int64_t max_batch) {
  if (gen < 1 || gen >= seq_len)
    throw InputError("throughput: generated tokens (" + std::to_string(gen) + ") must be >= 1 and below the length (" +
                     std::to_string(seq_len) + ")");
  const int64_t prompt = seq_len - gen;
  // One sequence is prefilled at a time, so the activations are one chunk's.
  const int64_t in_flight = prefill_tokens_in_flight(1, prompt, prefill_chunk);
  auto fits = [&](int64_t bsz) {
    return memory_cost(cfg, st, bsz, seq_len, in_flight).total() <= kUsableMemoryFraction * dev.memory_bytes;
  };
  ThroughputCost t;
  if (batch > 0) {
    t.batch = batch;
  } else if (dev.memory_bytes <= 0) {
    t.batch = 1;  // unknown capacity: no search
  } else if (fits(1)) {
    int64_t lo = 1, hi = 2;
    while (hi <= max_batch && fits(hi)) lo = hi, hi *= 2;
    hi = std::min(hi, max_batch + 1);
    while (hi - lo > 1) {  // fits(lo), !fits(hi) or hi beyond the cap
      const int64_t mid = lo + (hi - lo) / 2;
      (fits(mid) ? lo : hi) = mid;
    }
    t.batch = lo;
  } else {
    t.batch = 0;
    t.memory = memory_cost(cfg, st, 1, seq_len, in_flight);
    return t;
  }
  t.memory = memory_cost(cfg, st, t.batch, seq_len, in_flight);
  t.prefill_s = static_cast<double>(t.batch) * roofline_time(prefill_work(cfg, st, 1, prompt, prefill_chunk), dev);
  for (int64_t i = 0; i < gen; ++i) t.decode_s += roofline_time(decode_work(cfg, st, t.batch, prompt + i), dev);
  t.tokens_per_s = static_cast<double>(t.batch * gen) / (t.prefill_s + t.decode_s);
  return t;
}

}  // namespace yoco::cost
