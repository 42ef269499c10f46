#include "progress.hpp"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <utility>

#include "errors.hpp"
#include "format.hpp"

namespace yoco::cli {

std::string clock_string(double s) {
  const long t = static_cast<long>(s + 0.5);
  if (t >= 3600) return strf("%ld:%02ld:%02ld", t / 3600, (t / 60) % 60, t % 60);
  return strf("%ld:%02ld", t / 60, t % 60);
}

namespace {
// YOCO_PROGRESS=lines: one line per point and step, for logs of long runs
// (scripts/gpu-suite.sh sets it), where a terminal's redrawn line would not show.
bool lines_wanted() {
  const char* v = std::getenv("YOCO_PROGRESS");
  return v && std::string(v) == "lines";
}
}  // namespace

void check_progress_setting() {
  const char* v = std::getenv("YOCO_PROGRESS");
  if (v && *v && std::string(v) != "lines")
    throw InputError(std::string("YOCO_PROGRESS: unknown value '") + v +
                     "' (lines: one progress line a step on stderr; unset: a redrawn line on a terminal only)");
}

Progress::Progress(int64_t total_points, bool silent, std::string label)
    : enabled_(!silent && (isatty(STDERR_FILENO) == 1 || lines_wanted())),
      lines_(isatty(STDERR_FILENO) != 1 && lines_wanted()),
      total_(total_points),
      label_(std::move(label)),
      start_(std::chrono::steady_clock::now()) {}

double Progress::elapsed_s() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

void Progress::point(int64_t i, const std::string& what, double predicted_left_s) {
  current_ = i;
  point_ = what;
  step_.clear();
  left_s_ = predicted_left_s;
  draw();
}

void Progress::step(const std::string& what) {
  step_ = what;
  draw();
}

void Progress::draw() {
  if (!enabled_) return;
  std::string line = "[" + label_ + " " + std::to_string(current_) + "/" + std::to_string(total_) + ", " +
                     clock_string(elapsed_s()) + " elapsed" +
                     (left_s_ >= 0 ? ", ~" + clock_string(left_s_) + " left" : std::string()) + "] " + point_;
  if (!step_.empty()) line += (point_.empty() ? "" : ": ") + step_;
  if (lines_) {
    std::fprintf(stderr, "%s\n", line.c_str());
    std::fflush(stderr);
    return;
  }
  if (line.size() > 118) line.resize(118);
  std::fprintf(stderr, "\r\033[K%s", line.c_str());
  std::fflush(stderr);
}

void Progress::done() {
  if (!enabled_ || lines_) return;
  std::fprintf(stderr, "\r\033[K");
  std::fflush(stderr);
}

}  // namespace yoco::cli
