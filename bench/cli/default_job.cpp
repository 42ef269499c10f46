#include "default_job.hpp"

#include "bench_dry_run.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <optional>
#include <string>

#include "analytic_rows.hpp"
#include "cuda_backend.hpp"
#include "cuda_status.hpp"
#include "errors.hpp"
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

SweepSettings default_gpu_sweep(bool quick) {
  SweepSettings s;
  s.models = {"yoco-3b", "transformer-3b"};
  s.lengths = quick ? std::vector<int64_t>{32768, 131072}
                    : std::vector<int64_t>{32768, 65536, 131072, 262144, 524288, 1048576};
  s.gen = 1024;
  s.repeats = 3;
  s.warmup = 1;
  s.decode_sample = 64;
  s.budget_s = 120;
  s.max_batch = 1024;  // the memory decides: YOCO-3B serves hundreds of 32K sequences on 80 GB
  s.cupti = true;
  return s;
}

namespace {

// reports/results/<folder>: the GPU's family and model, e.g. "NVIDIA H100 80GB
// HBM3" -> nvidia-h100 (the rows keep the full name).
std::string gpu_results_folder(const std::string& name) {
  std::string slug, word;
  auto flush = [&] {
    if (word.empty()) return false;
    slug += (slug.empty() ? "" : "-") + word;
    const bool model = word.find_first_of("0123456789") != std::string::npos;
    word.clear();
    return model;
  };
  for (char c : name + " ") {
    if (std::isalnum(static_cast<unsigned char>(c))) {
      word += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    } else if (flush()) {
      break;
    }
  }
  return slug.empty() ? "cuda" : slug;
}

std::string quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

// The report step's command. Only the repo's own results folder regenerates the repo's report
// (reports/README.md and reports/figures); any other --results-dir (a scratch folder holding only
// this machine's results) gets its report beside its results, README.md and figures/ there: a
// report of a partial folder would drop the other devices' sections from the repo's.
std::string report_command(const std::string& source, const std::filesystem::path& results) {
  namespace fs = std::filesystem;
  std::error_code ec1, ec2;
  const fs::path own = fs::weakly_canonical(fs::path(source) / "reports" / "results", ec1);
  const fs::path here = fs::weakly_canonical(results, ec2);
  std::string cmd = "/usr/bin/python3 " + quote(source + "/reports/report.py") + " --results " + quote(results.string());
  if (ec1 || ec2 || here != own)
    cmd += " --out " + quote((results / "figures").string()) + " --readme " + quote((results / "README.md").string());
  return cmd;
}

}  // namespace

