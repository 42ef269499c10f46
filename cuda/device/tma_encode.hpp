#pragma once
// Host side of the TMA-fed kernels: the tensor map of a [batch, rows, stride] bf16 buffer in boxes
// of {64 columns, box_rows rows, 1 sequence} with the 128-byte swizzle (the layout of
// cuda/arch/wgmma_sm90.cuh), encoded through the runtime's driver entry point (no link against
// libcuda). The view's rules are arch/tma_plan.hpp's, tested on the CPU.
#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace yoco::cuda {

// cudaErrorInvalidValue where the view breaks a TMA rule (tma::bf16_rows_view says which),
// cudaErrorNotSupported where the driver lacks cuTensorMapEncodeTiled.
cudaError_t encode_bf16_rows(CUtensorMap* map, const __nv_bfloat16* base, int64_t batch, int64_t rows, int64_t stride,
                             int64_t box_rows);

}  // namespace yoco::cuda
