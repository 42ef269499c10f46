// bench_cuda_kernels: every registered CUDA kernel benchmark, timed against
// the ceilings measured at the start of the same run (DESIGN.md §5), printed
// as a table and written as result-schema CSV rows (reports/SCHEMA.md).
//
//   bench_cuda_kernels [--filter NAME[,NAME...]] [--out FILE.csv] [--list]
//
// A benchmark that throws (a failed launch, no memory) becomes a `failed` or
// `out_of_memory` row naming the error; the others still run. Exit status:
// 0 all ran, 1 some failed, 2 bad arguments or no device.
#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "atomic_file.hpp"
#include "device/device_ceilings.hpp"
#include "device/device_query.hpp"
#include "kernel_registry.hpp"
#include "result_row.hpp"

namespace {

using namespace yoco::cuda_bench;
using yoco::cli::make_row;
using yoco::cli::ResultRow;

std::vector<std::string> split_commas(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string item; std::getline(ss, item, ',');)
    if (!item.empty()) out.push_back(item);
  return out;
}

bool selected(const std::string& name, const std::vector<std::string>& filters) {
  if (filters.empty()) return true;
  for (const auto& f : filters)
    if (name.find(f) != std::string::npos) return true;
  return false;
}

// First line of a shell command's output, "" on failure.
std::string shell_line(const char* cmd) {
  std::string out;
  if (FILE* p = popen(cmd, "r")) {
    char buf[256];
    if (fgets(buf, sizeof buf, p)) out = buf;
    pclose(p);
  }
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r' || out.back() == ' ')) out.pop_back();
  return out;
}

