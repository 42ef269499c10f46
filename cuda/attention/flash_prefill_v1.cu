// Prefill attention, variant v1: FlashAttention-2 style on mma.sync, every head dim
// (64/128/256) and every architecture; the dispatcher is flash_prefill.cu.
//
// One CTA serves (query tile of kBr rows, query head, sequence). Warp w owns
// query rows [w*16*kMT, (w+1)*16*kMT) of the tile: kMT m16 tiles. Per key block
// of kBc keys: S = Q K^T on tensor cores (fp32), scale folded with log2(e),
// mask only where the block is cut by the diagonal or the window edge, online
// softmax (row max m, partial row sum l per thread, O rescaled by exp2(m_old -
// m_new)), then P (bf16, straight from the S accumulators) times V into O.
// K/V blocks are double-buffered with cp.async: block n+1 loads while block n
// computes. Shared tiles are [rows][D] bf16 with the 16-byte chunks of each row
// XOR-swizzled by (row & 7), so ldmatrix phases and cp.async stores hit 8
// distinct 16-byte bank groups.
//
// Fragment layouts (PTX ISA, mma.m16n8k16 .bf16): with g = lane/4, t = lane%4,
//   A (16x16, row): a0 (g, 2t..2t+1), a1 (g+8, 2t..), a2 (g, 2t+8..), a3 (g+8, 2t+8..)
//   B (16x8, col):  b0 (k 2t..2t+1, n g), b1 (k 2t+8.., n g)
//   C (16x8 fp32):  c0,c1 (g, 2t..2t+1), c2,c3 (g+8, 2t..2t+1)
// so the S accumulators of key tiles 2kk and 2kk+1 are exactly P's A fragment
// for key step kk (the FA2 register reuse).
#include <cmath>

#include "attention/attention_tiles.hpp"
#include "arch/cp_async.cuh"
#include "arch/device_math.cuh"
#include "arch/ldmatrix.cuh"
#include "arch/swizzle.hpp"
#include "attention/flash_prefill.hpp"
#include "attention/flash_prefill_params.hpp"

namespace yoco::cuda {

namespace {

using bf16 = __nv_bfloat16;

template <int D, int Bc, int Warps, int MT, int MinBlocks = 1>
struct Traits {
  static constexpr int kD = D, kBc = Bc, kWarps = Warps, kMT = MT, kMinBlocks = MinBlocks;
  static constexpr int kBr = Warps * 16 * MT;  // query rows per CTA
  static constexpr int kThreads = Warps * 32;
  static constexpr int kChunks = D / 8;  // 16-byte chunks per row
  static constexpr int kStages = 2;
  static constexpr int kQElems = kBr * D, kKVElems = Bc * D;
  static constexpr int kSmemBytes = (kQElems + 2 * kStages * kKVElems) * 2;
  static_assert(D % 64 == 0, "swizzle needs >= 8 chunks per row");
  static_assert(Bc % 16 == 0, "key blocks are whole k16 steps");
  static_assert((kBr * kChunks) % kThreads == 0 && (Bc * kChunks) % kThreads == 0, "whole loader rounds");
  static_assert(kSmemBytes <= 227 * 1024, "shared memory per block");
  static_assert(kWarps * 32 == kThreads);
};

// D 64: 4 warps x 32 rows, 128-key blocks (80 KiB). D 128: 4 warps x 32 rows,
// 64-key blocks (96 KiB). D 256: 8 warps x 16 rows, 64-key blocks (192 KiB).
using Traits64 = Traits<64, 128, 4, 2>;
using Traits128 = Traits<128, 64, 4, 2>;
using Traits256 = Traits<256, 64, 8, 1>;
static_assert(Traits64::kBr == attn::kPrefillTileRows && Traits128::kBr == attn::kPrefillTileRows &&
                  Traits256::kBr == attn::kPrefillTileRows,
              "the cost model counts prefill attention in tiles of kPrefillTileRows rows");

using Params = detail::PrefillParams;

// v1 addresses its tiles by element pointers: thin adapters over arch/ (no PTX of their own).
template <int D>
__device__ __forceinline__ int swz(int row, int col) {
  return dev::swz_index<D>(row, col);
}
__device__ __forceinline__ void cp_async16(bf16* smem, const bf16* gmem, bool valid) {
  dev::cp_async16(dev::smem_u32(smem), gmem, valid);
}
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const bf16* p) {
  dev::ldmatrix_x4(dev::smem_u32(p), r[0], r[1], r[2], r[3]);
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], const bf16* p) {
  dev::ldmatrix_x4_trans(dev::smem_u32(p), r[0], r[1], r[2], r[3]);
}
__device__ __forceinline__ void mma_bf16(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  dev::mma_bf16(c, a[0], a[1], a[2], a[3], b0, b1);
}
using dev::cp_async_commit;
using dev::cp_async_wait;
using dev::fast_exp2;
using dev::pack_bf16;

