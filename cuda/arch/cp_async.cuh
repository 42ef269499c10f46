#pragma once
// Asynchronous global -> shared copies (sm_80+, PTX cp.async): one definition
// of each form the kernels use. A copy whose `valid` is false reads nothing and
// writes zeros (src-size 0), so out-of-range rows become zero tiles without a
// branch around the copy; the source address must still be a valid pointer.
#include <cstdint>

namespace yoco::cuda::dev {

// A shared-memory address as the 32-bit window offset PTX's .shared operands take.
__device__ __forceinline__ uint32_t smem_u32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// 16 bytes, bypassing L1 (.cg): tiles read once per CTA.
__device__ __forceinline__ void cp_async16(uint32_t dst, const void* src, bool valid) {
  const int bytes = valid ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(bytes) : "memory");
}
// 4 bytes through L1 (.ca; .cg takes only 16): the per-token log-decays.
__device__ __forceinline__ void cp_async4(uint32_t dst, const void* src, bool valid) {
  const int bytes = valid ? 4 : 0;
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(dst), "l"(src), "r"(bytes) : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
// Waits until at most N of this thread's committed groups are still in flight.
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}
__device__ __forceinline__ void cp_async_wait_all() { cp_async_wait<0>(); }

}  // namespace yoco::cuda::dev
