#pragma once
// Shared by the libFuzzer targets: a per-process scratch file on tmpfs for
// readers that only take a path, and the rule that an InputError is the
// expected answer to bad input while anything else is a finding.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>

#include "errors.hpp"

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

// Runs parse(): true when it returned, false when it threw an InputError (the expected answer to bad
// input). Any other exception is a finding naming `what`.
template <class F>
bool accepts(const char* what, F&& parse) {
  try {
    parse();
    return true;
  } catch (const yoco::InputError&) {
    return false;
  } catch (const std::exception& e) {
    finding(std::string("non-InputError exception from ") + what + ": " + e.what());
  } catch (...) {
    finding(std::string("non-std exception from ") + what);
  }
}

}  // namespace yoco::fuzz
