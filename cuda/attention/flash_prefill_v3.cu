// Warp-specialised FlashAttention-3-style prefill on Hopper (issue 13, v3): v2's maths
// (cuda/attention/flash_prefill_wgmma_rows.cuh) fed by a TMA producer warp through full/empty mbarriers.
//
// Same contract as v1/v2 (cuda/attention/flash_prefill.hpp), head dim 128. Why v3: v2 stops near 500
// TFLOP/s because every thread issues cp.async and the CTA meets at a __syncthreads per key block,
// which drains the tensor cores and re-aligns the two warpgroups, so their ping-pong only
// half-develops (cuda/attention/NOTES-flash_prefill.md). Here the consumers never meet at a CTA barrier.
//
// CTA = 2 consumer warpgroups (warps 0-7, 64 query rows each) + 1 producer warpgroup (warps
// 8-11, of which warp 8 works): 384 threads. __launch_bounds__(384, 1) caps every thread at 168
// registers at entry (a lone producer warp, 288 threads, got the same cap from ptxas), so
// setmaxnreg moves them: producer 48, consumers 224 (128*48 + 256*224 = 63,488 of the 64,512
// allocated), above the 212 v2's consumers use; ptxas reports 0 spills for both regions.
//
// Producer (warp 8): TMA boxes of {64 columns, 128 rows} with the 128-byte swizzle (the layout
// of cuda/arch/wgmma_sm90.cuh), Q once, then K_0, and for t >= 1 K_t then V_{t-1}, into rings of
// kStages stages (K and V apart), each stage with a full barrier (1 arrival + the TMA bytes) and
// an empty barrier (one arrival per consumer warp, after its wgmma reading the stage is waited
// for). A V block reaching past the sequence's written rows [0, q_start + q_len) may hold
// unwritten cache rows (NaN; P = 0 does not cancel them): that block is loaded by the warp's
// cp.async with zero-fill instead, then fenced to the async proxy before the full barrier's
// arrival. K needs no such care: every key outside [kv_lo, kv_hi) is masked to -inf in S,
// whatever its value, and rows past the tensor's end are zero-filled by the TMA.
//
// Consumers (per warpgroup, as v2): iteration t waits for K_t (and V_{t-1}), issues S_t = Q K_t^T
// and O += P_{t-1} V_{t-1}, waits for S_t only, releases K_t, runs the softmax under the P V GEMM,
// waits, releases V_{t-1}, rescales O and packs P_t. Ping-pong with FA3's two scheduler barriers:
// warpgroup 1 issues after warpgroup 0's S_t is done (named barrier 2), warpgroup 0 issues
// iteration t+1 after warpgroup 1's S_t is done (named barrier 1), so the tensor cores run
// S0_t, P0V, S1_t, P1V, S0_{t+1}, ... and each warpgroup's softmax runs under the other's GEMMs.
// Arrivals balance exactly (barrier 1: nb - 1 each side, barrier 2: nb each side), so no
// phase can be completed by one warpgroup alone.
#include <cuda.h>

#include <cmath>
#include <cstdint>

#include "attention/attention_tiles.hpp"
#include "attention/flash_prefill.hpp"
#include "attention/flash_prefill_params.hpp"
#include "attention/flash_prefill_wgmma_rows.cuh"
#include "arch/tma_plan.hpp"
#include "arch/tma_sm90.cuh"
#include "arch/wgmma_sm90.cuh"
#include "device/tma_encode.hpp"

