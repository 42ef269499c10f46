#pragma once
// What every kernel benchmark needs around its launches: CUDA errors as
// exceptions (bench_cuda_kernels turns them into `failed` rows), device
// buffers, random inputs generated on the device (never zeros: METHOD.md), a
// finiteness check of outputs after the timed runs, and a stream that is
// destroyed on every path.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <cstddef>
#include <stdexcept>
#include <string>
#include <vector>

#include "device/counter_init.hpp"
#include "device/device_fill.hpp"  // launch_fill_normal_bf16
#include "dtype.hpp"

namespace yoco::cuda_bench {

using bf16 = __nv_bfloat16;

inline void check(cudaError_t e, const std::string& what) {
  if (e != cudaSuccess) throw std::runtime_error(what + ": " + cudaGetErrorString(e));
}

template <class T>
struct DeviceBuffer {
  T* p = nullptr;
  size_t n = 0;
  explicit DeviceBuffer(size_t count) : n(count) { check(cudaMalloc(&p, count * sizeof(T)), "cudaMalloc"); }
  ~DeviceBuffer() { cudaFree(p); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
};

// bf16(scale · N(0, 1)) from a counter-based hash of (seed, index).
inline void fill_normal_bf16(bf16* dst, size_t n, uint64_t seed, float scale = 1.0f) {
  check(cuda::launch_fill_normal_bf16(dst, static_cast<int64_t>(n), seed, scale, nullptr), "fill bf16");
  check(cudaDeviceSynchronize(), "fill bf16");
}

// offset + scale · U(-1, 1) (the counter-based weight initializer's rule).
inline void fill_uniform_f32(float* dst, size_t n, uint64_t key, float offset, float scale) {
  check(cuda::launch_counter_init(dst, static_cast<int64_t>(n), key, InitRule{offset, scale}, nullptr), "fill f32");
  check(cudaDeviceSynchronize(), "fill f32");
}

// The first min(n, limit) values (a 1M-token output is 6 GB: check a prefix).
inline bool all_finite_bf16(const bf16* d, size_t n, size_t limit = SIZE_MAX) {
  const size_t m = n < limit ? n : limit;
  std::vector<uint16_t> h(m);
  check(cudaMemcpy(h.data(), d, m * sizeof(uint16_t), cudaMemcpyDeviceToHost), "download");
  for (uint16_t b : h)
    if (!std::isfinite(bf16_bits_to_float(b))) return false;
  return true;
}

// Largest |a - b| / max(|b|, 1e-3) over the first n values of two device buffers; NaN if either
// holds a NaN (std::max would drop it).
inline double max_rel_diff(const bf16* a, const bf16* b, size_t n) {
  std::vector<uint16_t> ha(n), hb(n);
  check(cudaMemcpy(ha.data(), a, n * 2, cudaMemcpyDeviceToHost), "download");
  check(cudaMemcpy(hb.data(), b, n * 2, cudaMemcpyDeviceToHost), "download");
  double worst = 0;
  for (size_t i = 0; i < n; ++i) {
    const double x = bf16_bits_to_float(ha[i]), y = bf16_bits_to_float(hb[i]);
    const double d = std::abs(x - y) / (std::abs(y) > 1e-3 ? std::abs(y) : 1e-3);
    if (std::isnan(d)) return d;
    if (d > worst) worst = d;
  }
  return worst;
}

struct ScopedStream {
  cudaStream_t s = nullptr;
  ScopedStream() { check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "stream"); }
  // With a priority (cudaDeviceGetStreamPriorityRange's: lower numbers go first).
  explicit ScopedStream(int priority) {
    check(cudaStreamCreateWithPriority(&s, cudaStreamNonBlocking, priority), "stream with priority");
  }
  ~ScopedStream() { cudaStreamDestroy(s); }
  ScopedStream(const ScopedStream&) = delete;
  ScopedStream& operator=(const ScopedStream&) = delete;
};

}  // namespace yoco::cuda_bench
