#pragma once
// The options that forward and generate share: which model, which weights,
// which precision, which tokens.
#include <cstdint>
#include <memory>
#include <new>
#include <ostream>
#include <string>
#include <vector>

#include "args.hpp"
#include "config.hpp"
#include "errors.hpp"
#include "model_runner.hpp"

namespace yoco::cli {

// --model, --weights, --seed, --dtype (f64|f32, default f32), --device (cpu|cuda, default cpu).
std::vector<OptionSpec> model_option_specs();
// --tokens, --tokens-file.
std::vector<OptionSpec> token_option_specs();

struct ModelChoice {
  ModelConfig cfg;
  Precision precision = Precision::f32;
  WeightSource weights;
  uint64_t seed = 0;  // --seed (default 0), also when --weights is given
  bool cuda = false;  // --device cuda: the CUDA runners (bf16 storage, fp32 accumulation)
};

// --model is required; --weights and --seed exclude each other. --device cuda:
// --dtype is an InputError (the CUDA runners store bf16), and so is a build
// without CUDA or a machine without a device (cuda_status's reason).
// need_device false (a --dry-run): --device cuda needs the CUDA build, not a GPU.
ModelChoice model_choice(const ParsedArgs& a, bool need_device = true);

// The runner of the choice: the CPU reference (ModelRunner::create), under
// mpirun the reference with the sequence sharded over the ranks
// (harness/dist_runner.hpp), or, with --device cuda, the CUDA runner
// (harness/cuda_runner.hpp).
std::unique_ptr<ModelRunner> create_model_runner(const ModelChoice& m);

// With a CUDA runner: one line "other  <bytes> (CUDA context and libraries, cudaMemGetInfo)"
// beside print_memory's; nothing for a CPU runner.
void print_device_other(std::ostream& os, const ModelRunner& runner, const std::string& indent);

// "dtype f32" on the CPU; "bf16 weights and caches, fp32 accumulation" on CUDA.
std::string numerics_text(const ModelChoice& m);

// Runs `f`; with --device cuda a device allocation that does not fit
// (cuda::DeviceOutOfMemory, a std::bad_alloc that says what did not fit)
// becomes an InputError "out of device memory: ..." (exit 2, not an internal error).
template <class F>
auto device_memory_errors_as_input(const ModelChoice& m, F&& f) -> decltype(f()) {
  if (!m.cuda) return f();
  try {
    return f();
  } catch (const std::bad_alloc& e) {
    const std::string what = e.what();
    if (what.empty() || what == "std::bad_alloc") throw;
    throw InputError("out of device memory: " + what);
  }
}

// The ids of --tokens or --tokens-file (the caller has checked that exactly one
// is present), checked against the vocabulary.
std::vector<int64_t> tokens_from_args(const ParsedArgs& a, const ModelConfig& cfg);

}  // namespace yoco::cli
