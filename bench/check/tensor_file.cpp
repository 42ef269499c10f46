#include "tensor_file.hpp"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "dtype.hpp"
#include "errors.hpp"
#include "safetensors.hpp"

namespace yoco::check {

namespace {

[[noreturn]] void fail(const std::string& path, const std::string& what) { throw InputError(path + ": " + what); }

std::string dtype_name(DType t) {
  switch (t) {
    case DType::f64: return "f64";
    case DType::f32: return "f32";
    case DType::bf16: return "bf16";
    case DType::f16: return "f16";
    case DType::i64: return "i64";
    case DType::i32: return "i32";
  }
  return "?";
}

DType dtype_of(const std::string& name) {
  for (DType t : {DType::f64, DType::f32, DType::bf16, DType::f16, DType::i64, DType::i32})
    if (dtype_name(t) == name) return t;
  throw std::logic_error("tensor_file: unknown dtype name " + name);
}

class SafetensorsFile final : public TensorFile {
 public:
  explicit SafetensorsFile(const std::string& path) : TensorFile(path), reader_(path) {
    for (const auto& [name, e] : reader_.entries()) info_[name] = TensorInfo{dtype_name(e.dtype), e.shape};
    // Tensors of dtypes the check does not read (U8, BOOL, ...) refuse the check only when it uses them.
    for (const auto& [name, e] : reader_.others()) unusable_[name] = reader_.unsupported_dtype_message(name);
  }
  void read(const std::string& name, int64_t first, int64_t count, double* dst) const override {
    info(name);
    reader_.read_range(name, first, count, dst);
  }

 private:
  SafetensorsReader reader_;
};

int npy_size(const std::string& dtype) { return dtype_size(dtype_of(dtype)); }

class NpyFolder final : public TensorFile {
 public:
  explicit NpyFolder(const std::string& dir) : TensorFile(dir) {
    for (const auto& e : std::filesystem::directory_iterator(dir)) {
      if (e.path().extension() != ".npy") continue;
      const std::string name = e.path().stem().string();
      try {
        const NpyHeader h = read_npy_header(e.path().string());
        info_[name] = TensorInfo{h.dtype, h.shape};
        files_[name] = {e.path().string(), h.data_offset};
      } catch (const InputError& err) {
        unusable_[name] = err.what();  // a file the check does not read is no reason to refuse the folder
      }
    }
    if (info_.empty() && unusable_.empty()) fail(dir, "no .npy files in this folder (expected NAME.npy per tensor)");
  }
  void read(const std::string& name, int64_t first, int64_t count, double* dst) const override {
    const TensorInfo& t = info(name);
    const auto& [file, offset] = files_.at(name);
    if (first < 0 || count < 0 || first > t.numel() - count)
      fail(file, "elements [" + std::to_string(first) + ", " + std::to_string(first + count) + ") outside its " +
                     std::to_string(t.numel()));
    const int es = npy_size(t.dtype);
    std::ifstream in(file, std::ios::binary);
    in.seekg(static_cast<std::streamoff>(offset + static_cast<uint64_t>(first) * es));
    std::vector<unsigned char> raw(static_cast<size_t>(count) * es);
    in.read(reinterpret_cast<char*>(raw.data()), static_cast<std::streamsize>(raw.size()));
    if (!in) fail(file, "read failed (truncated?)");
    const DType dt = dtype_of(t.dtype);
    for (int64_t i = 0; i < count; ++i) dst[i] = decode_value(dt, raw.data() + static_cast<size_t>(i) * es);
  }

