// libFuzzer target: the .npy header reader of `yoco check` (bench/check/tensor_file.hpp), on the file's
// bytes as a stream of their own length. InputError is the expected outcome of bad input; any other
// exception, a crash, a sanitizer report or more memory than libFuzzer's limit (a length taken on the
// file's word) is a finding. An accepted header must describe data that lies inside the file.
#include <cstdint>
#include <sstream>
#include <string>

#include "fuzz_common.hpp"
#include "tensor_file.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  std::istringstream in(bytes, std::ios::binary);
  yoco::check::NpyHeader h;
  if (!yoco::fuzz::accepts("parse_npy_header", [&] { h = yoco::check::parse_npy_header(in, size, "fuzz.npy"); }))
    return 0;
  if (h.data_offset > size) yoco::fuzz::finding("an accepted header's data starts past the file's end");
  uint64_t elements = 1;
  for (int64_t d : h.shape) {
    if (d < 0) yoco::fuzz::finding("an accepted header has a negative dimension");
    elements *= static_cast<uint64_t>(d);
  }
  const uint64_t element_bytes = h.dtype == "f64" || h.dtype == "i64" ? 8 : h.dtype == "f16" ? 2 : 4;
  if (elements > (size - h.data_offset) / element_bytes)
    yoco::fuzz::finding("an accepted header's shape needs more bytes than the file has");
  return 0;
}