namespace yoco::cuda {

namespace {

using bf16 = __nv_bfloat16;
using namespace sm90;

constexpr int kD = kFlashD, kBr = kFlashBr, kBc = kFlashBc, kTileBytes = kFlashTileBytes, kHalfBytes = kFlashHalfBytes;
constexpr int kConsumerThreads = 256;                   // 2 warpgroups
constexpr int kConsumerWarps = kConsumerThreads / 32;   // one empty-barrier arrival each
constexpr int kProducerWarpgroup = 2;                   // warps 8-11; warp 8 issues the loads
constexpr int kThreads = kConsumerThreads + 128;
// The entry allocation is 168 per thread (65,536 / 384, in steps of 8); the producer's release
// must cover the consumers' growth. 40 spills in the producer's boundary-V path; 48 does not.
constexpr int kEntryRegs = 168, kProducerRegs = 48, kConsumerRegs = 224;
static_assert(128 * (kEntryRegs - kProducerRegs) >= kConsumerThreads * (kConsumerRegs - kEntryRegs), "register pool");
static_assert(kBr == 2 * 64, "one consumer warpgroup per 64 query rows");
static_assert(kHalfBytes == kBr * 128 && kHalfBytes == kBc * 128, "a TMA box is one 64-column half of a tile");

// Shared memory: Q, kStages K tiles, kStages V tiles (each 1024-byte aligned: swizzle atoms),
// then the mbarriers: q_full, k_full[S], k_empty[S], v_full[S], v_empty[S].
template <int kStages>
struct Smem {
  static constexpr int kOffQ = 0;
  static constexpr int kOffK = kTileBytes;
  static constexpr int kOffV = kOffK + kStages * kTileBytes;
  static constexpr int kOffBars = kOffV + kStages * kTileBytes;
  static constexpr int kBars = 1 + 4 * kStages;
  static constexpr int kBytes = kOffBars + kBars * 8 + 1024;  // + slack to align the base to 1024 B
  static_assert(kBytes <= 227 * 1024, "shared memory per block");
  __device__ static constexpr uint32_t q_full(uint32_t base) { return base + kOffBars; }
  __device__ static constexpr uint32_t k_full(uint32_t base, int s) { return base + kOffBars + 8 * (1 + s); }
  __device__ static constexpr uint32_t k_empty(uint32_t base, int s) {
    return base + kOffBars + 8 * (1 + kStages + s);
  }
  __device__ static constexpr uint32_t v_full(uint32_t base, int s) {
    return base + kOffBars + 8 * (1 + 2 * kStages + s);
  }
  __device__ static constexpr uint32_t v_empty(uint32_t base, int s) {
    return base + kOffBars + 8 * (1 + 3 * kStages + s);
  }
};

// v1/v2's parameters (p.v for the zero-filled boundary V blocks) and the tensor maps.
struct Params : detail::PrefillParams {
  CUtensorMap tq, tk, tv;  // 64-byte aligned opaque maps, by value (__grid_constant__)
};

// Predicated named-barrier operations over the two consumer warpgroups (256 threads): every
// consumer thread executes the instruction, so no wgmma sits in a warpgroup-divergent path.
template <int kId>
__device__ __forceinline__ void consumers_sync_if(bool wait) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.u32 p, %0, 0;\n@p bar.sync %1, 256;\n}\n" ::"r"(static_cast<unsigned>(wait)),
               "n"(kId)
               : "memory");
}
template <int kId>
__device__ __forceinline__ void consumers_arrive_if(bool arrive) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.u32 p, %0, 0;\n@p bar.arrive %1, 256;\n}\n" ::"r"(
                   static_cast<unsigned>(arrive)),
               "n"(kId)
               : "memory");
}

