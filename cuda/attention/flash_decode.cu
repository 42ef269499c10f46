// FlashDecoding, split-KV (KERNELS.md §2), built for bandwidth:
// - one block per (sequence, KV head, split) serves the G <= 8 query heads of its
//   KV group from one read of K and V (GQA packing);
// - K/V tiles of 64 keys stream through a 3-4 stage shared-memory ring filled by
//   16-byte cp.async (zero-filled past the split's last key), so 2-3 tiles are
//   in flight while one is consumed;
// - the math runs on tensor cores (mma.sync m16n8k16 bf16, fp32 accumulate):
//   S = Q·Kᵀ with the G query heads as rows (padded to 16 with zeros), then
//   Oᵀ += Vᵀ·Pᵀ with the head dim as rows and the 8 heads as columns, so the
//   score accumulator's layout is the P operand's layout and no shuffle moves P;
//   P enters as bf16 hi + lo (two MMAs), so P's rounding costs ~2^-16, not 2^-9;
// - each of the 4 warps owns 16 keys of every tile and keeps its own online
//   softmax state (log2 domain, scale·log2 e folded in); the warps merge in
//   shared memory at the end; the split writes fp32 O and its log2-sum-exp;
// - a combine kernel merges the splits by LSE (-inf splits weigh 0; all -inf
//   gives 0). With one split the block writes the bf16 output itself.
#include <algorithm>
#include <cmath>

#include "attention/decode_plan.hpp"
#include "arch/cp_async.cuh"
#include "arch/device_math.cuh"
#include "arch/ldmatrix.cuh"
#include "arch/swizzle.hpp"
#include "attention/flash_decode.hpp"

