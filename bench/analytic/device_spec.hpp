#pragma once
// The rates a roofline projection divides by. Named specs carry the vendor's
// datasheet numbers (dense, no sparsity) and say where they come from; a
// custom spec takes the user's --peak-tflops / --peak-gbs.
#include <string>
#include <vector>

namespace yoco::cost {

struct DeviceSpec {
  std::string name;       // "H100 SXM5 80GB (datasheet)"
  double peak_flops = 0;  // dense bf16 tensor-core FLOP/s
  double bandwidth = 0;   // HBM bytes/s
  double memory_bytes = 0;  // capacity; 0 = unknown (nothing is refused)
  std::string source;       // where the numbers come from
  int sm_count = 0;         // streaming multiprocessors; 0 = unknown (plans that need it take the calibration's)
};

// "h100" | "h200"; InputError listing the known names otherwise.
DeviceSpec device_spec(const std::string& name);
std::vector<std::string> device_spec_names();
// The datasheet name ("h100", "h200", "b200") of a card by the name the
// driver gives it ("NVIDIA H200 ..."); "" for a card without one here.
std::string datasheet_name_of(const std::string& device_name);
// A user-given device: peak in TFLOP/s, bandwidth in GB/s, memory in GB (decimal).
DeviceSpec custom_device_spec(double tflops, double gbs, double memory_gb);

}  // namespace yoco::cost
