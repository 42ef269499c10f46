#pragma once
// The analytic cost model (DESIGN.md §4–5): memory by category, FLOPs and
// bytes moved by part for a prefill and for one decode step, a roofline time
// projection and the throughput protocol — all computed from the shapes of a
// ModelConfig (and the parameter layout the reference uses), never from
// stored answers.
//
// Conventions
// - FLOPs: matmuls only, 2·m·n·k per product; causal attention counts half of
//   4·B·S²·H·Da (FlashAttention's convention); norms and elementwise ops count
//   0 FLOPs but their bytes.
// - Bytes: every tensor an op reads or writes, once (the floor a fused kernel
//   can reach: a flash kernel that re-reads K/V per query tile moves more).
// - Memory: caches sized for exactly the tokens served; activations are the
//   largest set of temporaries alive at once while prefilling `prefill_chunk`
//   tokens (a flash/chunk kernel keeps its tiles on chip, so no N×N or c×c
//   matrix is counted), plus the fp32 logits of the last positions.
// - Roofline: each part's time is max(FLOPs / peak, bytes / bandwidth); parts
//   run one after another, so the phase time is their sum.
#include <array>
#include <cstdint>
#include <string>

#include "config.hpp"
#include "device_spec.hpp"
#include "storage_type.hpp"

namespace yoco::cost {

enum class Part { gemm, attention, gret, norms, lm_head };
inline constexpr int kParts = 5;
const char* part_name(Part p);  // "gemm", "attention", "gret", "norms", "lm_head"

struct Work {
  double flops = 0, bytes = 0;
  Work& operator+=(const Work& o) {
    flops += o.flops;
    bytes += o.bytes;
    return *this;
  }
};

struct PhaseWork {
  std::array<Work, kParts> parts{};
  Work& operator[](Part p) { return parts[static_cast<int>(p)]; }
  const Work& operator[](Part p) const { return parts[static_cast<int>(p)]; }
  Work total() const;
};

struct MemoryCost {
  double weights = 0, kv_cache = 0, state = 0, activations = 0;
  double total() const { return weights + kv_cache + state + activations; }
};

// Bytes the cache grows by per token of one sequence: YOCO one global K/V
// (Hkv·Da each), the Transformer one per layer. SWA windows and gRet states
// do not grow with the sequence and count as state.
double kv_cache_bytes_per_token(const ModelConfig& cfg, const Storage& st);

// Memory while serving `batch` sequences of `capacity` tokens (prompt +
// generated) whose prefill has `prefill_tokens` tokens in flight at once
// (chunk × sequences prefilled together; the throughput protocol prefills one
// sequence at a time).
MemoryCost memory_cost(const ModelConfig& cfg, const Storage& st, int64_t batch, int64_t capacity,
                       int64_t prefill_tokens);
// Tokens in flight when `batch` prompts of `prompt` tokens are prefilled
// together in chunks of `prefill_chunk`.
int64_t prefill_tokens_in_flight(int64_t batch, int64_t prompt, int64_t prefill_chunk);

// How the kernels do the work, where it differs from the useful work the
// model counts by default (the defaults):
struct KernelView {
  // The prefill attention as a kernel computing a chunk's query rows in tiles
  // of this many (1: the useful work, FlashAttention's convention): the last
  // tile's padding rows multiply the keys its valid rows see. It matters where
  // a chunk holds few rows of each sequence (a large batch prefilled
  // together), not at all for chunks of whole tiles.
  int64_t attention_tile_rows = 1;
  // A step of at least this many rows runs the FFN's up half fused (the W1|W3
  // GEMM with SwiGLU in its epilogue: the GEMM writes F, not 2F, and the
  // SwiGLU pass is gone); 0: never.
  int64_t ffn_up_fused_from_rows = 0;
  // The residual stored once a layer (YOCO_RESIDUAL_PER_LAYER, cuda/runner/launch_count.hpp): the norm
  // between a layer's sublayers stores no residual, the layer's last norm adds both outputs, 2 bytes
  // an element a layer fewer (one activation element, the model's unit). YOCO's prefill where its FFN
  // runs whole and unfused (runner_kernels leaves it off with FFN row blocks or the FFN fused) and
  // F >= d; every Transformer layer where q's width is >= d, its decode steps too.
  bool residual_per_layer = false;
};

// Prefill of `batch` prompts of `prompt` tokens, `prefill_chunk` tokens per
// chunk, up to the logits of the last position (YOCO: early exit — the cross
// decoder runs for the last position only).
PhaseWork prefill_work(const ModelConfig& cfg, const Storage& st, int64_t batch, int64_t prompt,
                       int64_t prefill_chunk, const KernelView& kernels = {});

// One decode step of `batch` sequences that hold `context` tokens each: the new
// token attends to context + 1 keys.
PhaseWork decode_work(const ModelConfig& cfg, const Storage& st, int64_t batch, int64_t context,
                      const KernelView& kernels = {});

double roofline_time(const Work& w, const DeviceSpec& dev);
double roofline_time(const PhaseWork& w, const DeviceSpec& dev);

// DESIGN.md §4 throughput: prompts of seq_len − gen tokens, `gen` decode steps.
// Prompts are prefilled one sequence after another (prefill time × batch);
// decode steps serve the whole batch.
struct ThroughputCost {
  int64_t batch = 0;      // 0: not even one sequence fits
  double prefill_s = 0;   // all `batch` prefills
  double decode_s = 0;    // all `gen` steps
  double tokens_per_s = 0;
  MemoryCost memory;      // at that batch
};
// Usable device memory for the batch search: this fraction of the capacity
// (the rest is left for the CUDA context and library workspaces).
inline constexpr double kUsableMemoryFraction = 0.95;
// A throughput point costs one decode step per generated token (the step's
// work grows with the context, and the calibrated model's efficiencies are not
// linear in it, so the steps are not summed in closed form): the commands cap
// --gen here. 2^22 tokens, far more than any generation, take a fraction of a
// second a point; bench's 2^40 looped for hours before its first row.
inline constexpr int64_t kMaxThroughputGen = int64_t{1} << 22;
// batch 0 = the largest that fits in the device's usable memory (capped at
// `max_batch`); InputError when gen >= seq_len.
ThroughputCost throughput_cost(const ModelConfig& cfg, const Storage& st, const DeviceSpec& dev, int64_t seq_len,
                               int64_t gen, int64_t batch, int64_t prefill_chunk, int64_t max_batch = 1 << 20);

}  // namespace yoco::cost
