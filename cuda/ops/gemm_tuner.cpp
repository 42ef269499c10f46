#include "ops/gemm_tuner.hpp"

#include <cstdio>
#include <mutex>

namespace yoco::cuda {
namespace {

// The process's choices, one a shape (gemm_tuner.hpp).
struct Choices {
  std::mutex mutex;
  std::map<GemmTuner::Key, GemmChoice> by_key;
};
Choices& choices() {
  static Choices c;
  return c;
}

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

const char* type_name(int type) { return type == static_cast<int>(CUDA_R_32F) ? "fp32" : "bf16"; }

}  // namespace

GemmTuner::GemmTuner() {
  if (cublasLtCreate(&handle_) != CUBLAS_STATUS_SUCCESS) handle_ = nullptr;
}

GemmTuner::~GemmTuner() {
  problems_.clear();
  if (handle_) cublasLtDestroy(handle_);
}

std::string GemmTuner::choose(const GemmLtProblem& p, const GemmLtAlignment& align, const void* x, const void* w,
                              void* y, void* workspace, size_t workspace_bytes, cudaStream_t stream,
                              GemmChoice& out) {
  std::vector<cublasLtMatmulHeuristicResult_t> found;
  if (std::string e = gemm_lt_candidates(handle_, p, align, workspace_bytes, kCandidates, found); !e.empty())
    return e;
  if (found.empty()) return "cuBLASLt: no algorithm for this shape";
  out.candidates = static_cast<int>(found.size());
  out.rank = 0;
  out.algo = found[0].algo;
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(stream, &capture) != cudaSuccess) {
    cudaGetLastError();  // handled: keep the first candidate, as in a capture
    return "";
  }
  if (capture != cudaStreamCaptureStatusNone) return "";  // nothing can be timed in a capture: the first
  Events ev;
  if (!ev.start || !ev.stop) return "cudaEventCreate failed";
  bool have_best = false;
  double best = 0;
  for (size_t i = 0; i < found.size(); ++i) {
    // A warm-up run, then kTimedRuns back to back between one pair of events (the launches' host
    // latency hidden behind the queue, as in a prefill).
    bool failed = p.run(handle_, x, w, y, found[i].algo, workspace, workspace_bytes, stream) != CUBLAS_STATUS_SUCCESS;
    float ms = 0;
    if (!failed) failed = cudaEventRecord(ev.start, stream) != cudaSuccess;
    for (int r = 0; r < kTimedRuns && !failed; ++r)
      failed = p.run(handle_, x, w, y, found[i].algo, workspace, workspace_bytes, stream) != CUBLAS_STATUS_SUCCESS;
    if (!failed)
      failed = cudaEventRecord(ev.stop, stream) != cudaSuccess || cudaEventSynchronize(ev.stop) != cudaSuccess ||
               cudaEventElapsedTime(&ms, ev.start, ev.stop) != cudaSuccess;
    if (failed) {
      cudaGetLastError();  // handled here: the next launch's check must not take it for its own
      cudaStreamSynchronize(stream);
      out.time_s.push_back(-1);  // a candidate that failed to run is never kept
      continue;
    }
    const double t = static_cast<double>(ms) * 1e-3 / kTimedRuns;
    out.time_s.push_back(t);
    if (!have_best || t < best) {
      have_best = true;
      best = t;
      out.rank = static_cast<int>(i);
      out.algo = found[i].algo;
    }
  }
  if (!have_best) return "cuBLASLt: no candidate ran for this shape";
  out.timed = true;
  return "";
}

std::string GemmTuner::algorithm_for(const Key& key, int64_t m, const GemmLtProblem& p, const GemmLtAlignment& align,
                                     const GemmChoice& c, size_t workspace_bytes, cublasLtMatmulAlgo_t& out) {
  if (auto it = reused_.find({key, m}); it != reused_.end()) {
    out = it->second.first;
    return "";
  }
  cublasLtMatmulHeuristicResult_t check{};
  const bool fits = cublasLtMatmulAlgoCheck(handle_, p.op, p.a, p.b, p.c, p.c, &c.algo, &check) ==
                        CUBLAS_STATUS_SUCCESS &&
                    check.workspaceSize <= workspace_bytes;
  if (fits) {
    out = c.algo;
  } else {
    std::vector<cublasLtMatmulHeuristicResult_t> found;
    // The first usable of the heuristic's candidates (it drops those it marks unusable).
    if (std::string e = gemm_lt_candidates(handle_, p, align, workspace_bytes, kCandidates, found); !e.empty())
      return e;
    if (found.empty()) return "cuBLASLt: no algorithm for this shape";
    out = found[0].algo;
  }
  reused_.emplace(std::make_pair(key, m), std::make_pair(out, fits));
  return "";
}

