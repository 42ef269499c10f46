// yoco generate: prefill + greedy decoding with timings and the memory
// breakdown; --check compares every cached logit with the full forward.
#include <functional>
#include <iostream>

#include "args.hpp"
#include "commands.hpp"
#include "cuda_backend.hpp"
#include "decode_check.hpp"
#include "errors.hpp"
#include "format.hpp"
#include "safetensors.hpp"
#include "weights.hpp"
#include "greedy.hpp"
#include "host_memory.hpp"
#include "model_options.hpp"
#include "lists.hpp"
#include "mpi_inputs.hpp"
#include "mpi_job.hpp"
#include "sweep.hpp"
#include "progress.hpp"
#include "report.hpp"
#include "tokens.hpp"
#if defined(YOCO_HAVE_DIST)
#include "dist_backend.hpp"
#endif

namespace yoco::cli {

namespace {

constexpr int64_t kMaxCount = int64_t{1} << 40;  // beyond any memory; keeps products in range

CommandSpec generate_spec() {
  CommandSpec s;
  s.path = "yoco generate";
  s.usage =
      "yoco generate --model PRESET|FILE.json [--weights FILE.safetensors | --seed N]\n"
      "                     (--prompt-len N | --tokens 1,2,3 | --tokens-file FILE) --gen M [--batch B]\n"
      "                     [--dtype f64|f32 | --device cuda] [--prefill-chunk N] [--check]";
  s.summary =
      "Prefills the prompt (in chunks, cache sized for prompt + M tokens), then decodes M tokens greedily\n"
      "(argmax, ties to the lowest id), feeding each back. Prints the generated ids, the prefill time,\n"
      "the decode time per step and the memory breakdown. --device cuda runs the CUDA runner (bf16 weights,\n"
      "activations and caches, fp32 accumulation; decode steps replay a CUDA graph): the times include\n"
      "copying each step's logits to the host, which greedy decoding needs; memory is the device arena's\n"
      "(activations = its peak) plus `other` (CUDA context and libraries, cudaMemGetInfo).";
  s.options = model_option_specs();
  s.options.push_back({"--prompt-len", "N", "a deterministic synthetic prompt of N tokens, K and M as in bench's --lengths "
                                            "(from --seed; one per sequence)"});
  for (auto& o : token_option_specs()) s.options.push_back(o);
  s.options.push_back({"--gen", "M", "tokens to generate (>= 0, K and M as in --prompt-len); required"});
  s.options.push_back({"--batch", "B", "sequences decoded together (default 1; --tokens prompts are replicated)"});
  s.options.push_back({"--prefill-chunk", "N", "prefill chunk in tokens (>= 1, default 32768); refused under mpirun on the CPU (each rank prefills its shard in one step)"});
  s.options.push_back({"--check", "", "compare the cached logits with the full forward over prompt + generated tokens"});
  s.options.push_back({"--dry-run", "", "check the options, the model, the tokens and (--device cuda) the runners' YOCO_* "
                                        "switches, say what would run; run nothing, touch no device"});
  s.notes =
      "--check compares, for every sequence, the prefill's logits and those of each decode step with the\n"
      "full forward (parallel paradigm; chunkwise under mpirun) at the same positions, and passes when the largest RMS ratio is\n"
      "<= 1e-9 (f64) or <= 1e-4 (f32). A failed check exits with status 1. --check applies to --device cpu\n"
      "(the GPU's logits are checked against the reference by the GPU tests, tests/cuda).\n"
      "Progress (prefill, decode step i of M, the check) is redrawn on stderr when that is a terminal; with\n"
      "YOCO_PROGRESS=lines it is one line per report wherever stderr goes. Under mpirun the ranks' stderr is\n"
      "a pipe to mpirun, never a terminal: set YOCO_PROGRESS=lines (mpirun -x YOCO_PROGRESS=lines) to see it.";
  return s;
}

}  // namespace

int cmd_generate(const Args& args) {
  const CommandSpec spec = generate_spec();
  if (print_help_if_asked(spec, args)) return 0;
  const ParsedArgs a = parse_args(spec, args);
  a.exclusive({"--prompt-len", "--tokens", "--tokens-file"}, true);
  const int64_t gen = parse_count("--gen", a.require("--gen"), kMaxCount);
  const int64_t batch = a.get_int("--batch", 1, 1, kMaxCount);
  const int64_t chunk = a.get_int("--prefill-chunk", 32768, 1, INT64_MAX);
  // K and M as in --lengths ("4K"), so the same point is written the same way in every command.
  const int64_t prompt_len = a.has("--prompt-len") ? parse_length("--prompt-len", *a.get("--prompt-len"), kMaxCount) : 0;
  const bool check = a.has("--check");
  if (check && a.get_or("--device", "cpu") == "cuda")
    throw InputError("--check applies to --device cpu (its tolerances are the reference's; the GPU's logits are "
                     "checked against the reference by the GPU tests, tests/cuda)");
  const bool dry = a.has("--dry-run");
  const ModelChoice m = model_choice(a, !dry);

  refuse_prefill_chunk_under_mpirun(a, m.cuda);
  refuse_unshared_tokens_file(a);
  std::vector<int64_t> given;
  if (!a.has("--prompt-len")) given = tokens_from_args(a, m.cfg);
  const int64_t n = a.has("--prompt-len") ? prompt_len : static_cast<int64_t>(given.size());
  const std::string prompt_option =
      a.has("--prompt-len") ? "--prompt-len " + std::to_string(n)
                            : (a.has("--tokens") ? "--tokens" : "--tokens-file " + *a.get("--tokens-file"));
  check_prompt_splits(m.cfg, n, prompt_option);
  check_ranks_read_one_prompt(given, n, prompt_option);
  // On the GPU the host holds the tokens and one step's logits (as float and as double).
  const double host_cuda = static_cast<double>(batch) * (static_cast<double>(n + gen) * 8 * 3 +
                                                         static_cast<double>(m.cfg.vocab_size) * (4 + 8) * 2);
  require_host_memory(m.cuda ? host_cuda
                             : generation_bytes_estimate(m.cfg, precision_bytes(m.precision), static_cast<double>(batch),
                                                         static_cast<double>(n), static_cast<double>(gen),
                                                         static_cast<double>(chunk), check),
                      "generating " + std::to_string(gen) + " tokens after " + std::to_string(n) + " (batch " +
                          std::to_string(batch) + ") with " + m.cfg.name);
  if (dry) {
    if (m.cuda)
      if (const std::string why = cuda_model_unsupported_reason(m.cfg); !why.empty())
        throw InputError("--model " + m.cfg.name + ": the CUDA runners cannot run it: " + why);
    // The loaders' first step (CPU and CUDA alike): the file's header against the model, no tensor read.
    if (!m.weights.path.empty()) check_weights_file(SafetensorsReader(m.weights.path), m.cfg);
    const std::vector<std::string> switches = m.cuda ? cuda_runner_switches() : std::vector<std::string>{};
    std::string set;
    for (const auto& sw : switches) set += (set.empty() ? "" : ", ") + sw;
    std::cout << "yoco generate --dry-run: checked; nothing runs and no device is touched\n"
              << "  model " << m.cfg.name << " on " << (m.cuda ? "cuda" : "cpu") << ", weights " << m.weights.describe()
              << "; batch " << batch << ", prompt " << n << " tokens, generate " << gen << ", "
              << prefill_note(chunk, sharded_ranks(m.cuda))
              << (check ? ", --check" : "") << "\n";
    if (m.cuda) std::cout << "  runner switches: " << (set.empty() ? "none set (the defaults)" : set) << "\n";
    return 0;
  }
  std::vector<std::vector<int64_t>> prompts(static_cast<size_t>(batch));
  for (int64_t b = 0; b < batch; ++b)
    prompts[b] = a.has("--prompt-len") ? synthetic_prompt(m.seed, b, n, m.cfg.vocab_size) : given;
  const TokenBatch prompt = TokenBatch::from_sequences(prompts);

  auto runner = create_model_runner(m);
  std::cout << "model " << m.cfg.name << " (" << runner->architecture() << ", " << runner->param_count()
            << " parameters, weights " << m.weights.describe() << "), " << numerics_text(m) << "\n"
            << "batch " << batch << ", prompt " << n << " tokens"
            << (a.has("--prompt-len") ? " (synthetic, seed " + std::to_string(m.seed) + ")" : "") << ", generate "
            << gen << ", " << prefill_note(chunk, sharded_ranks(m.cuda)) << "\n";
  std::cout.flush();

  // A 3B model on the CPU takes about 0.5 s a step: a long generation said
  // nothing until its end. On stderr, when a terminal or YOCO_PROGRESS=lines
  // (progress.hpp), from rank 0 under mpirun; redrawn at most once a second,
  // so that fast steps stay fast.
  Progress progress(gen, !primary_process(), "generate");
  progress.step("prefill of " + std::to_string(n) + " tokens" + (batch > 1 ? " x " + std::to_string(batch) : ""));
  double last_draw = progress.elapsed_s();
  std::function<void(int64_t, const GreedyRun&)> report;
  if (progress.enabled())
    report = [&](int64_t j, const GreedyRun& r) {
      const double now = progress.elapsed_s();
      if (j + 1 < gen && now - last_draw < 1.0) return;
      last_draw = now;
      progress.point(j + 1, "decode", r.decode_s_per_step() * static_cast<double>(gen - j - 1));
    };
  const GreedyRun run = device_memory_errors_as_input(m, [&] {
    try {
      return run_greedy(*runner, prompt, gen, chunk, check, report);
    } catch (...) {
      progress.done();  // the error's line must not land on the progress line of a terminal
      throw;
    }
  });
  if (check) progress.point(gen, "check: the full forward over " + std::to_string(n + gen) + " tokens", -1);
  else progress.done();
  for (int64_t b = 0; b < batch; ++b) {
    std::cout << "seq " << b << ":";
    for (auto t : run.generated[b]) std::cout << " " << t;
    std::cout << "\n";
  }
  std::cout << strf("prefill: %.6f s\n", run.prefill_s);
  if (gen > 0)
    std::cout << strf("decode: %lld steps, %.6f s/step (%.3f ms/step)\n", static_cast<long long>(gen),
                      run.decode_s_per_step(), 1e3 * run.decode_s_per_step());
  else
    std::cout << "decode: no steps (--gen 0)\n";
  std::cout << "memory (activations = peak over prefill and decode"
            << (m.cuda ? "; the device arena's buffers" : "") << "):\n";
  print_memory(std::cout, run.memory, "  ");
  if (m.cuda) print_device_other(std::cout, *runner, "  ");
#if defined(YOCO_HAVE_DIST)
  if (auto* d = dynamic_cast<DistRunner*>(runner.get())) {
    // Memory above is rank 0's; what the ranks moved (a collective: every rank).
    std::cout << "communication over " << d->communicator().size() << " ranks (memory above: rank 0's; "
              << d->sharding() << "):\n";
    for (const PhaseReading& r : comm_readings(*d))
      if (r.reading.metric == "comm_bytes_received")
        std::cout << strf("  %-28s %12.0f B received by the busiest rank\n", r.phase.c_str(), r.reading.value);
  }
#endif

  if (!check) return 0;
  const DecodeCheck c = check_decode_against_forward(*runner, prompt, run);
  progress.done();
  // The sharded forward runs gRet chunkwise (dist_runner); one process runs the parallel form.
  std::cout << "check: cached logits vs full forward (" << (sharded_ranks(m.cuda) ? "chunkwise, sharded" : "parallel")
            << ") at " << c.positions
            << (c.positions == 1 ? " position x " : " positions x ") << c.sequences
            << (c.sequences == 1 ? " sequence: " : " sequences: ") << check_summary(c) << "\n";
  return c.pass ? 0 : 1;
}

}  // namespace yoco::cli
