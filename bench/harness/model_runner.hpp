#pragma once
// One handle on any CPU reference model: YocoModel<T> or TransformerModel<T>
// (chosen by ModelConfig::is_yoco()), T = float or double, with its decoding
// cache. Logits come back as double whatever T is (float -> double is exact),
// so callers -- the command line, the benchmark harness -- need no templates.
#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>
#include <utility>

#include "config.hpp"
#include "gret.hpp"
#include "memory.hpp"
#include "tensor.hpp"
#include "token_batch.hpp"

namespace yoco {

enum class Precision { f32, f64 };
const char* precision_name(Precision p);  // "f32" | "f64"
int precision_bytes(Precision p);         // 4 | 8
// "f32" | "f64"; otherwise InputError naming `option`.
Precision parse_precision(const std::string& option, const std::string& text);

// Where the parameters come from: a safetensors file, or the counter-based init.
struct WeightSource {
  std::string path;  // empty: Weights<T>::init(cfg, seed)
  uint64_t seed = 0;
  static WeightSource from_seed(uint64_t s) { return {"", s}; }
  static WeightSource from_file(std::string p) { return {std::move(p), 0}; }
  std::string describe() const;  // "seed 0" | "file W.safetensors"
};

// A model's logits as the runners hand them back (float -> double is exact).
template <class T>
Mat<double> to_double(Mat<T>&& m) {
  if constexpr (std::is_same_v<T, double>) return std::move(m);
  else return m.template cast<double>();
}

class ModelRunner {
 public:
  virtual ~ModelRunner() = default;

  // Loads or initialises the weights (InputError for a bad file, or for a model
  // too large for this machine's memory) and builds the model.
  static std::unique_ptr<ModelRunner> create(const ModelConfig& cfg, Precision precision, const WeightSource& weights);

  virtual const ModelConfig& config() const = 0;
  virtual Precision precision() const = 0;
  // True for YOCO with a gRet self-decoder: the only models with paradigms.
  bool has_gret() const;
  // "YOCO, gRet self-decoder" | "YOCO, SWA self-decoder (window 64)" | "GQA Transformer";
  // a device runner adds where it runs and how it stores ("..., bf16 weights and caches on <GPU>").
  virtual std::string architecture() const;
  int64_t param_count() const;

  // Logits at every position, [batch * length, vocab], row b * length + i for
  // token i of sequence b. Stateless (the cache is untouched). A paradigm other
  // than parallel is an InputError for models without gRet.
  virtual Mat<double> forward(const TokenBatch& tokens, GretParadigm paradigm = GretParadigm::parallel) const = 0;

  // Starts a generation: drops any previous cache, prefills `prompt` in chunks
  // of `prefill_chunk` tokens into a cache sized for prompt + max_new_tokens.
  // Returns the logits at the last prompt position, [batch, vocab].
  virtual Mat<double> prefill(const TokenBatch& prompt, int64_t max_new_tokens, int64_t prefill_chunk) = 0;
  // One token per sequence; returns [batch, vocab]. Needs a prefill first.
  virtual Mat<double> decode_step(const std::vector<int64_t>& tokens) = 0;

  // The same work as prefill / decode_step without handing the logits back:
  // what a timed region calls, so that a device runner's copy of the logits
  // to the host is not part of a step's latency (it leaves them on the
  // device). The CPU runners: prefill / decode_step, the result dropped.
  virtual void run_prefill(const TokenBatch& prompt, int64_t max_new_tokens, int64_t prefill_chunk) {
    prefill(prompt, max_new_tokens, prefill_chunk);
  }
  virtual void run_decode_step(const std::vector<int64_t>& tokens) { decode_step(tokens); }

  // Allocates now what a prefill of this shape would allocate for the generation's length (caches
  // for length + max_new_tokens tokens per sequence, the decode step's buffers), so that the prefill
  // that follows keeps them and allocates nothing: what the harness calls, outside the timer, before
  // a timed prefill whose generation differs from the one before (a point's last repeat, which
  // leaves the decode steps room). Drops the generation in progress. A shape the prefill would
  // refuse is left for it to refuse. A no-op where a prefill allocates nothing ahead: the CPU
  // runners, and the sharded ones (each prefill takes its shard and drops the generation).
  virtual void reserve_generation(int64_t /*batch*/, int64_t /*length*/, int64_t /*max_new_tokens*/,
                                  int64_t /*prefill_chunk*/) {}

  // Timing only: advances the cache by `n` positions without computing them, so
  // that a sampled decode can time steps late in a long generation without
  // running every step before them. A step costs the same whatever the cached
  // values are, but the logits after a skip are meaningless.
  virtual void skip_positions(int64_t n) = 0;

  // weights, kv_cache and state of the current cache; activations = peak of the
  // last forward / prefill / decode_step call.
  virtual MemoryBreakdown memory() const = 0;
  virtual int64_t position() const = 0;  // tokens in the cache per sequence (0 before prefill)
  virtual int64_t capacity() const = 0;  // tokens the cache can hold
  // The shortest prompt prefill takes: a sharded runner needs a token (or two
  // chunks) on every rank, so a prompt the harness makes up (the start of a
  // generation it moves on by skipping) must be at least this long.
  virtual int64_t shortest_prompt() const { return 1; }
};

}  // namespace yoco
