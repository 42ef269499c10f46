// One warp per (row, head): every lane reads the two log-sum-exps, the lanes
// sweep the head's elements four at a time (coalesced: a warp covers 128
// contiguous elements a pass), and lane 0 writes the merged log-sum-exp once
// every lane has read the old one. Memory-bound: 12 bytes an element (bf16 in,
// fp32 in and out, bf16 out).
#include "attention/attention_merge.hpp"

#include "attention/merge_math.hpp"

namespace yoco::cuda {

namespace {

using bf16 = __nv_bfloat16;
constexpr int kWarps = 8;

__global__ void __launch_bounds__(kWarps * 32) attention_merge_kernel(const bf16* __restrict__ part_o,
                                                                      const float* __restrict__ part_lse,
                                                                      int64_t pairs, int64_t n, int64_t heads,
                                                                      int64_t head_dim, bool first,
                                                                      float* __restrict__ acc_o,
                                                                      float* __restrict__ acc_lse,
                                                                      bf16* __restrict__ out) {
  const int lane = threadIdx.x % 32;
  const int64_t pair = static_cast<int64_t>(blockIdx.x) * kWarps + threadIdx.x / 32;  // (row, head)
  if (pair >= pairs) return;  // whole warps
  const int64_t row = pair / heads, h = pair % heads;
  const int64_t b = row / n, i = row % n;
  const int64_t li = (b * heads + h) * n + i;
  const float lse_new = part_lse[li];
  const float lse_old = first ? -INFINITY : acc_lse[li];
  __syncwarp();  // every lane has the old value before lane 0 overwrites it
  const attn::MergeWeights w = attn::merge_weights(lse_old, lse_new);
  if (lane == 0) acc_lse[li] = w.lse;
  const int64_t base = row * heads * head_dim + h * head_dim;
  for (int64_t e = lane * 4; e < head_dim; e += 128) {
    const __nv_bfloat162* p2 = reinterpret_cast<const __nv_bfloat162*>(part_o + base + e);
    const float2 p01 = __bfloat1622float2(p2[0]), p23 = __bfloat1622float2(p2[1]);
    float4 o = make_float4(0.f, 0.f, 0.f, 0.f);
    if (!first) o = *reinterpret_cast<const float4*>(acc_o + base + e);
    // A weight of 0 never multiplies the other side's values: acc is garbage at `first`.
    const float4 m = make_float4(w.b * p01.x + (first ? 0.f : w.a * o.x), w.b * p01.y + (first ? 0.f : w.a * o.y),
                                 w.b * p23.x + (first ? 0.f : w.a * o.z), w.b * p23.y + (first ? 0.f : w.a * o.w));
    *reinterpret_cast<float4*>(acc_o + base + e) = m;
    if (out != nullptr) {
      __nv_bfloat162* o2 = reinterpret_cast<__nv_bfloat162*>(out + base + e);
      o2[0] = __floats2bfloat162_rn(m.x, m.y);
      o2[1] = __floats2bfloat162_rn(m.z, m.w);
    }
  }
}

}  // namespace

cudaError_t launch_attention_merge(const bf16* part_o, const float* part_lse, int64_t batch, int64_t n, int64_t heads,
                                   int64_t head_dim, bool first, float* acc_o, float* acc_lse, bf16* out,
                                   cudaStream_t stream) {
  if (part_o == nullptr || part_lse == nullptr || acc_o == nullptr || acc_lse == nullptr || batch < 1 || n < 1 ||
      heads < 1 || head_dim < 4 || head_dim % 4 != 0)
    return cudaErrorInvalidValue;
  auto misaligned = [](const void* p, uintptr_t to) { return reinterpret_cast<uintptr_t>(p) % to != 0; };
  if (misaligned(acc_o, 16) || misaligned(part_o, 8) || (out != nullptr && misaligned(out, 8)))
    return cudaErrorInvalidValue;
  if (batch > INT64_MAX / n || batch * n > INT64_MAX / heads) return cudaErrorInvalidValue;
  const int64_t pairs = batch * n * heads;
  const int64_t blocks = (pairs + kWarps - 1) / kWarps;
  if (blocks > 0x7fffffff) return cudaErrorInvalidValue;
  attention_merge_kernel<<<static_cast<unsigned>(blocks), kWarps * 32, 0, stream>>>(
      part_o, part_lse, pairs, n, heads, head_dim, first, acc_o, acc_lse, out);
  return cudaGetLastError();
}

}  // namespace yoco::cuda
