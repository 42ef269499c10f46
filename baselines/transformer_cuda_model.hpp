#pragma once
// The GQA Transformer baseline on the GPU (DESIGN.md §3-4), the pair of
// baselines/transformer_model.hpp TransformerModel: per layer RMSNorm, one
// fused [Wq; Wk; Wv] GEMM, half-split RoPE (theta^(-2i/D)), the new keys and
// values written into that layer's KV cache (sized for exactly prompt +
// generation), flash prefill with each chunk's queries at their absolute
// positions over the cache rows [0, s + n), FlashDecoding at decode; fused
// add + RMSNorm, [W1; W3] as one GEMM; the LM head on the last positions only.
// The interface, errors and graph behaviour are cuda/runner/cuda_model.hpp's.
//
// Memory: per layer one kv_cache buffer [B, prompt + generation, 2 Hkv Da]
// (K | V in one row, so the fused projection's k|v columns go in with one
// copy); activations (one chunk's B * n rows, logits, the decode step's
// buffers, cuBLAS's workspace) are kept between calls and grow to the largest
// request; forward() and an out-of-memory give them back. The decode graph is
// kept across prefills that keep the caches, and re-captured when the caches
// are allocated anew, FlashDecoding's splits change, or a scratch buffer moved.
#include <memory>

#include "runner/cuda_model.hpp"

namespace yoco::cuda {

class ShardLink;  // runner/shard_link.hpp

// With a `link`, this rank's part of a sequence split across ranks by context
// parallelism (the link's RingShard: two mirrored chunks of 2R): prefill
// takes the whole prompt and runs the rank's two chunks as one step, each
// layer's attention by ring attention with causal load balancing (the keys
// and values pass around the ranks; the cache stays sharded); decode steps
// run eagerly, every rank the whole layer stack on the new token and its share
// of the attention, combined across ranks (rank 0 keeps the generated rows);
// forward gathers the logits. Every rank gets the same logits.
std::unique_ptr<CudaModel> create_transformer_cuda_model(const ModelConfig& cfg, const CudaWeightSource& source,
                                                         ShardLink* link = nullptr);

// Device bytes of a generation on this runner (weights, per-layer caches for
// prompt + gen tokens, a prefill chunk's and the decode step's buffers, the
// cuBLAS workspace), by the runner's own buffer formulas; see
// yoco_generation_device_bytes.
double transformer_generation_device_bytes(const ModelConfig& cfg, double batch, double prompt, double gen,
                                           double chunk);

}  // namespace yoco::cuda
