#include "gret/gret_update_branches.hpp"

#include <algorithm>

#include "gret/gret_recurrent.hpp"

namespace yoco::cuda {

GretUpdateBranches::GretUpdateBranches(int streams) : count_(std::max(1, streams)) {}

GretUpdateBranches::~GretUpdateBranches() {
  for (cudaStream_t s : side_) cudaStreamDestroy(s);
  for (cudaEvent_t e : done_) cudaEventDestroy(e);
  if (fork_) cudaEventDestroy(fork_);
}

cudaError_t GretUpdateBranches::prepare() {
  if (created_) return create_error_;
  created_ = true;
  // Timing is never read from these events; disabling it makes record and wait cheaper.
  cudaError_t e = cudaEventCreateWithFlags(&fork_, cudaEventDisableTiming);
  for (int i = 0; e == cudaSuccess && i < count_; ++i) {
    cudaStream_t s = nullptr;
    cudaEvent_t d = nullptr;
    // Non-blocking: the legacy default stream must not order the side streams.
    e = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    if (e == cudaSuccess) side_.push_back(s);
    if (e == cudaSuccess) e = cudaEventCreateWithFlags(&d, cudaEventDisableTiming);
    if (e == cudaSuccess) done_.push_back(d);
  }
  pending_.assign(done_.size(), false);
  create_error_ = e;  // what a later call reports too: the object is unusable after a failed creation
  return e;
}

cudaError_t GretUpdateBranches::launch_update(cudaStream_t main, const __nv_bfloat16* k, const __nv_bfloat16* v,
                                              int64_t row_stride, const float* log_gamma, float* state,
                                              int64_t batch, int64_t heads, int64_t head_dim) {
  if (const cudaError_t e = prepare(); e != cudaSuccess) return e;
  const auto i = static_cast<size_t>(next_);
  next_ = (next_ + 1) % count_;
  cudaError_t e = cudaEventRecord(fork_, main);
  if (e == cudaSuccess) e = cudaStreamWaitEvent(side_[i], fork_, 0);
  if (e != cudaSuccess) return e;
  // Once the side stream waits on the fork it belongs to a capture in progress, which can end only after it is
  // joined: so its completion is recorded (and joinable) even when the launch itself fails.
  const cudaError_t launched =
      launch_gret_state_update(k, v, row_stride, log_gamma, state, batch, heads, head_dim, side_[i]);
  e = cudaEventRecord(done_[i], side_[i]);
  if (e == cudaSuccess) pending_[i] = true;
  return launched != cudaSuccess ? launched : e;
}

cudaError_t GretUpdateBranches::join(cudaStream_t main) {
  cudaError_t first = cudaSuccess;
  for (size_t i = 0; i < pending_.size(); ++i) {
    if (!pending_[i]) continue;
    const cudaError_t e = cudaStreamWaitEvent(main, done_[i], 0);
    if (first == cudaSuccess) first = e;
    pending_[i] = false;
  }
  return first;
}

void GretUpdateBranches::forget() { std::fill(pending_.begin(), pending_.end(), false); }

bool GretUpdateBranches::outstanding() const {
  return std::find(pending_.begin(), pending_.end(), true) != pending_.end();
}

}  // namespace yoco::cuda
