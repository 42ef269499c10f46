#pragma once
// The runners' GEMM through cuBLASLt. The algorithm for each shape is chosen by timing the heuristic's
// first candidates on the call's own buffers, once per shape and process. This is a runtime tuning,
// the way PyTorch's TunableOp does it.
//
// Why: run-22's CUPTI puts yoco-3b's four self-decoder GEMMs at 91.9% of the same run's ceiling GEMM
// as a whole, while W1|W3 alone runs at 100%. cublasGemmEx gives every shape the kernel its heuristic
// ranks first. Bench family `gemm_shapes` measures the candidates shape by shape; this class takes the
// fastest at run time.
//
// - **First met outside a CUDA graph capture.** Each candidate runs once to warm up, then kTimedRuns
//   times between one pair of events on the call's stream. The one with the least time is kept, and
//   the call's output is then written by it. That costs one host synchronisation per candidate, once
//   per shape; benchmarks take it in their warm-up.
// - **First met inside a capture** (a decode step's graph). Nothing can be timed, so the heuristic's
//   first candidate is kept.
// - **A shape** is its sizes, output type, device, the operands' address alignment and the workspace;
//   its rows count as a class: each row count below kLargeRows on its own (a decode step's batch), every
//   count from kLargeRows up as one (a prefill step's rows). A prefill's ragged last chunk (and a
//   throughput prompt's, N - 1024 tokens) then takes its full chunks' algorithm, checked for its own
//   sizes with cublasLtMatmulAlgoCheck (the heuristic's first candidate if it does not fit), and is
//   never timed inside the measured prefill that first meets it.
// - **One algorithm per shape for the whole process.** The choices are shared by every GemmTuner, so
//   the process uses one algorithm a shape: eager and graph steps, and separate models, agree to the
//   bit. Different algorithms may round differently (split-K sums in another order, always in fp32).
// - **The tuning record.** Every choice is in `record_lines()`, with how the kept candidate compares
//   with the first: the record sits beside the choice.
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "ops/gemm_lt.hpp"

namespace yoco::cuda {

struct GemmChoice {
  int64_t m = 0;                 // the rows it was chosen at (the class's first)
  int rank = 0;                  // the kept candidate's place in the heuristic's order
  int candidates = 0;            // how many the heuristic offered
  bool timed = false;            // false: chosen inside a capture (the first candidate, untimed)
  std::vector<double> time_s;    // each candidate's time per run, in the heuristic's order (timed only; -1 failed)
  cublasLtMatmulAlgo_t algo{};
};

class GemmTuner {
 public:
  static constexpr int kCandidates = 8;
  static constexpr int kTimedRuns = 5;
  static constexpr int64_t kLargeRows = 4096;
  // The rows' class in a shape's key (above).
  static constexpr int64_t rows_class(int64_t m) { return m < kLargeRows ? m : kLargeRows; }

  GemmTuner();
  ~GemmTuner();
  GemmTuner(const GemmTuner&) = delete;
  GemmTuner& operator=(const GemmTuner&) = delete;
  bool ok() const { return handle_ != nullptr; }

  // y[m, n] = x[m, k] · w[n, k]ᵀ, bf16 operands, fp32 accumulation, y of `out_type` (bf16 or fp32), as
  // Gemm::linear; `workspace` of `workspace_bytes` (may be null and 0). Empty string on success.
  std::string run(const void* x, int64_t m, int64_t k, const void* w, int64_t n, void* y, cudaDataType_t out_type,
                  void* workspace, size_t workspace_bytes, cudaStream_t stream);

  // Whether the process has an algorithm for the shape of this call (its rows' class): a call would
  // not time anything.
  bool chosen(const void* x, int64_t m, int64_t k, const void* w, int64_t n, const void* y, cudaDataType_t out_type,
              size_t workspace_bytes) const;

  // One line for each shape this tuner ran, e.g. "m 32768 n 3072 k 3072 bf16: candidate 2 of 8, 0.93x the
  // first's time (timed)".
  std::vector<std::string> record_lines() const;
  // How many shapes this tuner timed itself (a shape another tuner of the process timed first is not
  // timed again).
  int timings() const { return timings_; }

  // (device, rows_class(m), n, k, output type, alignment, workspace bytes)
  using Key = std::tuple<int, int64_t, int64_t, int64_t, int, GemmLtAlignment, size_t>;

 private:
  std::string choose(const GemmLtProblem& p, const GemmLtAlignment& align, const void* x, const void* w, void* y,
                     void* workspace, size_t workspace_bytes, cudaStream_t stream, GemmChoice& out);
  // The class's algorithm for rows `m` of `p` (another row count of the class than the one it was chosen
  // at): kept where cublasLtMatmulAlgoCheck takes it within the workspace, else the heuristic's first
  // candidate for `p`; decided once per (key, m) and kept in reused_.
  std::string algorithm_for(const Key& key, int64_t m, const GemmLtProblem& p, const GemmLtAlignment& align,
                            const GemmChoice& c, size_t workspace_bytes, cublasLtMatmulAlgo_t& out);
  cublasLtHandle_t handle_ = nullptr;
  // Descriptors, made once per (m, n, k, output type).
  std::map<std::tuple<int64_t, int64_t, int64_t, int>, std::unique_ptr<GemmLtProblem>> problems_;
  std::map<Key, std::set<int64_t>> used_;  // the shapes this tuner ran and their row counts, for its record
  // (key, m) -> the algorithm for a row count of the class other than the chosen one, and whether it is
  // the class's (false: the heuristic's first for m).
  std::map<std::pair<Key, int64_t>, std::pair<cublasLtMatmulAlgo_t, bool>> reused_;
  int timings_ = 0;
};

}  // namespace yoco::cuda
