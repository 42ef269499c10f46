#pragma once
// What CUDA devices this process can see. Never throws: a machine without a
// driver or a GPU is a normal case (CI, the development machine), reported in
// `error`.
#include <cuda_runtime.h>

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

// The current device's compute capability and SM count (cudaDeviceGetAttribute: no context-wide
// state touched). The Hopper kernels (wgmma, TMA: built for sm_90a) run where `major == 9 &&
// minor == 0`; is_sm90 says so.
struct CurrentDevice {
  cudaError_t error = cudaSuccess;
  int id = 0, major = 0, minor = 0, sm_count = 0;
  bool is_sm90() const { return error == cudaSuccess && major == 9 && minor == 0; }
};
CurrentDevice current_device();

}  // namespace yoco::cuda