 private:
  std::map<std::string, std::pair<std::string, uint64_t>> files_;
};

}  // namespace

std::string shape_str(const std::vector<int64_t>& shape) {
  std::string r = "[";
  for (size_t i = 0; i < shape.size(); ++i) r += (i ? ", " : "") + std::to_string(shape[i]);
  return r + "]";
}

bool is_float_dtype(const std::string& dtype) {
  return dtype == "f64" || dtype == "f32" || dtype == "bf16" || dtype == "f16";
}

void require_float(const TensorFile& f, const std::string& name, const std::string& role) {
  const std::string& dt = f.info(name).dtype;
  if (!is_float_dtype(dt))
    fail(f.path(), "tensor '" + name + "'" + (role.empty() ? "" : " (" + role + ")") + " is " + dt +
                       ": expected a float tensor (f64, f32, bf16 or f16)");
}

int64_t TensorInfo::numel() const {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return n;
}

std::unique_ptr<TensorFile> TensorFile::open(const std::string& path) {
  if (std::filesystem::is_directory(path)) return std::make_unique<NpyFolder>(path);
  if (!std::filesystem::exists(path)) fail(path, "no such file or folder");
  {
    // One .npy file holds one tensor: the check reads a folder of them.
    std::ifstream in(path, std::ios::binary);
    char magic[6] = {};
    if (in.read(magic, 6) && std::memcmp(magic, "\x93NUMPY", 6) == 0)
      fail(path, "a single .npy file: pass the folder holding it (one NAME.npy per tensor), or a .safetensors file");
  }
  return std::make_unique<SafetensorsFile>(path);
}

const TensorInfo& TensorFile::info(const std::string& name) const {
  const auto it = info_.find(name);
  if (it != info_.end()) return it->second;
  if (const auto u = unusable_.find(name); u != unusable_.end()) throw InputError(u->second);
  std::string have;
  for (const auto& n : names()) have += (have.empty() ? "" : ", ") + n;
  fail(path_, "no tensor '" + name + "' (has: " + have + ")");
}

std::vector<std::string> TensorFile::names() const {
  std::vector<std::string> out;
  for (const auto& [n, i] : info_) out.push_back(n);
  for (const auto& [n, i] : unusable_) out.push_back(n);
  std::sort(out.begin(), out.end());
  return out;
}

NpyHeader read_npy_header(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(path, "cannot open");
  return parse_npy_header(in, std::filesystem::file_size(path), path);
}

NpyHeader parse_npy_header(std::istream& in, uint64_t file_size, const std::string& path) {
  char magic[8];
  in.read(magic, 8);
  if (!in || std::memcmp(magic, "\x93NUMPY", 6) != 0) fail(path, "not a .npy file (no \\x93NUMPY magic)");
  const int major = static_cast<unsigned char>(magic[6]);
  uint32_t hlen = 0;
  if (major == 1) {
    unsigned char b[2];
    in.read(reinterpret_cast<char*>(b), 2);
    hlen = b[0] | (b[1] << 8);
  } else if (major == 2 || major == 3) {
    unsigned char b[4];
    in.read(reinterpret_cast<char*>(b), 4);
    hlen = b[0] | (b[1] << 8) | (b[2] << 16) | (static_cast<uint32_t>(b[3]) << 24);
  } else {
    fail(path, ".npy format version " + std::to_string(major) + " is not supported (1, 2 or 3)");
  }
  // The length is the file's word: checked against the file before a buffer of it is made (a
  // corrupt 4-byte length would otherwise take 4 GiB first).
  const uint64_t preamble = major == 1 ? 10 : 12;
  if (!in || hlen > file_size - std::min(file_size, preamble))
    fail(path, "truncated .npy header (" + std::to_string(hlen) + " bytes of header in a file of " +
                   std::to_string(file_size) + ")");
  std::string h(hlen, '\0');
  in.read(h.data(), hlen);
  if (!in) fail(path, "truncated .npy header");
  NpyHeader out;
  out.data_offset = static_cast<uint64_t>(in.tellg());
  auto field = [&](const std::string& key) {
    const size_t k = h.find("'" + key + "'");
    if (k == std::string::npos) fail(path, ".npy header has no '" + key + "'");
    return h.substr(h.find(':', k) + 1);
  };
  const std::string descr = field("descr");
  const size_t q0 = descr.find('\''), q1 = descr.find('\'', q0 + 1);
  const std::string d = descr.substr(q0 + 1, q1 - q0 - 1);
  if (d == "<f8") out.dtype = "f64";
  else if (d == "<f4") out.dtype = "f32";
  else if (d == "<f2") out.dtype = "f16";
  else if (d == "<i8") out.dtype = "i64";
  else if (d == "<i4") out.dtype = "i32";
  else
    fail(path, "dtype '" + d + "' is not supported (little-endian f8, f4, f2, i8, i4; bf16 tensors: use safetensors)");
  if (field("fortran_order").find("False") != 0 && field("fortran_order").find(" False") != 0)
    fail(path, "Fortran-order arrays are not supported (save with numpy.ascontiguousarray)");
  std::string shape = field("shape");
  const size_t open = shape.find('('), close = shape.find(')');
  if (open == std::string::npos || close == std::string::npos || close < open)
    fail(path, ".npy header's shape is not a tuple (...)");
  shape = shape.substr(open + 1, close - open - 1);
  std::stringstream ss(shape);
  std::string item;
  // Sizes only, and at most 2^50 elements as the safetensors reader takes: a
  // product that wrapped around 2^64 passed the size check below and failed
  // later, allocating for the wrapped count.
  constexpr uint64_t kMaxElements = uint64_t{1} << 50;
  uint64_t elements = 1;
  while (std::getline(ss, item, ',')) {
    const size_t b = item.find_first_not_of(' '), e = item.find_last_not_of(' ');
    if (b == std::string::npos) continue;
    const std::string digits = item.substr(b, e - b + 1);
    if (digits.find_first_not_of("0123456789") != std::string::npos || digits.size() > 16)
      fail(path, ".npy header's shape (" + shape + ") has a dimension that is not a size 0 to 2^50: '" + digits + "'");
    const auto dim = static_cast<uint64_t>(std::stoll(digits));
    if (dim > 0 && elements > kMaxElements / dim)
      fail(path, ".npy header's shape (" + shape + ") has more than 2^50 elements");
    elements *= dim;
    out.shape.push_back(static_cast<int64_t>(dim));
  }
  const uint64_t need = out.data_offset + static_cast<uint64_t>(TensorInfo{out.dtype, out.shape}.numel()) *
                                              static_cast<uint64_t>(npy_size(out.dtype));
  if (file_size < need)
    fail(path, "truncated: the header's shape needs " + std::to_string(need) + " bytes, the file has " +
                   std::to_string(file_size));
  return out;
}

}  // namespace yoco::check
