#include "kernel_bench.hpp"

#include <algorithm>
#include <map>
#include <stdexcept>
#include <string>

#include "kernel_registry.hpp"

namespace yoco::cuda_bench {

namespace {

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}

// A buffer twice the L2, written before each cold sample so that no input of
// the timed launch is still cached.
struct L2Flusher {
  void* buf = nullptr;
  size_t bytes = 0;
  L2Flusher() {
    int dev = 0, l2 = 0;
    check(cudaGetDevice(&dev), "cudaGetDevice");
    check(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, dev), "L2 size");
    bytes = std::max<size_t>(2 * static_cast<size_t>(l2), 64u << 20);
    check(cudaMalloc(&buf, bytes), "L2 flush buffer");
  }
  ~L2Flusher() { cudaFree(buf); }
  void flush(cudaStream_t s, int round) { check(cudaMemsetAsync(buf, round & 0xff, bytes, s), "L2 flush"); }
};

L2Flusher& flusher() {
  static L2Flusher f;
  return f;
}

}  // namespace

Timing time_launches(const std::function<void(cudaStream_t)>& launch, cudaStream_t stream, int warmup, int repeats,
                     bool flush_l2) {
  for (int i = 0; i < warmup; ++i) launch(stream);
  check(cudaGetLastError(), "warm-up launch");
  check(cudaStreamSynchronize(stream), "warm-up");
  cudaEvent_t start, stop;
  check(cudaEventCreate(&start), "event");
  check(cudaEventCreate(&stop), "event");
  std::vector<double> t;
  for (int i = 0; i < repeats; ++i) {
    if (flush_l2) flusher().flush(stream, i);
    check(cudaEventRecord(start, stream), "event record");
    launch(stream);
    check(cudaGetLastError(), "timed launch");
    check(cudaEventRecord(stop, stream), "event record");
    check(cudaEventSynchronize(stop), "timed run");
    float ms = 0;
    check(cudaEventElapsedTime(&ms, start, stop), "elapsed");
    t.push_back(ms * 1e-3);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  std::sort(t.begin(), t.end());
  Timing r;
  r.repeats = static_cast<int>(t.size());
  if (t.empty()) return r;
  const size_t n = t.size();
  r.median_s = n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]);
  r.min_s = t.front();
  r.max_s = t.back();
  return r;
}

void Report::add(const KernelResult& r) { results_.push_back(r); }

std::vector<std::pair<std::string, BenchFn>>& kernel_benches() {
  static std::vector<std::pair<std::string, BenchFn>> all;
  return all;
}

bool register_kernel_bench(const char* name, BenchFn fn) {
  kernel_benches().emplace_back(name, std::move(fn));
  return true;
}

}  // namespace yoco::cuda_bench
