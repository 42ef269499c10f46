#pragma once
// Storage types the cost model prices: how many bytes one element of weights,
// KV cache or activations takes on the device. Computation is always fp32
// accumulate; only storage changes memory and bytes moved.
#include <string>
#include <vector>

namespace yoco::cost {

enum class StorageType { fp64, fp32, bf16, fp16, fp8, int8 };

double storage_bytes(StorageType t);
const char* storage_name(StorageType t);  // "bf16", ...
// One of `allowed`, else InputError "<option>: unknown storage type 'x' (choose: bf16, fp8, ...)".
StorageType parse_storage(const std::string& option, const std::string& text, const std::vector<StorageType>& allowed);

// What each kind of tensor is stored as. The defaults are the paper's setting:
// bf16 weights, KV cache and activations; gRet states fp32 (DESIGN.md §3).
struct Storage {
  StorageType weights = StorageType::bf16;
  StorageType kv_cache = StorageType::bf16;
  StorageType activations = StorageType::bf16;
  StorageType state = StorageType::fp32;
  StorageType logits = StorageType::fp32;
  // Everything in one type: the CPU reference stores all tensors as its T.
  static Storage uniform(StorageType t) { return {t, t, t, t, t}; }
};

}  // namespace yoco::cost
