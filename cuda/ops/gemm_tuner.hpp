#pragma once
// The runners' GEMM through cuBLASLt, with the algorithm of each shape chosen by timing the
// heuristic's first candidates on the call's own buffers, once per shape and process (a runtime
// tuning, as PyTorch's TunableOp does it).
//
// Why: run-22's CUPTI puts yoco-3b's four self-decoder GEMMs at 91.9% of the same run's ceiling GEMM
// as a whole, while W1|W3 alone runs at 100%. cublasGemmEx gives every shape the kernel its heuristic
// ranks first. Bench family `gemm_shapes` measures the candidates shape by shape; this class takes the
// fastest at run time.
//
// - When a shape is first met outside a CUDA graph capture, each candidate runs once to warm up and
//   then kTimedRuns times between events on the call's stream, and the one with the least median
//   time is kept. The call's output is then written by the kept algorithm. That costs one host
//   synchronisation per candidate, once per shape: benchmarks take it in their warm-up.
// - When a shape is first met inside a capture (a decode step's graph), nothing can be timed. The
//   heuristic's first candidate is kept instead, so that eager and graph steps use one algorithm for
//   a shape.
// - Every kept choice is in `record()`, with the times of all the candidates: the tuning record
//   beside the choice.
// Different algorithms may round differently (split-K sums in another order). One process keeps one
// algorithm for each shape, so its results are reproducible within the process.
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

namespace yoco::cuda {

struct GemmChoice {
  int rank = 0;                 // the kept candidate's place in the heuristic's order
  int candidates = 0;           // how many the heuristic offered
  bool timed = false;           // false: chosen inside a capture (the first candidate, untimed)
  std::vector<double> median_s;  // each candidate's median time, in the heuristic's order (timed only)
  cublasLtMatmulAlgo_t algo{};
};

struct GemmLtProblem;  // one shape's cuBLASLt descriptors (gemm_tuner.cpp)

class GemmTuner {
 public:
  static constexpr int kCandidates = 8;
  static constexpr int kTimedRuns = 5;

  GemmTuner();
  ~GemmTuner();
  GemmTuner(const GemmTuner&) = delete;
  GemmTuner& operator=(const GemmTuner&) = delete;
  bool ok() const { return handle_ != nullptr; }

  // y[m, n] = x[m, k] · w[n, k]ᵀ, bf16 operands, fp32 accumulation, y of `out_type` (bf16 or fp32), as
  // Gemm::linear; `workspace` of `workspace_bytes` (may be null and 0). Empty string on success.
  std::string run(const void* x, int64_t m, int64_t k, const void* w, int64_t n, void* y, cudaDataType_t out_type,
                  void* workspace, size_t workspace_bytes, cudaStream_t stream);

  // (m, n, k, output type) -> the choice.
  using Key = std::tuple<int64_t, int64_t, int64_t, int>;
  const std::map<Key, GemmChoice>& record() const { return choices_; }
  // One line a shape: "m 32768 n 3072 k 3072 bf16: candidate 2 of 8, 0.93x the first (timed)".
  std::vector<std::string> record_lines() const;

 private:
  std::string choose(const Key& key, const void* x, const void* w, void* y, void* workspace, size_t workspace_bytes,
                     cudaStream_t stream, GemmChoice& out);
  cublasLtHandle_t handle_ = nullptr;
  std::map<Key, GemmChoice> choices_;
  std::map<Key, std::shared_ptr<GemmLtProblem>> problems_;  // made once a shape, as the choices
};

}  // namespace yoco::cuda
