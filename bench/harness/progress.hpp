#pragma once
// Progress of a long sweep on stderr — only when stderr is a terminal, so logs
// and CI output stay clean: "[bench 3/8, 0:42 elapsed, ~1:10 left] transformer-tiny 8K: prefill".
// With YOCO_PROGRESS=lines and stderr not a terminal: the same, one line per
// point and step, for the logs of long runs.
#include <chrono>
#include <cstdint>
#include <string>

namespace yoco::cli {

// InputError unless YOCO_PROGRESS is unset, empty or "lines" (a misspelt value
// was taken silently as the terminal's default, and a log stayed empty).
void check_progress_setting();

class Progress {
 public:
  // `silent`: never draws (the ranks of an MPI job but rank 0). `label` opens
  // the line ("[generate 3/8, ...]" for yoco generate's decode steps).
  explicit Progress(int64_t total_points, bool silent = false, std::string label = "bench");
  bool enabled() const { return enabled_; }
  // Starts point i (1-based); `predicted_left_s` < 0 when unknown.
  void point(int64_t i, const std::string& what, double predicted_left_s);
  // What the current point is doing now.
  void step(const std::string& what);
  void done();  // clears the line
  double elapsed_s() const;

 private:
  void draw();
  bool enabled_, lines_;
  int64_t total_, current_ = 0;
  std::string label_;
  double left_s_ = -1;
  std::string point_, step_;
  std::chrono::steady_clock::time_point start_;
};

// "1:05", "12:00:03".
std::string clock_string(double seconds);

}  // namespace yoco::cli