// Issues cp.async for a [ROWS][D] tile whose row r is global row row0 + r at
// g + r * stride (g points at row row0's head columns, never dereferenced for
// invalid rows); rows outside [lo, hi) are zero-filled, so masked keys and
// padding rows hold finite values (P = 0 times garbage could be NaN).
template <int D, int ROWS, int THREADS>
__device__ __forceinline__ void load_tile(bf16* sm, const bf16* g, const bf16* safe, int64_t stride, int64_t row0,
                                          int64_t lo, int64_t hi, int tid) {
  constexpr int C = D / 8, RS = THREADS / C;  // a thread keeps its chunk column c; rows step by RS
  static_assert(THREADS % C == 0 && RS % 8 == 0 && ROWS % RS == 0, "fixed swizzle phase per thread");
  const int c = tid % C, r0 = tid / C;
  const int so = swz<D>(r0, c * 8);  // (r0 + i*RS) & 7 == r0 & 7
  const bf16* src = g + static_cast<int64_t>(r0) * stride + c * 8;
  const int64_t step = static_cast<int64_t>(RS) * stride;
#pragma unroll
  for (int i = 0; i < ROWS / RS; ++i) {
    const int64_t gr = row0 + r0 + i * RS;
    const bool valid = gr >= lo && gr < hi;
    cp_async16(sm + so + i * RS * D, valid ? src : safe, valid);
    src += step;
  }
}

