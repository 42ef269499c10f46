#include <cuda_runtime.h>

#include "device/device_query.hpp"

namespace yoco::cuda {

DeviceSummary query_devices() {
  DeviceSummary s;
  cudaDriverGetVersion(&s.driver_version);
  cudaRuntimeGetVersion(&s.runtime_version);
  const cudaError_t e = cudaGetDeviceCount(&s.count);
  if (e != cudaSuccess) {
    s.count = 0;
    // With no driver at all the runtime says "CUDA driver version is insufficient for CUDA runtime
    // version", which sends a user of a machine without a GPU after a driver upgrade.
    if (e == cudaErrorInsufficientDriver && s.driver_version == 0)
      s.error = "no NVIDIA driver found (libcuda is not installed or not loadable)";
    else if (e == cudaErrorNoDevice)
      s.error = "no CUDA device present";
    else
      s.error = cudaGetErrorString(e);
    cudaGetLastError();  // clear the sticky error so later calls start clean
    return s;
  }
  if (s.count == 0) {
    s.error = "no CUDA device present";
    return s;
  }
  cudaDeviceProp p{};
  if (cudaGetDeviceProperties(&p, 0) == cudaSuccess) {
    s.name = p.name;
    s.sm_major = p.major;
    s.sm_minor = p.minor;
    s.sm_count = p.multiProcessorCount;
    s.total_bytes = static_cast<int64_t>(p.totalGlobalMem);
  }
  return s;
}

CurrentDevice current_device() {
  CurrentDevice d;
  d.error = cudaGetDevice(&d.id);
  if (d.error == cudaSuccess) d.error = cudaDeviceGetAttribute(&d.major, cudaDevAttrComputeCapabilityMajor, d.id);
  if (d.error == cudaSuccess) d.error = cudaDeviceGetAttribute(&d.minor, cudaDevAttrComputeCapabilityMinor, d.id);
  if (d.error == cudaSuccess) d.error = cudaDeviceGetAttribute(&d.sm_count, cudaDevAttrMultiProcessorCount, d.id);
  return d;
}

}  // namespace yoco::cuda
