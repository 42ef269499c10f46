#include "cpu_ceilings.hpp"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <vector>

#include "format.hpp"
#include "host_memory.hpp"
#include "stats.hpp"
#include "tensor.hpp"

namespace yoco::cli {

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

CpuCeilings measure_cpu_ceilings() {
  CpuCeilings c;
  c.repeats = 5;
  const int n = 768;  // 0.9 GFLOP per product: long enough to time, short enough for CI
  Mat<float> a = Mat<float>::Random(n, n), b = Mat<float>::Random(n, n), out(n, n);
  out.noalias() = a * b;  // warm-up
  std::vector<double> gemm;
  for (int r = 0; r < c.repeats; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    out.noalias() = a * b;
    gemm.push_back(2.0 * n * n * n / seconds_since(t0));
  }
  const size_t bytes = size_t{256} << 20;  // well past every cache level
  std::vector<char> src(bytes, 1), dst(bytes, 0);
  std::memcpy(dst.data(), src.data(), bytes);  // warm-up: fault the pages in
  std::vector<double> copy;
  for (int r = 0; r < c.repeats; ++r) {
    src[static_cast<size_t>(r)] = static_cast<char>(r);
    const auto t0 = std::chrono::steady_clock::now();
    std::memcpy(dst.data(), src.data(), bytes);
    copy.push_back(2.0 * static_cast<double>(bytes) / seconds_since(t0));
  }
  // Read the results through a volatile so the copies and products cannot be optimised away.
  volatile float sink = out(0, 0) + static_cast<float>(dst[1]);
  (void)sink;
  const Summary g = summarize(gemm), m = summarize(copy);
  c.gemm_flops = g.median;
  c.gemm_min = g.min;
  c.gemm_max = g.max;
  c.copy_bw = m.median;
  c.copy_min = m.min;
  c.copy_max = m.max;
  return c;
}

cost::DeviceSpec cpu_roofline_spec(const CpuCeilings& c, const std::string& cpu_name) {
  cost::DeviceSpec s;
  s.name = "roofline of " + cpu_name + " (measured ceilings)";
  s.peak_flops = c.gemm_flops;
  s.bandwidth = c.copy_bw;
  s.memory_bytes = host_memory_bytes();
  s.source = "measured in this run: Eigen fp32 GEMM " + strf("%.1f", c.gemm_flops / 1e9) + " GFLOP/s, memcpy " +
             strf("%.1f", c.copy_bw / 1e9) + " GB/s (read + write)";
  return s;
}

}  // namespace yoco::cli
