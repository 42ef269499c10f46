#pragma once
// A plainly correct GPU attention for long lengths (issue 13 part 3,
// KERNELS.md §4): the check for the fast prefill/decode kernels at 32K-1M keys,
// where the fp64 CPU reference is too slow. It computes exact attention for a
// chosen set of query rows only, and shares NO index or mask code with the
// kernels (its mask is written inline from absolute positions), so that one
// bug cannot pass both.
//
// Method, per (sequence, query head, block of selected rows):
//   1. gather the selected q rows of the head into Q_s [R, D] (bf16);
//   2. S = Q_s K^T with cublasGemmEx: bf16 inputs (their products are exact in
//      fp32), CUBLAS_COMPUTE_32F, pedantic math mode (no TF32 anywhere), fp32 S;
//   3. one block per row: scale, mask by absolute position (key j visible to the
//      query at p iff j <= p and (window == 0 or p - j < window)), max, exp and sum
//      in fp64; P = exp(s - max) / sum written back in fp32; LSE in fp64;
//   4. O = P V with an fp32 GEMM (V converted to fp32 once per KV head), pedantic.
// Row blocks are sized so that S stays <= 2^28 floats (1 GiB) and <= 512 rows.
// Memory besides S: V in fp32 (keys x D x 4 B: 512 MiB at 1M keys, D 128).
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <string>
#include <vector>

namespace yoco::cuda {

// The same layout as PrefillAttentionShape (cuda/attention/flash_prefill.hpp), repeated
// here on purpose so the oracle depends on nothing of the kernel's.
struct OracleShape {
  int64_t batch = 1, n_heads = 0, n_kv_heads = 0, head_dim = 0;  // any head_dim; H % Hkv == 0
  int64_t q_rows = 0, capacity = 0;                              // rows per sequence in q and in k/v
  int64_t q_stride = 0, kv_stride = 0;                           // elements between rows
  int64_t window = 0;                                            // 0: causal only
  double scale = 0;
};

struct OracleRow {
  int64_t batch = 0, row = 0;  // query row `row` of sequence `batch` (absolute position q_start[batch] + row)
};

class AttentionOracle {
 public:
  AttentionOracle();
  ~AttentionOracle();
  AttentionOracle(const AttentionOracle&) = delete;
  AttentionOracle& operator=(const AttentionOracle&) = delete;
  bool ok() const { return handle_ != nullptr; }
  const std::string& error() const { return error_; }

  // q: device [batch, q_rows, q_stride] bf16; k, v: device [batch, capacity, kv_stride] bf16
  // (row p = position p; query head h reads KV head h / (H / Hkv)). q_start: host [batch], the
  // absolute position of each sequence's query row 0. rows: the query rows wanted, any order; each
  // must have q_start[batch] + row < capacity.
  // out (host): [rows.size(), H * D] fp32, row r of `rows` in row r, heads side by side.
  // lse (host, optional): [rows.size(), H] natural-log log-sum-exp of the scaled visible scores.
  // Synchronous (uses `stream`, then waits for it). Empty string on success, else why.
  std::string run(const __nv_bfloat16* q, const __nv_bfloat16* k, const __nv_bfloat16* v, const OracleShape& s,
                  const std::vector<int64_t>& q_start, const std::vector<OracleRow>& rows, std::vector<float>* out,
                  std::vector<double>* lse, cudaStream_t stream);

 private:
  cublasHandle_t handle_ = nullptr;
  std::string error_;
};

}  // namespace yoco::cuda
