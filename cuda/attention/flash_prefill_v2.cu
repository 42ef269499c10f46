// FlashAttention-3-style prefill attention on Hopper wgmma (issue 13, v2).
//
// Same contract as v1 (cuda/attention/flash_prefill.hpp): causal / sliding-window GQA
// prefill, queries bottom-right aligned at q_start[b] + i, bf16 in and out,
// fp32 scores / softmax / accumulators, optional fp32 LSE. Head dim 128 only;
// launch_flash_prefill sends other head dims to v1.
//
// CTA = 2 consumer warpgroups (256 threads), 128 query rows (64 per
// warpgroup), key blocks of 128. No producer warpgroup: every thread issues
// cp.async (16 B, zero-fill outside the visible key range) into 128-byte-
// swizzled tiles, then `fence.proxy.async` + barrier before wgmma reads them.
//
// Tiles are 128B-swizzled (cuda/arch/wgmma_sm90.cuh); the GEMMs, the softmax and the epilogue of a
// warpgroup's 64 rows are cuda/attention/flash_prefill_wgmma_rows.cuh, shared with v3.
//
// Pipeline (per warpgroup, FA3's intra-warpgroup overlap): iteration t issues
// S_t = Q K_t^T and O += P_{t-1} V_{t-1} back to back, waits for S_t only
// (wait_group 1), runs the masked online softmax of S_t while the P V GEMM is
// still on the tensor cores, then waits for it, rescales O and converts P_t to
// bf16. Ping-pong: warpgroup 1 issues its GEMMs only after warpgroup 0's S_t has
// finished (named barrier 1), so warpgroup 0's softmax runs under warpgroup 1's GEMMs
// (the lockstep schedule lost at every length and is retired: tag
// retired/prefill-v2-lockstep). Loads: at the
// top of iteration t (after the barrier) K_{t+1} goes into
// the K stage that held K_{t-1} and V_t into the V stage that held V_{t-2}; both
// were last read by wgmmas that every thread waited for before the barrier.

#include <cmath>
#include <cstdint>

#include "attention/attention_tiles.hpp"
#include "attention/flash_prefill.hpp"
#include "attention/flash_prefill_params.hpp"
#include "attention/flash_prefill_wgmma_rows.cuh"
#include "attention/prefill_version.hpp"
#include "arch/wgmma_sm90.cuh"

