#pragma once
// Which gated-retention kernels run: one selector per kernel family (the
// chunkwise prefill, the decode step), each answering "supported?" and
// "which?" together, so runners ask for `automatic` and never name a variant.
// The per-run overrides are read here and nowhere else: YOCO_GRET_CHUNK
// (a chunk variant's name) and YOCO_GRET_DECODE (eager | deferred | split); a caller
// reads them once, when it is made (cuda/README.md, the variant tables).
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <optional>
#include <string_view>

#include "gret/gret_plan.hpp"
#include "gret/gret_update_branches.hpp"

namespace yoco::cuda {

// ---- chunkwise prefill: every compiled variant, by the name it has everywhere
enum class GretChunkVariant { automatic, v2, v3, v5, v6, v7 };

// Every compiled variant at every chunk it serves, with its plan number
// (GretChunkPlan::kernel) and status (cuda/README.md): the GPU tests and the
// kernel benchmark iterate this table, so a new variant is one row.
struct GretChunkVariantRow {
  GretChunkVariant variant;
  int chunk;
  int plan_kernel;
  const char* name;
  const char* status;  // live, ladder (the previous default) or candidate
};
inline constexpr GretChunkVariantRow kGretChunkVariants[] = {
    {GretChunkVariant::v2, 64, 2, "v2", "live"},       {GretChunkVariant::v3, 64, 3, "v3", "ladder"},
    {GretChunkVariant::v5, 128, 5, "v5 C128", "live"}, {GretChunkVariant::v5, 256, 5, "v5 C256", "live"},
    {GretChunkVariant::v6, 64, 6, "v6", "live"},       {GretChunkVariant::v7, 64, 7, "v7", "candidate"},
};

const char* gret_chunk_variant_name(GretChunkVariant v);
std::optional<GretChunkVariant> gret_chunk_variant_named(std::string_view name);
// YOCO_GRET_CHUNK's variant (automatic when unset or empty); InputError naming
// the variable and the accepted names for anything else, and saying what
// replaced a retired variant (v3w16: v3).
GretChunkVariant gret_chunk_variant_from_env();

// A chunkwise prefill exists for this head dim (v2 serves 64, 128, 256; the
// faster variants 128 only).
bool gret_chunk_supported(int64_t head_dim);
// The plan the launch runs for `shape`: automatic is the measured default
// (plan_gret_chunk: v6 at head dim 128, chunk 64; v5 for chunks of 128/256;
// v2 elsewhere); a named variant where it serves the shape, else the default.
// plan.kernel and plan.chunk say what runs.
GretChunkPlan select_gret_chunk(const GretChunkShape& shape, int sm_count,
                                GretChunkVariant variant = GretChunkVariant::automatic, int chunk = 64);

// ---- decode step
enum class GretDecodeVariant { automatic, eager, deferred, split };

const char* gret_decode_variant_name(GretDecodeVariant v);
// YOCO_GRET_DECODE's variant (automatic when unset or empty); InputError otherwise.
GretDecodeVariant gret_decode_variant_from_env();

// A decode step exists for this head dim.
bool gret_decode_supported(int64_t head_dim);
// eager, deferred or split: automatic is the measured default (eager: the
// deferred step lost on the H100, cuda/gret/NOTES-gret_decode.md; split is not
// yet measured); deferred and split only where the fused step serves the head
// dim, else eager.
GretDecodeVariant select_gret_decode(int64_t head_dim, GretDecodeVariant variant = GretDecodeVariant::automatic);

// Bytes per gRet layer the decode variant keeps beside the fp32 state, 16-byte
// aligned, zeroed with the state at each prefill (the deferred step's pending
// records, gret_pending.hpp; 0 for the eager step).
int64_t gret_decode_state_extra_bytes(GretDecodeVariant variant, int64_t batch, int64_t heads, int64_t head_dim);

// One decode step of a gRet layer with its per-head RMSNorm and gate (out =
// silu(g) * norm(o)), by the variant select_gret_decode returned: deferred
// (the fused deferred step; `pending` holds its records, and overlap_previous
// makes it a programmatic dependent of the kernel before it), split (the fused
// output step, overlap_previous as for deferred, then the state update forked
// onto `branches`: the caller joins it before k, v or log γ are overwritten
// and before the step ends; cudaErrorInvalidValue without branches), or eager
// (the fused step where it serves the head dim, else the step, o into `out`,
// then the norm and gate in place). cuda/gret/gret_recurrent.hpp has each
// contract.
cudaError_t launch_gret_decode_norm_gate(GretDecodeVariant variant, const __nv_bfloat16* q, const __nv_bfloat16* k,
                                         const __nv_bfloat16* v, int64_t row_stride, const float* log_gamma,
                                         float* state, void* pending, const __nv_bfloat16* g, int64_t g_stride,
                                         float eps, __nv_bfloat16* out, int64_t batch, int64_t heads,
                                         int64_t head_dim, cudaStream_t stream, bool overlap_previous,
                                         GretUpdateBranches* branches = nullptr);

}  // namespace yoco::cuda
