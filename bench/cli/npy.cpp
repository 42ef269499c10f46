#include "npy.hpp"

#include <algorithm>
#include <bit>
#include <fstream>
#include <stdexcept>

#include "atomic_file.hpp"
#include "errors.hpp"

namespace yoco::cli {

static_assert(std::endian::native == std::endian::little, "the .npy writer assumes a little-endian host");

std::string npy_header(NpyDType dtype, const std::vector<int64_t>& shape) {
  std::string dict = "{'descr': '";
  dict += dtype == NpyDType::f64 ? "<f8" : "<f4";
  dict += "', 'fortran_order': False, 'shape': (";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] < 0) throw std::invalid_argument("npy_header: negative dimension");
    dict += (i ? ", " : "") + std::to_string(shape[i]);
  }
  if (shape.size() == 1) dict += ",";  // a Python 1-tuple
  dict += "), }";
  // magic (6) + version (2) + length (2) + dict + padding + '\n' = multiple of 64.
  const size_t unpadded = 10 + dict.size() + 1;
  dict.append((64 - unpadded % 64) % 64, ' ');
  dict += '\n';
  if (dict.size() > 65535) throw std::invalid_argument("npy_header: header too long for format 1.0");
  std::string h = "\x93NUMPY";
  h += static_cast<char>(1);
  h += static_cast<char>(0);
  h += static_cast<char>(dict.size() & 0xff);
  h += static_cast<char>((dict.size() >> 8) & 0xff);
  return h + dict;
}

namespace {

template <class Src>
void write_impl(const std::string& path, NpyDType dtype, const std::vector<int64_t>& shape, const Src* data) {
  const std::string header = npy_header(dtype, shape);
  int64_t n = 1;
  for (auto s : shape) n *= s;
  AtomicFile out(path);  // a failed write leaves any earlier file intact
  out.write(header);
  // Converted in blocks so that a large array needs no second full copy.
  constexpr int64_t kBlock = 1 << 16;
  std::vector<double> b64;
  std::vector<float> b32;
  for (int64_t s = 0; s < n; s += kBlock) {
    const int64_t m = std::min(kBlock, n - s);
    if (dtype == NpyDType::f64) {
      b64.assign(data + s, data + s + m);
      out.write(b64.data(), static_cast<size_t>(m) * 8);
    } else {
      b32.resize(static_cast<size_t>(m));
      for (int64_t i = 0; i < m; ++i) b32[i] = static_cast<float>(data[s + i]);
      out.write(b32.data(), static_cast<size_t>(m) * 4);
    }
  }
  out.commit();
}

}  // namespace

void write_npy(const std::string& path, NpyDType dtype, const std::vector<int64_t>& shape, const double* data) {
  write_impl(path, dtype, shape, data);
}
void write_npy(const std::string& path, NpyDType dtype, const std::vector<int64_t>& shape, const float* data) {
  write_impl(path, dtype, shape, data);
}

}  // namespace yoco::cli
