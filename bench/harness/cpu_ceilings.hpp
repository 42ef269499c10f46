#pragma once
// The CPU's own rates, measured in the same run as the benchmarks so that the
// CPU roofline projection and any efficiency figure divide by what this
// machine does, not by a datasheet: an Eigen fp32 GEMM (the library the
// reference uses, with the same build flags) and a large memcpy.
#include "device_spec.hpp"

namespace yoco::cli {

struct CpuCeilings {
  double gemm_flops = 0;  // FLOP/s, median of repeats
  double gemm_min = 0, gemm_max = 0;
  double copy_bw = 0;     // B/s counting read + write, median
  double copy_min = 0, copy_max = 0;
  int repeats = 0;
};

// About half a second on two cores.
CpuCeilings measure_cpu_ceilings();
// A roofline device made of these rates and this machine's memory.
cost::DeviceSpec cpu_roofline_spec(const CpuCeilings& c, const std::string& cpu_name);

}  // namespace yoco::cli
