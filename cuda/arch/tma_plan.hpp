#pragma once
// Host/device arithmetic of the TMA-fed kernels (KERNELS.md §1(c) "TMA rules", §6): the 3-D
// tensor-map view of a [batch, rows, stride] bf16 buffer, the box coordinates of a tile, and the
// stage / phase-parity arithmetic of a full/empty mbarrier ring. Pure integer functions, tested on
// the CPU (tests/test_tma_plan.cpp) before a GPU runs them; cuda/attention/flash_prefill_v3.cu and
// cuda/ops/gemm_swiglu_sm90.cu use them (the maps encoded by cuda/device/tma_encode.cpp).
#include <cstdint>

#include "arch/hd.hpp"

namespace yoco::cuda::tma {

// cuTensorMapEncodeTiled's view of a [batch, rows, stride] bf16 buffer (row r of sequence b at
// element (b * rows + r) * stride), cut into boxes of {64 columns, box_rows rows, 1 sequence}:
// 64 bf16 = 128 bytes, the widest inner box the 128-byte swizzle allows.
struct Bf16RowsView {
  uint64_t dims[3] = {0, 0, 0};         // columns (the whole row stride), rows, batch
  uint64_t strides_bytes[2] = {0, 0};   // between rows, between sequences
  uint32_t box[3] = {0, 0, 0};          // {64, box_rows, 1}
};

constexpr int64_t kBoxColumns = 64;

// Fills *out and returns nullptr when TMA can address the buffer, else the rule it breaks (CUDA
// 13.0 cuda.h: base 16-byte aligned, strides multiples of 16 B and < 2^40, dims in [1, 2^32],
// box dims in [1, 256]; and PTX: box coordinates are signed 32-bit, so every dim < 2^31; a box
// may overhang a dim by box_rows - 1, which the callers' own limits keep far from 2^31).
inline const char* bf16_rows_view(uint64_t base_address, int64_t batch, int64_t rows, int64_t stride,
                                  int64_t box_rows, Bf16RowsView* out) {
  constexpr uint64_t kDimMax = (uint64_t{1} << 31) - 1, kStrideMax = uint64_t{1} << 40;
  if (base_address % 16 != 0) return "the base address is not 16-byte aligned";
  if (batch < 1 || rows < 1 || stride < kBoxColumns) return "an empty buffer or a row narrower than one box";
  if (box_rows < 1 || box_rows > 256) return "a box holds 1 to 256 rows";
  if (static_cast<uint64_t>(stride) > kDimMax || static_cast<uint64_t>(rows) > kDimMax ||
      static_cast<uint64_t>(batch) > kDimMax)
    return "a dimension exceeds 2^31 - 1 (TMA coordinates are int32)";
  const uint64_t row_bytes = static_cast<uint64_t>(stride) * 2;
  if (row_bytes % 16 != 0) return "the row stride is not a multiple of 16 bytes";
  if (row_bytes >= kStrideMax || static_cast<uint64_t>(rows) > (kStrideMax - 1) / row_bytes)
    return "a stride reaches 2^40 bytes";
  out->dims[0] = static_cast<uint64_t>(stride);
  out->dims[1] = static_cast<uint64_t>(rows);
  out->dims[2] = static_cast<uint64_t>(batch);
  out->strides_bytes[0] = row_bytes;
  out->strides_bytes[1] = row_bytes * static_cast<uint64_t>(rows);
  out->box[0] = static_cast<uint32_t>(kBoxColumns);
  out->box[1] = static_cast<uint32_t>(box_rows);
  out->box[2] = 1;
  return nullptr;
}

// ---- A ring of `stages` buffers, each with a full and an empty mbarrier --------------------
// Use t (t = 0, 1, ...) of the ring sits in stage t mod stages. The consumer of use t waits for
// the full barrier's completion number t / stages (0-based); the producer, before filling use t,
// waits for the empty barrier's completion number t / stages - 1, i.e. the release of use
// t - stages (round 0 needs none). mbarrier.try_wait.parity(P) succeeds once the phase of parity
// P has completed, and a fresh barrier reports the phase before its first (parity 1) as complete.
YOCO_HD constexpr int ring_stage(int64_t t, int stages) { return static_cast<int>(t % stages); }
YOCO_HD constexpr uint32_t full_parity(int64_t t, int stages) { return static_cast<uint32_t>((t / stages) & 1); }
YOCO_HD constexpr uint32_t empty_parity(int64_t t, int stages) {
  return static_cast<uint32_t>(((t / stages) & 1) ^ 1);
}

}  // namespace yoco::cuda::tma
