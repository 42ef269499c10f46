#pragma once
// Reader and writer of the safetensors format: 8-byte little-endian header
// length, a JSON header {name: {dtype, shape, data_offsets}}, then the data.
// Every malformation is an InputError naming the file and the tensor.
#include <cstdint>
#include <map>
#include <memory>
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

// A tensor of one of the format's dtypes this suite does not convert (BOOL,
// U8, I8, I16, U16, U32, U64, F8_E5M2, F8_E4M3): checked as any entry (shape,
// bytes, place in the data section), listed, never read.
struct SafetensorsOtherEntry {
  std::string dtype;  // as the file names it
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0;
};

class SafetensorsReader {
 public:
  explicit SafetensorsReader(std::string path);
  const std::string& path() const { return path_; }
  // The tensors of a dtype this suite reads (F64, F32, BF16, F16, I64, I32).
  const std::map<std::string, SafetensorsEntry>& entries() const { return entries_; }
  // The others: a file holding them is whole, and whoever needs one says it cannot read it
  // (unsupported_dtype_message); a dtype the format does not define is refused at open.
  const std::map<std::string, SafetensorsOtherEntry>& others() const { return others_; }
  // "<path>: tensor 'NAME': unsupported dtype U8 (accepted: ...)", for a name in others().
  std::string unsupported_dtype_message(const std::string& name) const;
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
  std::map<std::string, SafetensorsOtherEntry> others_;
  std::map<std::string, std::string> metadata_;
};

struct TensorToWrite {
  std::string name;
  std::vector<int64_t> shape;
  const double* data64 = nullptr;  // exactly one of data64 / data32 set
  const float* data32 = nullptr;
};

class AtomicFile;

// Writes a file tensor after tensor in blocks of elements, so that a file
// larger than memory streams out; atomically: nothing appears at `path` unless
// commit() runs after every element was appended (AtomicFile).
class SafetensorsWriter {
 public:
  struct Spec {
    std::string name;
    DType dtype = DType::f32;
    std::vector<int64_t> shape;
  };
  SafetensorsWriter(const std::string& path, std::vector<Spec> tensors,
                    const std::map<std::string, std::string>& metadata);
  ~SafetensorsWriter();
  // The next `count` elements in file order (tensor after tensor, row-major),
  // converted to each tensor's dtype; a block may span tensors.
  void append(const double* x, int64_t count);
  void append(const float* x, int64_t count);
  // InputError naming the file unless every element was appended.
  void commit();

 private:
  template <class T>
  void append_impl(const T* x, int64_t count);
  std::vector<Spec> tensors_;
  std::unique_ptr<AtomicFile> out_;
  size_t tensor_ = 0;   // the tensor being written
  int64_t written_ = 0; // of its elements
  std::vector<unsigned char> buf_;
};

// Writes tensors in the given order, converting to `dtype` (F64, F32, BF16, F16).
void write_safetensors(const std::string& path, const std::vector<TensorToWrite>& tensors, DType dtype,
                       const std::map<std::string, std::string>& metadata);

}  // namespace yoco