std::string GemmTuner::run(const void* x, int64_t m, int64_t k, const void* w, int64_t n, void* y,
                           cudaDataType_t out_type, void* workspace, size_t workspace_bytes, cudaStream_t stream) {
  if (!handle_) return "cublasLtCreate failed";
  const auto shape = std::make_tuple(m, n, k, static_cast<int>(out_type));
  auto pit = problems_.find(shape);
  if (pit == problems_.end()) {
    auto p = std::make_unique<GemmLtProblem>(m, k, n, out_type);
    if (p->status != CUBLAS_STATUS_SUCCESS)
      return "cuBLASLt descriptors failed with status " + std::to_string(static_cast<int>(p->status));
    pit = problems_.emplace(shape, std::move(p)).first;
  }
  const GemmLtProblem& p = *pit->second;
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) return "cudaGetDevice failed";
  const GemmLtAlignment align = gemm_lt_alignment(x, w, y);
  const Key key{device, rows_class(m), n, k, static_cast<int>(out_type), align, workspace_bytes};
  cublasLtMatmulAlgo_t algo{};
  {
    // Held while choosing, so that two threads never time one shape twice or race on the map.
    Choices& c = choices();
    std::lock_guard<std::mutex> lock(c.mutex);
    auto cit = c.by_key.find(key);
    if (cit == c.by_key.end()) {
      GemmChoice choice;
      choice.m = m;
      if (std::string e = choose(p, align, x, w, y, workspace, workspace_bytes, stream, choice); !e.empty()) return e;
      if (choice.timed) ++timings_;
      cit = c.by_key.emplace(key, std::move(choice)).first;
    }
    algo = cit->second.algo;
    if (cit->second.m != m)
      if (std::string e = algorithm_for(key, m, p, align, cit->second, workspace_bytes, algo); !e.empty()) return e;
  }
  used_[key].insert(m);
  // The kept algorithm writes the call's output (after a tuning, the last candidate timed wrote it).
  const cublasStatus_t s = p.run(handle_, x, w, y, algo, workspace, workspace_bytes, stream);
  if (s != CUBLAS_STATUS_SUCCESS) return "cuBLASLt matmul failed with status " + std::to_string(static_cast<int>(s));
  return "";
}

bool GemmTuner::chosen(const void* x, int64_t m, int64_t k, const void* w, int64_t n, const void* y,
                       cudaDataType_t out_type, size_t workspace_bytes) const {
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) return false;
  const Key key{device, rows_class(m), n, k, static_cast<int>(out_type), gemm_lt_alignment(x, w, y), workspace_bytes};
  Choices& c = choices();
  std::lock_guard<std::mutex> lock(c.mutex);
  return c.by_key.count(key) > 0;
}

std::vector<std::string> GemmTuner::record_lines() const {
  std::vector<std::string> lines;
  Choices& all = choices();
  std::lock_guard<std::mutex> lock(all.mutex);
  for (const auto& [key, rows] : used_) {
    const GemmChoice& c = all.by_key.at(key);
    const auto& [device, m_class, n, k, type, align, ws] = key;
    char head[160];
    std::snprintf(head, sizeof head, "m %lld n %lld k %lld %s: candidate %d of %d", static_cast<long long>(c.m),
                  static_cast<long long>(n), static_cast<long long>(k), type_name(type), c.rank, c.candidates);
    char tail[96];
    const auto r = static_cast<size_t>(c.rank);
    if (c.timed && r < c.time_s.size() && !c.time_s.empty() && c.time_s[0] > 0)
      std::snprintf(tail, sizeof tail, ", %.3fx the first's time (timed)", c.time_s[r] / c.time_s[0]);
    else
      std::snprintf(tail, sizeof tail, " (%s)", c.timed ? "timed; the first failed" : "chosen in a capture, untimed");
    std::string line = std::string(head) + tail;
    // The class's other row counts this tuner ran, and whether the class's algorithm took them.
    for (const int64_t m : rows) {
      if (m == c.m) continue;
      const auto it = reused_.find({key, m});
      const bool kept = it != reused_.end() && it->second.second;
      line += "; m " + std::to_string(m) +
              (kept ? ": the same algorithm" : ": the heuristic's first (the class's did not fit)");
    }
    lines.push_back(line);
  }
  return lines;
}

}  // namespace yoco::cuda
