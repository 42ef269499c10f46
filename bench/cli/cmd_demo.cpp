// yoco demo: the suite's smoke test. For each tiny model: initialise (seed 0),
// prefill a synthetic prompt in chunks, decode greedily, and check that the
// cached logits match the full forward.
#include <iostream>

#include "args.hpp"
#include "commands.hpp"
#include "decode_check.hpp"
#include "format.hpp"
#include "greedy.hpp"
#include "host_memory.hpp"
#include "lists.hpp"
#include "model_runner.hpp"
#include "report.hpp"
#include "tokens.hpp"

namespace yoco::cli {

namespace {

CommandSpec demo_spec() {
  CommandSpec s;
  s.path = "yoco demo";
  s.usage = "yoco demo [--dtype f64|f32] [--prompt-len N] [--gen M] [--prefill-chunk N]";
  s.summary =
      "For yoco-tiny, yoco-swa-tiny and transformer-tiny (weights from seed 0): prefill a synthetic prompt\n"
      "in chunks, generate greedily, and check that the logits of the cached path (chunked prefill +\n"
      "decode steps) match the full forward over prompt + generated tokens. Prints a table; exits 1 if\n"
      "any check fails.";
  s.options = {
      {"--dtype", "f64|f32", "compute precision (default f64; tolerance 1e-9 in f64, 1e-4 in f32)"},
      {"--prompt-len", "N", "prompt tokens, K and M as in --lengths (default 200)"},
      {"--gen", "M", "tokens to generate, K and M as in --prompt-len (default 32)"},
      {"--prefill-chunk", "N", "prefill chunk (default 64, so that chunking is exercised)"},
  };
  return s;
}

}  // namespace

int cmd_demo(const Args& args) {
  const CommandSpec spec = demo_spec();
  if (print_help_if_asked(spec, args)) return 0;
  const ParsedArgs a = parse_args(spec, args);
  const Precision precision = parse_precision("--dtype", a.get_or("--dtype", "f64"));
  const int64_t n = a.has("--prompt-len") ? parse_length("--prompt-len", *a.get("--prompt-len"), 1 << 20) : 200;
  const int64_t gen = a.get("--gen") ? parse_count("--gen", *a.get("--gen"), 1 << 20) : 32;
  const int64_t chunk = a.get_int("--prefill-chunk", 64, 1, INT64_MAX);
  const char* const models[] = {"yoco-tiny", "yoco-swa-tiny", "transformer-tiny"};
  // generate's host-memory gate, for every model before any runs: a length this
  // machine cannot hold is exit 2 now, not an out-of-memory failure minutes in.
  for (const char* name : models)
    require_host_memory(generation_bytes_estimate(preset_config(name), precision_bytes(precision), 1,
                                                  static_cast<double>(n), static_cast<double>(gen),
                                                  static_cast<double>(chunk), true),
                        "the demo of " + std::string(name) + " (prompt " + std::to_string(n) + ", generate " +
                            std::to_string(gen) + ")");

  std::cout << "yoco demo: dtype " << precision_name(precision) << ", prompt " << n << " tokens (synthetic, seed 0), "
            << gen << " generated, prefill chunk " << chunk << ", batch 1, weights seed 0\n\n";
  TextTable table({"model", "params", "prompt", "generated", "prefill s", "decode ms/step", "memory total",
                   "max |diff|", "max RMS ratio", "check"});
  bool all_pass = true;
  for (const char* name : models) {
    const ModelConfig cfg = preset_config(name);
    auto runner = ModelRunner::create(cfg, precision, WeightSource::from_seed(0));
    const TokenBatch prompt = TokenBatch::single(synthetic_prompt(0, 0, n, cfg.vocab_size));
    const GreedyRun run = run_greedy(*runner, prompt, gen, chunk, true);
    const DecodeCheck c = check_decode_against_forward(*runner, prompt, run);
    all_pass = all_pass && c.pass;
    table.add_row({name, std::to_string(runner->param_count()), std::to_string(n), std::to_string(gen),
                   strf("%.4f", run.prefill_s), gen > 0 ? strf("%.3f", 1e3 * run.decode_s_per_step()) : "-",
                   human_bytes(static_cast<double>(run.memory.total())), strf("%.3g", c.max_abs_diff),
                   strf("%.3g", c.max_rms_ratio), c.pass ? "PASS" : "FAIL"});
  }
  std::cout << table.str() << "\n"
            << "check: logits of chunked prefill + " << gen << " decode steps vs the full forward (parallel) at "
            << gen + 1 << (gen == 0 ? " position" : " positions") << ", RMS-ratio tolerance " << strf("%.0e", decode_check_tolerance(precision))
            << "\n"
            << (all_pass ? "all checks PASS\n" : "some check FAILED\n");
  return all_pass ? 0 : 1;
}

}  // namespace yoco::cli
