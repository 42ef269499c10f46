#pragma once
// Whether `--device cuda` can run here: CUDA compiled in (cuda preset) and a
// device present. The harness says which of the two is missing.
#include <string>

namespace yoco::cli {

struct CudaStatus {
  bool built = false;   // compiled with the cuda preset
  bool device = false;  // a device answered
  std::string device_name, driver;
  std::string why_not;  // when !built or !device
};

CudaStatus cuda_status();

}  // namespace yoco::cli
