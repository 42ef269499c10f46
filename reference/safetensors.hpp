#pragma once
// Reader and writer of the safetensors format: 8-byte little-endian header
// length, a JSON header {name: {dtype, shape, data_offsets}}, then the data.
// Every malformation is an InputError naming the file and the tensor.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "dtype.hpp"

namespace yoco {

struct SafetensorsEntry {
  DType dtype = DType::f32;
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0;  // offsets into the data section
  int64_t numel() const {
    int64_t n = 1;
    for (auto s : shape) n *= s;
    return n;
  }
};

class SafetensorsReader {
 public:
  explicit SafetensorsReader(std::string path);
  const std::string& path() const { return path_; }
  const std::map<std::string, SafetensorsEntry>& entries() const { return entries_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  uint64_t data_bytes() const { return data_size_; }
  // Reads one tensor converted to double or float.
  template <class T>
  void read(const std::string& name, T* dst) const;
  // Reads elements [first, first + count) of one tensor (row-major), converted:
  // what a caller streaming a tensor larger than memory reads block by block.
  template <class T>
  void read_range(const std::string& name, int64_t first, int64_t count, T* dst) const;

 private:
  std::string path_;
  uint64_t data_start_ = 0, data_size_ = 0;
  std::map<std::string, SafetensorsEntry> entries_;
  std::map<std::string, std::string> metadata_;
};

struct TensorToWrite {
  std::string name;
  std::vector<int64_t> shape;
  const double* data64 = nullptr;  // exactly one of data64 / data32 set
  const float* data32 = nullptr;
};

// Writes tensors in the given order, converting to `dtype` (F64, F32, BF16, F16).
void write_safetensors(const std::string& path, const std::vector<TensorToWrite>& tensors, DType dtype,
                       const std::map<std::string, std::string>& metadata);

}  // namespace yoco
