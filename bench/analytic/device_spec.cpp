#include "device_spec.hpp"

#include <cctype>

#include "errors.hpp"

namespace yoco::cost {

// NVIDIA's datasheets list bf16 tensor-core rates "with sparsity" (2x); the
// dense rate is half of it. Capacities are decimal GB as sold.
DeviceSpec device_spec(const std::string& name) {
  if (name == "h100")
    return {"H100 SXM5 80GB (datasheet)", 989.4e12, 3.35e12, 80e9,
            "NVIDIA H100 Tensor Core GPU datasheet, SXM5: BF16 1979 TFLOP/s with sparsity (989.4 dense), "
            "HBM3 3.35 TB/s, 80 GB; 132 SMs (H100 SXM5, Hopper architecture whitepaper)",
            132};
  if (name == "h200")
    return {"H200 SXM 141GB (datasheet)", 989.4e12, 4.8e12, 141e9,
            "NVIDIA H200 Tensor Core GPU datasheet, SXM: BF16 1979 TFLOP/s with sparsity (989.4 dense), "
            "HBM3e 4.8 TB/s, 141 GB; 132 SMs (the H100 SXM5's GH100 configuration)",
            132};
  if (name == "b200")
    return {"B200 180GB (datasheet)", 2250e12, 8.0e12, 180e9,
            "NVIDIA HGX B200 datasheet, per GPU: FP16/BF16 4.5 PFLOP/s with sparsity (2250 TFLOP/s dense), "
            "HBM3e 8 TB/s, 180 GB; 148 SMs (Blackwell architecture technical brief)",
            148};
  throw InputError("--device-spec: unknown device '" + name +
                   "' (known: h100, h200, b200; or give --peak-tflops and --peak-gbs)");
}

std::vector<std::string> device_spec_names() { return {"h100", "h200", "b200"}; }

std::string datasheet_name_of(const std::string& device_name) {
  for (const char* n : {"H100", "H200", "B200"})
    if (device_name.find(n) != std::string::npos) {
      std::string s = n;
      s[0] = static_cast<char>(std::tolower(static_cast<unsigned char>(s[0])));
      return s;
    }
  return "";
}

DeviceSpec custom_device_spec(double tflops, double gbs, double memory_gb) {
  if (!(tflops > 0) || !(gbs > 0)) throw InputError("--peak-tflops and --peak-gbs must both be positive");
  DeviceSpec s;
  s.name = "custom (" + std::to_string(static_cast<long long>(tflops)) + " TFLOP/s, " +
           std::to_string(static_cast<long long>(gbs)) + " GB/s)";
  s.peak_flops = tflops * 1e12;
  s.bandwidth = gbs * 1e9;
  s.memory_bytes = memory_gb > 0 ? memory_gb * 1e9 : 0;
  s.source = "given on the command line (--peak-tflops, --peak-gbs)";
  return s;
}

}  // namespace yoco::cost
