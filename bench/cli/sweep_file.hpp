#pragma once
// The results file of a sweep as it runs (issue 12): rewritten atomically
// after each point with every row so far, so that an interrupted or killed run
// keeps each completed point; --resume reads it back so that the sweep
// continues where it stopped; SIGINT/SIGTERM say how many points were kept.
#include <optional>
#include <string>

#include "sweep.hpp"

namespace yoco::cli {

class SweepFile {
 public:
  // `out`: the CSV (none: rows go to stdout only, nothing to resume). `resume`:
  // read `out` first -- InputError when it is unreadable or not a results CSV;
  // a file that does not exist yet starts the sweep afresh, with a note on
  // stderr (the same command can then be repeated until the sweep is done).
  // `total_points`: models x lengths, for the interrupt message. While the
  // object lives, SIGINT and SIGTERM print "interrupted: N of M points kept
  // in FILE; ... --resume" and end the process by the signal (exit 130 / 143).
  SweepFile(std::optional<std::string> out, bool resume, int total_points);
  ~SweepFile();
  SweepFile(const SweepFile&) = delete;
  SweepFile& operator=(const SweepFile&) = delete;

  // What run_sweep needs: the earlier rows (--resume) and the per-point write.
  SweepIo io() const;

 private:
  std::optional<std::string> out_;
  std::vector<ResultRow> previous_;
  bool has_previous_ = false, handlers_ = false;
};

}  // namespace yoco::cli
