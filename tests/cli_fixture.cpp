// The fixture's helpers that need the reference models or <regex> (cli_fixture.hpp), compiled once.
#include "cli_fixture.hpp"

#include <cmath>
#include <cstring>
#include <regex>

#include "config.hpp"
#include "tensor.hpp"
#include "transformer_model.hpp"
#include "weights.hpp"
#include "yoco_model.hpp"

namespace yoco_test {

Npy read_npy(const std::string& file) {
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

double rms_ratio_vec(const std::vector<double>& a, const std::vector<double>& ref) {
  EXPECT_EQ(a.size(), ref.size());
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size() && i < ref.size(); ++i) {
    num += (a[i] - ref[i]) * (a[i] - ref[i]);
    den += ref[i] * ref[i];
  }
  return std::sqrt(num) / std::sqrt(den);
}

std::vector<double> reference_logits(const std::string& model, const std::vector<int64_t>& tokens, uint64_t seed) {
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

}  // namespace yoco_test
