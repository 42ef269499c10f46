// The runners' choices a prediction follows, and a row's notes read for them (runner_layout.hpp).
#include "runner_layout.hpp"

#include <cctype>
#include <string>

#include "attention/attention_tiles.hpp"
#include "attention/prefill_version.hpp"
#include "ops/gemm_swiglu_plan.hpp"
#include "runner/launch_count.hpp"

namespace yoco::cost {

RunnerLayout current_runner_layout() {
  RunnerLayout l{cuda::kBatchedGlobalKvByDefault, cuda::kDeltaInNormedRows, cuda::kFfnUpFusedByDefault};
  l.shared_sublayers = cuda::kSharedSublayerBuffers;
  l.residual_per_layer = cuda::kResidualPerLayerByDefault;
  return l;
}

// The whole number right after the first `words` in `notes` that digits
// follow (as reports/yocoreport/chunks.py reads them); `absent` where none do.
static int64_t number_after(const std::string& notes, const std::string& words, int64_t absent) {
  for (size_t at = notes.find(words); at != std::string::npos; at = notes.find(words, at + 1)) {
    int64_t n = 0;
    bool any = false;
    for (size_t i = at + words.size();
         i < notes.size() && std::isdigit(static_cast<unsigned char>(notes[i])) && n < (int64_t{1} << 50); ++i) {
      n = 10 * n + (notes[i] - '0');
      any = true;
    }
    if (any) return n;
  }
  return absent;
}

RunnerLayout runner_layout_of_notes(const std::string& notes) {
  RunnerLayout l{notes.find("global K/V batched") != std::string::npos,
                 notes.find("delta in the normed rows") != std::string::npos,
                 notes.find(cuda::kFfnUpFusedNote) != std::string::npos,
                 number_after(notes, cuda::kFfnRowBlocksNote, 0)};
  l.shared_sublayers = notes.find(cuda::kSharedSublayerNote) != std::string::npos;
  // The runners write it only where they take it (bench/harness/cuda_backend.cpp, residual_note).
  l.residual_per_layer = notes.find(cuda::kResidualPerLayerNote) != std::string::npos;
  // The CUDA runners write it since the calibration prices versions (bench/harness/cuda_backend.cpp).
  const int64_t v = number_after(notes, cuda::kAttentionPrefillNote, 0);
  l.attention_prefill_version = v >= 1 && v <= cuda::kFlashPrefillVersions ? static_cast<int>(v) : 0;
  return l;
}

std::string runner_layout_note(const RunnerLayout& layout) {
  std::string note;
  if (layout.ffn_up_fused) note += std::string("; ") + cuda::kFfnUpFusedNote;
  if (layout.ffn_rows > 0) note += "; " + std::string(cuda::kFfnRowBlocksNote) + std::to_string(layout.ffn_rows);
  if (!layout.shared_sublayers && cuda::kSharedSublayerBuffers) note += std::string("; ") + cuda::kApartSublayerNote;
  if (layout.residual_per_layer != cuda::kResidualPerLayerByDefault && layout.residual_per_layer)
    note += std::string("; ") + cuda::kResidualPerLayerNote;
  return note;
}

int64_t prefill_chunk_of_notes(const std::string& notes) {
  const int64_t c = number_after(notes, "prefill chunk ", kDefaultPrefillChunk);
  return c > 0 ? c : kDefaultPrefillChunk;
}

const char* ffn_up_fused_note() { return cuda::kFfnUpFusedNote; }

KernelView runner_kernels(const ModelConfig& cfg, const RunnerLayout& layout) {
  KernelView k;
  k.attention_tile_rows = cuda::attn::kPrefillTileRows;
  // Served: gemm_swiglu::unsupported's shape rules for a step of that many rows (the device is the runner's).
  const cuda::gemm_swiglu::Shape s{cuda::gemm_swiglu::kMinRowsToFuse, cfg.dim, cfg.hidden_dim, cfg.dim, cfg.hidden_dim};
  if (layout.ffn_up_fused && cuda::gemm_swiglu::unsupported(s) == nullptr)
    k.ffn_up_fused_from_rows = cuda::gemm_swiglu::kMinRowsToFuse;
  // YOCO's runner keeps a store each sublayer where its FFN runs in row blocks or fused (its input would
  // not fit the hidden rows' buffer, or would be read from the buffer it writes: yoco_self_decoder.cpp).
  k.residual_per_layer =
      layout.residual_per_layer && !(cfg.is_yoco() && (layout.ffn_rows > 0 || layout.ffn_up_fused));
  return k;
}

}  // namespace yoco::cost
