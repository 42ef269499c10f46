#pragma once
// The fixture of test_cli (its files, one per command, run the built `yoco`
// through the shell and check exit status, stdout/stderr and the files it
// writes) and the helpers more than one of those files uses. Expected logits
// are recomputed in-process with the reference models, so a CLI that wrote
// the wrong rows, dtype or shape fails.
//
// Light on purpose: it is compiled once a file. What needs the reference models or <regex> is
// defined once, in cli_fixture.cpp; nlohmann/json is in cli_safetensors_bytes.hpp, for the files
// that take safetensors apart. (With all of it here the eleven files took 157 s to compile on this
// project's 2-core VM, three times the one file they came from; 106 s this way.)
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "cli_runner.hpp"

namespace yoco_test {

// The suite's name in ctest: Cli.<test>, as when the tests were one file.
using Cli = CliTest;

// A minimal .npy (format 1.0) reader that checks the header strictly.
struct Npy {
  std::string descr;
  std::vector<int64_t> shape;
  std::vector<double> data;
};

// Reads a .npy file, checking its header strictly (EXPECTs).
Npy read_npy(const std::string& file);

// RMS of (a - ref) over RMS of ref.
double rms_ratio_vec(const std::vector<double>& a, const std::vector<double>& ref);

inline std::vector<int64_t> test_tokens(int n, int vocab, int mul = 37, int add = 5) {
  std::vector<int64_t> t;
  for (int i = 0; i < n; ++i) t.push_back((i * mul + add) % vocab);
  return t;
}

inline std::string join(const std::vector<int64_t>& v, const std::string& sep) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? sep : "") + std::to_string(v[i]);
  return s;
}

// In-process logits at every position, as a flat row-major vector.
std::vector<double> reference_logits(const std::string& model, const std::vector<int64_t>& tokens, uint64_t seed = 0);

inline std::string le64(uint64_t v) {
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i) s[i] = static_cast<char>((v >> (8 * i)) & 0xff);
  return s;
}

inline std::string join_safetensors(const std::string& header_text, const std::string& data) {
  return le64(header_text.size()) + header_text + data;
}

// The project's rule for bad input: exit 2 and one line on stderr naming what
// is wrong, never a usage text or a stack of lines.
inline void expect_one_line_error(const CliRun& r, const std::vector<std::string>& needles, const std::string& what) {
  expect_input_error(r, needles, what);
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << what << "\nstderr: " << r.err;
}

}  // namespace yoco_test
