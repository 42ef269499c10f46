// yoco forward: the logits of a model over one token sequence, as .npy.
#include <iostream>

#include "args.hpp"
#include "atomic_file.hpp"
#include "commands.hpp"
#include "errors.hpp"
#include "mpi_inputs.hpp"
#include "mpi_job.hpp"
#include "host_memory.hpp"
#include "model_options.hpp"
#include "npy.hpp"
#include "result_output.hpp"

namespace yoco::cli {

namespace {

CommandSpec forward_spec() {
  CommandSpec s;
  s.path = "yoco forward";
  s.usage =
      "yoco forward --model PRESET|FILE.json [--weights FILE.safetensors | --seed N]\n"
      "                    (--tokens 1,2,3 | --tokens-file FILE) [--dtype f64|f32 | --device cuda]\n"
      "                    [--paradigm parallel|recurrent|chunkwise] [--chunk N] [--all-positions] --out FILE.npy";
  s.summary =
      "Runs the full forward pass (no cache) over one token sequence and writes the logits as a NumPy\n"
      ".npy file: shape (vocab,) for the last position, or (N, vocab) with --all-positions; float32\n"
      "('<f4') for --dtype f32, float64 ('<f8') for --dtype f64.\n"
      "--device cuda runs the CUDA runner instead (bf16 weights, activations and caches, fp32 accumulation;\n"
      "gRet in the GPU's chunkwise kernel) and writes float32; --dtype, --paradigm and --chunk apply to the\n"
      "CPU reference only.";
  s.options = model_option_specs();
  for (auto& o : token_option_specs()) s.options.push_back(o);
  s.options.push_back({"--paradigm", "P", "gRet paradigm: parallel (default), recurrent or chunkwise; YOCO gRet models only; under mpirun chunkwise only (the default there)"});
  s.options.push_back({"--chunk", "N", "chunk size of the chunkwise paradigm (>= 1; default: the config's gret_chunk_size)"});
  s.options.push_back({"--all-positions", "", "write the logits of every position, not only the last"});
  s.options.push_back({"--out", "FILE.npy", "output file; required"});
  return s;
}

}  // namespace

int cmd_forward(const Args& args) {
  const CommandSpec spec = forward_spec();
  if (print_help_if_asked(spec, args)) return 0;
  const ParsedArgs a = parse_args(spec, args);
  a.exclusive({"--tokens", "--tokens-file"}, true);
  const std::string out = a.require("--out");
  for (const char* opt : {"--weights", "--tokens-file", "--model"})
    if (const auto in = a.get(opt)) refuse_output_over_input("--out", out, *in, std::string("the ") + opt + " file");
  const GretParadigm paradigm = parse_paradigm(a.get_or("--paradigm", "parallel"));
  const int64_t chunk = a.get_int("--chunk", 0, 1, INT64_MAX);
  for (const char* opt : {"--paradigm", "--chunk"})
    if (a.has(opt) && a.get_or("--device", "cpu") == "cuda")
      throw InputError(std::string(opt) + " applies to --device cpu: the CUDA runner computes gRet with its " +
                       "chunkwise kernel (the same function as every paradigm)");
  ModelChoice m = model_choice(a);
  const bool gret = m.cfg.is_yoco() && m.cfg.self_decoder() == SelfDecoderKind::gret;
  for (const char* opt : {"--paradigm", "--chunk"})
    if (a.has(opt) && !gret)
      throw InputError(std::string(opt) + " applies to YOCO gRet models only; " + m.cfg.name + " is " +
                       (m.cfg.is_yoco() ? "a YOCO model with a sliding-window self-decoder" : "a Transformer"));
  if (a.has("--chunk")) m.cfg.gret_chunk_size = chunk;
  // Under mpirun each rank runs its shard chunkwise, the states scanned across the ranks.
  const bool sharded = mpi_job() != nullptr;
  // Any other paradigm has no chunk: the option would be ignored without a word.
  if (a.has("--chunk") && !sharded && paradigm != GretParadigm::chunkwise)
    throw InputError("--chunk is the chunk of the chunkwise paradigm; this run is --paradigm " +
                     std::string(paradigm_name(paradigm)) + " (add --paradigm chunkwise)");
  if (sharded && a.has("--paradigm") && paradigm != GretParadigm::chunkwise)
    throw InputError("--paradigm " + std::string(paradigm_name(paradigm)) +
                     " under mpirun: the sharded forward runs gRet chunkwise within each rank's shard (give "
                     "--paradigm chunkwise, or run without mpirun)");

  refuse_unshared_tokens_file(a);
  const std::vector<int64_t> ids = tokens_from_args(a, m.cfg);
  const int64_t n = static_cast<int64_t>(ids.size());
  const std::string prompt_option = a.has("--tokens") ? "--tokens" : "--tokens-file " + *a.get("--tokens-file");
  check_prompt_splits(m.cfg, n, prompt_option);
  check_ranks_read_one_prompt(ids, n, prompt_option);
  // The GPU has one gRet form, its chunk kernel: chunkwise (parallel names the same function).
  const GretParadigm run_paradigm =
      m.cuda || sharded ? (gret ? GretParadigm::chunkwise : GretParadigm::parallel) : paradigm;
  const double logits_host = static_cast<double>(n) * static_cast<double>(m.cfg.vocab_size) * (4 + 8);
  // gRet's square temporaries as the paradigm has them: n x n in parallel, a chunk's chunkwise, none recurrent.
  const double gret_block = run_paradigm == GretParadigm::parallel    ? static_cast<double>(n)
                            : run_paradigm == GretParadigm::chunkwise ? static_cast<double>(m.cfg.gret_chunk_size)
                                                                      : 0.0;
  require_host_memory(m.cuda ? logits_host  // the GPU's logits on the host, as float and as double
                             : forward_bytes_estimate(m.cfg, precision_bytes(m.precision), 1, static_cast<double>(n),
                                                      gret_block),
                      "a forward over " + std::to_string(n) + " tokens of " + m.cfg.name);
  if (primary_process()) check_output_path(out);  // an unwritable --out is said before the work
  const auto runner = create_model_runner(m);
  const Mat<double> logits =
      device_memory_errors_as_input(m, [&] { return runner->forward(TokenBatch::single(ids), run_paradigm); });

  const bool all = a.has("--all-positions");
  const int64_t V = m.cfg.vocab_size;
  std::vector<int64_t> shape = all ? std::vector<int64_t>{n, V} : std::vector<int64_t>{V};
  const double* data = all ? logits.data() : logits.data() + (n - 1) * V;  // row-major
  if (primary_process())  // under mpirun every rank holds the same logits: rank 0 writes them
    write_npy(out, !m.cuda && m.precision == Precision::f64 ? NpyDType::f64 : NpyDType::f32, shape, data);

  std::string paradigm_text = "n/a";
  if (gret && m.cuda) {
    paradigm_text = "chunkwise (the GPU's chunk kernel)";
  } else if (gret && sharded) {
    paradigm_text = "chunkwise (chunk " + std::to_string(m.cfg.gret_chunk_size) +
                    ") within each rank's shard, the states scanned across the ranks";
  } else if (gret) {
    paradigm_text = paradigm_name(paradigm);
    if (paradigm == GretParadigm::chunkwise) paradigm_text += " (chunk " + std::to_string(m.cfg.gret_chunk_size) + ")";
  }
  std::string shape_text = all ? "(" + std::to_string(n) + ", " + std::to_string(V) + ")" : "(" + std::to_string(V) + ",)";
  std::cout << "forward: model " << m.cfg.name << " (" << runner->architecture() << ", weights "
            << m.weights.describe() << "), " << n << " tokens, " << numerics_text(m) << ", paradigm " << paradigm_text << ", logits " << (all ? "at all positions " : "at the last position ")
            << shape_text << " -> " << out << "\n";
  return 0;
}

}  // namespace yoco::cli
