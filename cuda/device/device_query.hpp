#pragma once
// What CUDA devices this process can see. Never throws: a machine without a
// driver or a GPU is a normal case (CI, the development machine), reported in
// `error`.
#include <cstdint>
#include <string>

namespace yoco::cuda {

struct DeviceSummary {
  int count = 0;
  std::string name;  // device 0
  int sm_major = 0, sm_minor = 0;
  int sm_count = 0;
  int64_t total_bytes = 0;
  int driver_version = 0, runtime_version = 0;
  std::string error;  // why count is 0, if it is
};

DeviceSummary query_devices();

}  // namespace yoco::cuda
