#include "ops/ffn_up.hpp"

#include "device/device_query.hpp"
#include "ops/elementwise.hpp"
#include "ops/gemm_swiglu.hpp"

namespace yoco::cuda {

bool ffn_up_fused_here(bool asked) { return asked && current_device().is_sm90(); }

std::string ffn_up_swiglu(Gemm& gemm, const __nv_bfloat16* x, int64_t rows, int64_t dim, const __nv_bfloat16* w13,
                          int64_t ffn_dim, __nv_bfloat16* h13, int64_t h13_rows, __nv_bfloat16* out, bool fused,
                          cudaStream_t stream, GemmSwigluCtas ctas) {
  const gemm_swiglu::Shape s{rows, dim, ffn_dim, dim, ffn_dim};
  if (fused && rows >= gemm_swiglu::kMinRowsToFuse && gemm_swiglu_serves(x, w13, s, out)) {
    const cudaError_t e = launch_gemm_swiglu(x, w13, s, out, stream, ctas);
    return e == cudaSuccess ? "" : std::string("fused W1|W3 + SwiGLU: ") + cudaGetErrorString(e);
  }
  if (h13 == nullptr || h13_rows < rows)
    return "ffn W1|W3: the fused kernel does not take " + std::to_string(rows) + " rows here, and the step's buffer "
           "for the pair holds " + std::to_string(h13 == nullptr ? 0 : h13_rows);
  if (std::string why = gemm.linear(x, rows, dim, w13, 2 * ffn_dim, h13, stream); !why.empty()) return "ffn W1|W3: " + why;
  const cudaError_t e = launch_swiglu(h13, rows, ffn_dim, out, stream);
  return e == cudaSuccess ? "" : std::string("ffn swiglu: ") + cudaGetErrorString(e);
}

}  // namespace yoco::cuda
