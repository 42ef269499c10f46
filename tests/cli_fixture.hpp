#pragma once
// The fixture of test_cli (its files, one per command, run the built `yoco`
// through the shell and check exit status, stdout/stderr and the files it
// writes) and the helpers more than one of those files uses. Expected logits
// are recomputed in-process with the reference models, so a CLI that wrote
// the wrong rows, dtype or shape fails.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <vector>

#include "cli_runner.hpp"
#include "config.hpp"
#include "tensor.hpp"
#include "transformer_model.hpp"
#include "weights.hpp"
#include "yoco_model.hpp"

namespace yoco_test {

// The suite's name in ctest: Cli.<test>, as when the tests were one file.
using Cli = CliTest;

// A minimal .npy (format 1.0) reader that checks the header strictly.
struct Npy {
  std::string descr;
  std::vector<int64_t> shape;
  std::vector<double> data;
};

inline Npy read_npy(const std::string& file) {
  const std::string b = slurp(file);
  Npy n;
  EXPECT_GE(b.size(), 10u) << file;
  if (b.size() < 10) return n;
  EXPECT_EQ(b.substr(0, 6), std::string("\x93NUMPY")) << file;
  EXPECT_EQ(b[6], 1) << "major version";
  EXPECT_EQ(b[7], 0) << "minor version";
  const size_t hlen = static_cast<unsigned char>(b[8]) | (static_cast<size_t>(static_cast<unsigned char>(b[9])) << 8);
  EXPECT_LE(10 + hlen, b.size());
  if (10 + hlen > b.size()) return n;
  EXPECT_EQ((10 + hlen) % 64, 0u) << "data must start on a 64-byte boundary";
  const std::string h = b.substr(10, hlen);
  EXPECT_EQ(h.back(), '\n');
  std::smatch m;
  EXPECT_TRUE(std::regex_search(h, m, std::regex("'descr': '(<f[48])'"))) << h;
  n.descr = m.size() > 1 ? m[1].str() : "";
  EXPECT_NE(h.find("'fortran_order': False"), std::string::npos) << h;
  std::smatch s;
  EXPECT_TRUE(std::regex_search(h, s, std::regex("'shape': \\(([0-9, ]*)\\)"))) << h;
  if (s.size() > 1) {
    const std::string dims = s[1].str();
    std::regex num("[0-9]+");
    for (auto it = std::sregex_iterator(dims.begin(), dims.end(), num); it != std::sregex_iterator(); ++it)
      n.shape.push_back(std::stoll(it->str()));
    if (n.shape.size() == 1) {
      EXPECT_NE(dims.find(','), std::string::npos) << "a 1-tuple needs its comma: " << h;
    }
  }
  int64_t count = 1;
  for (auto d : n.shape) count *= d;
  const size_t item = n.descr == "<f8" ? 8 : 4;
  EXPECT_EQ(b.size() - 10 - hlen, static_cast<size_t>(count) * item) << "data size of " << file;
  if (b.size() - 10 - hlen != static_cast<size_t>(count) * item) return n;
  n.data.resize(static_cast<size_t>(count));
  const char* p = b.data() + 10 + hlen;
  for (int64_t i = 0; i < count; ++i) {
    if (item == 8) {
      double x;
      std::memcpy(&x, p + 8 * i, 8);
      n.data[i] = x;
    } else {
      float x;
      std::memcpy(&x, p + 4 * i, 4);
      n.data[i] = x;
    }
  }
  return n;
}

inline double rms_ratio_vec(const std::vector<double>& a, const std::vector<double>& ref) {
  EXPECT_EQ(a.size(), ref.size());
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size() && i < ref.size(); ++i) {
    num += (a[i] - ref[i]) * (a[i] - ref[i]);
    den += ref[i] * ref[i];
  }
  return std::sqrt(num) / std::sqrt(den);
}

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
inline std::vector<double> reference_logits(const std::string& model, const std::vector<int64_t>& tokens, uint64_t seed = 0) {
  const yoco::ModelConfig cfg = yoco::preset_config(model);
  yoco::Mat<double> l;
  if (cfg.is_yoco()) {
    yoco::YocoModel<double> m(cfg, yoco::Weights<double>::init(cfg, seed));
    l = m.forward(yoco::TokenBatch::single(tokens));
  } else {
    yoco::TransformerModel<double> m(cfg, yoco::Weights<double>::init(cfg, seed));
    l = m.forward(yoco::TokenBatch::single(tokens));
  }
  return std::vector<double>(l.data(), l.data() + l.size());
}

// Splits a safetensors file into its JSON header and data section.
struct StFile {
  nlohmann::ordered_json header;
  std::string data;
};

inline StFile split_safetensors(const std::string& bytes) {
  uint64_t hlen = 0;
  for (int i = 7; i >= 0; --i) hlen = (hlen << 8) | static_cast<unsigned char>(bytes[i]);
  StFile f;
  f.header = nlohmann::ordered_json::parse(bytes.substr(8, hlen));
  f.data = bytes.substr(8 + hlen);
  return f;
}

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
