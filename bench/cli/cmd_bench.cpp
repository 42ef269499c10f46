// yoco bench: the measured harness. With no arguments it runs the default job
// (bench/cli/default_job.cpp); otherwise one sweep of models × lengths.
#include <iostream>
#include <map>

#include "args.hpp"
#include "commands.hpp"
#include "bench_dry_run.hpp"
#include "cuda_backend.hpp"
#include "cost_model.hpp"
#include "cuda_status.hpp"
#if defined(YOCO_HAVE_DIST)
#include "dist_backend.hpp"
#endif
#include "default_job.hpp"
#include "errors.hpp"
#include "format.hpp"
#include "lists.hpp"
#include "mpi_inputs.hpp"
#include "mpi_job.hpp"
#if defined(YOCO_HAVE_DIST_CUDA)
#include "dist_cuda_backend.hpp"
#endif
#include "result_output.hpp"
#include "sweep.hpp"
#include "sweep_file.hpp"
#include "sweep_table.hpp"

namespace yoco::cli {

namespace {

CommandSpec bench_spec() {
  CommandSpec s;
  s.path = "yoco bench";
  s.usage = "yoco bench [--model A,B] [--lengths N,...] [options]   |   yoco bench   (the default job)";
  s.summary =
      "Measures memory, prefill latency, decode step latency and throughput (DESIGN.md §4) for each model at\n"
      "each length, within a time budget per point, next to the cost model's projection of the same point.\n"
      "A point that would exceed the budget or does not fit becomes rows that say so (method over_budget /\n"
      "out_of_memory / failed) beside its analytic row: the sweep never stops at a missing point.\n"
      "With no arguments: the default job (see below).";
  s.options = {
      {"--model", "A,B,...", "presets or config files (default yoco-tiny,transformer-tiny on the CPU, yoco-small,transformer-small on CUDA)"},
      {"--lengths", "N,...", "sequence lengths, K = 1024, M = 1048576 (default 2K,4K,8K,16K,32K on the CPU)"},
      {"--gen", "N", "throughput: generated tokens per sequence, prompt = length - N, below every length; K = 1024, M = 1048576 (default 1024, at most 4194304 = 2^22 = 4M)"},
      {"--batch", "auto|N", "auto (default): 1 for memory/prefill/decode, the largest that fits for throughput"},
      {"--max-batch", "N", "cap of the automatic throughput batch (default 8 on the CPU, 1024 on CUDA)"},
      {"--metrics", "LIST", "any of memory,prefill,decode,throughput (default all)"},
      {"--repeats", "N", "timed prefills per point; the median is reported, min and max kept (default 3)"},
      {"--warmup", "N", "untimed prefills before them (default 1)"},
      {"--decode-sample", "N", "decode steps timed per point; throughput scales a sample when gen > N (default 64)"},
      {"--prefill-chunk", "N", "prefill chunk in tokens (default 32768); the CUDA runners share it across the batch (chunk / batch tokens of each sequence per step)"},
      {"--device", "cpu|cuda", "cpu runs the reference; cuda the CUDA runners: bf16 weights and caches, fp32 accumulation (default cpu)"},
      {"--dtype", "f32|f64", "CPU reference precision (default f32; --device cpu only)"},
      // The defaults from the sweeps themselves, so that the help cannot drift from them.
      {"--budget-s", "S", "time budget per point in whole seconds (>= 1); repeats are cut first; a throughput run that fits only on its own gets one of its own (default " +
                              strf("%g", default_cpu_sweep().budget_s) + "; the GPU default job " +
                              strf("%g", default_gpu_sweep(false).budget_s) + ")"},
      {"--seed", "S", "weights and synthetic prompts (default 0)"},
      {"--device-name", "LABEL", "device_name of the rows instead of the CPU's or GPU's name (CI baselines that must join across runners)"},
      {"--format", "table|csv|json", "what goes to stdout (default table)"},
      {"--out", "FILE.csv", "also write the rows as CSV, rewritten after each point (an interrupted run keeps every completed point)"},
      {"--resume", "", "continue the sweep in --out: its completed points are kept, not measured again (see below)"},
      {"--no-extrapolate", "", "a point too long for the budget or too large for the device gets over_budget / out_of_memory rows only (default: its prefill and decode are extrapolated from the model cut to 1 and 2 layer units, method extrapolated)"},
      {"--cupti", "", "--device cuda: per-kernel GPU time (CUPTI activity records) of one more prefill and 16 decode steps after each latency point's timed runs, by kernel and by family (default on in the GPU default job)"},
      {"--no-cupti", "", "the GPU default job without the CUPTI breakdown"},
      {"--default-job", "", "run the default job even with other options (they override its settings)"},
      {"--quick", "", "GPU default job: 32K and 128K only, a first look (writes sweep-quick.csv)"},
      {"--results-dir", "DIR", "default job: where result folders go (default <source>/reports/results); another folder gets its report beside its results (DIR/README.md, DIR/figures), never the repo's"},
      {"--no-report", "", "default job: do not regenerate the report (reports/README.md and the figures, or DIR's)"},
      {"--sweep-file", "NAME.csv", "default job: its file in the results folder (default sweep.csv on a GPU, "
                                   "bench.csv on the CPU): points outside the job's models and lengths, e.g. "
                                   "yoco-3b at 2M,4M, in a file of their own that --resume continues"},
      {"--dry-run", "", "check the options, the models and (--device cuda) the runners' YOCO_* switches, list the points and the file; run nothing, touch no device (any machine: a device call's commands checked ahead); alone, the default job's preview"},
  };
  s.notes =
      "Methods (reports/SCHEMA.md): measured = full runs timed, median of repeats; sampled = decode steps\n"
      "timed on a sample and scaled (half at the start, half at the end of the generation, the positions\n"
      "between skipped); exact = the reference's memory accounting; analytic = the cost model (device\n"
      "'roofline of <CPU> (measured ceilings)': this machine's GEMM rate and copy bandwidth, measured at the\n"
      "start of the run). Progress goes to stderr when it is a terminal.\n"
      "\n"
      "--device cuda (the cuda preset, a GPU present): the CUDA runners (bf16 weights, activations and caches,\n"
      "fp32 gRet state and accumulation), timed with CUDA events on the model's stream; memory from the\n"
      "device arena (weights, kv_cache, state, activations = its peak) + other (cudaMemGetInfo) and the\n"
      "device peak; ceilings from a bf16 cuBLAS GEMM and a device-to-device copy; analytic rows in bf16 on\n"
      "them ('<GPU> (measured ceilings)'); the throughput batch fits in 90% of the free device memory.\n"
      "Decode steps replay a CUDA graph after one untimed warm-up step (the capture); a latency point also\n"
      "times 16 eager steps (phase decode_eager) and reports the host's enqueue time of both\n"
      "(decode_host_enqueue_s). A point that does not fit is an out_of_memory row saying what did not fit.\n"
      "\n"
      "Long points (DESIGN.md §5): a point whose full run is predicted over --budget-s, or does not fit the\n"
      "device, is timed on the model cut to 1 and 2 layer units (YOCO: a self + a cross layer; Transformer:\n"
      "one layer) at the full length and batch: prefill and decode step = t(1) + (U - 1) x (t(2) - t(1)) for\n"
      "the model's U units, method extrapolated, the notes giving both probes and why the full model did not\n"
      "run; its memory and throughput rows stay over_budget / out_of_memory beside the analytic projection.\n"
      "\n"
      "Throughput batch (--batch auto): the largest up to --max-batch whose generation fits by the device's\n"
      "memory model, then allocated (caches for prompt + gen tokens, one token computed per sequence); if it\n"
      "does not fit, a binary search by allocation between 1 and it finds the largest that does; max_batch's\n"
      "notes say which. When the batch's prefill would take over a quarter of --budget-s, one sequence's\n"
      "prefill is timed and multiplied by the batch, and the decode runs on the batch's caches moved to the\n"
      "prompt's length by skipping positions (method sampled; the notes say so).\n"
      "\n"
      "The default job (no arguments). On a GPU (cuda preset): yoco-3b and transformer-3b at 32K, 64K, 128K,\n"
      "256K, 512K and 1M (--quick: 32K and 128K), 3 repeats after 1 warm-up, 64 decode steps, throughput at\n"
      "the largest batch up to 1024, --cupti, budget 120 s per point for its timed runs (24 minutes for the 12\n"
      "points; throughput runs under a budget of their own, weight initialisation, layer probes and profiling\n"
      "on top), into reports/results/<gpu>/sweep.csv\n"
      "(sweep-quick.csv); --device cpu runs the CPU job there.\n"
      "Without a GPU: yoco-tiny and transformer-tiny on the CPU at 2K-32K (the Transformer's quadratic\n"
      "prefill shows; a few minutes on 2 cores) into reports/results/cpu-<cpu>/bench.csv. Then both: the\n"
      "analytic projection of yoco-3b vs transformer-3b at 32K-1M on an H100 (datasheet) with KV bytes per\n"
      "token of every preset, and reports/report.py regenerates reports/README.md and the figures.\n"
      "\n"
      "Interrupted sweeps: --out is rewritten (atomically) after each point, so a run stopped by Ctrl-C,\n"
      "SIGTERM or a kill keeps every completed point; Ctrl-C / SIGTERM say how many (exit 130 / 143). The same\n"
      "command with --resume keeps the points already in --out and measures the rest; the file then holds\n"
      "what a full run writes (timings aside). Kept as they are, line for line: the measured rows (measured,\n"
      "sampled, extrapolated, exact and the rows of points that did not run) of every completed point.\n"
      "Made again, even when every point is complete: the ceiling rows (this machine's GEMM rate and copy\n"
      "bandwidth, measured at the start of every run), the analytic rows (their roofline times follow from\n"
      "those ceilings; their counted values are checked equal to the file's) and the ratio rows (from the\n"
      "rows above), all with this run's git_sha and timestamp: a file never mixes two runs' ceilings.\n"
      "A file from another device, --device-name, --dtype, --batch,\n"
      "--max-batch, --gen, --metrics or --prefill-chunk, or with points outside --model x --lengths, is\n"
      "refused (exit 2); a --out that does not exist yet starts the sweep afresh. The default job resumes its\n"
      "bench.csv.\n"
      "\n"
      "Exit status: 0 when the sweep ran to its end, also when points became over_budget, out_of_memory or\n"
      "failed rows: those are results the rows report (the sweep never stops at a missing point), and a gate\n"
      "judges them against a baseline: yoco compare --strict fails a value the baseline measured that the run\n"
      "lacks (scripts/ci-bench.sh does); 1 a lost device stopped the sweep (the points so far kept in --out);\n"
      "2 bad input; 130 / 143 Ctrl-C / SIGTERM.";
  return s;
}

// The CUDA sweep's defaults: the CPU's, with the small presets (head dim 64,
// which the CUDA kernels serve; the tiny presets' 16 is not).
SweepSettings default_cuda_sweep() {
  SweepSettings s = default_cpu_sweep();
  s.models = {"yoco-small", "transformer-small"};
  s.max_batch = 1024;  // the device's memory decides the throughput batch, not a CPU-sized cap
  return s;
}

std::set<std::string> parse_metrics(const std::string& text) {
  static const std::set<std::string> known = {"memory", "prefill", "decode", "throughput"};
  std::set<std::string> out;
  // A set would merge "memory,memory" silently; a repeated metric is more likely a typo for another one.
  for (const auto& m : split_unique_list("--metrics", text)) {
    if (!known.count(m)) throw InputError("--metrics: unknown metric '" + m + "' (memory, prefill, decode, throughput)");
    out.insert(m);
  }
  return out;
}

}  // namespace

SweepSettings sweep_settings(const ParsedArgs& a, const SweepSettings& defaults) {
  SweepSettings s = defaults;
  if (auto m = a.get("--model")) s.models = split_unique_list("--model", *m);
  if (auto l = a.get("--lengths")) s.lengths = parse_length_list("--lengths", *l);
  // The analytic throughput row costs a decode step per generated token, as yoco model's does.
  // A length, as the README says lengths are written: 1K = 1024 (the suite's one length parser).
  if (const auto g = a.get("--gen")) s.gen = parse_length("--gen", *g, cost::kMaxThroughputGen);
  const std::string batch = a.get_or("--batch", s.batch > 0 ? std::to_string(s.batch) : "auto");
  s.batch = batch == "auto" ? 0 : parse_int("--batch", batch, 1, 1 << 20);
  s.max_batch = a.get_int("--max-batch", s.max_batch, 1, 1 << 20);
  if (auto m = a.get("--metrics")) s.metrics = parse_metrics(*m);
  s.repeats = static_cast<int>(a.get_int("--repeats", s.repeats, 1, 1000));
  s.warmup = static_cast<int>(a.get_int("--warmup", s.warmup, 0, 1000));
  s.decode_sample = a.get_int("--decode-sample", s.decode_sample, 2, 1 << 20);
  const bool cuda = a.get_or("--device", "cpu") == "cuda";
  refuse_prefill_chunk_under_mpirun(a, cuda);
  s.prefill_chunk = a.get_int("--prefill-chunk", s.prefill_chunk, 1, int64_t{1} << 40);
  s.budget_s = static_cast<double>(a.get_int("--budget-s", static_cast<int64_t>(s.budget_s), 1, 1 << 30));
  s.precision = parse_precision("--dtype", a.get_or("--dtype", precision_name(s.precision)));
  s.seed = a.get_u64("--seed", s.seed);
  if (const auto name = a.get("--device-name")) {
    // The label is a column of every row and part of compare's join key: a line
    // break would cut the CSV record, and an empty one would silently stand for
    // the detected name (the join across runners it is for would not happen).
    if (name->find_first_not_of(" \t") == std::string::npos)
      throw InputError("--device-name: empty label (give the name the rows should carry)");
    for (const char c : *name)
      if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f)
        throw InputError("--device-name: the label holds a control character (a line break or tab): give it on one line");
    s.device_name = *name;
  }
  if (a.has("--no-extrapolate")) s.extrapolate = false;
  if (a.has("--cupti") && a.has("--no-cupti")) throw InputError("--cupti and --no-cupti: give one");
  if (a.has("--cupti")) s.cupti = true;
  if (a.has("--no-cupti")) s.cupti = false;
  for (const auto& m : s.models) resolve_model(m);  // a bad name fails before anything runs
  if (const auto out = a.get("--out"))
    for (const auto& m : s.models) refuse_output_over_input("--out", *out, m, "a --model file");
  // Throughput generates --gen tokens after a prompt of length - gen: a length
  // at or below --gen has no prompt, and its throughput rows would be missing
  // with nothing saying why. Said before anything runs.
  if (s.metrics.count("throughput"))
    for (int64_t n : s.lengths)
      if (n <= s.gen)
        throw InputError("--gen " + std::to_string(s.gen) + " leaves no prompt at length " + length_label(n) +
                         " (throughput: prompt = length - gen); give a --gen below every length, or leave throughput "
                         "out of --metrics");
  // Under mpirun every prompt is split over the ranks: one they cannot split
  // would be a point of `failed` rows and exit 0, found only once it runs.
  if (mpi_job()) {
    const bool latency = s.metrics.count("memory") || s.metrics.count("prefill") || s.metrics.count("decode");
    for (const auto& m : s.models) {
      const ModelConfig cfg = resolve_model(m);
      for (int64_t n : s.lengths) {
        if (latency) check_prompt_splits(cfg, n, "--lengths " + length_label(n) + ", --model " + m);
        if (s.metrics.count("throughput"))
          check_prompt_splits(cfg, n - s.gen, "--gen " + std::to_string(s.gen) + " at --lengths " + length_label(n) +
                                                  ", --model " + m + " (throughput: prompt = length - gen)");
      }
    }
    s.sharded_ranks = sharded_ranks(cuda);
  }
  return s;
}

