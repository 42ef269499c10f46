#pragma once
// ldmatrix (sm_75+): four 8x8 b16 matrices from shared memory into the mma
// fragment layout, one definition each. Lane l gives the address of row l % 8
// of matrix l / 8; register i receives matrix i. .trans transposes each matrix
// (the B operand of a row-major tile, the A operand K^T of the gRet state).
// The "memory" clobber keeps C++ shared-memory stores before them in order.
#include <cstdint>

namespace yoco::cuda::dev {

__device__ __forceinline__ void ldmatrix_x4(uint32_t addr, uint32_t& r0, uint32_t& r1, uint32_t& r2, uint32_t& r3) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
               : "r"(addr)
               : "memory");
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t addr, uint32_t& r0, uint32_t& r1, uint32_t& r2,
                                                  uint32_t& r3) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
               : "r"(addr)
               : "memory");
}

}  // namespace yoco::cuda::dev
