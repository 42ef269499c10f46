#pragma once
// Shared by the libFuzzer targets: a per-process scratch file on tmpfs for
// readers that only take a path, and the rule that an InputError is the
// expected answer to bad input while anything else is a finding.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace yoco::fuzz {

// /dev/shm when present (tmpfs: no disk I/O per execution), else /tmp. One
// file per process, rewritten each run, removed at exit.
inline const std::string& scratch_path(const char* suffix) {
  static const std::string path = [&] {
    const char* dir = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    std::string p = std::string(dir) + "/yoco_fuzz_" + std::to_string(getpid()) + suffix;
    static std::string for_atexit;
    for_atexit = p;
    std::atexit([] { std::remove(for_atexit.c_str()); });
    return p;
  }();
  return path;
}

inline void write_file(const std::string& path, const uint8_t* data, size_t size) {
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) std::abort();
  if (size && std::fwrite(data, 1, size, f) != size) std::abort();
  if (std::fclose(f) != 0) std::abort();
}

// A property the parser promised and broke: reported like a crash.
[[noreturn]] inline void finding(const std::string& what) {
  std::fprintf(stderr, "FINDING: %s\n", what.c_str());
  std::abort();
}

}  // namespace yoco::fuzz