int cmd_bench(const Args& args) {
  const CommandSpec spec = bench_spec();
  if (print_help_if_asked(spec, args)) return 0;
  const ParsedArgs a = parse_args(spec, args);
  const std::string device = a.get_or("--device", "cpu");
  if (device != "cpu" && device != "cuda") throw InputError("--device: expected cpu or cuda, got '" + device + "'");
  // No options (--dry-run aside): the default job, previewed by the dry run as it runs.
  const bool plain = args.empty() || (args.size() == 1 && a.has("--dry-run"));
  if (mpi_job() && (plain || a.has("--default-job") || a.has("--quick")))
    throw InputError("the default job runs one process: under mpirun give the sweep (--model, --lengths; "
                     "the rows say the rank count)");
#if !defined(YOCO_HAVE_DIST_CUDA)
  if (mpi_job() && device == "cuda")
    throw InputError("--device cuda under mpirun: this yoco was built without the sharded CUDA path (the cuda "
                     "preset with MPI); under mpirun the CPU reference runs sharded (drop --device cuda)");
#endif
  if (plain || a.has("--default-job") || a.has("--quick")) return run_default_job(a);
  for (const char* o : {"--results-dir", "--no-report", "--sweep-file"})
    if (a.has(o)) throw InputError(std::string(o) + " applies to the default job only (add --default-job)");
  const bool dry = a.has("--dry-run");
  if (device == "cuda") {
    if (a.has("--dtype"))
      throw InputError("--dtype: the CUDA runners store bf16 and accumulate in fp32; --dtype applies to --device cpu");
    const CudaStatus c = cuda_status();
    // A dry run needs the CUDA build (what it checks lives there), not a device.
    if (!c.built || (!c.device && !dry)) throw InputError("--device cuda: " + c.why_not);
    const auto missing = cuda_backend_missing();
    if (!missing.empty()) {
      std::string lacks;
      for (const auto& m : missing) lacks += (lacks.empty() ? "" : "; ") + m;
      throw InputError("--device cuda: the CUDA sweep backend lacks: " + lacks);
    }
    // The same sweep on the GPU.
    const OutputFormat format = parse_output_format(a);
    const SweepSettings s = sweep_settings(a, default_cuda_sweep());
    // A model the kernels cannot serve is refused before anything runs, as forward and generate do.
    for (const auto& m : s.models)
      if (const std::string why = cuda_model_unsupported_reason(resolve_model(m)); !why.empty())
        throw InputError("--model " + m + ": the CUDA runners cannot run it: " + why);
    const std::vector<std::string> switches = cuda_runner_switches();
    if (dry) return print_bench_dry_run(s, {device, "the sweep", a.get("--out"), a.has("--resume"), switches});
    if (auto out = a.get("--out")) prepare_output_path(*out);
    const int points = static_cast<int>(s.models.size() * s.lengths.size());
    const SweepFile file(a.get("--out"), a.has("--resume"), points);
#if defined(YOCO_HAVE_DIST_CUDA)
    if (dist::Communicator* comm = mpi_job()) {
      if (s.cupti) throw InputError("--cupti under mpirun: the kernel breakdown is taken in one process");
      DistCudaBackend backend(s.device_name, *comm);
      Progress progress(points, !primary_process());
      const auto rows = run_sweep(s, backend, progress, file.io());
      emit_rows(a, format, rows, [&] { print_sweep_table(rows); });
      return 0;
    }
#endif
    CudaBackend backend(s.device_name);
    Progress progress(points);
    const auto rows = run_sweep(s, backend, progress, file.io());
    emit_rows(a, format, rows, [&] { print_sweep_table(rows); });
    return 0;
  }
  const OutputFormat format = parse_output_format(a);
  const SweepSettings s = sweep_settings(a, default_cpu_sweep());
  if (s.cupti) throw InputError("--cupti profiles GPU kernels: it needs --device cuda");
  if (dry) return print_bench_dry_run(s, {device, "the sweep", a.get("--out"), a.has("--resume"), {}});
  if (auto out = a.get("--out")) prepare_output_path(*out);  // before any measurement
  const int points = static_cast<int>(s.models.size() * s.lengths.size());
  const SweepFile file(a.get("--out"), a.has("--resume"), points);  // --resume: read and checked first
  Progress progress(points, !primary_process());
#if defined(YOCO_HAVE_DIST)
  if (dist::Communicator* comm = mpi_job()) {
    DistCpuBackend backend(s.device_name, *comm);
    const auto rows = run_sweep(s, backend, progress, file.io());
    emit_rows(a, format, rows, [&] { print_sweep_table(rows); });
    return 0;
  }
#endif
  const auto rows = run_cpu_sweep(s, progress, file.io());
  emit_rows(a, format, rows, [&] { print_sweep_table(rows); });
  return 0;
}

}  // namespace yoco::cli
