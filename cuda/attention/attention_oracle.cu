// GPU attention oracle (see attention_oracle.hpp). Deliberately simple: two
// cuBLAS GEMMs in pedantic fp32 and a one-block-per-row fp64 softmax whose mask
// is spelled out from absolute positions, with no code shared with the kernels.
#include <algorithm>
#include <cmath>
#include <map>

#include "attention/attention_oracle.hpp"

namespace yoco::cuda {

namespace {

using bf16 = __nv_bfloat16;

// Qs[r, d] = q[(b * q_rows + idx[r]) * q_stride + h * D + d]
__global__ void gather_rows_kernel(const bf16* __restrict__ q, const int64_t* __restrict__ idx, int64_t b,
                                   int64_t q_rows, int64_t q_stride, int64_t h, int64_t D, int64_t R,
                                   bf16* __restrict__ qs) {
  const int64_t total = R * D;
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < total;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = e / D, d = e % D;
    qs[e] = q[(b * q_rows + idx[r]) * q_stride + h * D + d];
  }
}

// v32[j, d] = float(v[j * stride + d]) for j < n, d < D (v already at the head's columns).
__global__ void widen_kernel(const bf16* __restrict__ v, int64_t stride, int64_t n, int64_t D,
                             float* __restrict__ v32) {
  const int64_t total = n * D;
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < total;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t j = e / D, d = e % D;
    v32[e] = __bfloat162float(v[j * stride + d]);
  }
}

constexpr int kSoftmaxThreads = 256;

__device__ double block_reduce(double x, bool is_max, double* scratch) {
  for (int o = 16; o > 0; o >>= 1) {
    const double y = __shfl_xor_sync(0xffffffffu, x, o);
    x = is_max ? fmax(x, y) : x + y;
  }
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  __syncthreads();  // scratch may still be read from a previous reduction
  if (lane == 0) scratch[warp] = x;
  __syncthreads();
  double r = scratch[0];
  for (int w = 1; w < kSoftmaxThreads / 32; ++w) r = is_max ? fmax(r, scratch[w]) : r + scratch[w];
  return r;
}

// One block per selected row r: s = S[r, :n] * scale; key j is visible iff
// j <= pos[r] and (window == 0 or pos[r] - j < window). Writes P in place and the LSE.
__global__ void __launch_bounds__(kSoftmaxThreads)
    softmax_rows_kernel(float* __restrict__ S, int64_t n, const int64_t* __restrict__ pos, int64_t window,
                        double scale, double* __restrict__ lse) {
  __shared__ double scratch[kSoftmaxThreads / 32];
  const int64_t r = blockIdx.x;
  float* row = S + r * n;
  const int64_t p = pos[r];
  double mx = -INFINITY;
  for (int64_t j = threadIdx.x; j < n; j += kSoftmaxThreads) {
    const bool vis = j <= p && (window == 0 || p - j < window);
    if (vis) mx = fmax(mx, static_cast<double>(row[j]) * scale);
  }
  mx = block_reduce(mx, true, scratch);
  double sum = 0.0;
  for (int64_t j = threadIdx.x; j < n; j += kSoftmaxThreads) {
    const bool vis = j <= p && (window == 0 || p - j < window);
    if (vis) sum += exp(static_cast<double>(row[j]) * scale - mx);
  }
  sum = block_reduce(sum, false, scratch);
  for (int64_t j = threadIdx.x; j < n; j += kSoftmaxThreads) {
    const bool vis = j <= p && (window == 0 || p - j < window);
    row[j] = vis ? static_cast<float>(exp(static_cast<double>(row[j]) * scale - mx) / sum) : 0.0f;
  }
  if (threadIdx.x == 0) lse[r] = sum > 0.0 ? mx + log(sum) : -INFINITY;
}

unsigned grid_for(int64_t n) { return static_cast<unsigned>(std::clamp<int64_t>((n + 255) / 256, 1, 4096)); }

template <class T>
struct DevBuf {
  T* p = nullptr;
  cudaError_t alloc(int64_t n) { return cudaMalloc(&p, static_cast<size_t>(std::max<int64_t>(n, 1)) * sizeof(T)); }
  ~DevBuf() { cudaFree(p); }
};

