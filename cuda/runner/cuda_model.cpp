#include "runner/cuda_model.hpp"

#include <stdexcept>

#include "attention/flash_decode.hpp"
#include "attention/flash_prefill.hpp"
#include "gret/gret_select.hpp"
#include "runner/runner_support.hpp"

namespace yoco::cuda {

std::string cuda_model_unsupported(const ModelConfig& c) {
  const std::string dims = " (the CUDA kernels serve head dims 64, 128 and 256)";
  const int64_t group = c.n_attn_kv_heads > 0 ? c.n_attn_heads / c.n_attn_kv_heads : 0;
  if (c.dim % 8 != 0 || c.hidden_dim % 8 != 0)
    return "d " + std::to_string(c.dim) + " and FFN width " + std::to_string(c.hidden_dim) +
           " must be multiples of 8 (16-byte rows)";
  if (c.n_attn_heads < 1 || c.n_attn_kv_heads < 1 || c.n_attn_heads % c.n_attn_kv_heads != 0)
    return "query heads " + std::to_string(c.n_attn_heads) + " must be a multiple of KV heads " +
           std::to_string(c.n_attn_kv_heads);
  if (!flash_decode_supported(c.attn_head_dim(), 1) || !flash_prefill_supported(c.attn_head_dim()))
    return std::string(c.is_yoco() ? "cross-attention" : "attention") + " head dim " +
           std::to_string(c.attn_head_dim()) + dims;
  if (!flash_decode_supported(c.attn_head_dim(), group))
    return "GQA group " + std::to_string(group) + " (query heads per KV head) is above what FlashDecoding serves (8)";
  if (c.is_yoco()) {
    if (c.n_self_heads < 1 || c.dim % c.n_self_heads != 0)
      return "d " + std::to_string(c.dim) + " is not a multiple of the self-decoder heads " +
             std::to_string(c.n_self_heads);
    const int64_t D = c.self_head_dim();
    const bool served = c.self_decoder() == SelfDecoderKind::gret
                            ? gret_chunk_supported(D) && gret_decode_supported(D)
                            : flash_prefill_supported(D) && flash_decode_supported(D, 1);
    if (!served)
      return std::string(c.self_decoder() == SelfDecoderKind::gret ? "gRet" : "SWA") + " head dim " +
             std::to_string(D) + dims;
  }
  return "";
}

CudaModel::CudaModel() : backend_(cuda_backend()), arena_(*backend_) {
  check_cuda(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "create the model's stream");
}

CudaModel::~CudaModel() {
  if (stream_) {
    cudaStreamSynchronize(stream_);
    cudaStreamDestroy(stream_);
  }
}

void CudaModel::synchronize() { check_cuda(cudaStreamSynchronize(stream_), "the model's stream"); }

}  // namespace yoco::cuda
