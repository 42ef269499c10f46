// The cache and position kernels (cache_ops.hpp). The copies are memory-bound:
// one grid-stride range over (sequence, row, 16-byte vector) with the vector
// fastest, so a warp moves 512 contiguous bytes of a row; rows, strides or
// pointers that are not multiples of 8 elements / 16 bytes take the same kernel
// element by element. Index maths: cache_plan.hpp; the RoPE rotation:
// rope_pair.cuh (shared with launch_rope).
#include <cstdint>

#include "attention/cache_ops.hpp"
#include "attention/cache_plan.hpp"
#include "ops/rope_pair.cuh"

namespace yoco::cuda {

namespace {

namespace cp = cache_plan;

constexpr int kThreads = 256;

unsigned grid_for(int64_t n) {
  const int64_t blocks = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(blocks < 65535 * 8 ? (blocks > 0 ? blocks : 1) : 65535 * 8);
}

uint64_t address(const void* p) { return static_cast<uint64_t>(reinterpret_cast<uintptr_t>(p)); }

// V: uint4 (8 bf16) or uint16_t (1 bf16); strides and `chunks` (the row width) in V units.
template <class V>
__global__ void cache_write_kernel(const V* __restrict__ src, int64_t src_stride, int64_t batch, int64_t n,
                                   int64_t chunks, const int64_t* __restrict__ pos0, V* __restrict__ cache,
                                   int64_t capacity, int64_t cache_stride, int64_t ring) {
  const int64_t first = cp::first_written_row(n, ring), m = cp::rows_written(n, ring);
  const int64_t total = cp::copy_items(batch, m, chunks);
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < total;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const cp::CopyItem it = cp::copy_item(e, m, chunks);
    const int64_t i = first + it.j;
    const int64_t row = cp::cache_dest_row(pos0[it.b], i, ring);
    cache[cp::row_offset(it.b, capacity, row, cache_stride) + it.c] = src[cp::row_offset(it.b, n, i, src_stride) + it.c];
  }
}

template <class V>
__global__ void ring_gather_kernel(const V* __restrict__ ring, int64_t ring_stride, int64_t window, int64_t batch,
                                   int64_t first, int64_t count, int64_t chunks, V* __restrict__ dst, int64_t dst_rows,
                                   int64_t dst_stride) {
  const int64_t total = cp::copy_items(batch, count, chunks);
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < total;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const cp::CopyItem it = cp::copy_item(e, count, chunks);
    const int64_t slot = cp::gather_src_slot(first, it.j, window);
    dst[cp::row_offset(it.b, dst_rows, it.j, dst_stride) + it.c] =
        ring[cp::row_offset(it.b, window, slot, ring_stride) + it.c];
  }
}

// launch_rope's loop (elementwise.cu) with the row's position read from the device.
__global__ void rope_at_kernel(__nv_bfloat16* x, int64_t rows, int64_t row_stride, int64_t n_heads, int64_t head_dim,
                               const int64_t* __restrict__ positions, int64_t rows_per_seq,
                               const double* __restrict__ inv_freq, bool interleaved, double scale) {
  const int64_t half = head_dim / 2, pairs = rows * n_heads * half;
  for (int64_t p = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; p < pairs;
       p += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t i = p % half, h = (p / half) % n_heads, r = p / (half * n_heads);
    const int64_t position = cp::rope_position(positions[cp::rope_seq_of_row(r, rows_per_seq)], r, rows_per_seq);
    rope_rotate_pair(x + r * row_stride + h * head_dim, i, half, position, inv_freq, interleaved, scale);
  }
}

__global__ void advance_positions_kernel(int64_t* positions, int64_t* lengths, int64_t batch) {
  for (int64_t b = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; b < batch;
       b += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t p = positions[b] + 1;
    positions[b] = p;
    if (lengths) lengths[b] = p + 1;
  }
}

__global__ void set_positions_kernel(int64_t* positions, int64_t* lengths, int64_t batch, int64_t pos) {
  for (int64_t b = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; b < batch;
       b += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    positions[b] = pos;
    if (lengths) lengths[b] = pos + 1;
  }
}

}  // namespace

