#pragma once
// Hopper (sm_90a) mbarrier and TMA primitives, one PTX instruction each (PTX ISA 8.x "mbarrier",
// "cp.async.bulk.tensor"). Stage and parity arithmetic: cuda/arch/tma_plan.hpp; the tensor maps are
// encoded on the host (cuTensorMapEncodeTiled) and passed as __grid_constant__ parameters.
#include <cuda.h>

#include <cstdint>

namespace yoco::cuda::sm90 {

__device__ __forceinline__ void mbar_init(uint32_t bar, uint32_t arrivals) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(arrivals) : "memory");
}
// Makes the initialised barriers visible to the async proxy (TMA's complete_tx) and to other threads
// once a CTA barrier follows.
__device__ __forceinline__ void fence_mbar_init() { asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory"); }

__device__ __forceinline__ void mbar_arrive(uint32_t bar) {
  asm volatile("mbarrier.arrive.release.cta.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}
// One mbarrier arrival from the threads with `arrive` true, without a branch (a consumer warp's
// release of a ring stage comes from its lane 0, inside code wgmma must not see as divergent).
__device__ __forceinline__ void mbar_arrive_if(uint32_t bar, bool arrive) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.u32 p, %1, 0;\n@p mbarrier.arrive.release.cta.shared::cta.b64 _, [%0];\n}\n" ::"r"(
                   bar),
               "r"(static_cast<unsigned>(arrive))
               : "memory");
}
// One arrival, and `bytes` more transaction bytes that the phase waits for (TMA completes them).
__device__ __forceinline__ void mbar_arrive_expect_tx(uint32_t bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.release.cta.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}
// Waits until the phase of parity `parity` has completed (mbarrier.try_wait suspends the thread for a
// system-defined time before it fails, so this is not a hot spin; labels are local to the {}
// block, so inlined copies do not clash). The loop lives inside the asm: a C++ loop on a per-thread predicate is a divergent path to the compiler, and a wgmma
// after one gets serialised (ptxas advisory C7520).
__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity) {
  asm volatile(
      "{\n.reg .pred p;\nLAB_WAIT:\n"
      "mbarrier.try_wait.parity.acquire.cta.shared::cta.b64 p, [%0], %1;\n"
      "@!p bra LAB_WAIT;\n}\n" ::"r"(bar),
      "r"(parity)
      : "memory");
}

// Register reallocation between warpgroups (FA3's producer / consumer split): every warp of the
// warpgroup executes it; counts are multiples of 8 in [24, 256].
template <int kRegs>
__device__ __forceinline__ void setmaxnreg_dec() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kRegs));
}
template <int kRegs>
__device__ __forceinline__ void setmaxnreg_inc() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kRegs));
}

__device__ __forceinline__ void tma_prefetch_map(const CUtensorMap* map) {
  asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<uint64_t>(map)) : "memory");
}
// TMA load of the box at coordinates {c0, c1, c2} (innermost first) into shared memory at dst
// (aligned to the swizzle atom: 1024 B for the 128-byte swizzle); completes `bar`'s transaction
// bytes. Out-of-bounds elements are zero-filled (CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE).
__device__ __forceinline__ void tma_load_3d(uint32_t dst, const CUtensorMap* map, uint32_t bar, int32_t c0, int32_t c1,
                                            int32_t c2) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4, %5}], [%2];\n" ::"r"(
          dst),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(bar), "r"(c0), "r"(c1), "r"(c2)
      : "memory");
}

// ---- Thread-block clusters (a kernel launched with a cluster dimension) ----
// This CTA's rank in its cluster.
__device__ __forceinline__ uint32_t cluster_ctarank() {
  uint32_t r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
  return r;
}
// One arrival on the mbarrier at `bar`'s offset in the CTA of rank `rank` (this CTA's own included),
// from the threads with `arrive` true, without a branch (as mbar_arrive_if). The default semantics
// (release at CTA scope), as CUTLASS's cluster barriers: .release.cluster compiles to two GPU-wide
// fences (MEMBAR.ALL.GPU, which also waits for the warp's outstanding global stores), and a consumer's
// release orders nothing the peer reads: its wgmma reads of the stage are complete at wgmma.wait_group.
__device__ __forceinline__ void mbar_arrive_cluster_if(uint32_t bar, uint32_t rank, bool arrive) {
  asm volatile(
      "{\n.reg .pred p;\n.reg .b32 remote;\nsetp.ne.u32 p, %2, 0;\n"
      "mapa.shared::cluster.u32 remote, %0, %1;\n"
      "@p mbarrier.arrive.shared::cluster.b64 _, [remote];\n}\n" ::"r"(bar),
      "r"(rank), "r"(static_cast<unsigned>(arrive))
      : "memory");
}
// The number of CTAs in this CTA's cluster.
__device__ __forceinline__ uint32_t cluster_nctarank() {
  uint32_t n;
  asm volatile("mov.u32 %0, %%cluster_nctarank;\n" : "=r"(n));
  return n;
}
// Every thread of every CTA of the cluster: the arrivals before it happen before the waits after it
// (not the .aligned form: the warps reach it from different code).
__device__ __forceinline__ void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release;\nbarrier.cluster.wait.acquire;\n" ::: "memory");
}
// tma_load_3d, multicast: the box lands at `dst`'s offset in every CTA of the cluster whose bit is set
// in `cta_mask`, and completes the transaction bytes of the mbarrier at `bar`'s offset in each of them.
__device__ __forceinline__ void tma_load_3d_multicast(uint32_t dst, const CUtensorMap* map, uint32_t bar, int32_t c0,
                                                      int32_t c1, int32_t c2, uint16_t cta_mask) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster "
      "[%0], [%1, {%3, %4, %5}], [%2], %6;\n" ::"r"(dst),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(bar), "r"(c0), "r"(c1), "r"(c2), "h"(cta_mask)
      : "memory");
}

}  // namespace yoco::cuda::sm90
