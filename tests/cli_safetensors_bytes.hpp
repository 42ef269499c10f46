#pragma once
// A safetensors file taken apart into its JSON header and data section, for the CLI tests that write
// malformed ones (nlohmann/json: only the files that need it pay for it).
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

namespace yoco_test {

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

}  // namespace yoco_test
