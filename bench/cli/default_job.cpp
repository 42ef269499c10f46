#include "default_job.hpp"

#include <cstdlib>
#include <filesystem>
#include <iostream>

#include "analytic_rows.hpp"
#include "cuda_status.hpp"
#include "format.hpp"
#include "host_info.hpp"
#include "lists.hpp"
#include "result_output.hpp"
#include "sweep_file.hpp"
#include "sweep_table.hpp"

#ifndef YOCO_SOURCE_DIR
#define YOCO_SOURCE_DIR "."
#endif

namespace yoco::cli {

SweepSettings default_cpu_sweep() {
  SweepSettings s;
  s.models = {"yoco-tiny", "transformer-tiny"};
  s.lengths = {2048, 4096, 8192, 16384, 32768};
  s.gen = 1024;
  s.repeats = 3;
  s.warmup = 1;
  s.decode_sample = 64;
  s.budget_s = 60;
  s.max_batch = 8;
  return s;
}

namespace {

std::string quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

}  // namespace

int run_default_job(const ParsedArgs& a) {
  const std::string source = YOCO_SOURCE_DIR;
  const std::filesystem::path results = a.get_or("--results-dir", source + "/reports/results");
  const CudaStatus cuda = cuda_status();
  std::cout << "yoco bench: the default job\n";
  if (a.get_or("--device", "cpu") == "cuda" || cuda.device)
    std::cout << "  CUDA device " << (cuda.device ? cuda.device_name : "none")
              << ": the CUDA sweep arrives with the CUDA runners (issues 4-6); running the CPU job\n";
  else
    std::cout << "  no GPU here (" << cuda.why_not << "): CPU reference + analytic projection\n";

  // 1. The measured CPU sweep.
  const SweepSettings s = sweep_settings(a, default_cpu_sweep());
  std::cout << "\n[1/3] CPU sweep: " << s.models.size() << " models x " << s.lengths.size() << " lengths, budget "
            << s.budget_s << " s per point\n";
  std::cout.flush();
  const std::string cpu_dir = (results / device_slug("cpu", cpu_device_name())).string();
  const std::string an_dir = (results / "analytic-h100").string();
  for (const auto& f : {cpu_dir + "/bench.csv", an_dir + "/model.csv"}) prepare_output_path(f);  // before measuring
  const int points = static_cast<int>(s.models.size() * s.lengths.size());
  // bench.csv is rewritten after each point; --resume continues it.
  const SweepFile file(cpu_dir + "/bench.csv", a.has("--resume"), points);
  Progress progress(points);
  const auto cpu_rows = run_cpu_sweep(s, progress, file.io());
  save_results_csv(cpu_dir + "/bench.csv", cpu_rows);
  std::cout << "  wrote " << cpu_rows.size() << " rows to " << cpu_dir << "/bench.csv\n";

  // 2. The analytic projection of the paper's setting.
  AnalyticSettings an;
  an.device = cost::device_spec("h100");
  NamedConfigs models;
  for (const char* n : {"yoco-3b", "transformer-3b"}) {
    models.names.push_back(n);
    models.configs.push_back(preset_config(n));
  }
  const std::vector<int64_t> lengths = {32768, 65536, 131072, 262144, 524288, 1048576};
  const auto an_rows =
      analytic_sweep_rows(models, lengths, presets_by_size(), an, Provenance::here("analytic", an.device.name, ""));
  // Paper §1: a 65B GQA model with an 8-bit KV cache at 512K tokens (memory
  // only, so that its rows cannot collide with the bf16 KV-per-token rows above).
  AnalyticSettings int8 = an;
  int8.storage.kv_cache = cost::StorageType::int8;
  auto rows_65b = std::vector<ResultRow>{};
  for (const char* n : {"yoco-65b", "transformer-65b"})
    for (auto& r : analytic_rows(n, analytic_point(preset_config(n), 524288, int8), int8,
                                 Provenance::here("analytic", an.device.name, ""), {"memory"}))
      rows_65b.push_back(std::move(r));
  save_results_csv(an_dir + "/model.csv", an_rows);
  save_results_csv(an_dir + "/model-65b-int8-kv.csv", rows_65b);
  std::cout << "\n[2/3] analytic: yoco-3b vs transformer-3b, 32K-1M, " << an.device.name << "; KV per token of "
            << presets_by_size().names.size() << " presets\n  wrote " << an_rows.size() << " rows to " << an_dir
            << "/model.csv\n  65B models at 512K with an int8 KV cache (paper §1): " << an_dir << "/model-65b-int8-kv.csv\n";

  // 3. The report.
  std::cout << "\n[3/3] report: ";
  if (a.has("--no-report")) {
    std::cout << "skipped (--no-report)\n";
  } else {
    const std::string script = source + "/reports/report.py";
    const std::string cmd = "/usr/bin/python3 " + quote(script) + " --results " + quote(results.string());
    std::cout << cmd << "\n";
    std::cout.flush();
    if (std::system(cmd.c_str()) != 0) {
      std::cerr << "yoco bench: the report could not be regenerated (is python3-matplotlib installed? "
                   "scripts/install-deps.sh installs it)\n";
      return 1;
    }
  }
  std::cout << "\nThe CPU sweep (" << cpu_dir << "/bench.csv):\n";
  print_sweep_table(cpu_rows);
  return 0;
}

}  // namespace yoco::cli
