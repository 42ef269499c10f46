#include "ops/gemm.hpp"

#include "ops/gemv.hpp"
#include "ops/gemv_plan.hpp"

namespace yoco::cuda {

Gemm::Gemm() {
  if (cublasCreate(&handle_) != CUBLAS_STATUS_SUCCESS) {
    handle_ = nullptr;
    error_ = "cublasCreate failed";
  }
}

Gemm::~Gemm() {
  if (handle_) cublasDestroy(handle_);
}

std::string Gemm::run(const void* x, int64_t m, int64_t k, const void* w, int64_t n, void* y, cudaDataType_t out_type,
                      cudaStream_t stream, float beta) {
  if (!handle_) return error_;
  constexpr int64_t kMax = 0x7fffffff;
  if (m < 1 || n < 1 || k < 1 || m > kMax || n > kMax || k > kMax)
    return "gemm: shape " + std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k) +
           " outside cuBLAS's 32-bit range";
  // An accumulating call (beta 1) keeps cublasGemmEx's choice: the tuner times its candidates by running them
  // again on the call's own output, which would add the product more than once.
  if (tuner_ && beta == 0.0f) return tuner_->run(x, m, k, w, n, y, out_type, workspace_, workspace_bytes_, stream);
  // The GEMV's outputs: bf16 written, fp32 written or added to (beta 0 or 1); anything else stays cuBLAS's.
  const bool gemv_out = (out_type == CUDA_R_16BF && beta == 0.0f) ||
                        (out_type == CUDA_R_32F && (beta == 0.0f || beta == 1.0f));
  if (!tuner_ && small_rows_ == GemmSmallRows::gemv && gemv_out &&
      gemv::unsupported(m, k, n, reinterpret_cast<uintptr_t>(x), reinterpret_cast<uintptr_t>(w)) == nullptr) {
    const GemvOut out = out_type == CUDA_R_16BF ? GemvOut::bf16 : beta == 0.0f ? GemvOut::f32 : GemvOut::f32_accumulate;
    const cudaError_t e = launch_gemv(static_cast<const __nv_bfloat16*>(x), m, k, static_cast<const __nv_bfloat16*>(w),
                                      n, y, out, stream);
    return e == cudaSuccess ? std::string() : std::string("gemv: ") + cudaGetErrorString(e);
  }
  // The stream only when it changes: a prefill's eager GEMMs are paced by the host (launch_floor: an
  // eager cuBLAS call costs about twice an eager kernel), and the runners keep one stream.
  if (!stream_set_ || stream != stream_) {
    stream_set_ = false;  // until both calls succeed: a failed one is tried again by the next call
    if (cublasSetStream(handle_, stream) != CUBLAS_STATUS_SUCCESS) return "cublasSetStream failed";
    // cublasSetStream puts the handle back on cuBLAS's own workspace pool: give it ours again.
    if (workspace_ && cublasSetWorkspace(handle_, workspace_, workspace_bytes_) != CUBLAS_STATUS_SUCCESS)
      return "cublasSetWorkspace failed";
    stream_ = stream;
    stream_set_ = true;
  }
  const float alpha = 1.0f;
  // Column-major view: yᵀ[n, m] = W[n, k] (stored as the column-major k x n,
  // hence OP_T) · xᵀ[k, m] (the column-major k x m of row-major x).
  const cublasStatus_t s =
      cublasGemmEx(handle_, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(n), static_cast<int>(m), static_cast<int>(k),
                   &alpha, w, CUDA_R_16BF, static_cast<int>(k), x, CUDA_R_16BF, static_cast<int>(k), &beta, y, out_type,
                   static_cast<int>(n), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
  if (s != CUBLAS_STATUS_SUCCESS) return "cublasGemmEx failed with status " + std::to_string(static_cast<int>(s));
  return "";
}

std::string Gemm::set_workspace(void* workspace, size_t bytes) {
  if (!handle_) return error_;
  const cublasStatus_t s = cublasSetWorkspace(handle_, workspace, bytes);
  if (s != CUBLAS_STATUS_SUCCESS) return "cublasSetWorkspace failed with status " + std::to_string(static_cast<int>(s));
  workspace_ = workspace;
  workspace_bytes_ = bytes;
  return "";
}

std::string Gemm::choose_algorithms(GemmAlgorithms a) {
  if (a == GemmAlgorithms::cublas) {
    tuner_.reset();
    return "";
  }
  if (tuner_) return "";
  auto t = std::make_unique<GemmTuner>();
  if (!t->ok()) return "cublasLtCreate failed";
  tuner_ = std::move(t);
  return "";
}

std::string Gemm::choose_ahead(const __nv_bfloat16* x, int64_t m, int64_t k, const __nv_bfloat16* w, int64_t n,
                               void* y, cudaDataType_t out_type, cudaStream_t stream) {
  if (!tuner_ || tuner_->chosen(x, m, k, w, n, y, out_type, workspace_bytes_)) return "";
  return run(x, m, k, w, n, y, out_type, stream);
}

std::vector<std::string> Gemm::tuning_record() const { return tuner_ ? tuner_->record_lines() : std::vector<std::string>{}; }

std::string Gemm::linear(const __nv_bfloat16* x, int64_t m, int64_t k, const __nv_bfloat16* w, int64_t n,
                         __nv_bfloat16* y, cudaStream_t stream) {
  return run(x, m, k, w, n, y, CUDA_R_16BF, stream);
}

std::string Gemm::accumulate_f32(const __nv_bfloat16* x, int64_t m, int64_t k, const __nv_bfloat16* w, int64_t n,
                                 float* y, cudaStream_t stream) {
  return run(x, m, k, w, n, y, CUDA_R_32F, stream, 1.0f);
}

std::string Gemm::linear_f32(const __nv_bfloat16* x, int64_t m, int64_t k, const __nv_bfloat16* w, int64_t n, float* y,
                             cudaStream_t stream) {
  return run(x, m, k, w, n, y, CUDA_R_32F, stream);
}

}  // namespace yoco::cuda
