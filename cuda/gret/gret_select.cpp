#include "gret/gret_select.hpp"

#include <cstdlib>
#include <string>

#include "errors.hpp"
#include "gret/gret_gate.hpp"
#include "gret/gret_recurrent.hpp"

namespace yoco::cuda {

namespace {

struct NamedChunk {
  GretChunkVariant variant;
  const char* name;
};
constexpr NamedChunk kChunkNames[] = {{GretChunkVariant::automatic, "automatic"},
                                      {GretChunkVariant::v2, "v2"},
                                      {GretChunkVariant::v3, "v3"},
                                      {GretChunkVariant::v5, "v5"},
                                      {GretChunkVariant::v6, "v6"},
                                      {GretChunkVariant::v7, "v7"}};

// Retired variants and what replaced them (their last code: git tag retired/<family>-<name>).
struct Retired {
  const char* name;
  const char* successor;
  const char* why;
};
constexpr Retired kRetiredChunk[] = {{"v3w16", "v3", "it lost to v3 at every measured shape (H100, run-12)"}};

// The measured default of the decode step (H100, run-12: the deferred step
// took 45.0 us for 13 layers at B1 24x128 against the eager step's 29.8).
constexpr GretDecodeVariant kDefaultDecode = GretDecodeVariant::eager;

std::string env(const char* name) {
  const char* e = std::getenv(name);
  return e ? std::string(e) : std::string();
}

}  // namespace

const char* gret_chunk_variant_name(GretChunkVariant v) {
  for (const NamedChunk& n : kChunkNames)
    if (n.variant == v) return n.name;
  return "?";
}

std::optional<GretChunkVariant> gret_chunk_variant_named(std::string_view name) {
  for (const NamedChunk& n : kChunkNames)
    if (name == n.name) return n.variant;
  return std::nullopt;
}

GretChunkVariant gret_chunk_variant_from_env() {
  const std::string v = env("YOCO_GRET_CHUNK");
  if (v.empty()) return GretChunkVariant::automatic;
  if (const auto named = gret_chunk_variant_named(v)) return *named;
  for (const Retired& r : kRetiredChunk)
    if (v == r.name)
      throw InputError("YOCO_GRET_CHUNK is '" + v + "': that variant was retired (" + r.why + "): use " +
                       r.successor);
  throw InputError("YOCO_GRET_CHUNK is '" + v + "': it must be one of v2, v3, v5, v6, v7, automatic (or unset)");
}

bool gret_chunk_supported(int64_t head_dim) { return gret_slice_supported(head_dim, 16); }

GretChunkPlan select_gret_chunk(const GretChunkShape& s, int sm_count, GretChunkVariant variant, int chunk) {
  switch (variant) {
    case GretChunkVariant::v2: return plan_gret_chunk_v2(s, sm_count);
    case GretChunkVariant::v3: return plan_gret_chunk_v3(s, sm_count);
    case GretChunkVariant::v5: return plan_gret_chunk_v5(s, sm_count, chunk == 64 ? 128 : chunk);
    case GretChunkVariant::v6: return plan_gret_chunk_v6(s, sm_count);
    case GretChunkVariant::v7: return plan_gret_chunk_v7(s, sm_count);
    case GretChunkVariant::automatic: break;
  }
  return plan_gret_chunk(s, sm_count, chunk);
}

const char* gret_decode_variant_name(GretDecodeVariant v) {
  switch (v) {
    case GretDecodeVariant::eager: return "eager";
    case GretDecodeVariant::deferred: return "deferred";
    case GretDecodeVariant::split: return "split";
    default: return "automatic";
  }
}

GretDecodeVariant gret_decode_variant_from_env() {
  const std::string v = env("YOCO_GRET_DECODE");
  if (v.empty() || v == "automatic") return GretDecodeVariant::automatic;
  if (v == "eager") return GretDecodeVariant::eager;
  if (v == "deferred") return GretDecodeVariant::deferred;
  if (v == "split") return GretDecodeVariant::split;
  throw InputError("YOCO_GRET_DECODE is '" + v +
                   "': it must be 'split', 'deferred', 'eager' or 'automatic' (or unset)");
}

bool gret_decode_supported(int64_t head_dim) { return gret_step_supported(head_dim); }

GretDecodeVariant select_gret_decode(int64_t head_dim, GretDecodeVariant variant) {
  const GretDecodeVariant v = variant == GretDecodeVariant::automatic ? kDefaultDecode : variant;
  if ((v == GretDecodeVariant::deferred || v == GretDecodeVariant::split) && !gret_fused_step_supported(head_dim))
    return GretDecodeVariant::eager;
  return v;
}

int64_t gret_decode_state_extra_bytes(GretDecodeVariant variant, int64_t batch, int64_t heads, int64_t head_dim) {
  return select_gret_decode(head_dim, variant) == GretDecodeVariant::deferred
             ? gret_pending_bytes(batch, heads, head_dim)
             : 0;
}

cudaError_t launch_gret_decode_norm_gate(GretDecodeVariant variant, const __nv_bfloat16* q, const __nv_bfloat16* k,
                                         const __nv_bfloat16* v, int64_t row_stride, const float* log_gamma,
                                         float* state, void* pending, const __nv_bfloat16* g, int64_t g_stride,
                                         float eps, __nv_bfloat16* out, int64_t batch, int64_t heads,
                                         int64_t head_dim, cudaStream_t stream, bool overlap_previous,
                                         GretUpdateBranches* branches) {
  const GretDecodeVariant selected = select_gret_decode(head_dim, variant);
  if (selected == GretDecodeVariant::deferred)
    return launch_gret_deferred_step_norm_gate(q, k, v, row_stride, log_gamma, state, pending, g, g_stride, eps, out,
                                               batch, heads, head_dim, stream, overlap_previous);
  if (selected == GretDecodeVariant::split) {
    if (branches == nullptr) return cudaErrorInvalidValue;
    const cudaError_t e = launch_gret_output_step_norm_gate(q, k, v, row_stride, log_gamma, state, g, g_stride, eps,
                                                            out, batch, heads, head_dim, stream, overlap_previous);
    if (e != cudaSuccess) return e;
    return branches->launch_update(stream, k, v, row_stride, log_gamma, state, batch, heads, head_dim);
  }
  if (gret_fused_step_supported(head_dim))
    return launch_gret_recurrent_step_norm_gate(q, k, v, row_stride, log_gamma, state, g, g_stride, eps, out, batch,
                                                heads, head_dim, stream);
  const cudaError_t e = launch_gret_recurrent_step(q, k, v, row_stride, log_gamma, state, out, batch, heads, head_dim,
                                                   stream);
  if (e != cudaSuccess) return e;
  return launch_gret_norm_gate(out, g, g_stride, batch, heads, head_dim, eps, out, stream);
}

}  // namespace yoco::cuda