template <class T>
__global__ void __launch_bounds__(T::kThreads, T::kMinBlocks) flash_prefill_v1_kernel(const Params p) {
  constexpr int D = T::kD, Bc = T::kBc, MT = T::kMT, Br = T::kBr, NT = Bc / 8, DT = D / 8;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  // Grid (heads, tiles, batch): blocks launch x-fastest, so the first wave holds
  // the longest tiles of every head, and the G heads that share a KV head run
  // side by side (their K/V tiles come from L2).
  const int64_t tile = static_cast<int64_t>(gridDim.y) - 1 - blockIdx.y;  // longest tiles first
  const int64_t h = blockIdx.x, b = blockIdx.z;
  // The tile geometry of attn::query_tile, spelt out: at v1's 255-register cap, calling it costs
  // 8-12 bytes of spills (ptxas, CUDA 13.0).
  const int64_t len = p.q_len[b];
  const int64_t i0 = tile * Br;
  if (i0 >= len) return;  // uniform over the CTA: before any barrier
  const int64_t qs = p.q_start[b];
  const int64_t rows_valid = len - i0 < Br ? len - i0 : Br;
  const int64_t p_first = qs + i0, p_last = qs + i0 + rows_valid - 1;
  const int64_t window = p.window;
  // Clamped to the cache: ring attention's earlier key block has queries past its last row
  // (window 0 there, so the range is never empty; a no-op within the q_start + q_len <=
  // capacity contract).
  const attn::KeyBlockRange range =
      attn::key_blocks_in_cache(attn::key_block_range(p_first, p_last, window, Bc), p.capacity, Bc);
  // Keys any valid row of the tile can see; others are zero-filled.
  const int64_t kv_lo = window > 0 && p_first - window + 1 > 0 ? p_first - window + 1 : 0;
  const int64_t kv_hi = p_last + 1 < p.capacity ? p_last + 1 : p.capacity;
  const int64_t kvh = h / p.group;
  const int window32 = static_cast<int>(window);  // window <= capacity < 2^30 (the launcher clamps)

  const bf16* qg = p.q + (b * p.q_rows + i0) * p.q_stride + h * D;
  const bf16* kg = p.k + b * p.capacity * p.kv_stride + kvh * D;
  const bf16* vg = p.v + b * p.capacity * p.kv_stride + kvh * D;

  extern __shared__ __align__(128) unsigned char smem_raw[];
  bf16* sQ = reinterpret_cast<bf16*>(smem_raw);
  bf16* sK = sQ + T::kQElems;                   // stage s at sK + s * kKVElems
  bf16* sV = sK + T::kStages * T::kKVElems;     // stage s at sV + s * kKVElems

  // Prologue: Q and the first K/V block, one commit group.
  load_tile<D, Br, T::kThreads>(sQ, qg, p.q, p.q_stride, 0, 0, rows_valid, tid);
  {
    const int64_t j0 = range.first * Bc;
    load_tile<D, Bc, T::kThreads>(sK, kg + j0 * p.kv_stride, kg, p.kv_stride, j0, kv_lo, kv_hi, tid);
    load_tile<D, Bc, T::kThreads>(sV, vg + j0 * p.kv_stride, vg, p.kv_stride, j0, kv_lo, kv_hi, tid);
  }
  cp_async_commit();

  const int warp_row0 = warp * 16 * MT;
  float o_acc[MT][DT][4];
  float m_row[MT][2], l_row[MT][2];
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
    for (int dt = 0; dt < DT; ++dt)
#pragma unroll
      for (int e = 0; e < 4; ++e) o_acc[mt][dt][e] = 0.0f;
    m_row[mt][0] = m_row[mt][1] = -INFINITY;
    l_row[mt][0] = l_row[mt][1] = 0.0f;
  }

  for (int64_t n = range.first; n < range.last; ++n) {
    const int st = static_cast<int>((n - range.first) & 1);
    if (n + 1 < range.last) {
      const int64_t j0 = (n + 1) * Bc;
      bf16* dk = sK + (st ^ 1) * T::kKVElems;
      bf16* dv = sV + (st ^ 1) * T::kKVElems;
      load_tile<D, Bc, T::kThreads>(dk, kg + j0 * p.kv_stride, kg, p.kv_stride, j0, kv_lo, kv_hi, tid);
      load_tile<D, Bc, T::kThreads>(dv, vg + j0 * p.kv_stride, vg, p.kv_stride, j0, kv_lo, kv_hi, tid);
      cp_async_commit();
      cp_async_wait<1>();  // all but the group just issued: Q and block n are here
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();
    const bf16* k_s = sK + st * T::kKVElems;
    const bf16* v_s = sV + st * T::kKVElems;

    // S = Q K^T for this warp's rows.
    float s_acc[MT][NT][4];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int nt = 0; nt < NT; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) s_acc[mt][nt][e] = 0.0f;
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      uint32_t a[MT][4];
#pragma unroll
      for (int mt = 0; mt < MT; ++mt)
        ldmatrix_x4(a[mt], sQ + swz<D>(warp_row0 + mt * 16 + (lane & 7) + ((lane >> 3) & 1) * 8,
                                       kk * 16 + (lane >> 4) * 8));
#pragma unroll
      for (int nt2 = 0; nt2 < NT / 2; ++nt2) {
        uint32_t kb[4];  // b0,b1 of key tile 2*nt2, then of key tile 2*nt2+1
        ldmatrix_x4(kb, k_s + swz<D>(nt2 * 16 + (lane & 7) + (lane >> 4) * 8, kk * 16 + ((lane >> 3) & 1) * 8));
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
          mma_bf16(s_acc[mt][2 * nt2], a[mt], kb[0], kb[1]);
          mma_bf16(s_acc[mt][2 * nt2 + 1], a[mt], kb[2], kb[3]);
        }
      }
    }

    // Mask where the block is cut (raw scores; the scale enters below, fused into the exponent).
    // A block with rows past the cache is masked too: those rows are no keys.
    const bool masked = attn::key_block_needs_mask(n, Bc, p_first, p_last, window) ||
                        attn::key_block_past_cache(n, Bc, p.capacity);
    if (masked) {
      const int delta0 = static_cast<int>(n * Bc - (p_first + warp_row0));  // first key minus this warp's first row
      const int64_t left = p.capacity - n * Bc;
      const int keys_left = left < Bc ? static_cast<int>(left) : Bc;  // rows of this block inside the cache
#pragma unroll
      for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int nt = 0; nt < NT; ++nt)