std::string cuda_msg(const char* what, cudaError_t e) { return std::string(what) + ": " + cudaGetErrorString(e); }
std::string cublas_msg(const char* what, cublasStatus_t st) {
  return std::string(what) + ": cuBLAS status " + std::to_string(static_cast<int>(st));
}

}  // namespace

AttentionOracle::AttentionOracle() {
  if (cublasCreate(&handle_) != CUBLAS_STATUS_SUCCESS) {
    handle_ = nullptr;
    error_ = "cublasCreate failed";
    return;
  }
  if (cublasSetMathMode(handle_, CUBLAS_PEDANTIC_MATH) != CUBLAS_STATUS_SUCCESS) {
    cublasDestroy(handle_);
    handle_ = nullptr;
    error_ = "cublasSetMathMode(PEDANTIC) failed";
  }
}

AttentionOracle::~AttentionOracle() {
  if (handle_ != nullptr) cublasDestroy(handle_);
}

std::string AttentionOracle::run(const bf16* q, const bf16* k, const bf16* v, const OracleShape& s,
                                 const std::vector<int64_t>& q_start, const std::vector<OracleRow>& rows,
                                 std::vector<float>* out, std::vector<double>* lse, cudaStream_t stream) {
  if (!ok()) return error_;
  const int64_t H = s.n_heads, Hkv = s.n_kv_heads, D = s.head_dim;
  if (s.batch < 1 || H < 1 || Hkv < 1 || H % Hkv != 0 || D < 1 || s.q_rows < 1 || s.capacity < 1 ||
      s.q_stride < H * D || s.kv_stride < Hkv * D || s.window < 0 || static_cast<int64_t>(q_start.size()) != s.batch ||
      s.kv_stride > 0x7fffffff || s.capacity > 0x7fffffff)
    return "oracle: bad shape";
  for (const OracleRow& r : rows)
    if (r.batch < 0 || r.batch >= s.batch || r.row < 0 || r.row >= s.q_rows || q_start[r.batch] < 0 ||
        q_start[r.batch] + r.row >= s.capacity)
      return "oracle: row out of range";
  if (out == nullptr) return "oracle: no output";
  out->assign(rows.size() * static_cast<size_t>(H * D), 0.0f);
  if (lse != nullptr) lse->assign(rows.size() * static_cast<size_t>(H), 0.0);
  if (rows.empty()) return "";
  if (cublasSetStream(handle_, stream) != CUBLAS_STATUS_SUCCESS) return "oracle: cublasSetStream failed";

  // Rows grouped by sequence, in the caller's order within each.
  std::map<int64_t, std::vector<size_t>> by_batch;
  for (size_t r = 0; r < rows.size(); ++r) by_batch[rows[r].batch].push_back(r);
  int64_t max_keys = 1;
  for (const OracleRow& r : rows) max_keys = std::max(max_keys, q_start[r.batch] + r.row + 1);
  const int64_t block_rows = std::clamp<int64_t>((int64_t{1} << 28) / max_keys, 1, 512);

  DevBuf<float> S, v32, ob;
  DevBuf<bf16> qs;
  DevBuf<int64_t> idx, pos;
  DevBuf<double> lse_d;
  cudaError_t e;
  if ((e = S.alloc(block_rows * max_keys)) != cudaSuccess || (e = v32.alloc(max_keys * D)) != cudaSuccess ||
      (e = ob.alloc(block_rows * D)) != cudaSuccess || (e = qs.alloc(block_rows * D)) != cudaSuccess ||
      (e = idx.alloc(block_rows)) != cudaSuccess || (e = pos.alloc(block_rows)) != cudaSuccess ||
      (e = lse_d.alloc(block_rows)) != cudaSuccess)
    return cuda_msg("oracle: cudaMalloc", e);

  std::vector<float> o_host(static_cast<size_t>(block_rows * D));
  std::vector<double> lse_host(static_cast<size_t>(block_rows));
  for (const auto& [b, list] : by_batch) {
    int64_t n_keys = 1;  // keys any selected row of this sequence can see: [0, n_keys)
    for (size_t r : list) n_keys = std::max(n_keys, q_start[b] + rows[r].row + 1);
    for (int64_t kvh = 0; kvh < Hkv; ++kvh) {
      const bf16* kh = k + b * s.capacity * s.kv_stride + kvh * D;
      const bf16* vh = v + b * s.capacity * s.kv_stride + kvh * D;
      widen_kernel<<<grid_for(n_keys * D), 256, 0, stream>>>(vh, s.kv_stride, n_keys, D, v32.p);
      if ((e = cudaGetLastError()) != cudaSuccess) return cuda_msg("oracle: widen", e);
      for (int64_t h = kvh * (H / Hkv); h < (kvh + 1) * (H / Hkv); ++h) {
        for (size_t r0 = 0; r0 < list.size(); r0 += static_cast<size_t>(block_rows)) {
          const int64_t R = std::min<int64_t>(block_rows, static_cast<int64_t>(list.size() - r0));
          std::vector<int64_t> idx_h(static_cast<size_t>(R)), pos_h(static_cast<size_t>(R));
          for (int64_t i = 0; i < R; ++i) {
            idx_h[i] = rows[list[r0 + i]].row;
            pos_h[i] = q_start[b] + idx_h[i];
          }
          if ((e = cudaMemcpyAsync(idx.p, idx_h.data(), R * sizeof(int64_t), cudaMemcpyHostToDevice, stream)) !=
                  cudaSuccess ||
              (e = cudaMemcpyAsync(pos.p, pos_h.data(), R * sizeof(int64_t), cudaMemcpyHostToDevice, stream)) !=
                  cudaSuccess)
            return cuda_msg("oracle: upload rows", e);
          gather_rows_kernel<<<grid_for(R * D), 256, 0, stream>>>(q, idx.p, b, s.q_rows, s.q_stride, h, D, R, qs.p);
          if ((e = cudaGetLastError()) != cudaSuccess) return cuda_msg("oracle: gather", e);
          // S (row-major [R, n_keys]) = column-major S^T [n_keys, R] = K_h [n_keys, D] . Q_s^T.
          const float one = 1.0f, zero = 0.0f;
          cublasStatus_t st = cublasGemmEx(handle_, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(n_keys),
                                           static_cast<int>(R), static_cast<int>(D), &one, kh, CUDA_R_16BF,
                                           static_cast<int>(s.kv_stride), qs.p, CUDA_R_16BF, static_cast<int>(D),
                                           &zero, S.p, CUDA_R_32F, static_cast<int>(n_keys), CUBLAS_COMPUTE_32F,
                                           CUBLAS_GEMM_DEFAULT);
          if (st != CUBLAS_STATUS_SUCCESS) return cublas_msg("oracle: S = Q K^T", st);
          softmax_rows_kernel<<<static_cast<unsigned>(R), kSoftmaxThreads, 0, stream>>>(S.p, n_keys, pos.p,
                                                                                        s.window, s.scale, lse_d.p);
          if ((e = cudaGetLastError()) != cudaSuccess) return cuda_msg("oracle: softmax", e);
          // O (row-major [R, D]) = column-major O^T [D, R] = V_h^T [D, n_keys] . P^T [n_keys, R].
          st = cublasGemmEx(handle_, CUBLAS_OP_N, CUBLAS_OP_N, static_cast<int>(D), static_cast<int>(R),
                            static_cast<int>(n_keys), &one, v32.p, CUDA_R_32F, static_cast<int>(D), S.p, CUDA_R_32F,
                            static_cast<int>(n_keys), &zero, ob.p, CUDA_R_32F, static_cast<int>(D),
                            CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
          if (st != CUBLAS_STATUS_SUCCESS) return cublas_msg("oracle: O = P V", st);
          if ((e = cudaMemcpyAsync(o_host.data(), ob.p, R * D * sizeof(float), cudaMemcpyDeviceToHost, stream)) !=
                  cudaSuccess ||
              (e = cudaMemcpyAsync(lse_host.data(), lse_d.p, R * sizeof(double), cudaMemcpyDeviceToHost, stream)) !=
                  cudaSuccess ||
              (e = cudaStreamSynchronize(stream)) != cudaSuccess)
            return cuda_msg("oracle: download", e);
          for (int64_t i = 0; i < R; ++i) {
            const size_t r = list[r0 + i];
            std::copy(o_host.begin() + i * D, o_host.begin() + (i + 1) * D,
                      out->begin() + static_cast<int64_t>(r) * H * D + h * D);
            if (lse != nullptr) (*lse)[r * H + h] = lse_host[i];
          }
        }
      }
    }
  }
  return "";
}

}  // namespace yoco::cuda
