#include "bench_dry_run.hpp"

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <iostream>
#include <set>
#include <utility>

#include "errors.hpp"
#include "format.hpp"
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

// SweepFile's --resume refusals, and the first of run_sweep's (previous_points): a file to resume
// holds only points of this sweep. (Its rows' settings and device are checked when it runs.)
void check_resume_file(const SweepSettings& s, const std::string& file) {
  std::error_code ec;
  if (!std::filesystem::exists(file, ec)) return;
  std::set<std::pair<std::string, int64_t>> points;
  for (const auto& m : s.models)
    for (int64_t n : s.lengths) points.insert({m, n});
  for (const ResultRow& r : read_results_csv(file)) {  // InputError when it is not a results CSV
    if (r.phase == "ceiling" || r.model.find(" vs ") != std::string::npos) continue;
    if (!points.count({r.model, r.seq_len})) throw InputError(resume_outside_the_sweep(file, r.model, r.seq_len));
  }
}

void check_resume(const SweepSettings& s, const BenchDryRun& d) {
  if (!d.resume) return;
  if (!d.out) throw InputError("--resume needs --out FILE.csv: the results file of the sweep to continue");
  if (!d.resume_candidates) return check_resume_file(s, *d.out);
  for (const auto& f : *d.resume_candidates) check_resume_file(s, f);
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
            << "  device " << d.device << "; models " << joined(s.models) << "; lengths " << joined(lengths) << " ("
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
                  : d.resume ? (exists ? " (--resume: its rows are of this sweep's points; their settings are checked as it runs)"
                                         : " (--resume: not there yet, so from the start)")
                           : (exists ? " (exists: rewritten)" : " (new)"))
              << "\n";
  }
  if (d.device == "cuda")
    std::cout << "  runner switches: " << (d.switches.empty() ? "none set (the defaults)" : joined(d.switches)) << "\n";
  return 0;
}

}  // namespace yoco::cli
