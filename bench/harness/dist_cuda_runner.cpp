// The sharded CUDA runners (YOCO, the Transformer) behind the DistRunner handle (dist_cuda_runner.hpp).
#if defined(YOCO_HAVE_DIST_CUDA)

#include "dist_cuda_runner.hpp"

#include <cuda_runtime.h>

#include "cuda_runner.hpp"
#include "cuda_shard_link.hpp"
#include "errors.hpp"
#include "shard_plan.hpp"
#include "transformer_cuda_model.hpp"

#include <new>

namespace yoco {

namespace {

class DistCudaRunner final : public DistRunner {
 public:
  DistCudaRunner(const ModelConfig& cfg, const cuda::CudaWeightSource& source, dist::Communicator& comm)
      : comm_(comm), link_(comm),
        runner_(std::make_unique<CudaRunner>(cfg.is_yoco() ? cuda::create_yoco_cuda_model(cfg, source, &link_)
                                                           : cuda::create_transformer_cuda_model(cfg, source, &link_))) {}

  const ModelConfig& config() const override { return runner_->config(); }
  Precision precision() const override { return runner_->precision(); }
  std::string architecture() const override {
    return runner_->architecture() + ", sequence sharded over " + std::to_string(comm_.size()) + " MPI ranks (" +
           comm_.backend() + ")";
  }
  dist::Communicator& communicator() const override { return comm_; }
  const std::map<std::string, dist::CommCount>& last_prefill_comm() const override { return prefill_comm_; }
  const std::map<std::string, dist::CommCount>& last_decode_comm() const override { return decode_comm_; }
  std::string sharding() const override {
    return runner_->config().is_yoco()
               ? "chunk-parallel YOCO on the GPU: contiguous shards of the prompt, one per rank"
               : "context-parallel Transformer on the GPU: ring attention with causal load balancing, two mirrored "
                 "chunks of 2R per rank";
  }
  ModelRunner* local_runner() const override { return runner_.get(); }

  Mat<double> forward(const TokenBatch& tokens, GretParadigm paradigm) const override {
    plan(tokens.length);
    return counted("a forward", prefill_comm_, [&] { return runner_->forward(tokens, paradigm); });
  }
  Mat<double> prefill(const TokenBatch& prompt, int64_t max_new_tokens, int64_t prefill_chunk) override {
    plan(prompt.length);
    return counted("a prefill", prefill_comm_, [&] { return runner_->prefill(prompt, max_new_tokens, prefill_chunk); });
  }
  void run_prefill(const TokenBatch& prompt, int64_t max_new_tokens, int64_t prefill_chunk) override {
    plan(prompt.length);
    counted("a prefill", prefill_comm_, [&] {
      runner_->run_prefill(prompt, max_new_tokens, prefill_chunk);
      return Mat<double>();
    });
  }
  Mat<double> decode_step(const std::vector<int64_t>& tokens) override {
    return counted("a decode step", decode_comm_, [&] { return runner_->decode_step(tokens); });
  }
  void run_decode_step(const std::vector<int64_t>& tokens) override {
    counted("a decode step", decode_comm_, [&] {
      runner_->run_decode_step(tokens);
      return Mat<double>();
    });
  }
  void skip_positions(int64_t n) override { runner_->skip_positions(n); }
  // This rank's device arena (the last rank's cache holds the generated rows).
  MemoryBreakdown memory() const override { return runner_->memory(); }
  int64_t position() const override { return runner_->position(); }
  int64_t capacity() const override { return runner_->capacity(); }

 private:
  // The link's plan for a prompt of n tokens: YOCO one contiguous shard a
  // rank, the Transformer two chunks of 2R (as the CPU runners plan them).
  void plan(int64_t n) const {
    const dist::ShardPlan p = dist::ShardPlan::for_prompt(n, comm_.size(), parts_per_rank(runner_->config()));
    if (runner_->config().is_yoco()) link_.plan(p);
    else link_.plan_ring(p);
  }
  // The call's bytes by label. A device out of memory on one rank ends the
  // job: the other ranks would wait for it in their next collective, and the
  // ranks' buffers differ (the last holds the generated rows), so they need
  // not fail together.
  template <class F>
  Mat<double> counted(const char* what, std::map<std::string, dist::CommCount>& into, F&& f) const {
    comm_.reset_counts();
    Mat<double> out;
    try {
      out = f();
    } catch (const std::bad_alloc& e) {
      comm_.end_job(std::string("out of device memory in ") + what + " (" + e.what() +
                    "); a sharded run cannot go on one rank short");
    }
    into = comm_.counts();
    return out;
  }

  dist::Communicator& comm_;
  mutable dist::CudaShardLink link_;  // before the runner: the model holds a pointer to it
  std::unique_ptr<CudaRunner> runner_;
  mutable std::map<std::string, dist::CommCount> prefill_comm_, decode_comm_;
};

}  // namespace

std::unique_ptr<DistRunner> create_dist_cuda_runner(const ModelConfig& cfg, const cuda::CudaWeightSource& source,
                                                    dist::Communicator& comm) {
  cfg.validate();
  const std::string why = cuda::cuda_model_unsupported(cfg);
  if (!why.empty())
    throw InputError(why + ": the CUDA runners cannot run " + cfg.name + " (the CPU reference can: --device cpu)");
  use_rank_device(comm);
  return std::make_unique<DistCudaRunner>(cfg, source, comm);
}

int use_rank_device(dist::Communicator& comm) {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices < 1)
    throw InputError("--device cuda under mpirun: rank " + std::to_string(comm.rank()) + " sees no CUDA device");
  // One GPU a rank where there are enough; ranks beyond share them (MPI, host-staged).
  if (cudaSetDevice(comm.rank() % devices) != cudaSuccess)
    throw InputError("--device cuda under mpirun: rank " + std::to_string(comm.rank()) + " cannot use device " +
                     std::to_string(comm.rank() % devices));
  return (comm.size() + devices - 1) / devices;
}

}  // namespace yoco

#endif  // YOCO_HAVE_DIST_CUDA
