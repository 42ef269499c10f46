#include "device/tma_encode.hpp"

#include <cudaTypedefs.h>

#include "arch/tma_plan.hpp"

namespace yoco::cuda {

namespace {
using EncodeTiled = PFN_cuTensorMapEncodeTiled_v12000;

EncodeTiled encode_tiled() {
  static const EncodeTiled fn = []() -> EncodeTiled {
    void* f = nullptr;
    cudaDriverEntryPointQueryResult q{};
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &f, 12000, cudaEnableDefault, &q) != cudaSuccess ||
        q != cudaDriverEntryPointSuccess)
      return nullptr;
    return reinterpret_cast<EncodeTiled>(f);
  }();
  return fn;
}
}  // namespace

cudaError_t encode_bf16_rows(CUtensorMap* map, const __nv_bfloat16* base, int64_t batch, int64_t rows, int64_t stride,
                             int64_t box_rows) {
  tma::Bf16RowsView view;
  if (tma::bf16_rows_view(reinterpret_cast<uint64_t>(base), batch, rows, stride, box_rows, &view) != nullptr)
    return cudaErrorInvalidValue;
  const EncodeTiled fn = encode_tiled();
  if (fn == nullptr) return cudaErrorNotSupported;
  const cuuint64_t dims[3] = {view.dims[0], view.dims[1], view.dims[2]};
  const cuuint64_t strides[2] = {view.strides_bytes[0], view.strides_bytes[1]};
  const cuuint32_t box[3] = {view.box[0], view.box[1], view.box[2]};
  const cuuint32_t elem[3] = {1, 1, 1};
  const CUresult r = fn(map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 3, const_cast<__nv_bfloat16*>(base), dims, strides, box,
                        elem, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                        CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  return r == CUDA_SUCCESS ? cudaSuccess : cudaErrorInvalidValue;
}

}  // namespace yoco::cuda
