#pragma once
// The dense projections: y = x Wᵀ for a [out, in] weight (reference linear()),
// bf16 operands, fp32 accumulation, through cuBLAS: cublasGemmEx's own choice of
// algorithm, or each shape's fastest of cuBLASLt's candidates timed at first use
// (GemmAlgorithms::tuned, ops/gemm_tuner.hpp). Row-major [rows, features]
// buffers as everywhere else; cuBLAS is column-major, so the call computes
// yᵀ = W xᵀ, which is the same memory.
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ops/gemm_tuner.hpp"

namespace yoco::cuda {

enum class GemmAlgorithms { cublas, tuned };
// Calls of a few rows (a decode step's): cuBLAS like the rest, or ops/gemv.hpp's kernel where it serves
// the shape (gemv::unsupported), on the cublas path (a tuned Gemm times its own candidates).
enum class GemmSmallRows { cublas, gemv };

class Gemm {
 public:
  Gemm();
  ~Gemm();
  Gemm(const Gemm&) = delete;
  Gemm& operator=(const Gemm&) = delete;
  bool ok() const { return handle_ != nullptr; }
  const std::string& error() const { return error_; }

  // y[m, n] = x[m, k] · w[n, k]ᵀ, y bf16. Empty string on success, else why.
  // m, n, k above 2^31 - 1 are refused (cuBLAS's 32-bit API): callers split rows.
  std::string linear(const __nv_bfloat16* x, int64_t m, int64_t k, const __nv_bfloat16* w, int64_t n,
                     __nv_bfloat16* y, cudaStream_t stream);
  // Gives cuBLAS its workspace (what a captured CUDA graph needs: no
  // allocation inside the capture). The memory must outlive the handle's use.
  std::string set_workspace(void* workspace, size_t bytes);
  // From the next call on: cublasGemmEx's choice (the default) or the tuned cuBLASLt path. Call it
  // before any graph captures this Gemm's calls: a captured graph keeps the path it was captured
  // with. Empty string on success, else why (cuBLASLt could not start).
  std::string choose_algorithms(GemmAlgorithms a);
  GemmAlgorithms algorithms() const { return tuner_ ? GemmAlgorithms::tuned : GemmAlgorithms::cublas; }
  // From the next call on (before any graph captures this Gemm's calls, as choose_algorithms).
  void set_small_rows(GemmSmallRows r) { small_rows_ = r; }
  GemmSmallRows small_rows() const { return small_rows_; }
  // The tuned path's record, a line per shape this Gemm ran (empty on the cublas path), and how many
  // shapes it timed itself.
  std::vector<std::string> tuning_record() const;
  int tuning_timings() const { return tuner_ ? tuner_->timings() : 0; }
  // On the tuned path, runs y = x · wᵀ (bf16 or fp32 y) once where its shape has no algorithm yet, so
  // that the shape is timed here, eagerly, and not met first inside a decode graph's capture (where it
  // could only take the heuristic's first). A no-op otherwise, and on the cublas path. x and y are the
  // caller's scratch: y is overwritten. Empty string on success, else why.
  std::string choose_ahead(const __nv_bfloat16* x, int64_t m, int64_t k, const __nv_bfloat16* w, int64_t n, void* y,
                           cudaDataType_t out_type, cudaStream_t stream);
  // y[m, n] += x[m, k] · w[n, k]ᵀ into fp32 y (beta 1): a sublayer's output added to the fp32
  // residual in the GEMM's epilogue, with no bf16 delta between. Always cublasGemmEx's choice.
  std::string accumulate_f32(const __nv_bfloat16* x, int64_t m, int64_t k, const __nv_bfloat16* w, int64_t n,
                             float* y, cudaStream_t stream);
  // The same with fp32 output (logits).
  std::string linear_f32(const __nv_bfloat16* x, int64_t m, int64_t k, const __nv_bfloat16* w, int64_t n, float* y,
                         cudaStream_t stream);

 private:
  std::string run(const void* x, int64_t m, int64_t k, const void* w, int64_t n, void* y, cudaDataType_t out_type,
                  cudaStream_t stream, float beta = 0.0f);
  cublasHandle_t handle_ = nullptr;
  void* workspace_ = nullptr;  // set_workspace's, given again after every cublasSetStream
  size_t workspace_bytes_ = 0;
  cudaStream_t stream_ = nullptr;  // the handle's stream, once stream_set_
  bool stream_set_ = false;
  std::string error_;
  std::unique_ptr<GemmTuner> tuner_;  // set: GemmAlgorithms::tuned
  GemmSmallRows small_rows_ = GemmSmallRows::cublas;
};

}  // namespace yoco::cuda
