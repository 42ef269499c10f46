#include "ops/gemm_tuner.hpp"

#include <algorithm>
#include <cstdio>

namespace yoco::cuda {
namespace {

std::string lt_error(const char* what, cublasStatus_t s) {
  return std::string("cuBLASLt ") + what + " failed with status " + std::to_string(static_cast<int>(s));
}

}  // namespace

// The descriptors of one shape, in cuBLAS's column-major terms: yᵀ (n x m) = op_T(w as k x n) · xᵀ
// (k x m), the view ops/gemm.cu gives cublasGemmEx.
struct GemmLtProblem {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasStatus_t status = CUBLAS_STATUS_SUCCESS;
  GemmLtProblem(int64_t m, int64_t k, int64_t n, cudaDataType_t out_type) {
    const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
    if (ok(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F)) &&
        ok(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta)) &&
        ok(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb)) &&
        ok(cublasLtMatrixLayoutCreate(&a, CUDA_R_16BF, static_cast<uint64_t>(k), static_cast<uint64_t>(n), k)) &&
        ok(cublasLtMatrixLayoutCreate(&b, CUDA_R_16BF, static_cast<uint64_t>(k), static_cast<uint64_t>(m), k)))
      ok(cublasLtMatrixLayoutCreate(&c, out_type, static_cast<uint64_t>(n), static_cast<uint64_t>(m), n));
  }
  bool ok(cublasStatus_t s) {
    status = s;
    return s == CUBLAS_STATUS_SUCCESS;
  }
  ~GemmLtProblem() {
    if (c) cublasLtMatrixLayoutDestroy(c);
    if (b) cublasLtMatrixLayoutDestroy(b);
    if (a) cublasLtMatrixLayoutDestroy(a);
    if (op) cublasLtMatmulDescDestroy(op);
  }
  GemmLtProblem(const GemmLtProblem&) = delete;
  GemmLtProblem& operator=(const GemmLtProblem&) = delete;
};

namespace {

struct Events {
  cudaEvent_t start = nullptr, stop = nullptr;
  Events() {
    cudaEventCreate(&start);
    cudaEventCreate(&stop);
  }
  ~Events() {
    if (start) cudaEventDestroy(start);
    if (stop) cudaEventDestroy(stop);
  }
};

}  // namespace

GemmTuner::GemmTuner() {
  if (cublasLtCreate(&handle_) != CUBLAS_STATUS_SUCCESS) handle_ = nullptr;
}

GemmTuner::~GemmTuner() {
  problems_.clear();
  if (handle_) cublasLtDestroy(handle_);
}

std::string GemmTuner::choose(const Key& key, const void* x, const void* w, void* y, void* workspace,
                              size_t workspace_bytes, cudaStream_t stream, GemmChoice& out) {
  const GemmLtProblem& p = *problems_.at(key);
  cublasLtMatmulPreference_t pref = nullptr;
  cublasStatus_t s = cublasLtMatmulPreferenceCreate(&pref);
  if (s != CUBLAS_STATUS_SUCCESS) return lt_error("preference", s);
  std::vector<cublasLtMatmulHeuristicResult_t> found(kCandidates);
  int count = 0;
  s = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace_bytes,
                                           sizeof workspace_bytes);
  if (s == CUBLAS_STATUS_SUCCESS)
    s = cublasLtMatmulAlgoGetHeuristic(handle_, p.op, p.a, p.b, p.c, p.c, pref, kCandidates, found.data(), &count);
  cublasLtMatmulPreferenceDestroy(pref);
  if (s != CUBLAS_STATUS_SUCCESS) return lt_error("heuristic", s);
  found.resize(static_cast<size_t>(std::max(count, 0)));
  found.erase(std::remove_if(found.begin(), found.end(),
                             [](const cublasLtMatmulHeuristicResult_t& r) { return r.state != CUBLAS_STATUS_SUCCESS; }),
              found.end());
  if (found.empty()) return "cuBLASLt: no algorithm for this shape";
  out.candidates = static_cast<int>(found.size());
  out.rank = 0;
  out.algo = found[0].algo;
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(stream, &capture) != cudaSuccess) return "cudaStreamIsCapturing failed";
  if (capture != cudaStreamCaptureStatusNone) return "";  // nothing can be timed in a capture: the first
  const float alpha = 1.0f, beta = 0.0f;
  Events ev;
  if (!ev.start || !ev.stop) return "cudaEventCreate failed";
  double best = 0;
  for (size_t i = 0; i < found.size(); ++i) {
    std::vector<double> t;
    bool failed = false;
    for (int r = 0; r <= kTimedRuns && !failed; ++r) {  // run 0 warms up
      cudaEventRecord(ev.start, stream);
      failed = cublasLtMatmul(handle_, p.op, &alpha, w, p.a, x, p.b, &beta, y, p.c, y, p.c, &found[i].algo,
                              workspace, workspace_bytes, stream) != CUBLAS_STATUS_SUCCESS;
      cudaEventRecord(ev.stop, stream);
      float ms = 0;
      if (!failed && cudaEventSynchronize(ev.stop) == cudaSuccess &&
          cudaEventElapsedTime(&ms, ev.start, ev.stop) == cudaSuccess) {
        if (r > 0) t.push_back(static_cast<double>(ms) * 1e-3);
      } else {
        failed = true;
      }
    }
    double median = -1;  // a candidate that failed to run is never kept
    if (!failed) {
      std::sort(t.begin(), t.end());
      median = t[t.size() / 2];
      if (out.median_s.empty() || best <= 0 || median < best) {
        best = median;
        out.rank = static_cast<int>(i);
        out.algo = found[i].algo;
      }
    }
    out.median_s.push_back(median);
  }
  if (best <= 0) return "cuBLASLt: no candidate ran for this shape";
  out.timed = true;
  return "";
}