#pragma unroll
          for (int e = 0; e < 4; ++e) {  // delta = key - query position, 32-bit (|delta| <= q_start + q_len < 2^31)
            const int key = nt * 8 + (lane & 3) * 2 + (e & 1);  // within the block
            const int delta = delta0 + key - (mt * 16 + (lane >> 2) + (e >> 1) * 8);
            if (!attn::key_visible_delta(delta, window32) || key >= keys_left) s_acc[mt][nt][e] = -INFINITY;
          }
    }

    // Online softmax in the log2 domain: m is the running max of scale*log2(e)*s
    // (scale > 0, so the max of raw scores gives it). Row half hr: elements
    // e = 2hr, 2hr+1 (rows g and g+8).
    const float sl2 = p.scale_log2;
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int hr = 0; hr < 2; ++hr) {
        float mx = -INFINITY;
#pragma unroll
        for (int nt = 0; nt < NT; ++nt) mx = fmaxf(mx, fmaxf(s_acc[mt][nt][2 * hr], s_acc[mt][nt][2 * hr + 1]));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
        const float m_new = fmaxf(m_row[mt][hr], mx * sl2);     // -inf * sl2 = -inf
        const float m_use = m_new == -INFINITY ? 0.0f : m_new;  // no visible key yet: never -inf - -inf
        const float corr = fast_exp2(m_row[mt][hr] - m_use);
        m_row[mt][hr] = m_new;
        float sum = 0.0f;
#pragma unroll
        for (int nt = 0; nt < NT; ++nt) {
          const float p0 = fast_exp2(fmaf(s_acc[mt][nt][2 * hr], sl2, -m_use));  // masked: -inf -> 0
          const float p1 = fast_exp2(fmaf(s_acc[mt][nt][2 * hr + 1], sl2, -m_use));
          s_acc[mt][nt][2 * hr] = p0;
          s_acc[mt][nt][2 * hr + 1] = p1;
          sum += p0 + p1;
        }
        l_row[mt][hr] = l_row[mt][hr] * corr + sum;  // this thread's partial; quads reduce at the end
#pragma unroll
        for (int dt = 0; dt < DT; ++dt) {
          o_acc[mt][dt][2 * hr] *= corr;
          o_acc[mt][dt][2 * hr + 1] *= corr;
        }
      }

    // O += P V.
#pragma unroll
    for (int kk = 0; kk < Bc / 16; ++kk) {
      uint32_t a[MT][4];
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        a[mt][0] = pack_bf16(s_acc[mt][2 * kk][0], s_acc[mt][2 * kk][1]);
        a[mt][1] = pack_bf16(s_acc[mt][2 * kk][2], s_acc[mt][2 * kk][3]);
        a[mt][2] = pack_bf16(s_acc[mt][2 * kk + 1][0], s_acc[mt][2 * kk + 1][1]);
        a[mt][3] = pack_bf16(s_acc[mt][2 * kk + 1][2], s_acc[mt][2 * kk + 1][3]);
      }
