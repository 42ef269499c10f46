// yoco weights init | inspect: write counter-initialised weights as
// safetensors; list (and optionally validate) a safetensors file.
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <optional>

#include "args.hpp"
#include "atomic_file.hpp"
#include "commands.hpp"
#include "errors.hpp"
#include "format.hpp"
#include "host_memory.hpp"
#include "param_layout.hpp"
#include "result_output.hpp"
#include "safetensors.hpp"
#include "weights.hpp"

namespace yoco::cli {

namespace {

const char* kWeightsUsage =
    "usage: yoco weights init --model PRESET|FILE.json --seed N --out FILE.safetensors [--dtype f32|bf16|f16|f64]\n"
    "       yoco weights inspect FILE.safetensors [--model PRESET|FILE.json]\n"
    "\n"
    "  init     write the counter-based initial weights of a model (the same values --seed gives\n"
    "           forward and generate) as a safetensors file\n"
    "  inspect  list a safetensors file's tensors and metadata; with --model, also check that the\n"
    "           file holds exactly that model's tensors with the right shapes\n"
    "\n"
    "Run 'yoco weights init --help' or 'yoco weights inspect --help' for details.\n";

CommandSpec init_spec() {
  CommandSpec s;
  s.path = "yoco weights init";
  s.usage = "yoco weights init --model PRESET|FILE.json --seed N --out FILE.safetensors [--dtype f32|bf16|f16|f64]";
  s.summary =
      "Writes the counter-based initial weights of a model as safetensors (tensor names of DESIGN.md §3,\n"
      "metadata: format=pt and the model config as yoco_config).";
  s.options = {
      {"--model", "PRESET|FILE.json", "model preset or config file; required"},
      {"--seed", "N", "init seed; required"},
      {"--out", "FILE.safetensors", "output file; required"},
      {"--dtype", "f32|bf16|f16|f64", "storage type (default f32; bf16 rounds to nearest even)"},
  };
  return s;
}

CommandSpec inspect_spec() {
  CommandSpec s;
  s.path = "yoco weights inspect";
  s.usage = "yoco weights inspect FILE.safetensors [--model PRESET|FILE.json]";
  s.summary =
      "Prints every tensor (name, dtype, shape, bytes) in file order, the metadata, the tensor count and\n"
      "the byte total. With --model, loads the file as that model's weights: a missing, extra or\n"
      "mis-shaped tensor is an error (exit 2).";
  s.options = {{"--model", "PRESET|FILE.json", "validate the file against this model"}};
  s.min_positional = 1;
  s.max_positional = 1;
  return s;
}

DType parse_storage_dtype(const std::string& t) {
  if (t == "f32") return DType::f32;
  if (t == "bf16") return DType::bf16;
  if (t == "f16") return DType::f16;
  if (t == "f64") return DType::f64;
  throw InputError("--dtype: must be f32, bf16, f16 or f64, got '" + t + "'");
}


int weights_init(const Args& args) {
  const CommandSpec spec = init_spec();
  if (print_help_if_asked(spec, args)) return 0;
  const ParsedArgs a = parse_args(spec, args);
  const uint64_t seed = parse_u64("--seed", a.require("--seed"));
  const std::string out = a.require("--out");
  refuse_output_over_input("--out", out, a.require("--model"), "the --model file");
  const DType dtype = parse_storage_dtype(a.get_or("--dtype", "f32"));
  const ModelConfig cfg = resolve_model(a.require("--model"));
  // One tensor at a time (save_initial_weights): its floats and the writer's 1 MiB buffer.
  require_host_memory(static_cast<double>(largest_tensor_elements(cfg)) * 4 + (1 << 20), "the weights of " + cfg.name);
  check_output_path(out);  // an unwritable --out is said before the work
  const auto layout = param_layout(cfg);
  int64_t bytes = 0;
  for (const auto& p : layout) bytes += p.numel() * dtype_size(dtype);
  // The file is written beside its target and renamed (reference/atomic_file.hpp): a disk, or a file-size
  // limit, that cannot hold it is said now, not as a failed write minutes and gigabytes later (yoco-3b in
  // f64 is 24 GB). (Only for a file made anew: /dev/null or a pipe is written in place.)
  std::error_code ec;
  const bool in_place = std::filesystem::exists(out, ec) && !std::filesystem::is_regular_file(out, ec);
  if (!in_place) {
    if (const auto free = free_bytes_beside(out); free && static_cast<uint64_t>(bytes) > *free)
      throw InputError("--out " + out + ": needs " + bytes_with_human(bytes) + " of tensor data, " +
                       bytes_with_human(static_cast<int64_t>(*free)) + " free there");
    if (const auto limit = file_size_limit(); limit && static_cast<uint64_t>(bytes) > *limit)
      throw InputError("--out " + out + ": needs " + bytes_with_human(bytes) +
                       " of tensor data, the file-size limit (ulimit -f) allows " +
                       bytes_with_human(static_cast<int64_t>(*limit)));
  }
  // A long step for the large presets (seconds to minutes): said on a terminal, not in logs.
  if (isatty(STDERR_FILENO) == 1)
    std::cerr << "yoco weights: initialising and writing " << param_count(cfg) << " parameters of " << cfg.name
              << " (" << bytes_with_human(bytes) << ") to " << out << "...\n";
  // The values are floats by construction, so float storage loses nothing even for F64.
  save_initial_weights(cfg, seed, out, dtype);
  std::cout << "wrote " << out << ": model " << cfg.name << ", seed " << seed << ", dtype " << dtype_safetensors_name(dtype)
            << ", " << layout.size() << " tensors, " << param_count(cfg) << " parameters, "
            << bytes_with_human(bytes) << " of tensor data\n";
  return 0;
}

int weights_inspect(const Args& args) {
  const CommandSpec spec = inspect_spec();
  if (print_help_if_asked(spec, args)) return 0;
  const ParsedArgs a = parse_args(spec, args);
  const std::string path = a.positional()[0];
  // Resolve the model first so that a bad --model is reported before the file is read.
  std::optional<ModelConfig> cfg;
  if (const auto m = a.get("--model")) cfg = resolve_model(*m);
  const SafetensorsReader file(path);

  // Every tensor in file order, those of dtypes the suite does not read (U8, BOOL, ...) too.
  struct Listed {
    std::string name, dtype;
    const std::vector<int64_t>* shape;
    uint64_t begin, end;
  };
  std::vector<Listed> order;
  for (const auto& [name, e] : file.entries())
    order.push_back({name, dtype_safetensors_name(e.dtype), &e.shape, e.begin, e.end});
  for (const auto& [name, e] : file.others()) order.push_back({name, e.dtype, &e.shape, e.begin, e.end});
  std::stable_sort(order.begin(), order.end(), [](const Listed& x, const Listed& y) { return x.begin < y.begin; });

  std::cout << path << "\n";
  std::cout << "metadata:" << (file.metadata().empty() ? " (none)" : "") << "\n";
  for (const auto& [k, v] : file.metadata()) {
    std::string shown = v;
    for (size_t p = 0; (p = shown.find('\n', p)) != std::string::npos; p += 5) shown.replace(p, 1, "\n    ");
    std::cout << "  " << k << ": " << shown << "\n";
  }
  TextTable t({"name", "dtype", "shape", "bytes"});
  uint64_t total = 0;
  for (const Listed& e : order) {
    const uint64_t b = e.end - e.begin;
    total += b;
    t.add_row({e.name, e.dtype, shape_string(*e.shape), std::to_string(b)});
  }
  std::cout << "tensors:\n" << t.str();
  std::cout << "total: " << order.size() << " tensors, " << bytes_with_human(static_cast<int64_t>(total))
            << " of tensor data (data section " << file.data_bytes() << " B)\n";

  if (cfg) {
    // Tensor by tensor: a 65B model's file is checked with one tensor's floats in memory.
    require_host_memory(static_cast<double>(largest_tensor_elements(*cfg)) * 4, "the largest tensor of " + cfg->name);
    check_weights_file_values(*cfg, path);
    std::cout << "valid weights for model " << cfg->name << ": all " << param_layout(*cfg).size()
              << " tensors present with the right shapes, no extra tensor\n";
  }
  return 0;
}

}  // namespace

int cmd_weights(const Args& args) {
  // One line, as every bad input: the usage is for --help.
  if (args.empty()) throw InputError("yoco weights: missing action: init or inspect (see yoco weights --help)");
  const std::string action = args[0];
  const Args rest(args.begin() + 1, args.end());
  if (action == "--help" || action == "-h" || action == "help") {
    std::cout << kWeightsUsage;
    return 0;
  }
  if (action == "init") return weights_init(rest);
  if (action == "inspect") return weights_inspect(rest);
  throw InputError("yoco weights: unknown action '" + action + "' (expected init or inspect; see yoco weights --help)");
}

}  // namespace yoco::cli