namespace yoco::cuda {

namespace {

using bf16 = __nv_bfloat16;
using namespace sm90;

constexpr int kD = kFlashD, kBr = kFlashBr, kBc = kFlashBc, kTileBytes = kFlashTileBytes;
constexpr int kThreads = 256;  // 2 warpgroups
constexpr int kOffQ = 0, kOffK = kTileBytes, kOffV = 3 * kTileBytes;  // K, V: 2 stages each
constexpr int kSmemUsed = 5 * kTileBytes;
constexpr int kSmemBytes = kSmemUsed + 1024;  // + slack to align the base to 1024 B
static_assert(kSmemBytes <= 227 * 1024, "shared memory per block");
static_assert(kBr == 2 * 64 && kThreads == 2 * 128, "one warpgroup per 64 query rows");

using Params = detail::PrefillParams;

// Named barrier 1 over both warpgroups, predicated (no branch near the wgmmas): threads with
// `wait` true sync on it (and count), the others only arrive (count).
__device__ __forceinline__ void wg_order_sync_if(bool wait) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.u32 p, %0, 0;\n@p bar.sync 1, 256;\n}\n" ::"r"(static_cast<unsigned>(wait))
               : "memory");
}
__device__ __forceinline__ void wg_order_arrive_if(bool arrive) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.u32 p, %0, 0;\n@p bar.arrive 1, 256;\n}\n" ::"r"(static_cast<unsigned>(arrive))
               : "memory");
}
__global__ void __launch_bounds__(kThreads, 1) flash_prefill_v2_kernel(const Params p) {
  const int tid = threadIdx.x, wg = tid / 128, warp = (tid % 128) / 32, lane = tid % 32;
  const int64_t tile = static_cast<int64_t>(gridDim.y) - 1 - blockIdx.y;  // longest tiles first
  const int64_t h = blockIdx.x, b = blockIdx.z;
  // Keys outside [kv_lo, kv_hi) are invisible to every valid row of the tile.
  const attn::QueryTile qt = attn::query_tile(tile, kBr, p.q_start[b], p.q_len[b], p.window, p.capacity, kBc);
  if (qt.rows_valid <= 0) return;  // uniform over the CTA: before any barrier
  const int64_t i0 = qt.i0, rows_valid = qt.rows_valid, p_first = qt.p_first, p_last = qt.p_last;
  const int64_t window = p.window, kv_lo = qt.kv_lo, kv_hi = qt.kv_hi;
  const attn::KeyBlockRange range = qt.blocks;
  const int64_t kvh = h / p.group;
  const bf16* qg = p.q + (b * p.q_rows + i0) * p.q_stride + h * kD;
  const bf16* kg = p.k + b * p.capacity * p.kv_stride + kvh * kD;
  const bf16* vg = p.v + b * p.capacity * p.kv_stride + kvh * kD;

  extern __shared__ __align__(1024) unsigned char smem_raw[];
  const uint32_t raw_addr = static_cast<uint32_t>(__cvta_generic_to_shared(smem_raw));
  const uint32_t base = (raw_addr + 1023u) & ~1023u;  // swizzle atoms on 1024-byte boundaries
  unsigned char* smem = smem_raw + (base - raw_addr);
  const uint32_t sQ = base + kOffQ, sK = base + kOffK, sV = base + kOffV;

  const int64_t nb = range.last - range.first;  // >= 1
  // Prologue: Q and K of the first block.
  load_tile_sw128<kBr, kD, kThreads>(sQ, qg, p.q, p.q_stride, 0, 0, rows_valid, tid);
  load_tile_sw128<kBc, kD, kThreads>(sK, kg + range.first * kBc * p.kv_stride, kg, p.kv_stride, range.first * kBc,
                                     kv_lo, kv_hi, tid);
  cp_async_commit();

  FlashRows rows;
  rows.init();
  const int row_wg0 = wg * 64 + warp * 16;  // this warp's first row in the CTA tile
  const uint32_t q_desc_base = sQ + static_cast<uint32_t>(wg * 64 * 128);

  // Ping-pong (FA3's warp-scheduler barrier, reduced to one named barrier): in every iteration
  // warpgroup 1 issues its GEMMs only after warpgroup 0 has issued its own, so the tensor cores
  // run S0, P0 V, S1, P1 V in that order; warpgroup 0's softmax then runs under warpgroup 1's
  // GEMMs instead of both softmaxes running at once. Both warpgroups run the same wgmma code (no
  // wgmma in a warpgroup-divergent path); only the barrier call differs.
  for (int64_t t = 0; t < nb; ++t) {
    const int64_t n = range.first + t;
    cp_async_wait_all();   // this thread's K_t, V_{t-1} (and Q) have landed
    fence_proxy_async();   // ... and are visible to wgmma
    __syncthreads();       // everyone's; and every wgmma of iteration t-1 is complete
    {
      if (t + 1 < nb) {
        const int64_t j0 = (n + 1) * kBc;
        load_tile_sw128<kBc, kD, kThreads>(sK + static_cast<uint32_t>(((t + 1) & 1) * kTileBytes),
                                           kg + j0 * p.kv_stride, kg, p.kv_stride, j0, kv_lo, kv_hi, tid);
      }
      const int64_t j0 = n * kBc;
      load_tile_sw128<kBc, kD, kThreads>(sV + static_cast<uint32_t>((t & 1) * kTileBytes), vg + j0 * p.kv_stride,
                                         vg, p.kv_stride, j0, kv_lo, kv_hi, tid);
      cp_async_commit();
    }
    static_assert(kThreads == 256, "the order barrier counts both warpgroups");
    wg_order_sync_if(wg == 1);  // warpgroup 1 waits until warpgroup 0 has issued
    // S_t = Q K_t^T and, for t > 0, O += P_{t-1} V_{t-1}: two commit groups (one when t == 0).
    rows.issue_s(q_desc_base, sK + static_cast<uint32_t>((t & 1) * kTileBytes));
    if (t > 0) rows.issue_pv(sV + static_cast<uint32_t>(((t + 1) & 1) * kTileBytes));  // V_{t-1}
    if (t > 0) {
      wgmma_wait<1>();  // S_t done; P_{t-1} V_{t-1} may still run
    } else {
      wgmma_wait<0>();
    }
    reg_fence(rows.s_acc);
    // After the wait (an arrive between issue and wait makes ptxas serialise the wgmmas): warpgroup
    // 1's GEMMs still queue behind warpgroup 0's P V, which is running.
    wg_order_arrive_if(wg == 0);
    float corr[2];
    rows.softmax(n, p_first, p_last, window, lane, row_wg0, p.scale_log2, corr);
    wgmma_wait<0>();  // P_{t-1} V_{t-1} done: O and P are ours again
    reg_fence(rows.o_acc);
    reg_fence(rows.p_frag);
    rows.rescale_and_pack(corr);
  }

  // Tail: O += P V of the last block.
  cp_async_wait_all();
  fence_proxy_async();
  __syncthreads();
  rows.last_pv(sV + static_cast<uint32_t>(((nb - 1) & 1) * kTileBytes));

  // Epilogue through this warp's own 16 rows of the Q tile.
  rows.store(smem + kOffQ, p.o + (b * p.q_rows + i0) * (p.H * kD) + h * kD, p.H * kD, rows_valid,
             p.lse, (b * p.H + h) * p.q_rows + i0, lane, row_wg0);
}

}  // namespace

// The cost model reads the head dim from prefill_version.hpp: the two must agree.
static_assert(kD == kWgmmaPrefillHeadDim, "prefill_version.hpp: kWgmmaPrefillHeadDim is the wgmma versions' head dim");
bool flash_prefill_v2_supported(int64_t head_dim) { return head_dim == kD; }

cudaError_t launch_flash_prefill_v2(const bf16* q, const bf16* k, const bf16* v, const int64_t* q_start,
                                    const int64_t* q_len, const PrefillAttentionShape& s, bf16* o, float* lse,
                                    cudaStream_t stream) {
  if (!detail::prefill_args_valid(q, k, v, q_start, q_len, s, o) || s.head_dim != kD) return cudaErrorInvalidValue;
  const Params p = detail::prefill_params(q, k, v, q_start, q_len, s, o, lse);
  const int64_t tiles = attn::query_tiles(s.q_rows, kBr);
  if (tiles > 65535) return cudaErrorInvalidValue;
  const auto kernel = flash_prefill_v2_kernel;
  cudaError_t err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes);
  if (err != cudaSuccess) return err;
  const dim3 grid(static_cast<unsigned>(s.n_heads), static_cast<unsigned>(tiles), static_cast<unsigned>(s.batch));
  kernel<<<grid, kThreads, kSmemBytes, stream>>>(p);
  return cudaGetLastError();
}

}  // namespace yoco::cuda
