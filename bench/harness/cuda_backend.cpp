// The CUDA backend: a skeleton that says what it lacks (cuda_backend.hpp).
// Every part not yet written throws, naming itself, so nothing can run on a
// half-made backend by accident.
#include "cuda_backend.hpp"

#include <stdexcept>

#include "cuda_status.hpp"

namespace yoco::cli {

namespace {

[[noreturn]] void lacks(const std::string& what) {
  throw std::logic_error("the CUDA sweep backend lacks " + what + " (the CUDA runners issue fills it in)");
}

}  // namespace

std::vector<std::string> cuda_backend_missing() {
  return {"runners (create_runner: the CUDA YOCO and Transformer runners)",
          "timer (CUDA events)",
          "memory readings (device arena + cudaMemGetInfo + device peak)",
          "ceilings (bf16 cuBLAS GEMM + device-to-device copy)",
          "analytic storage (bf16)",
          "memory estimate (generation_bytes on the device)"};
}

CudaBackend::CudaBackend(const std::string& device_name) {
  const CudaStatus c = cuda_status();
  prov_ = Provenance::here("cuda", device_name.empty() ? c.device_name : device_name, c.driver);
}

Ceilings CudaBackend::measure_ceilings(Progress&) { lacks("its ceilings (bf16 cuBLAS GEMM + device-to-device copy)"); }
cost::Storage CudaBackend::analytic_storage(Precision) const { lacks("its analytic storage types (bf16)"); }
double CudaBackend::usable_memory_bytes() const { lacks("its memory capacity (cudaMemGetInfo)"); }
double CudaBackend::generation_bytes(const ModelConfig&, Precision, double, double, double, double) const {
  lacks("its memory estimate of a generation");
}
std::unique_ptr<ModelRunner> CudaBackend::create_runner(const ModelConfig&, Precision, uint64_t) {
  lacks("its runners (the CUDA YOCO and Transformer runners)");
}
double CudaBackend::time(const std::function<void()>&) { lacks("its timer (CUDA events)"); }
void CudaBackend::reset_peak_memory() { lacks("its peak memory mark (the device arena)"); }
std::vector<Reading> CudaBackend::memory_breakdown(const ModelRunner&, int64_t, Precision) {
  lacks("its memory readings (device arena + cudaMemGetInfo)");
}
std::vector<Reading> CudaBackend::memory_peaks() { lacks("its device peak (mem_device_peak_bytes)"); }

}  // namespace yoco::cli