cudaError_t launch_cache_write_rows(const __nv_bfloat16* src, int64_t src_stride, int64_t batch, int64_t n,
                                    int64_t width, const int64_t* pos0, __nv_bfloat16* cache, int64_t capacity,
                                    int64_t cache_stride, int64_t ring, cudaStream_t stream) {
  if (src_stride < 0 || batch < 0 || n < 0 || width < 0 || capacity < 0 || cache_stride < 0 || ring < 0)
    return cudaErrorInvalidValue;
  if (width > src_stride || width > cache_stride) return cudaErrorInvalidValue;  // rows would overlap
  if (cp::is_ring(ring) ? capacity < ring : n > capacity) return cudaErrorInvalidValue;
  if (batch == 0 || n == 0 || width == 0) return cudaSuccess;
  if (!src || !pos0 || !cache) return cudaErrorInvalidValue;
  const int64_t m = cp::rows_written(n, ring);
  if (cp::vec16_ok(width, src_stride, cache_stride, address(src), address(cache))) {
    const int64_t v = cp::kVecElems;
    cache_write_kernel<uint4><<<grid_for(cp::copy_items(batch, m, width / v)), kThreads, 0, stream>>>(
        reinterpret_cast<const uint4*>(src), src_stride / v, batch, n, width / v, pos0, reinterpret_cast<uint4*>(cache),
        capacity, cache_stride / v, ring);
  } else {
    cache_write_kernel<uint16_t><<<grid_for(cp::copy_items(batch, m, width)), kThreads, 0, stream>>>(
        reinterpret_cast<const uint16_t*>(src), src_stride, batch, n, width, pos0, reinterpret_cast<uint16_t*>(cache),
        capacity, cache_stride, ring);
  }
  return cudaGetLastError();
}

cudaError_t launch_ring_gather(const __nv_bfloat16* ring, int64_t ring_stride, int64_t window, int64_t batch,
                               int64_t first, int64_t count, int64_t width, __nv_bfloat16* dst, int64_t dst_rows,
                               int64_t dst_stride, cudaStream_t stream) {
  if (window < 1 || ring_stride < 0 || batch < 0 || first < 0 || count < 0 || width < 0 || dst_rows < 0 ||
      dst_stride < 0)
    return cudaErrorInvalidValue;
  if (count > window || count > dst_rows) return cudaErrorInvalidValue;
  if (width > ring_stride || width > dst_stride) return cudaErrorInvalidValue;
  if (batch == 0 || count == 0 || width == 0) return cudaSuccess;
  if (!ring || !dst) return cudaErrorInvalidValue;
  if (cp::vec16_ok(width, ring_stride, dst_stride, address(ring), address(dst))) {
    const int64_t v = cp::kVecElems;
    ring_gather_kernel<uint4><<<grid_for(cp::copy_items(batch, count, width / v)), kThreads, 0, stream>>>(
        reinterpret_cast<const uint4*>(ring), ring_stride / v, window, batch, first, count, width / v,
        reinterpret_cast<uint4*>(dst), dst_rows, dst_stride / v);
  } else {
    ring_gather_kernel<uint16_t><<<grid_for(cp::copy_items(batch, count, width)), kThreads, 0, stream>>>(
        reinterpret_cast<const uint16_t*>(ring), ring_stride, window, batch, first, count, width,
        reinterpret_cast<uint16_t*>(dst), dst_rows, dst_stride);
  }
  return cudaGetLastError();
}

cudaError_t launch_rope_at(__nv_bfloat16* x, int64_t rows, int64_t row_stride, int64_t n_heads, int64_t head_dim,
                           const int64_t* positions, int64_t rows_per_seq, const double* inv_freq, RopeLayout layout,
                           double scale, cudaStream_t stream) {
  if (rows < 0 || n_heads < 0 || head_dim < 0 || head_dim % 2 != 0 || rows_per_seq < 1 ||
      row_stride < n_heads * head_dim)
    return cudaErrorInvalidValue;
  if (rows == 0 || n_heads == 0 || head_dim == 0) return cudaSuccess;
  if (!x || !positions || !inv_freq) return cudaErrorInvalidValue;
  rope_at_kernel<<<grid_for(rows * n_heads * (head_dim / 2)), kThreads, 0, stream>>>(
      x, rows, row_stride, n_heads, head_dim, positions, rows_per_seq, inv_freq, layout == RopeLayout::interleaved,
      scale);
  return cudaGetLastError();
}

cudaError_t launch_advance_positions(int64_t* positions, int64_t* lengths, int64_t batch, cudaStream_t stream) {
  if (batch < 0) return cudaErrorInvalidValue;
  if (batch == 0) return cudaSuccess;
  if (!positions) return cudaErrorInvalidValue;
  advance_positions_kernel<<<grid_for(batch), kThreads, 0, stream>>>(positions, lengths, batch);
  return cudaGetLastError();
}

cudaError_t launch_set_positions(int64_t* positions, int64_t* lengths, int64_t batch, int64_t pos,
                                 cudaStream_t stream) {
  if (batch < 0) return cudaErrorInvalidValue;
  if (batch == 0) return cudaSuccess;
  if (!positions) return cudaErrorInvalidValue;
  set_positions_kernel<<<grid_for(batch), kThreads, 0, stream>>>(positions, lengths, batch, pos);
  return cudaGetLastError();
}

}  // namespace yoco::cuda