std::string GemmTuner::run(const void* x, int64_t m, int64_t k, const void* w, int64_t n, void* y,
                           cudaDataType_t out_type, void* workspace, size_t workspace_bytes, cudaStream_t stream) {
  if (!handle_) return "cublasLtCreate failed";
  const Key key{m, n, k, static_cast<int>(out_type)};
  auto pit = problems_.find(key);
  if (pit == problems_.end()) {
    auto p = std::make_shared<GemmLtProblem>(m, k, n, out_type);
    if (p->status != CUBLAS_STATUS_SUCCESS) return lt_error("descriptor", p->status);
    pit = problems_.emplace(key, std::move(p)).first;
  }
  auto cit = choices_.find(key);
  if (cit == choices_.end()) {
    GemmChoice c;
    if (std::string e = choose(key, x, w, y, workspace, workspace_bytes, stream, c); !e.empty()) return e;
    cit = choices_.emplace(key, std::move(c)).first;
  }
  const GemmLtProblem& p = *pit->second;
  const float alpha = 1.0f, beta = 0.0f;
  // The kept algorithm writes the call's output (after a tuning, the last candidate timed wrote it).
  const cublasStatus_t s = cublasLtMatmul(handle_, p.op, &alpha, w, p.a, x, p.b, &beta, y, p.c, y, p.c,
                                          &cit->second.algo, workspace, workspace_bytes, stream);
  if (s != CUBLAS_STATUS_SUCCESS) return lt_error("matmul", s);
  return "";
}

std::vector<std::string> GemmTuner::record_lines() const {
  std::vector<std::string> lines;
  for (const auto& [key, c] : choices_) {
    const auto& [m, n, k, type] = key;
    char buf[240];
    if (c.timed && c.median_s.size() > static_cast<size_t>(c.rank) && c.median_s[0] > 0)
      std::snprintf(buf, sizeof buf, "m %lld n %lld k %lld %s: candidate %d of %d, %.3fx the first's time (timed)",
                    static_cast<long long>(m), static_cast<long long>(n), static_cast<long long>(k),
                    type == static_cast<int>(CUDA_R_32F) ? "fp32" : "bf16", c.rank, c.candidates,
                    c.median_s[static_cast<size_t>(c.rank)] / c.median_s[0]);
    else
      std::snprintf(buf, sizeof buf, "m %lld n %lld k %lld %s: candidate %d of %d (%s)", static_cast<long long>(m),
                    static_cast<long long>(n), static_cast<long long>(k),
                    type == static_cast<int>(CUDA_R_32F) ? "fp32" : "bf16", c.rank, c.candidates,
                    c.timed ? "timed" : "chosen in a capture, untimed");
    lines.emplace_back(buf);
  }
  return lines;
}

}  // namespace yoco::cuda
