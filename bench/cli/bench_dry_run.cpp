#include "bench_dry_run.hpp"

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <iostream>
#include <map>
#include <set>
#include <utility>

#include "analytic_rows.hpp"
#include "device_backend.hpp"
#include "device_spec.hpp"
#include "errors.hpp"
#include "format.hpp"
#include "host_info.hpp"
#include "lists.hpp"
#include "result_csv.hpp"

namespace yoco::cli {

namespace {

std::string joined(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& i : items) out += (out.empty() ? "" : ", ") + i;
  return out;
}

// prepare_output_path's refusals without its writes (it makes the folders and a probe file): the
// file is no folder, and the nearest folder on its path that exists is one, and writable.
void check_output_unwritten(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::is_directory(path, ec)) throw InputError(path + ": cannot write (is a folder)");
  fs::path dir = fs::path(path).parent_path();
  while (!dir.empty() && !fs::exists(dir, ec)) dir = dir.parent_path();
  if (dir.empty()) dir = ".";
  if (!fs::is_directory(dir, ec)) throw InputError(path + ": cannot write (" + dir.string() + " is not a folder)");
  if (::access(dir.c_str(), W_OK) != 0) throw InputError(path + ": cannot write (" + dir.string() + " is not writable)");
}

// SweepFile's --resume refusals, and run_sweep's first (previous_points): a file to resume holds only
// points of this sweep, and each point's analytic rows are those this run would make (the settings,
// and the cost model, they were written with). The counted values need no ceilings: any roofline
// gives the same bytes and FLOPs. The device of its measured rows too (a GPU's name only with --device-name).
void check_resume_file(const SweepSettings& s, const std::string& device, const std::string& file) {
  std::error_code ec;
  if (!std::filesystem::exists(file, ec)) return;
  std::set<std::pair<std::string, int64_t>> points;
  for (const auto& m : s.models)
    for (int64_t n : s.lengths) points.insert({m, n});
  const std::vector<ResultRow> rows = read_results_csv(file);  // InputError when it is not a results CSV
  // The run's device_name: --device-name, else the CPU's (read from the host, as the CPU backend does);
  // a GPU's name would need the device, so without --device-name only the device is checked.
  std::optional<std::string> device_name;
  if (!s.device_name.empty()) device_name = s.device_name;
  else if (device == "cpu") device_name = cpu_device_name();
  std::map<std::pair<std::string, int64_t>, std::vector<const ResultRow*>> by_point;
  for (const ResultRow& r : rows) {
    // Under mpirun the rows name the ranks' device (cpu-xN), which the real run checks.
    if (s.sharded_ranks == 0) check_resumed_device(file, r, device, device_name);
    if (r.phase == "ceiling" || r.model.find(" vs ") != std::string::npos) continue;
    if (!points.count({r.model, r.seq_len})) throw InputError(resume_outside_the_sweep(file, r.model, r.seq_len));
    by_point[{r.model, r.seq_len}].push_back(&r);
  }
  const AnalyticSettings an = sweep_analytic_settings(s, runner_storage(device, s.precision), cost::device_spec("h100"));
  const Provenance prov = Provenance::here("analytic", an.device.name, "");
  for (const auto& model : s.models)  // in the run's order, so the first point refused is the run's
    for (int64_t n : s.lengths) {
      const auto it = by_point.find({model, n});
      if (it == by_point.end()) continue;
      // The batches as the run plans them: a throughput batch found from the device's memory is the
      // file's (the run keeps it too), else one this machine cannot know, and the run refuses anyway.
      const bool do_tp = s.metrics.count("throughput") && n > s.gen;
      int64_t tp_batch = do_tp ? s.batch : 0;
      for (const ResultRow* r : it->second)
        if (do_tp && s.batch == 0 && r->prov.device == "analytic" && r->phase == "throughput" && r->batch >= 1)
          tp_batch = r->batch;
      if (do_tp && tp_batch == 0) tp_batch = 1;
      const int64_t B = s.batch > 0 ? s.batch : 1;
      const AnalyticSettings a = point_analytic_settings(an, B, tp_batch);
      check_resumed_point(resumed_point_words(file, model, n), s, B, tp_batch, do_tp, it->second,
                          analytic_rows(model, analytic_point(resolve_model(model), n, a), a, prov, s.metrics));
    }
}

void check_resume(const SweepSettings& s, const BenchDryRun& d) {
  if (!d.resume) return;
  if (!d.out) throw InputError("--resume needs --out FILE.csv: the results file of the sweep to continue");
  if (!d.resume_candidates) return check_resume_file(s, d.device, *d.out);
  for (const auto& f : *d.resume_candidates) check_resume_file(s, d.device, f);
}

}  // namespace

int print_bench_dry_run(const SweepSettings& s, const BenchDryRun& d) {
  // What a real run refuses of its files before it measures, checked without writing.
  check_resume(s, d);
  if (d.out) check_output_unwritten(*d.out);
  std::vector<std::string> lengths, metrics(s.metrics.begin(), s.metrics.end());
  for (int64_t n : s.lengths) lengths.push_back(length_label(n));
  const size_t points = s.models.size() * s.lengths.size();
  std::cout << "yoco bench --dry-run: " << d.what << " checked; nothing runs and no device is touched\n"
            << "  device " << d.device  // the rows' label: cpu-xR on R ranks
            << (s.sharded_ranks > 0 ? "-x" + std::to_string(s.sharded_ranks) : std::string()) << "; models " << joined(s.models) << "; lengths " << joined(lengths) << " ("
            << points << (points == 1 ? " point" : " points") << ")\n"
            << "  metrics " << joined(metrics) << "; " << s.repeats << (s.repeats == 1 ? " repeat" : " repeats")
            << " after " << s.warmup << " warm-up; " << s.decode_sample << " decode steps timed; "
            << prefill_note(s.prefill_chunk, s.sharded_ranks) << "; batch " << (s.batch > 0 ? std::to_string(s.batch) : "auto (max " +
                                                                                     std::to_string(s.max_batch) + ")")
            << (s.metrics.count("throughput") ? "; throughput generates " + std::to_string(s.gen) : std::string())
            << "\n"
            << strf("  budget %.0f s a point for its timed runs: at most %.0f min of them", s.budget_s,
                    std::ceil(static_cast<double>(points) * s.budget_s / 60.0))
            << (s.cupti ? "; CUPTI breakdown on" : "") << (s.extrapolate ? "" : "; no extrapolation") << "\n";
  if (d.out) {
    std::error_code ec;
    const bool exists = std::filesystem::exists(*d.out, ec);
    std::cout << "  results " << *d.out
              << (d.resume && d.resume_candidates
                      ? " (--resume: the GPU's folder decides which file; " +
                            (d.resume_candidates->empty() ? std::string("none there yet")
                                                          : "each there checked: " + joined(*d.resume_candidates)) +
                            ")"
                  : d.resume ? (exists ? " (--resume: its rows are of this sweep's points and settings, checked as a run checks them)"
                                         : " (--resume: not there yet, so from the start)")
                           : (exists ? " (exists: rewritten)" : " (new)"))
              << "\n";
  }
  if (d.device == "cuda")
    std::cout << "  runner switches: " << (d.switches.empty() ? "none set (the defaults)" : joined(d.switches)) << "\n";
  return 0;
}

}  // namespace yoco::cli
