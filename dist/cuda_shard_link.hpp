#pragma once
// The CUDA YOCO runner's shard link (cuda/runner/shard_link.hpp) over a
// Communicator: the same exchanges as the CPU reference's ShardedYoco
// (dist/yoco_sharded.hpp), on device buffers staged through the host. With
// the MPI backend the collectives run on host memory (ranks may share one
// GPU); with NCCL they run on device buffers (one GPU a rank), the host
// copies kept because the scan over the ranks' states and the log-sum-exp
// combine run on the host in double (a few KB to a few MB a layer; the
// prefill's GEMMs are seconds at the lengths where sharding pays).
//
// Collective labels as on the CPU: gret_state (B x Hs x (2 + D x D) fp32 a
// rank, the shard's total log decay, local state and a pad word per head),
// swa_window (B x (W - 1) x 2d bf16 a rank), cross_partial (B x H x (Da + 2)
// doubles a rank: its FlashDecoding splits merged into one (m, l, output)),
// last_hidden (B x d fp32, from the last rank; the Transformer's B x V logits
// from rank 0); forward's kv_gather (B x n x 2 kvw bf16 a rank, padded to the
// longest shard) and logits (B x n x V fp32). The Transformer's ring_kv (a
// rank's two chunks' keys | values, B x rows x 2 kvw bf16, to the next rank
// per ring step: device to device with NCCL, through the host with MPI) and
// decode_partial (as cross_partial).
#include <cstdint>
#include <string>
#include <vector>

#include "communicator.hpp"
#include "runner/shard_link.hpp"
#include "shard_plan.hpp"

namespace yoco::dist {

class CudaShardLink final : public cuda::ShardLink {
 public:
  // `comm` outlives the link. Plan a prompt with plan() before each prefill.
  explicit CudaShardLink(Communicator& comm);
  ~CudaShardLink() override;
  CudaShardLink(const CudaShardLink&) = delete;
  CudaShardLink& operator=(const CudaShardLink&) = delete;

  // The shards of the next prompt (plan.ranks() == comm.size()): YOCO's.
  void plan(const ShardPlan& plan);
  // The Transformer's: 2R chunks, rank r holding chunks r and 2R-1-r.
  void plan_ring(const ShardPlan& chunks);
  const ShardPlan& shard_plan() const { return plan_; }
  Communicator& communicator() const { return comm_; }

  const cuda::Shard& shard() const override { return shard_; }
  const cuda::RingShard& ring_shard() const override { return ring_; }
  bool gret_state_in(int64_t layer, float* state, const float* log_gamma, int64_t batch, int64_t n, int64_t heads,
                     int64_t head_dim, cudaStream_t stream) override;
  void swa_window_in(int64_t layer, const __nv_bfloat16* kv, int64_t stride, int64_t batch, int64_t n, int64_t d,
                     int64_t window, __nv_bfloat16* ring, cudaStream_t stream) override;
  void attention_across(const float* part_o, const float* part_lse, int64_t batch, int64_t heads, int splits,
                        int64_t head_dim, __nv_bfloat16* out, const char* label, cudaStream_t stream) override;
  void hidden_from(int root, float* x, int64_t elems, cudaStream_t stream) override;
  void ring_pass(const void* send, int64_t send_bytes, void* recv, int64_t recv_bytes, cudaStream_t stream) override;
  void gather_ring_rows(const void* mine, void* all, int64_t batch, int64_t row_bytes, cudaStream_t stream) override;
  void gather_rows(const void* mine, int64_t mine_seq_rows, void* all, int64_t all_seq_rows, int64_t batch,
                   int64_t row_bytes, const char* label, cudaStream_t stream) override;

 private:
  // Host buffers in and out, whatever the backend wants.
  void allgather(const void* send, int64_t bytes, void* recv, const std::string& label);
  void broadcast(void* buf, int64_t bytes, int root, const std::string& label);
  // NCCL's device staging buffers, grown on demand.
  void* device_staging(int which, int64_t bytes);

  Communicator& comm_;
  ShardPlan plan_;
  cuda::Shard shard_;
  cuda::RingShard ring_;
  bool device_collectives_;
  void* staging_[2] = {nullptr, nullptr};
  int64_t staging_bytes_[2] = {0, 0};
};

}  // namespace yoco::dist
