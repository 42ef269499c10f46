#include "model_options.hpp"

#include "cuda_status.hpp"
#include "errors.hpp"
#include "format.hpp"
#include "mpi_job.hpp"
#include "tokens.hpp"

#if defined(YOCO_HAVE_CUDA)
#include "cuda_runner.hpp"
#endif
#if defined(YOCO_HAVE_DIST)
#include "dist_runner.hpp"
#endif
#if defined(YOCO_HAVE_DIST_CUDA)
#include "dist_cuda_runner.hpp"
#endif

namespace yoco::cli {

std::vector<OptionSpec> model_option_specs() {
  return {
      {"--model", "PRESET|FILE.json", "model preset (e.g. yoco-tiny, yoco-swa-tiny, transformer-tiny) or config file; required"},
      {"--weights", "FILE.safetensors", "load the weights from a safetensors file"},
      {"--seed", "N", "counter-based weight init with this seed (default 0; not with --weights)"},
      {"--dtype", "f64|f32", "compute precision of the CPU reference (default f32; not with --device cuda)"},
      {"--device", "cpu|cuda", "cpu: the reference (default); cuda: the CUDA runners, bf16 weights and caches, fp32 "
                               "accumulation (the cuda preset and a GPU)"},
  };
}

std::vector<OptionSpec> token_option_specs() {
  return {
      {"--tokens", "1,2,3", "token ids, separated by commas and/or spaces"},
      {"--tokens-file", "FILE", "token ids from a file, separated by commas and/or whitespace; under mpirun a regular file every rank reads alike"},
  };
}

ModelChoice model_choice(const ParsedArgs& a, bool need_device) {
  ModelChoice m;
  a.exclusive({"--weights", "--seed"}, false);
  const std::string device = a.get_or("--device", "cpu");
  if (device != "cpu" && device != "cuda") throw InputError("--device: expected cpu or cuda, got '" + device + "'");
  m.cuda = device == "cuda";
  if (m.cuda && a.has("--dtype"))
    throw InputError("--dtype: the CUDA runners store bf16 and accumulate in fp32; --dtype applies to --device cpu");
  m.precision = parse_precision("--dtype", a.get_or("--dtype", "f32"));
  m.seed = a.get_u64("--seed", 0);
  m.cfg = resolve_model(a.require("--model"));
  m.weights = a.has("--weights") ? WeightSource::from_file(*a.get("--weights")) : WeightSource::from_seed(m.seed);
#if !defined(YOCO_HAVE_DIST_CUDA)
  if (m.cuda && mpi_job())
    throw InputError("--device cuda under mpirun: this yoco was built without the sharded CUDA path (the cuda "
                     "preset with MPI); under mpirun the CPU reference runs sharded (drop --device cuda)");
#endif
  if (m.cuda) {
    const CudaStatus c = cuda_status();
    if (!c.built || (!c.device && need_device)) throw InputError("--device cuda: " + c.why_not);
  }
  return m;
}

std::unique_ptr<ModelRunner> create_model_runner(const ModelChoice& m) {
#if defined(YOCO_HAVE_DIST)
  if (!m.cuda && mpi_job()) return DistRunner::create(m.cfg, m.precision, m.weights, *mpi_job());
#endif
#if defined(YOCO_HAVE_DIST_CUDA)
  if (m.cuda && mpi_job()) {
    cuda::CudaWeightSource src;
    src.path = m.weights.path;
    src.seed = m.weights.seed;
    return device_memory_errors_as_input(m, [&] { return create_dist_cuda_runner(m.cfg, src, *mpi_job()); });
  }
#endif
  if (!m.cuda) return ModelRunner::create(m.cfg, m.precision, m.weights);
#if defined(YOCO_HAVE_CUDA)
  cuda::CudaWeightSource src;
  src.path = m.weights.path;
  src.seed = m.weights.seed;
  return device_memory_errors_as_input(m, [&] { return create_cuda_runner(m.cfg, src); });
#else
  throw InputError("--device cuda: " + cuda_status().why_not);
#endif
}

std::string numerics_text(const ModelChoice& m) {
  return m.cuda ? "bf16 weights and caches, fp32 accumulation" : std::string("dtype ") + precision_name(m.precision);
}

std::vector<int64_t> tokens_from_args(const ParsedArgs& a, const ModelConfig& cfg) {
  std::string source;
  std::vector<int64_t> ids;
  if (const auto t = a.get("--tokens")) {
    source = "--tokens";
    ids = parse_token_list(*t, source);
  } else {
    source = a.require("--tokens-file");
    ids = read_token_file(source);
  }
  check_token_range(ids, cfg.vocab_size, source, cfg.name);
  return ids;
}

void print_device_other(std::ostream& os, const ModelRunner& runner, const std::string& indent) {
#if defined(YOCO_HAVE_CUDA)
  const auto* c = dynamic_cast<const CudaRunner*>(&runner);
  if (!c) return;
  const cuda::ArenaReport r = c->model().arena().report();
  if (r.device_known)
    os << indent << strf("%-12s", "other") << bytes_with_human(r.other)
       << " (CUDA context and libraries: cudaMemGetInfo's used memory beyond the arena)\n";
  else
    os << indent << strf("%-12s", "other") << "unknown (cudaMemGetInfo: " << r.device_error << ")\n";
#else
  (void)os;
  (void)runner;
  (void)indent;
#endif
}

}  // namespace yoco::cli
