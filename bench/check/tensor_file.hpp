#pragma once
// Named tensors from the files users of PyTorch and NumPy write: one
// .safetensors file (safetensors.torch.save_file), or a folder of NAME.npy
// files (numpy.save). Read in ranges of elements converted to double, so that
// a tensor larger than memory streams block by block. Every problem is an
// InputError naming the file and the tensor.
#include <cstdint>
#include <istream>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace yoco::check {

// "[1, 2, 3]": a shape in messages.
std::string shape_str(const std::vector<int64_t>& shape);
// f64, f32, bf16 or f16 (not an index tensor).
bool is_float_dtype(const std::string& dtype);

struct TensorInfo {
  std::string dtype;           // f64, f32, f16, bf16, i64, i32
  std::vector<int64_t> shape;  // row-major
  int64_t numel() const;
};

class TensorFile;
// InputError "<path>: tensor 'name' (role) is i32: expected a float tensor
// (f64, f32, bf16 or f16)" unless it is one: said before any shape is compared.
void require_float(const TensorFile& f, const std::string& name, const std::string& role = "");

class TensorFile {
 public:
  // path: a .safetensors file, or a folder holding NAME.npy files.
  static std::unique_ptr<TensorFile> open(const std::string& path);
  virtual ~TensorFile() = default;
  const std::string& path() const { return path_; }
  bool has(const std::string& name) const { return info_.count(name) != 0 || unusable_.count(name) != 0; }
  // InputError "<path>: no tensor 'name' (has: a, b, ...)" when absent; the
  // reason it cannot be read (an unsupported dtype, a bad .npy header) for a
  // tensor that is there but unusable: that is said only when it is asked for.
  const TensorInfo& info(const std::string& name) const;
  std::vector<std::string> names() const;
  // Elements [first, first + count) of `name`, row-major, as double.
  virtual void read(const std::string& name, int64_t first, int64_t count, double* dst) const = 0;

 protected:
  explicit TensorFile(std::string path) : path_(std::move(path)) {}
  std::string path_;
  std::map<std::string, TensorInfo> info_;
  std::map<std::string, std::string> unusable_;  // name -> the InputError it raises when used
};

// A .npy file's header: dtype, shape and where its data starts. InputError
// naming the file for anything this reader does not take (Fortran order,
// big-endian, an unknown dtype, a truncated file).
struct NpyHeader {
  std::string dtype;
  std::vector<int64_t> shape;
  uint64_t data_offset = 0;
};
NpyHeader read_npy_header(const std::string& path);
// The same from a stream at the file's start, file_size its bytes in all; path names it in errors.
NpyHeader parse_npy_header(std::istream& in, uint64_t file_size, const std::string& path);

}  // namespace yoco::check
