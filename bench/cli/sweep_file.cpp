#include "sweep_file.hpp"

#include "mpi_job.hpp"

#include <signal.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <iostream>

#include "errors.hpp"
#include "mpi_job.hpp"
#include "result_csv.hpp"
#include "stop_signals.hpp"

namespace yoco::cli {

namespace {

// What the signal handler says; set before it is installed, read only there.
volatile sig_atomic_t g_points_kept = 0;
volatile sig_atomic_t g_written = 0;  // the file was written by this run (at least one point finished)
int g_resumed = 0;                    // --resume of a file that exists: it holds the earlier run's points
int g_total_points = 0;
char g_file[4096];
struct sigaction g_old_int, g_old_term;

void put(char*& p, const char* end, const char* s) {
  while (*s && p < end) *p++ = *s++;
}
void put_int(char*& p, const char* end, long v) {
  char digits[24];
  int k = 0;
  do {
    digits[k++] = static_cast<char>('0' + v % 10);
    v /= 10;
  } while (v > 0 && k < 20);
  while (k > 0 && p < end) *p++ = digits[--k];
}

// Async-signal-safe: formats into a stack buffer, write(2), then the default
// action ends the process by the same signal once this returns. Not
// SA_RESETHAND: that resets the action as the kernel delivers the signal, so a
// second SIGINT or SIGTERM arriving before the handler runs (timeout(1) signals
// the process and then its group; a user presses Ctrl-C twice) would kill the
// process at once, without the message. Here both stay blocked (sa_mask) until
// the message is written and the default action is back.
volatile sig_atomic_t g_stopping = 0;

extern "C" void on_stop_signal(int sig) {
  if (g_stopping) return;  // another thread is saying it; it ends the process
  g_stopping = 1;
  char buf[4096 + 256];
  char* p = buf;
  const char* end = buf + sizeof(buf);
  put(p, end, "\nyoco bench: interrupted (");
  put(p, end, sig == SIGINT ? "SIGINT" : "SIGTERM");
  put(p, end, "): ");
  if (g_written) {
    put_int(p, end, g_points_kept);
    put(p, end, " of ");
    put_int(p, end, g_total_points);
    put(p, end, " points kept in ");
    put(p, end, g_file);
    put(p, end, "; run the same command with --resume to continue\n");
  } else if (g_resumed) {
    // Nothing finished in this run: the file is the earlier run's, untouched.
    put(p, end, "no point finished in this run; ");
    put(p, end, g_file);
    put(p, end, " is as it was; run the same command with --resume to continue\n");
  } else {
    // A count of kept points would claim a file that was never written (or is an older run's).
    put(p, end, "no point finished, so no file was written (");
    put(p, end, g_file);
    put(p, end, " untouched); run the same command to start again\n");
  }
  ssize_t ignored = ::write(STDERR_FILENO, buf, static_cast<size_t>(p - buf));
  (void)ignored;
  // The other stop signal, if pending too, is dropped: the exit status is that
  // of the signal the message names (130 / 143).
  struct sigaction act {};
  sigemptyset(&act.sa_mask);
  act.sa_handler = SIG_IGN;
  ::sigaction(sig == SIGINT ? SIGTERM : SIGINT, &act, nullptr);
  act.sa_handler = SIG_DFL;
  ::sigaction(sig, &act, nullptr);
  ::raise(sig);  // blocked until the handler returns, then the default action
}


}  // namespace

SweepFile::SweepFile(std::optional<std::string> out, bool resume, int total_points) : out_(std::move(out)) {
  if (resume && !out_) throw InputError("--resume needs --out FILE.csv: the results file of the sweep to continue");
  if (resume) {
    std::error_code ec;
    if (std::filesystem::exists(*out_, ec)) {
      previous_ = read_results_csv(*out_);
      has_previous_ = true;
    } else if (primary_process()) {
      std::cerr << "yoco bench: --resume: " << *out_ << " does not exist yet; starting the sweep from its first point\n";
    }
  }
  // Under mpirun rank 0 writes the file and alone says what an interrupt kept.
  if (!out_ || !primary_process()) return;
  g_points_kept = 0;
  g_written = 0;
  g_resumed = has_previous_ ? 1 : 0;
  g_stopping = 0;
  g_total_points = total_points;
  std::strncpy(g_file, out_->c_str(), sizeof(g_file) - 1);
  g_file[sizeof(g_file) - 1] = '\0';
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sigaddset(&sa.sa_mask, SIGINT);
  sigaddset(&sa.sa_mask, SIGTERM);
  sa.sa_flags = 0;
  sigaction(SIGINT, &sa, &g_old_int);
  sigaction(SIGTERM, &sa, &g_old_term);
  handlers_ = true;
}

SweepFile::~SweepFile() {
  if (!handlers_) return;
  sigaction(SIGINT, &g_old_int, nullptr);
  sigaction(SIGTERM, &g_old_term, nullptr);
}

SweepIo SweepFile::io() const {
  SweepIo io;
  if (!out_) return io;
  if (has_previous_) {
    io.previous = &previous_;
    io.previous_file = *out_;
  }
  const std::string out = *out_;
  if (!primary_process()) return io;  // under mpirun rank 0 writes the file (every rank reads it to --resume)
  io.on_point = [out](const std::vector<ResultRow>& rows, int points_done) {
    StopSignalsHeld hold;  // the count the handler prints is that of the file on disk
    save_results_csv(out, rows);  // atomic: the file is always a whole, valid CSV
    g_points_kept = points_done;
    g_written = 1;
  };
  io.note = [](const std::string& line) {
    // On a terminal the progress line is drawn without a line break: the note
    // would run on from its text. Cleared, it is drawn again at the next step.
    if (isatty(STDERR_FILENO) == 1) std::cerr << "\r\033[K";
    std::cerr << "yoco bench: " << line << "\n";
  };
  return io;
}

}  // namespace yoco::cli
