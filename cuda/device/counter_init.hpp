#pragma once
// Generates a weight tensor on the device with the reference's counter-based
// rule (reference/counter_rng.hpp), so device weights need no host copy and are
// bit-identical, in fp32, to Weights<float>::init.
#include <cuda_runtime.h>

#include <cstdint>

#include "counter_rng.hpp"

namespace yoco::cuda {

// dst[i] = counter_init_value(key, i, rule) for i in [0, n). 64-bit indexing.
cudaError_t launch_counter_init(float* dst, int64_t n, uint64_t key, InitRule rule, cudaStream_t stream);

}  // namespace yoco::cuda