namespace yoco::cuda {

namespace {

namespace dp = decode_plan;

constexpr int kWarps = 4;
constexpr int kThreads = kWarps * 32;
constexpr int kTileKeys = 64;  // 16 keys per warp
constexpr int kMaxGroup = 8;

template <int D>
struct Traits {
  static constexpr int kStages = D == 64 ? 4 : 3;
  static constexpr int kChunks = D / 8;                    // 16-byte chunks per row
  static constexpr int kRowStep = kThreads / kChunks;      // rows one pass of the block covers
  static constexpr int kPasses = kTileKeys / kRowStep;     // cp.async per thread per tensor per tile
  static constexpr int kTileBytes = kTileKeys * D * 2;     // K (or V) of one tile
  static constexpr int kStageBytes = 2 * kTileBytes;
  static constexpr int kPipeBytes = kStages * kStageBytes;
  static constexpr int kMergeBytes = (kWarps * kMaxGroup * D + 2 * kWarps * kMaxGroup) * 4;
  static constexpr int kSmem = kPipeBytes > kMergeBytes ? kPipeBytes : kMergeBytes;
  static_assert(kChunks % 8 == 0, "the XOR swizzle permutes groups of 8 chunks");
  static_assert(kThreads % kChunks == 0 && kTileKeys % kRowStep == 0, "loader mapping");
  static_assert(kSmem <= 227 * 1024, "shared memory per block");
  static_assert(kTileKeys == kWarps * 16, "each warp owns one 16-key MMA slab per tile");
};

// Blocks per SM, from the occupancy arithmetic with the register cap the kernel is built for.
template <int D>
constexpr int64_t blocks_per_sm_for() {
  return dp::blocks_per_sm(128, kThreads, Traits<D>::kSmem);
}

using dev::cp_async16;
using dev::cp_async_commit;
using dev::cp_async_wait;
using dev::ldmatrix_x4;
using dev::ldmatrix_x4_trans;
using dev::mma_bf16;
using dev::smem_u32;
using dev::pack_bf16;

struct SplitParams {
  const __nv_bfloat16* q;
  const __nv_bfloat16* k;
  const __nv_bfloat16* v;
  const int64_t* lengths;
  int64_t H, Hkv, capacity, kv_stride, window;
  int ring;
  int splits;
  float scale_log2;
  float* part_o;        // [B, H, splits, D]
  float* part_lse;      // [B, H, splits]
  __nv_bfloat16* out;   // non-null only when splits == 1: the block writes the output itself
};

template <int D>
__global__ void __launch_bounds__(kThreads) split_kernel(const SplitParams p) {
  using T = Traits<D>;
  constexpr int kSteps = D / 16;  // k-steps of S = Q·Kᵀ, m-tiles of Oᵀ
  extern __shared__ __align__(128) unsigned char smem[];

  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int gid = lane >> 2, tig = lane & 3;  // MMA fragment row group, thread in group
  const int G = static_cast<int>(p.H / p.Hkv);
  const int split = static_cast<int>(blockIdx.x % static_cast<unsigned>(p.splits));
  const int64_t unit = blockIdx.x / static_cast<unsigned>(p.splits);
  const int64_t kvh = unit % p.Hkv, b = unit / p.Hkv;

  const dp::KeyRange keys = dp::decode_key_range(p.lengths[b], p.window, p.ring != 0);
  const dp::SplitRange sr = dp::split_key_range(keys.count, kTileKeys, p.splits, split);
  const int64_t key0 = keys.begin + sr.begin;  // first cache row of this split
  const int64_t nkeys = sr.end - sr.begin;
  const int64_t ntiles = dp::ceil_div(nkeys, kTileKeys);

  // Q as the A operand (rows = heads, padded to 16 with zeros): a0 = Q[gid][16ks + 2tig, +1],
  // a2 = Q[gid][16ks + 8 + 2tig, +1]; a1 = a3 = 0 (rows 8..15).
  uint32_t qa[kSteps][2];
  {
    const uint32_t* qrow =
        reinterpret_cast<const uint32_t*>(p.q + dp::q_offset(b, kvh * G + (gid < G ? gid : 0), p.H, D));
#pragma unroll
    for (int ks = 0; ks < kSteps; ++ks) {
      qa[ks][0] = gid < G ? __ldg(qrow + ks * 8 + tig) : 0u;
      qa[ks][1] = gid < G ? __ldg(qrow + ks * 8 + 4 + tig) : 0u;
    }
  }

  // Loader: thread t copies chunk t mod kChunks of rows t / kChunks + i·kRowStep.
  const int ld_ch = threadIdx.x % T::kChunks, ld_r0 = threadIdx.x / T::kChunks;
  const int64_t seq_base = dp::kv_offset(b, 0, kvh, p.capacity, p.kv_stride, D);
  const __nv_bfloat16* kthr = p.k + seq_base + (key0 + ld_r0) * p.kv_stride + ld_ch * 8;
  const __nv_bfloat16* vthr = p.v + seq_base + (key0 + ld_r0) * p.kv_stride + ld_ch * 8;
  const uint32_t smem_base = smem_u32(smem);

  auto load_tile = [&](int64_t t, int stage) {
    const int64_t rows_left = nkeys - t * kTileKeys;  // >= 1
    const uint32_t ks = smem_base + stage * T::kStageBytes, vs = ks + T::kTileBytes;
    const int64_t tile_off = t * kTileKeys * p.kv_stride;
#pragma unroll
    for (int i = 0; i < T::kPasses; ++i) {
      const int r = ld_r0 + i * T::kRowStep;
      const bool ok = r < rows_left;
      const int64_t off = ok ? tile_off + static_cast<int64_t>(i) * T::kRowStep * p.kv_stride : 0;
      const uint32_t so = dev::swz_chunk<D>(r, ld_ch);
      // Rows past the split's end are zero-filled (src size 0, address unread but valid):
      // zero K gives a finite score that is then masked, zero V keeps 0·V = 0 (garbage could be NaN).
      cp_async16(ks + so, ok ? static_cast<const void*>(kthr + off) : static_cast<const void*>(p.k), ok);
      cp_async16(vs + so, ok ? static_cast<const void*>(vthr + off) : static_cast<const void*>(p.v), ok);
    }
  };

#pragma unroll
  for (int st = 0; st < T::kStages - 1; ++st) {
    if (st < ntiles) load_tile(st, st);
    cp_async_commit();  // always commit, so group g is tile g
  }

  float m = -INFINITY;  // running max (log2 domain) of head gid over this warp's keys
  float l = 0.0f;       // this lane's part of the running sum of head gid
  float acc[kSteps][4];  // Oᵀ: [dim 16mt + gid (+8)][head 2tig (+1)]
#pragma unroll
  for (int mt = 0; mt < kSteps; ++mt) acc[mt][0] = acc[mt][1] = acc[mt][2] = acc[mt][3] = 0.0f;

  // ldmatrix address pieces: lane supplies row (lane mod 8) of matrix lane / 8.
  const int lm_mat = lane >> 3, lm_row = lane & 7;
  const int lm_key = warp * 16 + (lm_mat >> 1) * 8 + lm_row;  // tile row this lane addresses
  const int lm_half = lm_mat & 1;

  for (int64_t t = 0; t < ntiles; ++t) {
    cp_async_wait<T::kStages - 2>();
    __syncthreads();  // tile t visible to all; every warp is done with tile t-1's stage
    {
      const int64_t nt = t + T::kStages - 1;
      if (nt < ntiles) load_tile(nt, static_cast<int>(nt % T::kStages));
      cp_async_commit();
    }
    const uint32_t ks_base = smem_base + static_cast<uint32_t>(t % T::kStages) * T::kStageBytes;
    const uint32_t vs_base = ks_base + T::kTileBytes;

    // S = Q·Kᵀ for this warp's 16 keys: two n-tiles of 8 keys.
    float sc[2][4] = {{0.0f, 0.0f, 0.0f, 0.0f}, {0.0f, 0.0f, 0.0f, 0.0f}};
#pragma unroll
    for (int ks = 0; ks < kSteps; ++ks) {
      uint32_t b0, b1, b2, b3;  // (keys 0-7: dims lo, hi), (keys 8-15: dims lo, hi)
      ldmatrix_x4(ks_base + dev::swz_chunk<D>(lm_key, ks * 2 + lm_half), b0, b1, b2, b3);
      mma_bf16(sc[0], qa[ks][0], 0u, qa[ks][1], 0u, b0, b1);
      mma_bf16(sc[1], qa[ks][0], 0u, qa[ks][1], 0u, b2, b3);
    }

    // Scores of head gid at keys 2tig, 2tig+1, 8+2tig, 9+2tig of the slab; mask past the split.
    const int64_t kbase = t * kTileKeys + warp * 16 + 2 * tig;
    float s[4] = {sc[0][0], sc[0][1], sc[1][0], sc[1][1]};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int64_t key = kbase + (i & 1) + (i >> 1) * 8;
      s[i] = key < nkeys ? s[i] * p.scale_log2 : -INFINITY;
    }
    float mt_max = fmaxf(fmaxf(s[0], s[1]), fmaxf(s[2], s[3]));
    mt_max = fmaxf(mt_max, __shfl_xor_sync(0xffffffffu, mt_max, 1));
    mt_max = fmaxf(mt_max, __shfl_xor_sync(0xffffffffu, mt_max, 2));
    const float m_new = fmaxf(m, mt_max);
    const float m_use = m_new == -INFINITY ? 0.0f : m_new;  // all masked so far: exp2(-inf - 0) = 0, no NaN
    const float corr = exp2f(m - m_use);
    m = m_new;
    float pr[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) pr[i] = exp2f(s[i] - m_use);
    l = l * corr + ((pr[0] + pr[1]) + (pr[2] + pr[3]));

    // Rescale Oᵀ: columns are heads 2tig and 2tig+1, whose factors live on lanes 8tig and 8tig+4.
    const float c_a = __shfl_sync(0xffffffffu, corr, tig * 8);
    const float c_b = __shfl_sync(0xffffffffu, corr, tig * 8 + 4);
#pragma unroll
    for (int mt = 0; mt < kSteps; ++mt) {
      acc[mt][0] *= c_a;
      acc[mt][1] *= c_b;
      acc[mt][2] *= c_a;
      acc[mt][3] *= c_b;
    }

    // Pᵀ as the B operand: b0 = P[gid][keys 2tig, +1], b1 = P[gid][keys 8+2tig, +1] —
    // exactly the score fragment's layout. P = hi + lo, both bf16.
    const uint32_t ph0 = pack_bf16(pr[0], pr[1]), ph1 = pack_bf16(pr[2], pr[3]);
    const __nv_bfloat162 h0 = *reinterpret_cast<const __nv_bfloat162*>(&ph0);
    const __nv_bfloat162 h1 = *reinterpret_cast<const __nv_bfloat162*>(&ph1);
    const uint32_t pl0 = pack_bf16(pr[0] - __low2float(h0), pr[1] - __high2float(h0));
    const uint32_t pl1 = pack_bf16(pr[2] - __low2float(h1), pr[3] - __high2float(h1));

    // Oᵀ += Vᵀ·Pᵀ: A = Vᵀ (16 dims x 16 keys) by ldmatrix.trans of V rows.
#pragma unroll
    for (int mt = 0; mt < kSteps; ++mt) {
      uint32_t a0, a1, a2, a3;  // (keys 0-7, dims lo), (keys 0-7, dims hi), (keys 8-15, lo), (keys 8-15, hi)
      ldmatrix_x4_trans(vs_base + dev::swz_chunk<D>(lm_key, mt * 2 + lm_half), a0, a1, a2, a3);
      mma_bf16(acc[mt], a0, a1, a2, a3, ph0, ph1);
      mma_bf16(acc[mt], a0, a1, a2, a3, pl0, pl1);
    }
  }

