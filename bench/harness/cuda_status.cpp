#include "cuda_status.hpp"

#ifdef YOCO_HAVE_CUDA
#include "device/device_query.hpp"
#endif

namespace yoco::cli {

CudaStatus cuda_status() {
  CudaStatus s;
#ifdef YOCO_HAVE_CUDA
  s.built = true;
  const auto q = yoco::cuda::query_devices();
  if (q.count > 0) {
    s.device = true;
    s.device_name = q.name;
    s.driver = "CUDA driver " + std::to_string(q.driver_version / 1000) + "." +
               std::to_string((q.driver_version % 1000) / 10);
  } else {
    s.why_not = "no CUDA device: " + q.error;
  }
#else
  s.why_not = "this yoco was built without CUDA (cpu preset); build the cuda preset (cmake --preset cuda)";
#endif
  return s;
}

}  // namespace yoco::cli
