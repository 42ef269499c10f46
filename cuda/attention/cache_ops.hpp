#pragma once
// The small kernels that move keys and values into and out of the caches the
// runners keep (DESIGN.md §4), and the decode step's positions, which live on
// the device so that a captured CUDA graph replays unchanged step after step
// (a kernel advances them at the end of the step). Index maths in
// cache_plan.hpp (host + device, tested on the CPU by tests/test_cache_plan.cpp).
// Every size is int64_t and every index inside the kernels is 64-bit.
//
// Cache layout (both models): [batch, capacity, stride] bf16, row p of
// sequence b at element (b * capacity + p) * stride. YOCO's global cache and
// the Transformer's per-layer caches are linear (row p holds position p); the
// SWA self-decoder keeps a ring of W slots (capacity = W, position p in slot
// p mod W).
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "ops.hpp"  // RopeLayout

namespace yoco::cuda {

// Copies `n` rows per sequence into the cache: row i of sequence b (src element
// (b * n + i) * src_stride, `width` elements) goes to cache row pos0[b] + i of
// sequence b (linear, ring == 0), or, with ring == W > 0, to slot
// (pos0[b] + i) mod W -- and then only the last min(n, W) rows are written (the
// earlier ones would be overwritten by later positions of the same call, and
// writing them in parallel would race). pos0: device int64 [batch] (the decode
// step's positions, or a prefill chunk's start uploaded once). cache rows must
// exist: linear needs pos0[b] + n <= capacity (checked by the caller; the
// kernel does not bound-check), ring needs capacity >= W.
cudaError_t launch_cache_write_rows(const __nv_bfloat16* src, int64_t src_stride, int64_t batch, int64_t n,
                                    int64_t width, const int64_t* pos0, __nv_bfloat16* cache, int64_t capacity,
                                    int64_t cache_stride, int64_t ring, cudaStream_t stream);

// SWA prefill: the keys (or values) a chunk's queries need from before the
// chunk, unrolled from the ring in position order. For each sequence b and
// t in [0, count): dst row t of sequence b (element (b * dst_rows + t) *
// dst_stride) <- ring slot (first + t) mod W of sequence b (element
// (b * W + slot) * ring_stride), `width` elements. first, count: host values,
// the same for every sequence (positions first .. first + count - 1, count <= W).
cudaError_t launch_ring_gather(const __nv_bfloat16* ring, int64_t ring_stride, int64_t window, int64_t batch,
                               int64_t first, int64_t count, int64_t width, __nv_bfloat16* dst, int64_t dst_rows,
                               int64_t dst_stride, cudaStream_t stream);

// RoPE with each row's position read from the device: row r is at position
// positions[r / rows_per_seq] + r % rows_per_seq (decode: rows_per_seq 1, one
// position per sequence). Otherwise exactly launch_rope (cuda/ops/elementwise.hpp),
// including `scale` (the rotated pair is multiplied by it before the one
// rounding to bf16: gRet's key scale D^-1/2 folded into the rotation).
cudaError_t launch_rope_at(__nv_bfloat16* x, int64_t rows, int64_t row_stride, int64_t n_heads, int64_t head_dim,
                           const int64_t* positions, int64_t rows_per_seq, const double* inv_freq, RopeLayout layout,
                           double scale, cudaStream_t stream);

// End of a decode step: positions[b] += 1 and lengths[b] = positions[b] + 1
// for b < batch (lengths is what FlashDecoding reads: tokens visible to the
// query at `positions`).
cudaError_t launch_advance_positions(int64_t* positions, int64_t* lengths, int64_t batch, cudaStream_t stream);

// positions[b] = pos and lengths[b] = pos + 1 for b < batch (after a prefill or
// a skip; a kernel, so no pageable host memory is involved). Both launchers
// accept lengths == nullptr (positions only: also how a runner fills any
// per-sequence int64 argument, e.g. a prefill chunk's start, without a copy).
cudaError_t launch_set_positions(int64_t* positions, int64_t* lengths, int64_t batch, int64_t pos,
                                 cudaStream_t stream);

}  // namespace yoco::cuda