  // Full row sums of head gid (the 4 lanes of a group hold disjoint keys).
  l += __shfl_xor_sync(0xffffffffu, l, 1);
  l += __shfl_xor_sync(0xffffffffu, l, 2);

  // Merge the 4 warps through shared memory (the pipeline's space, once it is idle).
  cp_async_wait<0>();
  __syncthreads();
  float* wacc = reinterpret_cast<float*>(smem);  // [warp][head 0..7][D]
  float* wm = wacc + kWarps * kMaxGroup * D;     // [warp][head]
  float* wl = wm + kWarps * kMaxGroup;
  if (tig == 0) {
    wm[warp * kMaxGroup + gid] = m;
    wl[warp * kMaxGroup + gid] = l;
  }
#pragma unroll
  for (int mt = 0; mt < kSteps; ++mt) {
    float* w0 = wacc + (warp * kMaxGroup + 2 * tig) * D + mt * 16 + gid;
    w0[0] = acc[mt][0];
    w0[D] = acc[mt][1];
    w0[8] = acc[mt][2];
    w0[D + 8] = acc[mt][3];
  }
  __syncthreads();

  for (int i = threadIdx.x; i < G * D; i += kThreads) {
    const int g = i / D, d = i % D;
    float mx = -INFINITY;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) mx = fmaxf(mx, wm[w * kMaxGroup + g]);
    float lsum = 0.0f, o = 0.0f;
    if (mx != -INFINITY) {
#pragma unroll
      for (int w = 0; w < kWarps; ++w) {
        const float c = exp2f(wm[w * kMaxGroup + g] - mx);  // a warp with no key: exp2(-inf) = 0, its l and O are 0
        lsum += wl[w * kMaxGroup + g] * c;
        o += wacc[(w * kMaxGroup + g) * D + d] * c;
      }
    }
    const int64_t h = kvh * G + g;
    const float val = lsum > 0.0f ? o / lsum : 0.0f;
    if (p.out != nullptr) {
      p.out[dp::q_offset(b, h, p.H, D) + d] = __float2bfloat16(val);
    } else {
      const int64_t slot = dp::partial_slot(b, h, split, p.H, p.splits);
      p.part_o[slot * D + d] = val;
      // log2-sum-exp of the split's scores; -inf for an empty split.
      if (d == 0) p.part_lse[slot] = lsum > 0.0f ? mx + log2f(lsum) : -INFINITY;
    }
  }
}

