#pragma once
// Causal (optionally sliding-window) GQA prefill attention on tensor cores,
// FlashAttention style: online softmax in the exp2 domain with the scale folded
// in, key blocks outside the visible band never loaded, the mask applied only
// on blocks cut by the diagonal or the window edge. ↔ reference attention()
// (reference/ops.hpp). Variants (cuda/attention/NOTES-flash_prefill.md):
// v1 mma.sync, any head dim 64/128/256 and architecture; v2 wgmma (head dim
// 128, sm_90a); v3 v2's maths fed by a TMA producer warp through mbarriers.
//
// Queries are bottom-right aligned (chunked prefill): query row i of sequence b
// sits at absolute position q_start[b] + i and sees key j iff j <= q_start[b] + i
// and (window == 0 or j > q_start[b] + i - window). Index maths:
// cuda/attention/attention_tiles.hpp (proved on the CPU by tests/test_attention_tiles.cpp).
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace yoco::cuda {

struct PrefillAttentionShape {
  int64_t batch = 1, n_heads = 0, n_kv_heads = 0, head_dim = 0;  // head_dim 64, 128 or 256; H % Hkv == 0
  int64_t q_rows = 0;    // query rows per sequence in the q/o buffers
  int64_t capacity = 0;  // key/value rows per sequence in the k/v buffers
  // Elements between consecutive rows (>= H*D and >= Hkv*D, multiples of 8), so q, k, v can sit
  // inside fused projection outputs; o rows are dense H*D.
  int64_t q_stride = 0, kv_stride = 0;
  int64_t window = 0;  // 0: causal only; else sliding window W (the query sees itself and W-1 keys back)
  float scale = 0;     // usually head_dim^-1/2; must be finite and > 0
};

// q: [batch, q_rows, q_stride] bf16; row i of sequence b is at absolute position
//    q_start[b] + i and is valid for i < q_len[b] (q_len[b] <= q_rows).
// k, v: [batch, capacity, kv_stride] bf16; row p holds position p; q_start[b] + q_len[b] <= capacity.
//    Query head h reads KV head h / (H / Hkv) at columns [kvh*D, kvh*D + D).
// q_start, q_len: device int64 arrays [batch].
// o: [batch, q_rows, H*D] bf16 (rows i >= q_len[b] are left untouched).
// lse: optional fp32 [batch, H, q_rows]: natural-log log-sum-exp of each valid row's scaled scores
//    (nullptr: not written).
// q, k, v, o must be 16-byte aligned. Returns cudaErrorInvalidValue on a bad shape or alignment,
// else the launch's error. Asynchronous on `stream`.
cudaError_t launch_flash_prefill(const __nv_bfloat16* q, const __nv_bfloat16* k, const __nv_bfloat16* v,
                                 const int64_t* q_start, const int64_t* q_len, const PrefillAttentionShape& s,
                                 __nv_bfloat16* o, float* lse, cudaStream_t stream);

// Variant dispatch: launch_flash_prefill runs v3 where flash_prefill_v2_supported(head_dim) (128)
// and the current device is compute capability 9.0, else v1 (kHopperPrefillVersion and
// flash_prefill_version in attention/prefill_version.hpp; cuda/README.md's variant table has the evidence).
// The entry points below run one variant explicitly (same contract, same errors; v2 and v3 also
// return cudaErrorInvalidValue for a head dim they do not serve).
//
// v1 alone also serves q_start[b] + q_len[b] > capacity with window == 0: positions at or past
// `capacity` hold no key, so a query sees every row [0, capacity) before it. (Not with a window:
// the parameters clamp a window >= capacity to none, which is right only inside the contract.) Ring attention
// (baselines/transformer_ring.cpp) attends a block of keys that wholly precedes its queries
// this way: keys of chunk c in a [batch, len(c), kv_stride] buffer, q_start = begin(q) - begin(c)
// >= len(c), every key visible. (v2 and v3 keep the contract: they may visit blocks past the cache.)
cudaError_t launch_flash_prefill_v1(const __nv_bfloat16* q, const __nv_bfloat16* k, const __nv_bfloat16* v,
                                    const int64_t* q_start, const int64_t* q_len, const PrefillAttentionShape& s,
                                    __nv_bfloat16* o, float* lse, cudaStream_t stream);
cudaError_t launch_flash_prefill_v2(const __nv_bfloat16* q, const __nv_bfloat16* k, const __nv_bfloat16* v,
                                    const int64_t* q_start, const int64_t* q_len, const PrefillAttentionShape& s,
                                    __nv_bfloat16* o, float* lse, cudaStream_t stream);
// v3: warp-specialised (TMA producer warp, mbarrier rings, no CTA barrier in the loop). Same head
// dims as v2; also returns cudaErrorInvalidValue where TMA cannot address a buffer (a row index
// of 2^31 or more) and cudaErrorNotSupported where the driver lacks cuTensorMapEncodeTiled.
cudaError_t launch_flash_prefill_v3(const __nv_bfloat16* q, const __nv_bfloat16* k, const __nv_bfloat16* v,
                                    const int64_t* q_start, const int64_t* q_len, const PrefillAttentionShape& s,
                                    __nv_bfloat16* o, float* lse, cudaStream_t stream);
// Head dims v2 and v3 run (128 today).
bool flash_prefill_v2_supported(int64_t head_dim);

// Every compiled prefill variant, by the name it has everywhere, with its
// status (cuda/README.md): the GPU tests and the kernel benchmark iterate
// kFlashPrefillVariants, so a new variant is one row. automatic is the
// dispatcher (launch_flash_prefill).
enum class PrefillVariant { automatic, v1, v2, v3, v3_stages3 };
struct PrefillVariantRow {
  PrefillVariant variant;
  const char* name;
  const char* status;  // live, ladder (the previous default) or candidate
  const char* what;
};
inline constexpr PrefillVariantRow kFlashPrefillVariants[] = {
    {PrefillVariant::v1, "v1", "live", "mma.sync v1"},
    {PrefillVariant::v2, "v2", "ladder", "wgmma v2 ping-pong"},
    {PrefillVariant::v3, "v3", "live", "wgmma v3 TMA producer, 2 stages"},
    {PrefillVariant::v3_stages3, "v3 3 stages", "candidate", "wgmma v3 TMA producer, 3 stages"},
};
const char* flash_prefill_variant_name(PrefillVariant v);
// Whether `v` serves this head dim on a device of compute capability 9.0
// (v2 and v3: head dim 128 and sm_90 only; the launch refuses otherwise).
bool flash_prefill_variant_serves(PrefillVariant v, int64_t head_dim);
// Runs one variant (automatic: launch_flash_prefill), with its contract.
cudaError_t launch_flash_prefill_variant(PrefillVariant v, const __nv_bfloat16* q, const __nv_bfloat16* k,
                                         const __nv_bfloat16* v_, const int64_t* q_start, const int64_t* q_len,
                                         const PrefillAttentionShape& s, __nv_bfloat16* o, float* lse,
                                         cudaStream_t stream);

// Whether launch_flash_prefill serves this head dim (64, 128, 256: v1 serves
// them all on any architecture).
bool flash_prefill_supported(int64_t head_dim);

// Query rows per CTA for this head dim (the tile height, for callers that plan work; 128 for
// D 64/128 in both versions, 64 for D 256 in v1); 0 if unsupported.
int flash_prefill_tile_rows(int64_t head_dim);

namespace detail {
// The shape / pointer / alignment checks shared by both versions.
bool prefill_args_valid(const __nv_bfloat16* q, const __nv_bfloat16* k, const __nv_bfloat16* v,
                        const int64_t* q_start, const int64_t* q_len, const PrefillAttentionShape& s,
                        const __nv_bfloat16* o);
// v3 with an explicit K/V ring depth: 2 (the default of launch_flash_prefill_v3, 160 KiB of shared
// memory) or 3 (224 KiB); anything else is cudaErrorInvalidValue. For tests and benches.
cudaError_t launch_flash_prefill_v3_stages(int stages, const __nv_bfloat16* q, const __nv_bfloat16* k,
                                           const __nv_bfloat16* v, const int64_t* q_start, const int64_t* q_len,
                                           const PrefillAttentionShape& s, __nv_bfloat16* o, float* lse,
                                           cudaStream_t stream);
}  // namespace detail

}  // namespace yoco::cuda
