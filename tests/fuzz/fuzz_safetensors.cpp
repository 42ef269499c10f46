// libFuzzer target: the safetensors reader (reference/safetensors.hpp), header
// and data. The reader takes a path only, so each input is written to a
// scratch file on tmpfs. InputError is the expected outcome of bad input;
// any other exception, a crash or a sanitizer report is a finding.
#include <cmath>
#include <exception>
#include <string>
#include <vector>

#include "errors.hpp"
#include "fuzz_common.hpp"
#include "safetensors.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string& path = yoco::fuzz::scratch_path(".safetensors");
  yoco::fuzz::write_file(path, data, size);
  yoco::fuzz::accepts("SafetensorsReader", [&] {
    yoco::SafetensorsReader r(path);
    // Every tensor the reader accepted must read back: its bytes lie within
    // the file (checked above), so numel is bounded by the input size.
    uint64_t total = 0;
    for (const auto& [name, e] : r.entries()) {
      if (e.end < e.begin || e.end > r.data_bytes()) yoco::fuzz::finding("entry '" + name + "' outside the data");
      total += e.end - e.begin;
      std::vector<double> d(static_cast<size_t>(e.numel()));
      r.read(name, d.data());
      std::vector<float> f(static_cast<size_t>(e.numel()));
      r.read(name, f.data());
    }
    // Tensors of the format's other dtypes: within the data, refused when read.
    for (const auto& [name, e] : r.others()) {
      if (e.end < e.begin || e.end > r.data_bytes()) yoco::fuzz::finding("entry '" + name + "' outside the data");
      total += e.end - e.begin;
      bool refused = false;
      try {
        double d;
        r.read_range(name, 0, 0, &d);
      } catch (const yoco::InputError&) {
        refused = true;
      }
      if (!refused) yoco::fuzz::finding("entry '" + name + "' of dtype " + e.dtype + " was read");
    }
    if (total != r.data_bytes()) yoco::fuzz::finding("accepted entries do not cover the data section");
  });
  return 0;
}
