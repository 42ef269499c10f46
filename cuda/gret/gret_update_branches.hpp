#pragma once
// Side streams for the split decode step's state updates
// (gret_recurrent.hpp: launch_gret_state_update): each update is forked off
// the main stream after everything enqueued on it so far (so after the output
// step that reads the state), runs beside the kernels that follow, and is
// joined back where the caller must see it done: before anything overwrites
// the update's k, v or log γ, and before the end of the step. Works eagerly
// and under stream capture, where a fork and a join become graph edges (a
// side stream joins the capture by waiting on the fork event, and the capture
// may end only after join()).
//
// One side stream serves a runner, whose next layer joins the previous
// layer's update before its projection overwrites k and v; several let a
// benchmark's back-to-back layers run their updates side by side
// (round-robin over the streams; at least one).
//
// Never launch a programmatic dependent (overlap_previous) right after a
// join: whether a programmatic launch keeps a preceding event wait as a full
// dependency, eagerly or in a capture, is not documented, and the next output
// step would read the state the joined update writes. Let a plain kernel sit
// between them (the runner's projection GEMM does).
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

namespace yoco::cuda {

class GretUpdateBranches {
 public:
  // Creates nothing until the first update.
  explicit GretUpdateBranches(int streams = 1);
  GretUpdateBranches(const GretUpdateBranches&) = delete;
  GretUpdateBranches& operator=(const GretUpdateBranches&) = delete;
  ~GretUpdateBranches();

  // Creates the side streams and events (launch_update does it at its first
  // call otherwise). Call it before a stream capture: creating streams while
  // one is captured is not something to rely on.
  cudaError_t prepare();
  // launch_gret_state_update on the next side stream, after all work
  // enqueued on `main` so far.
  cudaError_t launch_update(cudaStream_t main, const __nv_bfloat16* k, const __nv_bfloat16* v, int64_t row_stride,
                            const float* log_gamma, float* state, int64_t batch, int64_t heads, int64_t head_dim);
  // Work enqueued on `main` after this waits for every update launched
  // before it; a no-op when none is outstanding.
  cudaError_t join(cudaStream_t main);
  // Whether updates were launched and not yet joined.
  bool outstanding() const;
  // Drops the outstanding updates without joining them: for a caller whose
  // stream capture failed and was ended, whose forks went with it.
  void forget();

 private:
  int count_;
  std::vector<cudaStream_t> side_;
  std::vector<cudaEvent_t> done_;  // the last update's completion, per side stream
  std::vector<bool> pending_;      // launched on that stream since the last join
  cudaEvent_t fork_ = nullptr;
  int next_ = 0;
  bool created_ = false;
  cudaError_t create_error_ = cudaSuccess;
};

}  // namespace yoco::cuda