int run_default_job(const ParsedArgs& a) {
  const std::string source = YOCO_SOURCE_DIR;
  const std::filesystem::path results = a.get_or("--results-dir", source + "/reports/results");
  // A plain file name: the folder is the device's, so that a later call on the same card resumes it.
  const std::optional<std::string> sweep_file = a.get("--sweep-file");
  if (sweep_file && (sweep_file->size() < 5 || sweep_file->find_first_of("/\\") != std::string::npos ||
                     (*sweep_file)[0] == '.' || sweep_file->substr(sweep_file->size() - 4) != ".csv"))
    throw InputError("--sweep-file: a file name ending in .csv, without a folder (got '" + *sweep_file +
                     "'): it goes in the device's results folder");
  const CudaStatus cuda = cuda_status();
  const bool cuda_ready = cuda.built && cuda.device && cuda_backend_missing().empty();
  const std::string device = a.get_or("--device", cuda_ready ? "cuda" : "cpu");
  const bool quick = a.has("--quick"), dry = a.has("--dry-run");
  std::cout << "yoco bench: the default job\n";
  if (device == "cuda") {
    // A dry run needs the CUDA build (what it checks lives there), not a device.
    if (!cuda.built || (!cuda.device && !dry)) throw InputError("--device cuda: " + cuda.why_not);
    std::cout << "  GPU " << (cuda.device ? cuda.device_name + " (driver " + cuda.driver + ")" : "none here (--dry-run)")
              << ": yoco-3b vs transformer-3b" << (quick ? " at 32K and 128K (--quick)" : " at 32K-1M")
              << ", then the analytic projection and the report (--device cpu: the CPU job instead)\n";
  } else if (cuda_ready) {
    std::cout << "  GPU " << cuda.device_name << " present, --device cpu: CPU reference + analytic projection\n";
  } else {
    std::cout << "  no GPU here (" << (cuda.why_not.empty() ? "the CUDA sweep backend is not built" : cuda.why_not)
              << "): CPU reference + analytic projection\n";
  }
  if (quick && device != "cuda") throw InputError("--quick: the GPU job's first look; this job runs on the CPU");

  // 1. The measured sweep: the paper's models on the GPU, the tiny ones on the CPU.
  std::vector<ResultRow> rows;
  std::string sweep_csv;
  const std::string an_dir = (results / "analytic-h100").string();
  {
    const SweepSettings s = sweep_settings(a, device == "cuda" ? default_gpu_sweep(quick) : default_cpu_sweep());
    const int points = static_cast<int>(s.models.size() * s.lengths.size());
    if (device == "cuda") {
      for (const auto& m : s.models)
        if (const std::string why = cuda_model_unsupported_reason(resolve_model(m)); !why.empty())
          throw InputError("--model " + m + ": the CUDA runners cannot run it: " + why);
      // (A dry run without a device cannot know the card's folder: it says so.)
      sweep_csv = (results / (cuda.device ? gpu_results_folder(cuda.device_name) : "<the GPU's folder>") /
                   sweep_file.value_or(quick ? "sweep-quick.csv" : "sweep.csv"))
                      .string();
    } else {
      sweep_csv = (results / device_slug("cpu", cpu_device_name()) / sweep_file.value_or("bench.csv")).string();
    }
    if (dry) {
      const std::vector<std::string> switches = device == "cuda" ? cuda_runner_switches() : std::vector<std::string>{};
      BenchDryRun d{device, "the default job's sweep", sweep_csv, a.has("--resume"), switches, std::nullopt};
      if (device == "cuda" && !cuda.device) {  // the card's folder unknown: every card's file it may resume
        std::vector<std::string> files;
        std::error_code ec;
        for (const auto& e : std::filesystem::directory_iterator(results, ec)) {
          const std::string card = e.path().filename().string();
          if (card.rfind("cpu", 0) == 0 || card.rfind("analytic", 0) == 0) continue;
          const auto f = e.path() / sweep_file.value_or(quick ? "sweep-quick.csv" : "sweep.csv");
          if (std::filesystem::is_regular_file(f, ec)) files.push_back(f.string());
        }
        std::sort(files.begin(), files.end());
        d.resume_candidates = files;
      }
      print_bench_dry_run(s, d);
      std::cout << "  then the analytic projection (" << an_dir << "/model.csv, model-65b-int8-kv.csv)\n"
                << "  then the report: "
                << (a.has("--no-report") ? std::string("skipped (--no-report)") : report_command(source, results))
                << "\n";
      return 0;
    }
    std::cout << "\n[1/3] " << (device == "cuda" ? "GPU" : "CPU") << " sweep: " << s.models.size() << " models x "
              << s.lengths.size() << " lengths, budget " << s.budget_s << " s per point for its timed runs (at most "
              << strf("%.0f", std::ceil(points * s.budget_s / 60.0))
              << " min; throughput runs under a budget of their own, weight initialisation, layer probes"
              << (s.cupti ? ", the CUPTI breakdown" : "") << " come on top); progress on stderr\n";
    std::cout.flush();
    for (const auto& f : {sweep_csv, an_dir + "/model.csv"}) prepare_output_path(f);  // before measuring
    // The sweep's file is rewritten after each point; --resume continues it.
    const SweepFile file(sweep_csv, a.has("--resume"), points);
    Progress progress(points);
    if (device == "cuda") {
      CudaBackend backend(s.device_name);
      rows = run_sweep(s, backend, progress, file.io());
    } else {
      rows = run_cpu_sweep(s, progress, file.io());
    }
    save_results_csv(sweep_csv, rows);
    std::cout << "  wrote " << rows.size() << " rows to " << sweep_csv << "\n";
  }

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
    const std::string cmd = report_command(source, results);
    std::cout << cmd << "\n";
    std::cout.flush();
    if (std::system(cmd.c_str()) != 0) {
      std::cerr << "yoco bench: the report could not be regenerated (is python3-matplotlib installed? "
                   "scripts/install-deps.sh installs it)\n";
      return 1;
    }
  }
  std::cout << "\nThe sweep (" << sweep_csv << "):\n";
  print_sweep_table(rows);
  return 0;
}

}  // namespace yoco::cli
