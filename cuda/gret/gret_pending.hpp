#pragma once
// The deferred gRet decode step's pending update: where each CTA keeps the
// last step's (k, v, log γ) that it has not yet applied to the state
// (cuda/gret/gret_recurrent.hpp: launch_gret_deferred_step).
//
// Why defer. At batch 1 a step moves ~3 MB (24 heads × 128² fp32, read and
// written), about 1 µs at the copy rate, and what bounds a chain of steps is
// the dependent part of each kernel: after the previous kernel completes it
// must read q, k, v, update and store the whole state, and complete (every
// store drained) before the next kernel may start its own. The deferred step
// applies step t−1's update at the start of step t, before it waits for the
// previous kernel (nothing of step t−1 is written by that kernel), and keeps
// step t's update for step t+1: after the wait it only reads q, k, v, forms
// S_t = γ_t S_{t−1} + k_tᵀ v_t in registers — the eager step's arithmetic, so o
// is bit-identical — and writes o and this small record. The state traffic
// leaves the dependent path and overlaps the kernel before.
//
// Layout: one record per (sequence, head, V-slice); the slices of a head are
// separate CTAs, each reading its record before its wait and rewriting it
// after, so no CTA ever reads a record another CTA writes (every slice keeps
// its own copy of k, which all of them need). A record:
//   k: head_dim bf16 at byte 0, v: the slice's width bf16 at 2·head_dim,
//   log γ: fp32 at 2·(head_dim + width), then a uint32 flag (1: an update is
//   pending), padded to 16 bytes.
// All-zero bytes are "no pending update" (flag 0: the state is not touched,
// not even rewritten — applying a zero update would turn a −0 into +0), so a
// zeroed buffer starts a decode and launch_gret_pending_flush returns to it.
#include <cstdint>

#include "arch/hd.hpp"

namespace yoco::cuda {

// The V-slice width the deferred step (and the fused step) uses: 16 columns
// up to head_dim 128, 32 at 256 (≤ 8 CTAs a head, one portable cluster).
// 0 where the deferred step does not run.
YOCO_HD constexpr int gret_deferred_slice_width(int64_t head_dim) {
  if (head_dim >= 16 && head_dim <= 128 && head_dim % 16 == 0) return 16;
  if (head_dim > 128 && head_dim <= 256 && head_dim % 32 == 0) return 32;
  return 0;
}

struct GretPendingLayout {
  int64_t head_dim = 0;
  int width = 0;   // V columns per slice
  int slices = 0;  // head_dim / width
  int64_t record_bytes = 0;

  YOCO_HD constexpr int64_t k_offset() const { return 0; }
  YOCO_HD constexpr int64_t v_offset() const { return 2 * head_dim; }
  YOCO_HD constexpr int64_t log_gamma_offset() const { return 2 * (head_dim + width); }
  YOCO_HD constexpr int64_t flag_offset() const { return log_gamma_offset() + 4; }
  // Byte offset of the record of (sequence·heads + head) `bh`, slice `slice`.
  YOCO_HD constexpr int64_t record_offset(int64_t bh, int64_t slice) const {
    return (bh * slices + slice) * record_bytes;
  }
};

// slices == 0 where gret_deferred_slice_width(head_dim) == 0.
YOCO_HD constexpr GretPendingLayout gret_pending_layout(int64_t head_dim) {
  GretPendingLayout l;
  const int w = gret_deferred_slice_width(head_dim);
  if (w == 0) return l;
  l.head_dim = head_dim;
  l.width = w;
  l.slices = static_cast<int>(head_dim / w);
  l.record_bytes = (2 * (head_dim + w) + 8 + 15) / 16 * 16;
  return l;
}

// Bytes of the pending buffer for a batch; 0 where the deferred step does not run.
YOCO_HD constexpr int64_t gret_pending_bytes(int64_t batch, int64_t heads, int64_t head_dim) {
  const GretPendingLayout l = gret_pending_layout(head_dim);
  return batch * heads * l.slices * l.record_bytes;
}

}  // namespace yoco::cuda
