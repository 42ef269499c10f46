#include <algorithm>
#include <cmath>

#include "flash_decode.hpp"

namespace yoco::cuda {

namespace {

constexpr int kWarps = 4;
constexpr int kMaxGroup = 8;

// Block (b, kv head, split). Warp w takes keys s0 + w, s0 + w + 4, ...; lane l
// holds dims l, l + 32, ... of each head's accumulator. Scores are kept in the
// log2 domain (scale folded with log2 e) so exp2f does the exponentials.
template <int Da>
__global__ void __launch_bounds__(kWarps * 32)
    split_kernel(const __nv_bfloat16* __restrict__ q, const __nv_bfloat16* __restrict__ k,
                 const __nv_bfloat16* __restrict__ v, const int64_t* __restrict__ lengths, int64_t H, int64_t Hkv,
                 int64_t capacity, int64_t window, float scale_log2, int splits, float* __restrict__ part_o,
                 float* __restrict__ part_lse) {
  constexpr int kPer = Da / 32;  // dims per lane
  const int64_t G = H / Hkv;
  const int split = blockIdx.x % splits;
  const int64_t kvh = (blockIdx.x / splits) % Hkv, b = blockIdx.x / (splits * Hkv);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;

  const int64_t len = lengths[b];
  const int64_t first = window > 0 ? max(int64_t{0}, len - window) : int64_t{0};
  const int64_t span = len - first, per_split = (span + splits - 1) / splits;
  const int64_t s0 = first + split * per_split, s1 = min(len, s0 + per_split);

  __shared__ float qs[kMaxGroup][Da];
  for (int64_t i = threadIdx.x; i < G * Da; i += blockDim.x) {
    const int64_t g = i / Da, d = i % Da;
    qs[g][d] = __bfloat162float(q[(b * H + kvh * G + g) * Da + d]);
  }
  __syncthreads();

  float m[kMaxGroup], l[kMaxGroup], acc[kMaxGroup][kPer];
#pragma unroll
  for (int g = 0; g < kMaxGroup; ++g) {
    m[g] = -INFINITY;
    l[g] = 0.0f;
#pragma unroll
    for (int e = 0; e < kPer; ++e) acc[g][e] = 0.0f;
  }
  const int64_t row = Hkv * Da;
  const __nv_bfloat16* kb = k + b * capacity * row + kvh * Da;
  const __nv_bfloat16* vb = v + b * capacity * row + kvh * Da;
  for (int64_t j = s0 + warp; j < s1; j += kWarps) {
    float kr[kPer], vr[kPer];
#pragma unroll
    for (int e = 0; e < kPer; ++e) {
      kr[e] = __bfloat162float(kb[j * row + lane + 32 * e]);
      vr[e] = __bfloat162float(vb[j * row + lane + 32 * e]);
    }
#pragma unroll
    for (int g = 0; g < kMaxGroup; ++g) {
      if (g >= G) break;
      float dot = 0.0f;
#pragma unroll
      for (int e = 0; e < kPer; ++e) dot = fmaf(qs[g][lane + 32 * e], kr[e], dot);
      for (int o = 16; o > 0; o >>= 1) dot += __shfl_xor_sync(0xffffffffu, dot, o);
      const float s = dot * scale_log2;
      const float m_new = fmaxf(m[g], s);
      const float corr = exp2f(m[g] - m_new), p = exp2f(s - m_new);
      l[g] = l[g] * corr + p;
#pragma unroll
      for (int e = 0; e < kPer; ++e) acc[g][e] = fmaf(acc[g][e], corr, p * vr[e]);
      m[g] = m_new;
    }
  }

  // Merge the four warps' running states through shared memory.
  __shared__ float wm[kWarps][kMaxGroup], wl[kWarps][kMaxGroup];
  __shared__ float wacc[kWarps][kMaxGroup][Da];
#pragma unroll
  for (int g = 0; g < kMaxGroup; ++g) {  // unrolled with a break: register arrays need constant indices
    if (g >= G) break;
    if (lane == 0) {
      wm[warp][g] = m[g];
      wl[warp][g] = l[g];
    }
#pragma unroll
    for (int e = 0; e < kPer; ++e) wacc[warp][g][lane + 32 * e] = acc[g][e];
  }
  __syncthreads();
  for (int64_t i = threadIdx.x; i < G * Da; i += blockDim.x) {
    const int64_t g = i / Da, d = i % Da;
    float mx = -INFINITY;
    for (int w = 0; w < kWarps; ++w) mx = fmaxf(mx, wm[w][g]);
    float lsum = 0.0f, o = 0.0f;
    if (mx != -INFINITY) {
      for (int w = 0; w < kWarps; ++w) {
        const float c = exp2f(wm[w][g] - mx);
        lsum += wl[w][g] * c;
        o += wacc[w][g][d] * c;
      }
    }
    const int64_t hq = kvh * G + g;
    const int64_t slot = (b * H + hq) * splits + split;
    part_o[slot * Da + d] = lsum > 0.0f ? o / lsum : 0.0f;
    // log2-sum-exp of the split's scores; -inf for an empty split.
    if (d == 0) part_lse[slot] = lsum > 0.0f ? mx + log2f(lsum) : -INFINITY;
  }
}

// One block per (b, head): weights 2^(lse_s - max) over the splits.
template <int Da>
__global__ void combine_kernel(const float* __restrict__ part_o, const float* __restrict__ part_lse, int splits,
                               __nv_bfloat16* __restrict__ out) {
  const int64_t bh = blockIdx.x;
  const float* lse = part_lse + bh * splits;
  float mx = -INFINITY;
  for (int s = 0; s < splits; ++s) mx = fmaxf(mx, lse[s]);
  for (int d = threadIdx.x; d < Da; d += blockDim.x) {
    float num = 0.0f, den = 0.0f;
    for (int s = 0; s < splits; ++s) {
      if (lse[s] == -INFINITY) continue;
      const float w = exp2f(lse[s] - mx);
      num += w * part_o[(bh * splits + s) * Da + d];
      den += w;
    }
    out[bh * Da + d] = __float2bfloat16(den > 0.0f ? num / den : 0.0f);
  }
}

template <int Da>
cudaError_t launch(const __nv_bfloat16* q, const __nv_bfloat16* k, const __nv_bfloat16* v, const int64_t* lengths,
                   const DecodeAttentionShape& s, int splits, float* workspace, __nv_bfloat16* out,
                   cudaStream_t stream) {
  float* part_o = workspace;
  float* part_lse = workspace + s.batch * s.n_heads * splits * Da;
  const int64_t blocks = s.batch * s.n_kv_heads * splits;
  const float scale_log2 = s.scale * 1.4426950408889634f;
  split_kernel<Da><<<static_cast<unsigned>(blocks), kWarps * 32, 0, stream>>>(
      q, k, v, lengths, s.n_heads, s.n_kv_heads, s.capacity, s.window, scale_log2, splits, part_o, part_lse);
  combine_kernel<Da><<<static_cast<unsigned>(s.batch * s.n_heads), Da < 128 ? Da : 128, 0, stream>>>(
      part_o, part_lse, splits, out);
  return cudaGetLastError();
}

}  // namespace

int choose_decode_splits(const DecodeAttentionShape& s, int64_t max_len, int sm_count) {
  const int64_t blocks = std::max<int64_t>(1, s.batch * s.n_kv_heads);
  const int64_t want = (2 * static_cast<int64_t>(sm_count) + blocks - 1) / blocks;
  const int64_t by_len = std::max<int64_t>(1, max_len / 256);
  return static_cast<int>(std::clamp<int64_t>(std::min(want, by_len), 1, 128));
}

int64_t decode_workspace_floats(const DecodeAttentionShape& s, int splits) {
  return s.batch * s.n_heads * splits * (s.head_dim + 1);
}

cudaError_t launch_flash_decode(const __nv_bfloat16* q, const __nv_bfloat16* k, const __nv_bfloat16* v,
                                const int64_t* lengths, const DecodeAttentionShape& s, int splits, float* workspace,
                                __nv_bfloat16* out, cudaStream_t stream) {
  if (s.n_kv_heads < 1 || s.n_heads % s.n_kv_heads != 0 || s.n_heads / s.n_kv_heads > kMaxGroup || splits < 1 ||
      s.batch < 1 || s.batch * s.n_kv_heads * splits > 0x7fffffff)
    return cudaErrorInvalidValue;
  switch (s.head_dim) {
    case 64: return launch<64>(q, k, v, lengths, s, splits, workspace, out, stream);
    case 128: return launch<128>(q, k, v, lengths, s, splits, workspace, out, stream);
    case 256: return launch<256>(q, k, v, lengths, s, splits, workspace, out, stream);
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace yoco::cuda
