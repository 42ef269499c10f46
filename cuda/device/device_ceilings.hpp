#pragma once
// The rates a kernel's efficiency is reported against (DESIGN.md §5), measured
// on the device in the same run: a large device-to-device copy (bytes read +
// written per second) and a large bf16 cuBLAS GEMM with fp32 accumulation.
// CUDA events, warm-up, median of repeats; min and max kept.
#include <string>

namespace yoco::cuda {

struct Rate {
  double median = 0, min = 0, max = 0;
  int repeats = 0;
};

struct DeviceCeilings {
  Rate copy_bw;      // B/s, counting read + write
  Rate gemm_flops;   // FLOP/s, 2·m·n·k per product
  std::string copy_desc, gemm_desc;  // what was timed
  std::string error;  // non-empty: something failed (e.g. not enough memory); rates then 0
};

// About a second on an H100. copy_bytes: size of each of the two buffers;
// gemm_n: m = n = k of the square product.
DeviceCeilings measure_device_ceilings(long long copy_bytes = 1LL << 30, int gemm_n = 8192, int repeats = 10);

}  // namespace yoco::cuda