template <int kStages>
__global__ void __launch_bounds__(kThreads, 1) flash_prefill_v3_kernel(const __grid_constant__ Params p) {
  using L = Smem<kStages>;
  const int tid = threadIdx.x, lane = tid % 32;
  // Warp-uniform to the compiler (a broadcast), so the role split is no divergent path for wgmma.
  const int wg = __shfl_sync(0xffffffffu, tid / 128, 0);
  const int64_t tile = static_cast<int64_t>(gridDim.y) - 1 - blockIdx.y;  // longest tiles first
  const int64_t h = blockIdx.x, b = blockIdx.z;
  const int64_t qs = p.q_start[b], len = p.q_len[b];
  const attn::QueryTile qt = attn::query_tile(tile, kBr, qs, len, p.window, p.capacity, kBc);
  if (qt.rows_valid <= 0) return;  // uniform over the CTA: before any barrier
  // (No [kv_lo, kv_hi) here: K is masked in S and V's slow path goes by the written rows.)
  const int64_t i0 = qt.i0, rows_valid = qt.rows_valid, p_first = qt.p_first, p_last = qt.p_last;
  const int64_t window = p.window;
  const attn::KeyBlockRange range = qt.blocks;
  const int64_t kvh = h / p.group;
  const int64_t nb = range.last - range.first;  // >= 1

  extern __shared__ __align__(1024) unsigned char smem_raw[];
  const uint32_t raw_addr = static_cast<uint32_t>(__cvta_generic_to_shared(smem_raw));
  const uint32_t base = (raw_addr + 1023u) & ~1023u;  // swizzle atoms on 1024-byte boundaries
  unsigned char* smem = smem_raw + (base - raw_addr);
  const uint32_t sQ = base + L::kOffQ, sK = base + L::kOffK, sV = base + L::kOffV;

  if (tid == 0) {
    mbar_init(L::q_full(base), 1);
#pragma unroll
    for (int s = 0; s < kStages; ++s) {
      mbar_init(L::k_full(base, s), 1);
      mbar_init(L::k_empty(base, s), kConsumerWarps);
      mbar_init(L::v_full(base, s), 1);
      mbar_init(L::v_empty(base, s), kConsumerWarps);
    }
    fence_mbar_init();
  }
  __syncthreads();  // the only CTA-wide barrier

  if (wg == kProducerWarpgroup) {
    setmaxnreg_dec<kProducerRegs>();
    if (tid / 32 != kProducerWarpgroup * 4) return;  // warps 9-11 have nothing to do
    // Coordinates are int32 (the launcher checks every row index fits).
    const int32_t qcol = static_cast<int32_t>(h * kD), kcol = static_cast<int32_t>(kvh * kD);
    const int32_t bb = static_cast<int32_t>(b);
    // Q rows past q_len are loaded as they are (v2 zero-filled them): each S / P / O row is its own
    // query's, those rows are never stored, and the row-max shuffles stay inside a row's quad.
    if (lane == 0) {
      tma_prefetch_map(&p.tq);
      tma_prefetch_map(&p.tk);
      tma_prefetch_map(&p.tv);
      const uint32_t bar = L::q_full(base);
      mbar_arrive_expect_tx(bar, kTileBytes);
      tma_load_3d(sQ, &p.tq, bar, qcol, static_cast<int32_t>(i0), bb);
      tma_load_3d(sQ + kHalfBytes, &p.tq, bar, qcol + 64, static_cast<int32_t>(i0), bb);
    }
    const bf16* vg = p.v + b * p.capacity * p.kv_stride + kvh * kD;
    // Rows [0, kv_written) hold written cache (the contract: row p holds position p for every
    // p < q_start + q_len); only a block reaching past it can hold NaN. Masked rows below it are
    // finite and meet P = 0 exactly, so only the sequence's final partial block takes the slow path.
    const int64_t kv_written = qs + len < p.capacity ? qs + len : p.capacity;
    // The whole warp waits on each barrier and reconverges after lane 0's issue, so the lanes never
    // sit in two different waits at once.
    auto load_k = [&](int64_t t) {
      const int s = tma::ring_stage(t, kStages);
      mbar_wait(L::k_empty(base, s), tma::empty_parity(t, kStages));
      if (lane == 0) {
        const uint32_t dst = sK + static_cast<uint32_t>(s * kTileBytes), bar = L::k_full(base, s);
        const int32_t row = static_cast<int32_t>((range.first + t) * kBc);
        mbar_arrive_expect_tx(bar, kTileBytes);
        tma_load_3d(dst, &p.tk, bar, kcol, row, bb);
        tma_load_3d(dst + kHalfBytes, &p.tk, bar, kcol + 64, row, bb);
      }
      __syncwarp();
    };
    auto load_v = [&](int64_t t) {
      const int s = tma::ring_stage(t, kStages);
      const int64_t n = range.first + t;
      mbar_wait(L::v_empty(base, s), tma::empty_parity(t, kStages));  // every lane: all may write
      const uint32_t dst = sV + static_cast<uint32_t>(s * kTileBytes), bar = L::v_full(base, s);
      if (attn::key_block_inside(n, kBc, 0, kv_written)) {
        if (lane == 0) {
          const int32_t row = static_cast<int32_t>(n * kBc);
          mbar_arrive_expect_tx(bar, kTileBytes);
          tma_load_3d(dst, &p.tv, bar, kcol, row, bb);
          tma_load_3d(dst + kHalfBytes, &p.tv, bar, kcol + 64, row, bb);
        }
        __syncwarp();
      } else {
        const int64_t j0 = n * kBc;
        load_tile_sw128<kBc, kD, 32>(dst, vg + j0 * p.kv_stride, vg, p.kv_stride, j0, 0, kv_written, lane);
        cp_async_commit();
        cp_async_wait_all();
        fence_proxy_async();  // this lane's rows, visible to wgmma (async proxy)
        __syncwarp();
        if (lane == 0) mbar_arrive(bar);
      }
    };
    load_k(0);
    for (int64_t t = 1; t < nb; ++t) {
      load_k(t);
      load_v(t - 1);
    }
    load_v(nb - 1);
    return;  // in-flight TMA completes on the barriers the consumers wait for
  }

  // ---- Consumers ----
  setmaxnreg_inc<kConsumerRegs>();
  const int warp = (tid % 128) / 32;
  FlashRows rows;
  rows.init();
  const int row_wg0 = wg * 64 + warp * 16;  // this warp's first row in the CTA tile
  const uint32_t q_base = sQ + static_cast<uint32_t>(wg * 64 * 128);
  mbar_wait(L::q_full(base), 0);

  for (int64_t t = 0; t < nb; ++t) {
    const int64_t n = range.first + t;
    const int ks = tma::ring_stage(t, kStages);
    const int vs = tma::ring_stage(t + kStages - 1, kStages);  // stage of use t - 1
    mbar_wait(L::k_full(base, ks), tma::full_parity(t, kStages));
    if (t > 0) mbar_wait(L::v_full(base, vs), tma::full_parity(t - 1, kStages));
    consumers_sync_if<1>(wg == 0 && t > 0);  // warpgroup 0: after warpgroup 1's S_{t-1}
    consumers_sync_if<2>(wg == 1);           // warpgroup 1: after warpgroup 0's S_t
    // S_t = Q K_t^T and, for t > 0, O += P_{t-1} V_{t-1}: two commit groups (one when t == 0).
    rows.issue_s(q_base, sK + static_cast<uint32_t>(ks * kTileBytes));
    if (t > 0) rows.issue_pv(sV + static_cast<uint32_t>(vs * kTileBytes));
    if (t > 0) {
      wgmma_wait<1>();  // S_t done; P_{t-1} V_{t-1} may still run
    } else {
      wgmma_wait<0>();
    }
    reg_fence(rows.s_acc);
    mbar_arrive_if(L::k_empty(base, ks), lane == 0);  // this warp is done reading K_t
    consumers_arrive_if<2>(wg == 0);
    consumers_arrive_if<1>(wg == 1 && t + 1 < nb);
    float corr[2];
    rows.softmax(n, p_first, p_last, window, lane, row_wg0, p.scale_log2, corr);
    wgmma_wait<0>();  // P_{t-1} V_{t-1} done: O and P are ours again, V_{t-1} is free
    reg_fence(rows.o_acc);
    reg_fence(rows.p_frag);
    mbar_arrive_if(L::v_empty(base, vs), lane == 0 && t > 0);
    rows.rescale_and_pack(corr);
  }

  // Tail: O += P V of the last block.
  const int vs = tma::ring_stage(nb - 1, kStages);
  mbar_wait(L::v_full(base, vs), tma::full_parity(nb - 1, kStages));
  rows.last_pv(sV + static_cast<uint32_t>(vs * kTileBytes));
  mbar_arrive_if(L::v_empty(base, vs), lane == 0);  // every use released: the rings end balanced

  // Epilogue through this warp's own 16 rows of the Q tile (its S GEMMs are complete).
  rows.store(smem + L::kOffQ, p.o + (b * p.q_rows + i0) * (p.H * kD) + h * kD, p.H * kD, rows_valid, p.lse,
             (b * p.H + h) * p.q_rows + i0, lane, row_wg0);
}

