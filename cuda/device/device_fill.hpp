#pragma once
// Device-side test and benchmark inputs, for lengths where generating them on
// the host and uploading is too slow; both kernel families' tests and benches
// use them.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace yoco::cuda {

// dst[i] = bf16(stddev * N(0,1)) from a counter-based hash of (seed, i), 64-bit indexing.
cudaError_t launch_fill_normal_bf16(__nv_bfloat16* dst, int64_t n, uint64_t seed, float stddev,
                                    cudaStream_t stream);

}  // namespace yoco::cuda
