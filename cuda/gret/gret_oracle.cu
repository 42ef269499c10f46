#include "gret/gret_oracle.hpp"

namespace yoco::cuda {

namespace {

// Thread j owns column j of the head's state. D <= 128: the column lives in
// registers; D = 256: it lives in state_out (global memory, L2-resident; the
// column is only ever touched by its own thread). Each token's q and k are
// staged in shared memory (double-buffered: one barrier per token); the next
// token's values are fetched into registers while the current one is computed.
template <int D, bool kRegs>
__global__ void __launch_bounds__(D) gret_oracle_kernel(const __nv_bfloat16* __restrict__ q,
                                                        const __nv_bfloat16* __restrict__ k,
                                                        const __nv_bfloat16* __restrict__ v,
                                                        const float* __restrict__ log_gamma,
                                                        const float* state_in, float* state_out,
                                                        float* __restrict__ o, int64_t heads, int64_t seq_len,
                                                        int64_t row_stride) {
  __shared__ float qs[2][D], ks[2][D];
  const int j = threadIdx.x;
  const int64_t bh = blockIdx.x;
  const int64_t b = bh / heads, hd = bh % heads;
  const int64_t col0 = hd * D;
  const int64_t in_row0 = b * seq_len;  // first token row of this sequence
  const int64_t dd = static_cast<int64_t>(D) * D;
  const float* sin = state_in ? state_in + bh * dd : nullptr;
  float* sout = state_out + bh * dd;

  float sreg[kRegs ? D : 1];
  if constexpr (kRegs) {
#pragma unroll
    for (int i = 0; i < D; ++i) sreg[i] = sin ? sin[static_cast<int64_t>(i) * D + j] : 0.0f;
  } else {
    for (int i = 0; i < D; ++i) {
      const float x = sin ? sin[static_cast<int64_t>(i) * D + j] : 0.0f;
      sout[static_cast<int64_t>(i) * D + j] = x;  // same thread reads and writes (in-place safe)
    }
  }

  float nq = 0, nk = 0, nv = 0, ng = 0;
  auto fetch = [&](int64_t tok) {
    const int64_t r = (in_row0 + tok) * row_stride + col0 + j;
    nq = __bfloat162float(q[r]);
    nk = __bfloat162float(k[r]);
    nv = __bfloat162float(v[r]);
    ng = log_gamma[(in_row0 + tok) * heads + hd];
  };
  if (seq_len > 0) fetch(0);
  for (int64_t tok = 0; tok < seq_len; ++tok) {
    const int p = static_cast<int>(tok & 1);
    qs[p][j] = nq;
    ks[p][j] = nk;
    const float vj = nv, gamma = expf(ng);
    __syncthreads();  // q, k of this token visible; the buffer written here was last read two tokens ago
    if (tok + 1 < seq_len) fetch(tok + 1);
    float acc = 0.0f;
    if constexpr (kRegs) {
#pragma unroll
      for (int i = 0; i < D; ++i) {
        sreg[i] = fmaf(gamma, sreg[i], ks[p][i] * vj);
        acc = fmaf(qs[p][i], sreg[i], acc);
      }
    } else {
      for (int i = 0; i < D; ++i) {
        float* sp = sout + static_cast<int64_t>(i) * D + j;
        const float x = fmaf(gamma, *sp, ks[p][i] * vj);
        *sp = x;
        acc = fmaf(qs[p][i], x, acc);
      }
    }
    o[(in_row0 + tok) * heads * D + col0 + j] = acc;
  }
  if constexpr (kRegs) {
#pragma unroll
    for (int i = 0; i < D; ++i) sout[static_cast<int64_t>(i) * D + j] = sreg[i];
  }
}

}  // namespace

cudaError_t launch_gret_recurrent_oracle(const __nv_bfloat16* q, const __nv_bfloat16* k, const __nv_bfloat16* v,
                                         const float* log_gamma, const float* state_in, float* state_out, float* o,
                                         int64_t batch, int64_t heads, int64_t head_dim, int64_t seq_len,
                                         int64_t row_stride, cudaStream_t stream) {
  if (!q || !k || !v || !log_gamma || !state_out || !o) return cudaErrorInvalidValue;
  if (batch < 1 || heads < 1 || seq_len < 0 || row_stride < heads * head_dim || batch * heads > 0x7fffffffLL)
    return cudaErrorInvalidValue;
  const unsigned grid = static_cast<unsigned>(batch * heads);
  switch (head_dim) {
    case 64:
      gret_oracle_kernel<64, true><<<grid, 64, 0, stream>>>(q, k, v, log_gamma, state_in, state_out, o, heads,
                                                            seq_len, row_stride);
      break;
    case 128:
      gret_oracle_kernel<128, true><<<grid, 128, 0, stream>>>(q, k, v, log_gamma, state_in, state_out, o, heads,
                                                              seq_len, row_stride);
      break;
    case 256:
      gret_oracle_kernel<256, false><<<grid, 256, 0, stream>>>(q, k, v, log_gamma, state_in, state_out, o, heads,
                                                               seq_len, row_stride);
      break;
    default: return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

}  // namespace yoco::cuda