std::string phase_of(const KernelResult& r) { return r.variant.empty() ? r.kernel : r.kernel + ":" + r.variant; }

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> filters;
  std::string out;
  bool list = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--filter" && i + 1 < argc) filters = split_commas(argv[++i]);
    else if (a == "--out" && i + 1 < argc) out = argv[++i];
    else if (a == "--list") list = true;
    else if (a == "-h" || a == "--help") {
      std::cout << "usage: bench_cuda_kernels [--filter NAME[,NAME...]] [--out FILE.csv] [--list]\n"
                   "Times every registered CUDA kernel benchmark (CUDA events, warm-up, cold L2, median of repeats)\n"
                   "against the copy and GEMM ceilings measured at the start of the run.\n";
      return 0;
    } else {
      std::cerr << "bench_cuda_kernels: unknown argument '" << a << "' (see --help)\n";
      return 2;
    }
  }
  if (list) {
    for (const auto& [name, fn] : kernel_benches()) std::cout << name << "\n";
    return 0;
  }
  if (!out.empty()) {  // an unwritable --out is reported before any measurement
    try {
      yoco::check_output_path(out);
    } catch (const std::exception& e) {
      std::cerr << "bench_cuda_kernels: " << e.what() << "\n";
      return 2;
    }
  }
  const auto dev = yoco::cuda::query_devices();
  if (dev.count == 0) {
    std::cerr << "bench_cuda_kernels: no CUDA device: " << dev.error << "\n";
    return 2;
  }
  // The kernel driver's version as nvidia-smi prints it; the CUDA driver API
  // version where nvidia-smi is missing.
  std::string driver = shell_line("nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null");
  if (driver.empty())
    driver = "CUDA " + std::to_string(dev.driver_version / 1000) + "." + std::to_string(dev.driver_version % 1000 / 10);
  const auto prov = yoco::cli::Provenance::here("cuda", dev.name, driver);
  std::vector<ResultRow> rows;

  std::cerr << "[bench] " << dev.name << ", " << dev.sm_count << " SMs; measuring ceilings\n";
  const auto ceil = yoco::cuda::measure_device_ceilings();
  if (!ceil.error.empty()) {
    std::cerr << "bench_cuda_kernels: ceilings failed: " << ceil.error << "\n";
    return 1;
  }
  const double copy_bw = ceil.copy_bw.median, gemm = ceil.gemm_flops.median;
  {
    auto r = make_row(prov, "-", 0, 1, 0, "ceiling", "copy_bw_gbs", copy_bw / 1e9, "GB/s", "measured",
                      ceil.copy_bw.repeats, ceil.copy_desc);
    r.min = ceil.copy_bw.min / 1e9;
    r.max = ceil.copy_bw.max / 1e9;
    rows.push_back(r);
    auto g = make_row(prov, "-", 0, 1, 0, "ceiling", "gemm_peak_tflops", gemm / 1e12, "TFLOP/s", "measured",
                      ceil.gemm_flops.repeats, ceil.gemm_desc);
    g.min = ceil.gemm_flops.min / 1e12;
    g.max = ceil.gemm_flops.max / 1e12;
    rows.push_back(g);
  }
  std::printf("ceilings: copy %.0f GB/s, bf16 GEMM %.0f TFLOP/s\n", copy_bw / 1e9, gemm / 1e12);

  int failed = 0;
  std::vector<KernelResult> all;
  for (const auto& [name, fn] : kernel_benches()) {
    if (!selected(name, filters)) continue;
    std::cerr << "[bench] " << name << "\n";
    Report report;
    try {
      fn(report);
    } catch (const std::exception& e) {
      ++failed;
      const std::string msg = e.what();
      const bool oom = msg.find("out of memory") != std::string::npos;
      rows.push_back(make_row(prov, "-", 0, 1, 0, name, "kernel_time_s", std::nullopt, "s",
                              oom ? "out_of_memory" : "failed", 0, msg));
      std::cerr << "[bench] " << name << " failed: " << msg << "\n";
      cudaGetLastError();  // clear a sticky-free error so later benchmarks can run
    }
    for (const auto& r : report.results()) {
      all.push_back(r);
      const std::string phase = phase_of(r);
      const std::string model = r.model.empty() ? "-" : r.model;
      for (const auto& [name, value] : r.params)
        rows.push_back(make_row(prov, model, r.seq_len, r.batch, 0, phase, "param_" + name, value, "count", "exact",
                                0, "the variant's parameter"));
      if (!r.skipped.empty()) {
        rows.push_back(make_row(prov, model, r.seq_len, r.batch, 0, phase, "kernel_time_s", std::nullopt, "s",
                                "skipped", 0, r.skipped));
        continue;
      }
      const double t = r.time.median_s;
      auto tr = make_row(prov, model, r.seq_len, r.batch, 0, phase, "kernel_time_s", t, "s", "measured",
                         r.time.repeats, r.notes);
      tr.min = r.time.min_s;
      tr.max = r.time.max_s;
      rows.push_back(tr);
      if (r.bytes > 0 && t > 0) {
        rows.push_back(make_row(prov, model, r.seq_len, r.batch, 0, phase, "achieved_gbs", r.bytes / t / 1e9, "GB/s",
                                "measured", r.time.repeats, "bytes floor / median time"));
        rows.push_back(make_row(prov, model, r.seq_len, r.batch, 0, phase, "fraction_of_copy_bw",
                                r.bytes / t / copy_bw, "ratio", "measured", r.time.repeats,
                                "against the copy ceiling of this run"));
      }
      if (r.flops > 0 && t > 0) {
        rows.push_back(make_row(prov, model, r.seq_len, r.batch, 0, phase, "achieved_tflops", r.flops / t / 1e12,
                                "TFLOP/s", "measured", r.time.repeats, "matmul FLOPs / median time"));
        rows.push_back(make_row(prov, model, r.seq_len, r.batch, 0, phase, "fraction_of_gemm_peak",
                                r.flops / t / gemm, "ratio", "measured", r.time.repeats,
                                "against the GEMM ceiling of this run"));
      }
    }
    // After each benchmark, atomically (temporary file, checked writes, fsync,
    // rename): a run cut off later keeps what it measured, never a torn file.
    if (!out.empty()) {
      try {
        yoco::cli::save_results_csv(out, rows);
      } catch (const std::exception& e) {
        std::cerr << "bench_cuda_kernels: " << e.what() << "\n";
        return 2;
      }
    }
  }

  std::printf("\n%-34s %-10s %7s %3s %10s %9s %7s %9s %7s %8s  %s\n", "kernel", "model", "N", "B", "median_ms",
              "GB/s", "%copy", "TFLOP/s", "%gemm", "x_floor", "notes");
  for (const auto& r : all) {
    const double t = r.time.median_s;
    const double gbs = r.bytes / t / 1e9, tf = r.flops / t / 1e12;
    const double floor_s = std::max(r.bytes / copy_bw, r.flops / gemm);
    std::printf("%-34s %-10s %7lld %3lld %10.4f %9.0f %6.1f%% %9.1f %6.1f%% %8.2f  %s\n", phase_of(r).c_str(),
                r.model.c_str(), static_cast<long long>(r.seq_len), static_cast<long long>(r.batch), t * 1e3, gbs,
                100.0 * r.bytes / t / copy_bw, tf, 100.0 * r.flops / t / gemm, floor_s > 0 ? t / floor_s : 0.0,
                r.notes.c_str());
  }
  if (!out.empty()) std::printf("wrote %zu rows to %s\n", rows.size(), out.c_str());
  return failed ? 1 : 0;
}
