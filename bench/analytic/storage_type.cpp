#include "storage_type.hpp"

#include "errors.hpp"

namespace yoco::cost {

double storage_bytes(StorageType t) {
  switch (t) {
    case StorageType::fp64: return 8;
    case StorageType::fp32: return 4;
    case StorageType::bf16:
    case StorageType::fp16: return 2;
    case StorageType::fp8:
    case StorageType::int8: return 1;
  }
  return 0;
}

const char* storage_name(StorageType t) {
  switch (t) {
    case StorageType::fp64: return "fp64";
    case StorageType::fp32: return "fp32";
    case StorageType::bf16: return "bf16";
    case StorageType::fp16: return "fp16";
    case StorageType::fp8: return "fp8";
    case StorageType::int8: return "int8";
  }
  return "?";
}

StorageType parse_storage(const std::string& option, const std::string& text, const std::vector<StorageType>& allowed) {
  std::string names;
  for (StorageType t : allowed) {
    if (text == storage_name(t)) return t;
    names += (names.empty() ? "" : ", ") + std::string(storage_name(t));
  }
  throw InputError(option + ": unknown storage type '" + text + "' (choose: " + names + ")");
}

}  // namespace yoco::cost