// The tensor map of a [batch, rows, stride] bf16 buffer in boxes of {64, 128, 1}.
cudaError_t encode_rows(CUtensorMap* map, const bf16* base, int64_t batch, int64_t rows, int64_t stride) {
  return encode_bf16_rows(map, base, batch, rows, stride, kBc);
}

template <int kStages>
cudaError_t launch_stages(const Params& p, const PrefillAttentionShape& s, int64_t tiles, cudaStream_t stream) {
  const auto kernel = flash_prefill_v3_kernel<kStages>;
  const int bytes = Smem<kStages>::kBytes;
  cudaError_t err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
  if (err != cudaSuccess) return err;
  const dim3 grid(static_cast<unsigned>(s.n_heads), static_cast<unsigned>(tiles), static_cast<unsigned>(s.batch));
  kernel<<<grid, kThreads, bytes, stream>>>(p);
  return cudaGetLastError();
}

}  // namespace

// The K/V ring depth launch_flash_prefill_v3 runs (2 or 3; 3 uses 224 KiB of shared memory).
constexpr int kV3DefaultStages = 2;

cudaError_t detail::launch_flash_prefill_v3_stages(int stages, const bf16* q, const bf16* k, const bf16* v,
                                                   const int64_t* q_start, const int64_t* q_len,
                                                   const PrefillAttentionShape& s, bf16* o, float* lse,
                                                   cudaStream_t stream) {
  if (!detail::prefill_args_valid(q, k, v, q_start, q_len, s, o) || s.head_dim != kD) return cudaErrorInvalidValue;
  if (stages != 2 && stages != 3) return cudaErrorInvalidValue;
  const int64_t tiles = attn::query_tiles(s.q_rows, kBr);
  if (tiles > 65535) return cudaErrorInvalidValue;
  Params p{};
  static_cast<detail::PrefillParams&>(p) = detail::prefill_params(q, k, v, q_start, q_len, s, o, lse);
  cudaError_t err = encode_rows(&p.tq, q, s.batch, s.q_rows, s.q_stride);
  if (err == cudaSuccess) err = encode_rows(&p.tk, k, s.batch, s.capacity, s.kv_stride);
  if (err == cudaSuccess) err = encode_rows(&p.tv, v, s.batch, s.capacity, s.kv_stride);
  if (err != cudaSuccess) return err;
  return stages == 3 ? launch_stages<3>(p, s, tiles, stream) : launch_stages<2>(p, s, tiles, stream);
}

cudaError_t launch_flash_prefill_v3(const bf16* q, const bf16* k, const bf16* v, const int64_t* q_start,
                                    const int64_t* q_len, const PrefillAttentionShape& s, bf16* o, float* lse,
                                    cudaStream_t stream) {
  return detail::launch_flash_prefill_v3_stages(kV3DefaultStages, q, k, v, q_start, q_len, s, o, lse, stream);
}

}  // namespace yoco::cuda
