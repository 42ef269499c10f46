#pragma once
// f(i) for i in [0, n) on every hardware thread: the host side of the long GPU tests (their exact
// references over 128K keys or 4K-token tails of 24 heads) would otherwise take seconds of the
// device's time alone.
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

namespace yoco::cuda_test {

template <class F>
void parallel_for(int64_t n, const F& f) {
  const int64_t threads =
      std::max<int64_t>(1, std::min<int64_t>(n, static_cast<int64_t>(std::thread::hardware_concurrency())));
  std::atomic<int64_t> next{0};
  std::vector<std::thread> pool;
  for (int64_t t = 0; t < threads; ++t)
    pool.emplace_back([&] {
      for (int64_t i = next++; i < n; i = next++) f(i);
    });
  for (auto& th : pool) th.join();
}

}  // namespace yoco::cuda_test
