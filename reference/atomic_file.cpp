#include "atomic_file.hpp"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <mutex>
#include <utility>
#include <vector>

#include "errors.hpp"
#include "stop_signals.hpp"

namespace yoco {
namespace {

constexpr size_t kBuffer = size_t{1} << 20;

std::string folder_of(const std::string& path) {
  const std::filesystem::path p(path);
  return p.has_parent_path() ? p.parent_path().string() : std::string(".");
}

bool is_special(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode);
}

// Mode of a new file: the target's if it exists, else 0666 less the umask.
mode_t new_file_mode(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode)) return st.st_mode & 07777;
  const mode_t mask = ::umask(0);
  ::umask(mask);
  return 0666 & ~mask;
}

void close_quietly(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

// A writer stopped by SIGINT or SIGTERM removes its temporary (StopSignalCleanup
// below); one killed where no handler runs (SIGKILL, the OOM killer, a signal
// whose handler someone else installed) leaves it behind, the size of what it
// had written (700 MB for a 3B model's weights), so the next writer of the same
// target removes those. A live writer holds an flock on its temporary from just
// after creating it until after the rename, so one that can be locked has no
// writer; an empty one may be between mkstemp and flock, and is left alone
// until it is a minute old.
void remove_stale_temporaries(const std::string& folder, const std::string& name) {
  const std::string prefix = "." + name + ".tmp.";
  std::error_code ec;
  for (std::filesystem::directory_iterator it(folder, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string f = it->path().filename().string();
    if (f.size() != prefix.size() + 6 || f.compare(0, prefix.size(), prefix) != 0) continue;
    const int fd = ::open(it->path().c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0) continue;
    struct stat st {};
    const bool stale = ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == ::geteuid() &&
                       (st.st_size > 0 || std::time(nullptr) - st.st_mtime > 60) &&
                       ::flock(fd, LOCK_EX | LOCK_NB) == 0;
    if (stale) ::unlink(it->path().c_str());
    ::close(fd);
  }
}

// While an AtomicFile lives, SIGINT and SIGTERM remove its temporary before
// the process ends by the signal (exit 130 / 143), so Ctrl-C during
// `yoco forward` or `weights init` leaves no hidden file of tens of MB. Only
// where the signal's action is the default one: a process that chose its own
// (the bench sweep says what it kept and blocks both signals while it writes;
// a caller ignoring SIGINT) keeps it. The handler reads fixed slots, set with
// both signals blocked, and calls only unlink, write, sigaction and raise
// (async-signal-safe), and says which file was not written.
constexpr int kSlots = 16;
constexpr size_t kPathBytes = 4096;
char g_temp[kSlots][kPathBytes], g_target[kSlots][kPathBytes];
volatile sig_atomic_t g_temp_live[kSlots];
std::mutex g_slots_mutex;
int g_live_files = 0;
bool g_installed[2] = {false, false};
struct sigaction g_previous[2];
constexpr int kStopSignals[2] = {SIGINT, SIGTERM};

void say(const char* s) {
  ssize_t ignored = ::write(STDERR_FILENO, s, std::strlen(s));
  (void)ignored;
}

extern "C" void remove_temporaries_and_stop(int sig) {
  for (int i = 0; i < kSlots; ++i) {
    if (!g_temp_live[i]) continue;
    ::unlink(g_temp[i]);
    say("yoco: interrupted (");
    say(sig == SIGINT ? "SIGINT" : "SIGTERM");
    say("): ");
    say(g_target[i]);
    say(" not written; any earlier file there is as it was\n");
  }
  struct sigaction act {};
  sigemptyset(&act.sa_mask);
  act.sa_handler = SIG_DFL;
  ::sigaction(sig, &act, nullptr);
  ::raise(sig);  // pending until the handler returns, then the default action
}

// A slot for `temp` (-1 where all are taken: that temporary is left to the next writer).
int register_temporary(const std::string& temp, const std::string& target) {
  std::lock_guard<std::mutex> lock(g_slots_mutex);
  int slot = -1;
  for (int i = 0; i < kSlots && slot < 0; ++i)
    if (!g_temp_live[i]) slot = i;
  if (slot < 0 || temp.size() >= kPathBytes || target.size() >= kPathBytes) return -1;
  std::memcpy(g_temp[slot], temp.c_str(), temp.size() + 1);
  // The handler cannot escape: control bytes of the name (a line break) are shown as '?' so that its
  // message stays one line.
  for (size_t i = 0; i <= target.size(); ++i) {
    const auto u = static_cast<unsigned char>(target.c_str()[i]);
    g_target[slot][i] = (u != 0 && (u < 0x20 || u == 0x7f)) ? '?' : static_cast<char>(u);
  }
  std::atomic_thread_fence(std::memory_order_release);  // the path is whole before a handler can see the slot
  g_temp_live[slot] = 1;
  if (g_live_files++ == 0) {
    for (int k = 0; k < 2; ++k) {
      struct sigaction now {};
      g_installed[k] = ::sigaction(kStopSignals[k], nullptr, &now) == 0 && now.sa_handler == SIG_DFL &&
                       !(now.sa_flags & SA_SIGINFO);
      if (!g_installed[k]) continue;
      struct sigaction act {};
      act.sa_handler = remove_temporaries_and_stop;
      sigemptyset(&act.sa_mask);
      sigaddset(&act.sa_mask, SIGINT);
      sigaddset(&act.sa_mask, SIGTERM);
      ::sigaction(kStopSignals[k], &act, &g_previous[k]);
    }
  }
  return slot;
}

void release_temporary(int slot) {
  if (slot < 0) return;
  std::lock_guard<std::mutex> lock(g_slots_mutex);
  g_temp_live[slot] = 0;
  if (--g_live_files > 0) return;
  for (int k = 0; k < 2; ++k) {
    struct sigaction now {};
    // Put back only our own: a handler installed since (by code that saved ours) stays.
    if (g_installed[k] && ::sigaction(kStopSignals[k], nullptr, &now) == 0 &&
        now.sa_handler == remove_temporaries_and_stop)
      ::sigaction(kStopSignals[k], &g_previous[k], nullptr);
    g_installed[k] = false;
  }
}

}  // namespace

AtomicFile::AtomicFile(std::string path) : path_(std::move(path)) {
  if (path_.empty()) throw InputError("output path is empty");
  struct stat st {};
  if (::stat(path_.c_str(), &st) == 0 && S_ISDIR(st.st_mode))
    throw InputError(path_ + ": cannot write (is a folder)");
  if (is_special(path_)) {
    fd_ = ::open(path_.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd_ < 0) fail("cannot open for writing", errno);
  } else {
    const std::string name = std::filesystem::path(path_).filename().string();
    std::error_code ec;
    if (std::filesystem::create_directories(folder_of(path_), ec); ec)
      fail("cannot create its folder " + folder_of(path_), ec.value());
    remove_stale_temporaries(folder_of(path_), name);
    std::string tmpl = (std::filesystem::path(folder_of(path_)) / ("." + name + ".tmp.XXXXXX")).string();
    const mode_t mode = new_file_mode(path_);
    {
      StopSignalsHeld hold;  // created and registered as one step: a Ctrl-C between leaves nothing
      fd_ = ::mkstemp(tmpl.data());
      if (fd_ >= 0) slot_ = register_temporary(tmpl, path_);
    }
    if (fd_ < 0) fail("cannot write (creating a temporary file in " + folder_of(path_) + ")", errno);
    temp_ = tmpl;
    // On a descriptor of its own, so that it outlives the close before the
    // rename: the temporary is never unlocked while this writer lives.
    lock_fd_ = ::open(temp_.c_str(), O_RDONLY | O_CLOEXEC);
    if (lock_fd_ >= 0) ::flock(lock_fd_, LOCK_EX | LOCK_NB);
    ::fchmod(fd_, mode);
  }
  buf_.reserve(kBuffer);
}

AtomicFile::~AtomicFile() {
  if (!committed_) {
    close_quietly(fd_);
    if (!temp_.empty()) ::unlink(temp_.c_str());
  }
  release_temporary(slot_);
  close_quietly(lock_fd_);
}

void AtomicFile::fail(const std::string& what, int err) {
  close_quietly(fd_);
  const bool replacing = !temp_.empty();
  if (replacing) ::unlink(temp_.c_str());
  temp_.clear();
  release_temporary(std::exchange(slot_, -1));
  committed_ = true;  // nothing left to clean up
  throw InputError(path_ + ": " + what + (err ? std::string(" (") + std::strerror(err) + ")" : std::string()) +
                   (replacing ? "; any earlier file there is left as it was" : ""));
}

void AtomicFile::flush() {
  const char* p = buf_.data();
  size_t left = buf_.size();
  while (left > 0) {
    const ssize_t w = ::write(fd_, p, left);
    if (w < 0) {
      if (errno == EINTR) continue;
      fail("write failed", errno);
    }
    if (w == 0) fail("write failed (no progress)", 0);
    p += w;
    left -= static_cast<size_t>(w);
  }
  buf_.clear();
}

void AtomicFile::write(const void* data, size_t n) {
  if (fd_ < 0) throw InputError(path_ + ": write after the file was closed");
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    const size_t take = std::min(n, kBuffer - buf_.size());
    buf_.append(p, take);
    p += take;
    n -= take;
    if (buf_.size() == kBuffer) flush();
  }
}

