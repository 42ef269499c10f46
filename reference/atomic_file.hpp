#pragma once
// Output files that are either written whole or not at all: the bytes go to a
// temporary file in the target's folder; every write and the close are
// checked, the data is fsynced, and only then is the temporary renamed over the
// target. A failure (a full disk, an unwritable folder) is an InputError
// naming the target, and an earlier file at that path stays byte-for-byte as
// it was. A target that exists and is not a regular file (/dev/null,
// /dev/full, a pipe) is written in place, with the same checks, since it
// cannot be replaced by a rename. SIGINT or SIGTERM while a writer lives
// removes its temporary before the process ends by the signal (where their
// action was the default one); temporaries of the same target left by a writer
// killed otherwise are removed when the next writer opens. A missing folder of
// the target is created.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

namespace yoco {

class AtomicFile {
 public:
  // Opens the temporary file; InputError "<path>: cannot write (...)" when it
  // cannot be created (no folder, a folder that is a file, no permission).
  explicit AtomicFile(std::string path);
  ~AtomicFile();  // without commit(): the temporary is removed, the target untouched
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  void write(const void* data, size_t n);  // buffered; InputError on a failed write
  void write(const std::string& s) { write(s.data(), s.size()); }
  // Flushes, fsyncs, closes and renames over the target: InputError on any failure.
  void commit();

  const std::string& path() const { return path_; }

 private:
  void flush();
  [[noreturn]] void fail(const std::string& what, int err);

  std::string path_, temp_;  // temp_ empty: writing the target in place
  int fd_ = -1;
  int lock_fd_ = -1;  // holds an flock on temp_ while this writer lives (a stale temporary has none)
  int slot_ = -1;     // temp_'s slot for the SIGINT / SIGTERM cleanup (-1: none)
  std::string buf_;
  bool committed_ = false;
};

// The whole of `bytes` to `path`, atomically as above.
void write_file_atomically(const std::string& path, const std::string& bytes);

// Checks, before long work, that `path` can be written: its folder exists (or
// is created) and a file can be created in it, or the target is an existing
// non-regular file open for writing. InputError naming the path otherwise.
void check_output_path(const std::string& path);

// Bytes free to this user on the file system that holds `path`'s folder; nullopt when unknown.
std::optional<uint64_t> free_bytes_beside(const std::string& path);

// The largest file this process may write (RLIMIT_FSIZE, `ulimit -f`); nullopt when unlimited.
std::optional<uint64_t> file_size_limit();

}  // namespace yoco
