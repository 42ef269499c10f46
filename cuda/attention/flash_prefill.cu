// Prefill attention: the argument check every variant shares and the
// dispatcher. Variants: v1 (flash_prefill_v1.cu, mma.sync, any head dim and
// architecture), v2 (flash_prefill_v2.cu, wgmma ping-pong, Hopper, head dim
// 128) and v3 (flash_prefill_v3.cu, v2's maths fed by a TMA producer warp);
// cuda/attention/NOTES-flash_prefill.md has their measurements.
#include <cmath>
#include <cstdint>

#include "attention/flash_prefill.hpp"
#include "attention/prefill_version.hpp"
#include "device/device_query.hpp"

namespace yoco::cuda {

namespace {
using bf16 = __nv_bfloat16;
bool aligned16(const void* ptr) { return (reinterpret_cast<uintptr_t>(ptr) & 15u) == 0; }
}  // namespace

namespace detail {
bool prefill_args_valid(const bf16* q, const bf16* k, const bf16* v, const int64_t* q_start, const int64_t* q_len,
                        const PrefillAttentionShape& s, const bf16* o) {
  const int64_t D = s.head_dim;
  if (s.batch < 1 || s.batch > 65535 || s.n_heads < 1 || s.n_heads > 65535 || s.n_kv_heads < 1 ||
      s.n_heads % s.n_kv_heads != 0 || !flash_prefill_supported(D) || s.q_rows < 1 || s.capacity < 1 ||
      s.q_stride < s.n_heads * D || s.kv_stride < s.n_kv_heads * D || s.q_stride % 8 != 0 ||
      s.kv_stride % 8 != 0 || s.window < 0 || s.capacity >= (int64_t{1} << 30) || !std::isfinite(s.scale) ||
      !(s.scale > 0.0f))
    return false;
  return q != nullptr && k != nullptr && v != nullptr && o != nullptr && q_start != nullptr && q_len != nullptr &&
         aligned16(q) && aligned16(k) && aligned16(v) && aligned16(o);
}
}  // namespace detail

bool flash_prefill_supported(int64_t head_dim) { return head_dim == 64 || head_dim == 128 || head_dim == 256; }

// kHopperPrefillVersion (attention/prefill_version.hpp) picks v3 or v2 on compute capability 9.0.

cudaError_t launch_flash_prefill(const bf16* q, const bf16* k, const bf16* v, const int64_t* q_start,
                                 const int64_t* q_len, const PrefillAttentionShape& s, bf16* o, float* lse,
                                 cudaStream_t stream) {
  if (!detail::prefill_args_valid(q, k, v, q_start, q_len, s, o)) return cudaErrorInvalidValue;  // before any CUDA call
  if (flash_prefill_v2_supported(s.head_dim)) {
    const CurrentDevice dev = current_device();
    if (dev.error != cudaSuccess) return dev.error;
    if (dev.is_sm90())
      return kHopperPrefillVersion == 3 ? launch_flash_prefill_v3(q, k, v, q_start, q_len, s, o, lse, stream)
                                        : launch_flash_prefill_v2(q, k, v, q_start, q_len, s, o, lse, stream);
  }
  return launch_flash_prefill_v1(q, k, v, q_start, q_len, s, o, lse, stream);
}

const char* flash_prefill_variant_name(PrefillVariant v) {
  if (v == PrefillVariant::automatic) return "automatic";
  for (const PrefillVariantRow& r : kFlashPrefillVariants)
    if (r.variant == v) return r.name;
  return "?";
}

bool flash_prefill_variant_serves(PrefillVariant v, int64_t head_dim) {
  if (v == PrefillVariant::automatic || v == PrefillVariant::v1) return flash_prefill_supported(head_dim);
  return flash_prefill_v2_supported(head_dim);
}

cudaError_t launch_flash_prefill_variant(PrefillVariant variant, const bf16* q, const bf16* k, const bf16* v,
                                         const int64_t* q_start, const int64_t* q_len, const PrefillAttentionShape& s,
                                         bf16* o, float* lse, cudaStream_t stream) {
  switch (variant) {
    case PrefillVariant::v1: return launch_flash_prefill_v1(q, k, v, q_start, q_len, s, o, lse, stream);
    case PrefillVariant::v2: return launch_flash_prefill_v2(q, k, v, q_start, q_len, s, o, lse, stream);
    case PrefillVariant::v3: return launch_flash_prefill_v3(q, k, v, q_start, q_len, s, o, lse, stream);
    case PrefillVariant::v3_stages3:
      return detail::launch_flash_prefill_v3_stages(3, q, k, v, q_start, q_len, s, o, lse, stream);
    case PrefillVariant::automatic: break;
  }
  return launch_flash_prefill(q, k, v, q_start, q_len, s, o, lse, stream);
}

}  // namespace yoco::cuda