void AtomicFile::commit() {
  if (fd_ < 0) throw InputError(path_ + ": commit after the file was closed");
  flush();
  if (!temp_.empty() && ::fsync(fd_) != 0) fail("fsync failed", errno);
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) {
    const int err = errno;
    fd_ = -1;
    fail("close failed", err);
  }
  if (!temp_.empty()) {
    {
      // Renamed and released as one step: a Ctrl-C between would say "not written" of a file just written.
      StopSignalsHeld hold;
      if (::rename(temp_.c_str(), path_.c_str()) != 0) fail("cannot rename the temporary file over it", errno);
      temp_.clear();
      release_temporary(std::exchange(slot_, -1));
    }
    // The rename itself is durable once the folder is synced (best effort).
    const int dfd = ::open(folder_of(path_).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
      ::fsync(dfd);
      ::close(dfd);
    }
  }
  committed_ = true;
}

void write_file_atomically(const std::string& path, const std::string& bytes) {
  AtomicFile f(path);
  f.write(bytes);
  f.commit();
}

void check_output_path(const std::string& path) {
  // The folders the probe makes are removed again (when still empty): a command refused after the
  // check (bad tokens, the memory gate) leaves no empty folders behind; the real writer makes them.
  std::vector<std::filesystem::path> made;
  std::error_code ec;
  for (std::filesystem::path p = std::filesystem::path(folder_of(path)); !p.empty() && !std::filesystem::exists(p, ec);
       p = p.parent_path()) {
    made.push_back(p);
    if (p == p.parent_path()) break;
  }
  {
    AtomicFile probe(path);  // creates (and, uncommitted, removes) a temporary beside the target
  }
  for (const auto& p : made) std::filesystem::remove(p, ec);  // deepest first; a folder not empty stays
}

std::optional<uint64_t> free_bytes_beside(const std::string& path) {
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  struct statvfs fs {};
  if (::statvfs(parent.empty() ? "." : parent.c_str(), &fs) != 0) return std::nullopt;
  return static_cast<uint64_t>(fs.f_bavail) * static_cast<uint64_t>(fs.f_frsize);
}

std::optional<uint64_t> file_size_limit() {
  struct rlimit r {};
  if (::getrlimit(RLIMIT_FSIZE, &r) != 0 || r.rlim_cur == RLIM_INFINITY) return std::nullopt;
  return static_cast<uint64_t>(r.rlim_cur);
}

}  // namespace yoco
