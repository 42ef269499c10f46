// The real backend of the arena: the CUDA runtime's allocator.
#include <cuda_runtime.h>

#include "device/device_arena.hpp"

namespace yoco::cuda {

namespace {

class CudaBackend final : public DeviceBackend {
 public:
  void* allocate(int64_t bytes, std::string& error) override {
    void* p = nullptr;
    const cudaError_t e = cudaMalloc(&p, static_cast<size_t>(bytes));
    if (e != cudaSuccess) {
      error = cudaGetErrorString(e);
      cudaGetLastError();  // an allocation failure is not sticky: clear it so the run goes on
      return nullptr;
    }
    return p;
  }
  void release(void* p) override { cudaFree(p); }
  bool mem_info(int64_t& free_bytes, int64_t& total_bytes, std::string& error) override {
    size_t f = 0, t = 0;
    const cudaError_t e = cudaMemGetInfo(&f, &t);
    if (e != cudaSuccess) {
      error = cudaGetErrorString(e);
      cudaGetLastError();
      return false;
    }
    free_bytes = static_cast<int64_t>(f);
    total_bytes = static_cast<int64_t>(t);
    return true;
  }
};

}  // namespace

std::unique_ptr<DeviceBackend> cuda_backend() { return std::make_unique<CudaBackend>(); }

}  // namespace yoco::cuda
