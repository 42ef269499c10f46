#pragma once
// The parameters every prefill attention kernel reads (v1 cuda/attention/flash_prefill_v1.cu, v2
// cuda/attention/flash_prefill_v2.cu, v3 cuda/attention/flash_prefill_v3.cu, which adds its tensor maps),
// filled from the launcher's arguments in one place.
#include <cuda_bf16.h>

#include <cstdint>

#include "attention/flash_prefill.hpp"

namespace yoco::cuda::detail {

struct PrefillParams {
  const __nv_bfloat16* q;
  const __nv_bfloat16* k;
  const __nv_bfloat16* v;
  const int64_t* q_start;
  const int64_t* q_len;
  __nv_bfloat16* o;
  float* lse;
  int64_t H, group, q_rows, capacity, q_stride, kv_stride, window;
  float scale_log2;  // softmax scale * log2(e): the kernels' exp2 domain
};

// For arguments prefill_args_valid accepted.
inline PrefillParams prefill_params(const __nv_bfloat16* q, const __nv_bfloat16* k, const __nv_bfloat16* v,
                                    const int64_t* q_start, const int64_t* q_len, const PrefillAttentionShape& s,
                                    __nv_bfloat16* o, float* lse) {
  PrefillParams p{};
  p.q = q;
  p.k = k;
  p.v = v;
  p.q_start = q_start;
  p.q_len = q_len;
  p.o = o;
  p.lse = lse;
  p.H = s.n_heads;
  p.group = s.n_heads / s.n_kv_heads;
  p.q_rows = s.q_rows;
  p.capacity = s.capacity;
  p.q_stride = s.q_stride;
  p.kv_stride = s.kv_stride;
  p.window = s.window < s.capacity ? s.window : 0;  // a window covering the whole cache is no window
  p.scale_log2 = static_cast<float>(static_cast<double>(s.scale) * 1.4426950408889634);
  return p;
}

}  // namespace yoco::cuda::detail