#pragma unroll
      for (int dt2 = 0; dt2 < DT / 2; ++dt2) {
        uint32_t vb[4];  // b0,b1 of dim tile 2*dt2, then of dim tile 2*dt2+1
        ldmatrix_x4_trans(vb, v_s + swz<D>(kk * 16 + (lane & 7) + ((lane >> 3) & 1) * 8, dt2 * 16 + (lane >> 4) * 8));
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
          mma_bf16(o_acc[mt][2 * dt2], a[mt], vb[0], vb[1]);
          mma_bf16(o_acc[mt][2 * dt2 + 1], a[mt], vb[2], vb[3]);
        }
      }
    }
    __syncthreads();  // every warp is done with this stage before it is refilled
  }

  // Epilogue: reduce l over the quad, normalise, stage O through this warp's
  // own Q rows (only this warp ever read them), write 16-byte rows.
  const float kLn2 = 0.69314718055994531f;
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int hr = 0; hr < 2; ++hr) {
      float l = l_row[mt][hr];
      l += __shfl_xor_sync(0xffffffffu, l, 1);
      l += __shfl_xor_sync(0xffffffffu, l, 2);
      const float inv = l > 0.0f ? 1.0f / l : 0.0f;
      const int r = warp_row0 + mt * 16 + (lane >> 2) + hr * 8;
#pragma unroll
      for (int dt = 0; dt < DT; ++dt) {
        const uint32_t packed = pack_bf16(o_acc[mt][dt][2 * hr] * inv, o_acc[mt][dt][2 * hr + 1] * inv);
        *reinterpret_cast<uint32_t*>(sQ + swz<D>(r, dt * 8 + (lane & 3) * 2)) = packed;
      }
      if (p.lse != nullptr && (lane & 3) == 0 && r < rows_valid) {
        const float val = l > 0.0f ? (m_row[mt][hr] + __log2f(l)) * kLn2 : -INFINITY;
        p.lse[(b * p.H + h) * p.q_rows + i0 + r] = val;
      }
    }
  __syncwarp();
  constexpr int C = T::kChunks, WarpRows = 16 * MT;
  bf16* og = p.o + (b * p.q_rows + i0) * (p.H * D) + h * D;
#pragma unroll
  for (int idx = lane; idx < WarpRows * C; idx += 32) {
    const int r = warp_row0 + idx / C, c = idx % C;
    if (r < rows_valid)
      *reinterpret_cast<uint4*>(og + static_cast<int64_t>(r) * (p.H * D) + c * 8) =
          *reinterpret_cast<const uint4*>(sQ + swz<D>(r, c * 8));
  }
}

template <class T>
cudaError_t launch_impl(const Params& p, int64_t batch, int64_t q_rows, cudaStream_t stream) {
  const auto kernel = flash_prefill_v1_kernel<T>;
  cudaError_t err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, T::kSmemBytes);
  if (err != cudaSuccess) return err;
  const int64_t tiles = attn::query_tiles(q_rows, T::kBr);
  if (tiles > 65535) return cudaErrorInvalidValue;  // grid y: q_rows up to 65535 tiles (8.4M rows at 128)
  const dim3 grid(static_cast<unsigned>(p.H), static_cast<unsigned>(tiles), static_cast<unsigned>(batch));
  kernel<<<grid, T::kThreads, T::kSmemBytes, stream>>>(p);
  return cudaGetLastError();
}

}  // namespace

int flash_prefill_tile_rows(int64_t head_dim) {
  switch (head_dim) {
    case 64: return Traits64::kBr;
    case 128: return Traits128::kBr;
    case 256: return Traits256::kBr;
    default: return 0;
  }
}

cudaError_t launch_flash_prefill_v1(const bf16* q, const bf16* k, const bf16* v, const int64_t* q_start,
                                    const int64_t* q_len, const PrefillAttentionShape& s, bf16* o, float* lse,
                                    cudaStream_t stream) {
  if (!detail::prefill_args_valid(q, k, v, q_start, q_len, s, o)) return cudaErrorInvalidValue;
  const int64_t D = s.head_dim;
  const Params p = detail::prefill_params(q, k, v, q_start, q_len, s, o, lse);
  switch (D) {
    case 64: return launch_impl<Traits64>(p, s.batch, s.q_rows, stream);
    case 128: return launch_impl<Traits128>(p, s.batch, s.q_rows, stream);
    default: return launch_impl<Traits256>(p, s.batch, s.q_rows, stream);
  }
}

}  // namespace yoco::cuda