// One block per (b, head): O = Σ 2^(lse_s - M) O_s / Σ 2^(lse_s - M), M = max lse;
// -inf splits weigh 0; all -inf (no key) gives 0.
template <int D>
__global__ void __launch_bounds__(128) combine_kernel(const float* __restrict__ part_o,
                                                      const float* __restrict__ part_lse, int splits,
                                                      __nv_bfloat16* __restrict__ out) {
  const int64_t bh = blockIdx.x;
  const float* lse = part_lse + bh * splits;
  float mx = -INFINITY;
  for (int s = 0; s < splits; ++s) mx = fmaxf(mx, lse[s]);
  for (int d = threadIdx.x; d < D; d += blockDim.x) {
    float num = 0.0f, den = 0.0f;
    if (mx != -INFINITY) {
      for (int s = 0; s < splits; ++s) {
        const float ls = lse[s];
        if (ls == -INFINITY) continue;
        const float w = exp2f(ls - mx);
        num += w * part_o[(bh * splits + s) * D + d];
        den += w;
      }
    }
    out[bh * D + d] = __float2bfloat16(den > 0.0f ? num / den : 0.0f);
  }
}

template <int D>
cudaError_t launch(const __nv_bfloat16* q, const __nv_bfloat16* k, const __nv_bfloat16* v, const int64_t* lengths,
                   const DecodeAttentionShape& s, int64_t kv_stride, int splits, float* workspace,
                   __nv_bfloat16* out, cudaStream_t stream) {
  using T = Traits<D>;
  // Above 48 KB of dynamic shared memory needs an opt-in (once per process; one device assumed).
  static const cudaError_t attr =
      cudaFuncSetAttribute(split_kernel<D>, cudaFuncAttributeMaxDynamicSharedMemorySize, T::kSmem);
  if (attr != cudaSuccess) return attr;

  SplitParams p{};
  p.q = q;
  p.k = k;
  p.v = v;
  p.lengths = lengths;
  p.H = s.n_heads;
  p.Hkv = s.n_kv_heads;
  p.capacity = s.capacity;
  p.kv_stride = kv_stride;
  p.window = s.window;
  p.ring = s.ring ? 1 : 0;
  p.splits = splits;
  p.scale_log2 = s.scale * 1.4426950408889634f;
  const DecodePartials parts = decode_partials(s, splits, workspace);
  p.part_o = parts.part_o;
  p.part_lse = parts.part_lse;
  p.out = splits == 1 ? out : nullptr;
  const int64_t blocks = s.batch * s.n_kv_heads * splits;
  split_kernel<D><<<static_cast<unsigned>(blocks), kThreads, T::kSmem, stream>>>(p);
  if (splits > 1)
    combine_kernel<D><<<static_cast<unsigned>(s.batch * s.n_heads), D < 128 ? D : 128, 0, stream>>>(
        p.part_o, p.part_lse, splits, out);
  return cudaGetLastError();
}

