// Writes the committed seed corpora (tests/fuzz/corpus/<target>/) with the
// project's own writers: write_safetensors, config_to_json_text and
// write_results_csv. Each seed is a small valid file (a few KB at most) so
// that the fuzzer starts from inputs that pass every check.
//   make_seeds OUT_DIR      (OUT_DIR/fuzz_safetensors, /fuzz_config, /fuzz_results_csv)
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "config.hpp"
#include "result_row.hpp"
#include "safetensors.hpp"

namespace fs = std::filesystem;
using namespace yoco;

namespace {

void put(const fs::path& p, const std::string& text) {
  std::ofstream o(p, std::ios::binary);
  o << text;
  if (!o) throw std::runtime_error("cannot write " + p.string());
}

void safetensors_seeds(const fs::path& dir) {
  const std::vector<double> a = {1.0, -2.5, 0.0, 3.25, 1e-3, -0.0};
  const std::vector<float> b = {0.5f, 1.5f, -7.0f, 65504.0f};
  struct Case {
    const char* name;
    DType dtype;
    std::vector<TensorToWrite> tensors;
    std::map<std::string, std::string> meta;
  };
  const std::vector<Case> cases = {
      {"f32_two_tensors", DType::f32,
       {{"layers.0.w", {2, 3}, a.data(), nullptr}, {"norm", {4}, nullptr, b.data()}},
       {{"format", "pt"}}},
      {"f64_one", DType::f64, {{"x", {6}, a.data(), nullptr}}, {}},
      {"bf16_meta", DType::bf16, {{"emb", {2, 2}, nullptr, b.data()}}, {{"preset", "yoco-tiny"}, {"seed", "0"}}},
      {"f16_scalar_and_empty", DType::f16, {{"s", {}, nullptr, b.data()}, {"e", {0, 3}, nullptr, b.data()}}, {}},
      {"no_tensors", DType::f32, {}, {{"note", "empty"}}},
  };
  for (const auto& c : cases) write_safetensors((dir / (std::string(c.name) + ".safetensors")).string(), c.tensors, c.dtype, c.meta);
}

void config_seeds(const fs::path& dir) {
  for (const char* preset : {"yoco-tiny", "yoco-swa-tiny", "transformer-tiny", "yoco-3b", "transformer-3b"})
    put(dir / (std::string(preset) + ".json"), config_to_json_text(preset_config(preset)));
  // The authors' params.json shape: ignored fields, self_decoder, no model_type.
  put(dir / "params_style.json",
      "{\"dim\": 64, \"n_layers\": 4, \"hidden_dim\": 128, \"vocab_size\": 256, \"n_self_heads\": 2,\n"
      " \"n_attn_heads\": 4, \"n_attn_kv_heads\": 2, \"self_decoder\": \"gret\", \"max_batch_size\": 1,\n"
      " \"max_seq_len\": 2048, \"model_parallel_size\": 1, \"rope_theta\": 10000.0, \"norm_eps\": 1e-5}\n");
}

void csv_seeds(const fs::path& dir) {
  cli::Provenance p{"0123456789ab", "2026-01-01T00:00:00Z", "host", "cpu", "Test CPU", ""};
  std::vector<cli::ResultRow> rows;
  rows.push_back(cli::make_row(p, "yoco-tiny", 1024, 1, 0, "prefill", "latency_s", 0.125, "s", "measured", 3, ""));
  rows.back().min = 0.12;
  rows.back().max = 0.13;
  rows.push_back(cli::make_row(p, "yoco-tiny", 1024, 1, 32, "decode", "throughput_tok_s", 812.5, "tok/s", "measured", 3,
                               "note, with \"quotes\""));
  rows.push_back(cli::make_row(p, "transformer-tiny", 1024, 1, 0, "total", "kv_cache_bytes", 1048576.0, "B",
                               "analytic", 0, ""));
  rows.push_back(cli::make_row(p, "transformer-tiny", 1048576, 1, 0, "prefill", "latency_s", std::nullopt, "s",
                               "measured", 0, "not run: out of memory"));
  rows.push_back(cli::make_row(p, "yoco-tiny", 32768, 4, 0, "prefill", "peak_memory_bytes", 3.0000000000000004e9, "B",
                               "extrapolated", 1, ""));
  std::ostringstream all, one, none;
  cli::write_results_csv(all, rows);
  cli::write_results_csv(one, {rows[0]});
  cli::write_results_csv(none, {});
  put(dir / "rows.csv", all.str());
  put(dir / "one_row.csv", one.str());
  put(dir / "header_only.csv", none.str());
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: make_seeds OUT_DIR\n");
    return 2;
  }
  const fs::path out = argv[1];
  for (const char* t : {"fuzz_safetensors", "fuzz_config", "fuzz_results_csv"}) fs::create_directories(out / t);
  safetensors_seeds(out / "fuzz_safetensors");
  config_seeds(out / "fuzz_config");
  csv_seeds(out / "fuzz_results_csv");
  return 0;
}
