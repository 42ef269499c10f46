#pragma once
// yoco bench --dry-run: what a sweep would run, after every check that needs no
// device -- the options, the models (and on --device cuda whether the runners
// serve them), the runners' YOCO_* switches -- and nothing else: no device is
// touched, no file written. A device call's commands (scripts/gpu-suite.sh
// --dry-run) are checked this way on any machine, so that a misspelt option
// costs a test here rather than a step of a device session.
#include <optional>
#include <string>
#include <vector>

#include "sweep.hpp"

namespace yoco::cli {

struct BenchDryRun {
  std::string device;                // cpu or cuda
  std::string what;                  // "the sweep" or "the default job's sweep"
  std::optional<std::string> out;    // the results file the run would write
  bool resume = false;
  std::vector<std::string> switches;  // YOCO_* switches set (cuda_runner_switches)
  // The default job on --device cuda with no GPU here: `out`'s folder (the card's) is unknown, so
  // with --resume each results/<card>/<file> that exists is checked as the file it may continue.
  std::optional<std::vector<std::string>> resume_candidates = std::nullopt;
};

// Prints the plan (points, protocol, budget, file, switches) to stdout; returns 0. First, as a real
// run does before it measures, an InputError for --resume without --out, a file to resume that is
// not a results CSV or holds points outside the sweep, and an --out that cannot be written (a
// folder, or under a file) -- checked without writing anything.
int print_bench_dry_run(const SweepSettings& s, const BenchDryRun& d);

}  // namespace yoco::cli