bool aligned16(const void* ptr) { return (reinterpret_cast<uintptr_t>(ptr) & 15u) == 0; }

}  // namespace

int decode_tile_keys() { return kTileKeys; }

int decode_blocks_per_sm(int64_t head_dim) {
  switch (head_dim) {
    case 64: return static_cast<int>(blocks_per_sm_for<64>());
    case 128: return static_cast<int>(blocks_per_sm_for<128>());
    case 256: return static_cast<int>(blocks_per_sm_for<256>());
    default: return 0;
  }
}

int choose_decode_splits(const DecodeAttentionShape& s, int64_t max_len, int sm_count) {
  const int per_sm = std::max(1, decode_blocks_per_sm(s.head_dim));
  // In ring mode (or a windowed linear cache) at most `window` keys are visible.
  const int64_t visible = s.window > 0 ? std::min(max_len, s.window) : max_len;
  return static_cast<int>(
      dp::choose_split_count(s.batch, s.n_kv_heads, visible, std::max(1, sm_count), per_sm, kTileKeys));
}

int64_t decode_workspace_floats(const DecodeAttentionShape& s, int splits) {
  return s.batch * s.n_heads * splits * (s.head_dim + 1);
}

DecodePartials decode_partials(const DecodeAttentionShape& s, int splits, float* workspace) {
  DecodePartials p;
  p.part_o = workspace;
  p.part_lse = splits > 1 && workspace ? workspace + s.batch * s.n_heads * splits * s.head_dim : nullptr;
  return p;
}

bool flash_decode_supported(int64_t head_dim, int64_t group) {
  return (head_dim == 64 || head_dim == 128 || head_dim == 256) && group >= 1 && group <= kMaxGroup;
}

cudaError_t launch_flash_decode(const __nv_bfloat16* q, const __nv_bfloat16* k, const __nv_bfloat16* v,
                                const int64_t* lengths, const DecodeAttentionShape& s, int splits, float* workspace,
                                __nv_bfloat16* out, cudaStream_t stream) {
  if (s.n_kv_heads < 1 || s.n_heads % s.n_kv_heads != 0 || s.n_heads / s.n_kv_heads > kMaxGroup || splits < 1 ||
      s.batch < 1 || s.batch * s.n_kv_heads * splits > 0x7fffffff || s.batch * s.n_heads > 0x7fffffff ||
      s.capacity < 1 || s.window < 0)
    return cudaErrorInvalidValue;
  if (s.ring && (s.window < 1 || s.window > s.capacity)) return cudaErrorInvalidValue;
  const int64_t kv_stride = s.kv_stride == 0 ? s.n_kv_heads * s.head_dim : s.kv_stride;
  if (kv_stride % 8 != 0 || kv_stride < s.n_kv_heads * s.head_dim) return cudaErrorInvalidValue;
  // K/V rows move as 16-byte chunks; q is read as bf16 pairs.
  if ((reinterpret_cast<uintptr_t>(q) & 3u) != 0 || !aligned16(k) || !aligned16(v) || out == nullptr ||
      lengths == nullptr)
    return cudaErrorInvalidValue;
  if (splits > 1 && workspace == nullptr) return cudaErrorInvalidValue;
  switch (s.head_dim) {
    case 64: return launch<64>(q, k, v, lengths, s, kv_stride, splits, workspace, out, stream);
    case 128: return launch<128>(q, k, v, lengths, s, kv_stride, splits, workspace, out, stream);
    case 256: return launch<256>(q, k, v, lengths, s, kv_stride, splits, workspace, out, stream);
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace yoco::cuda
