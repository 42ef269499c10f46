#pragma once
// The registered kernel benchmarks, in registration order (main reads them).
#include <string>
#include <utility>
#include <vector>

#include "kernel_bench.hpp"

namespace yoco::cuda_bench {
std::vector<std::pair<std::string, BenchFn>>& kernel_benches();
}
