#pragma once
// Writer of NumPy's .npy format, version 1.0, for little-endian float32 and
// float64 C-order arrays of any rank (numpy.load reads them back unchanged).
//   "\x93NUMPY" 1 0 | uint16 LE header length | "{'descr': '<f8', 'fortran_order': False, 'shape': (N, V), }"
//   padded with spaces and a final '\n' so that the data starts on a 64-byte boundary.
#include <cstdint>
#include <string>
#include <vector>

namespace yoco::cli {

enum class NpyDType { f32, f64 };

// The header (magic, version, length, dict, padding) for an array of `shape`.
std::string npy_header(NpyDType dtype, const std::vector<int64_t>& shape);

// Writes `data` (product of `shape` elements, C order), converted to `dtype`.
// Throws InputError naming the file if it cannot be written.
void write_npy(const std::string& path, NpyDType dtype, const std::vector<int64_t>& shape, const double* data);
void write_npy(const std::string& path, NpyDType dtype, const std::vector<int64_t>& shape, const float* data);

}  // namespace yoco::cli
