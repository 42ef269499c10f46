// The throughput run and its batch search (sweep_steps.hpp).
#include <algorithm>

#include "format.hpp"
#include "lists.hpp"
#include "sweep_steps.hpp"
#include "token_batch.hpp"

namespace yoco::cli {

namespace {

// A generation of `batch` sequences with caches for `capacity` tokens and a
// prompt of `prompt` tokens each (the runner's shortest: what a decode on
// skipped positions starts from).
void start_generation(ModelRunner& r, int64_t batch, int64_t prompt, int64_t capacity, int64_t chunk) {
  std::vector<std::vector<int64_t>> seqs(static_cast<size_t>(batch), std::vector<int64_t>(static_cast<size_t>(prompt), 1));
  r.run_prefill(TokenBatch::from_sequences(seqs), capacity - prompt, chunk);
}

// The throughput's batch search: whether `batch` sequences' caches fit beside
// one prefill step's activations -- a prompt of chunk / batch tokens each (at
// least one, at most the prompt), what a device runner holds at once whatever
// the prompt's length. Cheap: about one chunk computed.
bool generation_fits(ModelRunner& r, int64_t batch, int64_t prompt_len, int64_t capacity, int64_t chunk) {
  const int64_t step = std::min(prompt_len, std::max<int64_t>(r.shortest_prompt(), chunk / batch));
  try {
    start_generation(r, batch, step, capacity, chunk);
    return true;
  } catch (const std::bad_alloc&) {
    return false;
  }
}

struct NothingFits : std::bad_alloc {
  const char* what() const noexcept override {
    return "not even one sequence's generation fits when allocated (the batch search found none)";
  }
};

}  // namespace

void measure_throughput(const SweepSettings& s, DeviceBackend& dev, Progress& progress, ModelRunner& runner,
                        const ModelConfig& cfg, int64_t n, int64_t Bt, const std::string& bt_note, bool tp_one,
                        PointResult& res) {
  const int64_t dec_warm = dev.decode_warmup_steps();
  const int64_t prompt_len = n - s.gen, capacity = n + dec_warm;
  int64_t batch = Bt;
  res.tp_batch_note = bt_note;
  res.throughput_batch = batch;
  if (s.batch == 0) {
    progress.step("throughput: allocating batch " + std::to_string(batch));
    if (!generation_fits(runner, batch, prompt_len, capacity, s.prefill_chunk)) {
      int64_t lo = 0, hi = batch;  // lo fits (0: none known), hi does not
      while (hi - lo > 1) {
        const int64_t mid = lo + (hi - lo) / 2;
        progress.step("throughput: batch search, allocating " + std::to_string(mid));
        (generation_fits(runner, mid, prompt_len, capacity, s.prefill_chunk) ? lo : hi) = mid;
      }
      if (lo == 0) throw NothingFits();  // the caller's out_of_memory row
      res.tp_batch_note = bt_note + "; batch " + std::to_string(batch) +
                          " did not fit when allocated, a binary search by allocation found " + std::to_string(lo);
      batch = lo;
      res.throughput_batch = batch;
    } else {
      res.tp_batch_note = bt_note + ", confirmed by allocating it";
    }
  }
  std::string prefill_how;
  if (s.warmup > 0 && !(s.metrics.count("memory") || s.metrics.count("prefill") || s.metrics.count("decode"))) {
    // No latency prefill ran before on this runner: one untimed prefill of a
    // sequence warms it (the device's kernels loaded, the GEMM plans chosen).
    progress.step("throughput: warm-up prefill 1 x " + length_label(prompt_len));
    runner.run_prefill(TokenBatch::from_sequences(prompts(s.seed + 1, 1, prompt_len, cfg.vocab_size)), 0,
                       s.prefill_chunk);
    prefill_how = "; after an untimed warm-up prefill of one sequence";
  }
  if (tp_one && batch > 1) {
    progress.step("throughput: prefill 1 x " + length_label(prompt_len) + " (x " + std::to_string(batch) + ")");
    const TokenBatch one = TokenBatch::from_sequences(prompts(s.seed + 1, 1, prompt_len, cfg.vocab_size));
    const double t = time_prefill(dev, runner, one, 0, s.prefill_chunk);
    res.tp_prefill_s = t * static_cast<double>(batch);
    // The batch's caches, moved to the prompt's length without computing it.
    const int64_t start = runner.shortest_prompt();
    start_generation(runner, batch, start, capacity, s.prefill_chunk);
    runner.skip_positions(prompt_len - start);
    prefill_how += "; prefill sampled: one sequence of " + std::to_string(prompt_len) + " tokens timed (" +
                  strf("%.4g", t) + " s) x " + std::to_string(batch) +
                  " (the batch's would take over a quarter of --budget-s); decode on the batch's caches moved to "
                  "the prompt's length by skipping positions (a step costs the same whatever the cached values)";
    // Sharded, a skip cannot spread the prompt's rows over the ranks' shards: the number must say so.
    if (start > 1)
      prefill_how += "; sharded: the skipped positions sit on one rank, so the decode is timed with that rank "
                     "holding the whole prompt (an upper bound of the sharded decode)";
    res.throughput_sampled = true;
  } else {
    progress.step("throughput: prefill " + std::to_string(batch) + " x " + length_label(prompt_len));
    const TokenBatch prompt = TokenBatch::from_sequences(prompts(s.seed + 1, batch, prompt_len, cfg.vocab_size));
    res.tp_prefill_s = time_prefill(dev, runner, prompt, s.gen + dec_warm, s.prefill_chunk);
    if (const std::string how = dev.runner_note(cfg, batch); !how.empty()) prefill_how += "; " + how;
  }
  progress.step("throughput: decode");
  warm_up_decode(dev, runner, batch);
  std::vector<double> steps;
  bool decode_sampled = false;
  if (s.gen <= s.decode_sample) {
    steps = time_decode_steps(dev, runner, batch, s.gen);
  } else {
    // Sampled: half the sample at the start of the generation, half at its end
    // (the positions between are skipped, not computed); a step's cost is affine
    // in its context, so the mean of the two halves is the mean over all steps.
    const int64_t head = s.decode_sample / 2, tail = s.decode_sample - head;
    steps = time_decode_steps(dev, runner, batch, head);
    runner.skip_positions(s.gen - s.decode_sample);
    const auto t = time_decode_steps(dev, runner, batch, tail);
    steps.insert(steps.end(), t.begin(), t.end());
    decode_sampled = true;
  }
  res.throughput_sampled = res.throughput_sampled || decode_sampled;
  double sum = 0;
  for (double t : steps) sum += t;
  res.tp_decode_s = sum / static_cast<double>(steps.size()) * static_cast<double>(s.gen);
  res.throughput = static_cast<double>(batch * s.gen) / (*res.tp_prefill_s + *res.tp_decode_s);
  res.throughput_note =
      "prompt " + std::to_string(prompt_len) + " + " + std::to_string(s.gen) + " generated, batch " +
      std::to_string(batch) + " (" + res.tp_batch_note + "); prefill " + strf("%.3f", *res.tp_prefill_s) +
      " s, decode " + strf("%.3f", *res.tp_decode_s) + " s; " + prefill_note(s.prefill_chunk, s.sharded_ranks) +
      prefill_how +
      (decode_sampled ? strf("; decode sampled: %lld steps at the start and %lld at the end of %lld, mean step x %lld",
                             static_cast<long long>(s.decode_sample / 2),
                             static_cast<long long>(s.decode_sample - s.decode_sample / 2),
                             static_cast<long long>(s.gen), static_cast<long long>(s.gen))
                      : std::string("; every decode step timed")) +
      (dec_warm > 0 ? "; after " + std::to_string(dec_warm) + " untimed warm-up decode step" +
                          (dec_warm == 1 ? "" : "s") + " (the device's)"
                    : std::string());
}

}  // namespace yoco::cli
