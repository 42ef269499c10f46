// gRet chunkwise prefill (issue 14; KERNELS.md §3):
// - yoco-3b gRet layer (24 heads x 128) at batch 1 and N = 32K, 128K, 512K;
// - the KERNELS.md anchor shape (2, 16384, 16, 128) (Helion retention 0.466 ms on H100);
// each with V-slices of 64, 32 and 16 columns (2, 4, 8 CTAs per head) as
// separate rows, the planner's pick marked "(plan)";
// - the fp32 recurrent GPU oracle at 32K, for scale.
// Floors: bytes = B*N*H*(3*D*2 + 4 + D*2) (q, k, v, log-gamma in, o out; the
// state never leaves the chip); flops = B*N*H*(4*C*D + 4*D*D), C = 64, full
// C x C blocks as FLA counts them (the kernel skips masked 16-row tiles but
// repeats Q K^T once per slice). q, k, v sit in one fused row of 3*H*D.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "counter_init.hpp"
#include "dtype.hpp"
#include "gret_chunk.hpp"
#include "gret_oracle.hpp"
#include "kernel_bench.hpp"

namespace yoco::cuda_bench {
namespace {

using bf16 = __nv_bfloat16;

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string("bench_gret_chunk: ") + what + ": " + cudaGetErrorString(e));
}

template <class T>
struct Buf {
  T* p = nullptr;
  size_t n = 0;
  explicit Buf(size_t count) : n(count) { check(cudaMalloc(&p, count * sizeof(T)), "cudaMalloc"); }
  ~Buf() { cudaFree(p); }
  Buf(const Buf&) = delete;
  Buf& operator=(const Buf&) = delete;
};

// Random bf16 (normal): a 1 Mi-element host tile copied over the buffer.
void fill_bf16(bf16* dst, size_t n, uint64_t seed, float scale) {
  const size_t tile = std::min<size_t>(n, size_t{1} << 20);
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<uint16_t> h(tile);
  for (auto& x : h) x = float_to_bf16_bits(d(rng));
  for (size_t off = 0; off < n; off += tile)
    check(cudaMemcpy(dst + off, h.data(), std::min(tile, n - off) * sizeof(uint16_t), cudaMemcpyHostToDevice),
          "upload bf16");
}

void fill_f32(float* dst, size_t n, uint64_t key, float offset, float scale) {
  check(cuda::launch_counter_init(dst, static_cast<int64_t>(n), key, InitRule{offset, scale}, nullptr), "counter_init");
  check(cudaDeviceSynchronize(), "counter_init sync");
}

bool all_finite_bf16(const bf16* d, size_t n) {
  const size_t m = std::min<size_t>(n, size_t{1} << 24);  // the first 16 Mi values
  std::vector<uint16_t> h(m);
  check(cudaMemcpy(h.data(), d, m * sizeof(uint16_t), cudaMemcpyDeviceToHost), "download");
  for (uint16_t b : h)
    if (!std::isfinite(bf16_bits_to_float(b))) return false;
  return true;
}

struct Shape {
  const char* model;
  int64_t batch, heads, D, N;
};

void bench_shape(Report& report, const Shape& sh, cudaStream_t stream, int sm_count) {
  const int64_t B = sh.batch, H = sh.heads, D = sh.D, N = sh.N, W = H * D, stride = 3 * W;
  const double token_heads = static_cast<double>(B) * N * H;
  const double bytes = token_heads * (3.0 * D * 2 + 4 + D * 2);
  const double flops = token_heads * (4.0 * 64 * D + 4.0 * D * D);
  Buf<bf16> qkv(static_cast<size_t>(B * N * stride)), o(static_cast<size_t>(B * N * W));
  Buf<float> lg(static_cast<size_t>(B * N * H)), state(static_cast<size_t>(B * H * D * D));
  fill_bf16(qkv.p, qkv.n, 3 + N, 0.3f);
  fill_f32(lg.p, lg.n, 5, -0.03f, 0.02f);  // log gamma in [-0.05, -0.01]
  fill_f32(state.p, state.n, 6, 0.0f, 0.1f);
  cuda::GretChunkShape s{B, H, D, N, stride};
  const cuda::GretChunkPlan plan = cuda::plan_gret_chunk(s, sm_count);
  for (int cols : {64, 32, 16}) {
    if (!cuda::gret_slice_supported(D, cols)) continue;
    cuda::GretChunkPlan p = plan;
    p.slice_cols = cols;
    p.slices = static_cast<int>(D / cols);
    const std::string variant = "C64 v" + std::to_string(p.slices) + (cols == plan.slice_cols ? " (plan)" : "");
    KernelResult r{"gret_chunk", variant, sh.model, N, B, bytes, flops, {}, ""};
    r.time = time_launches(
        [&](cudaStream_t st) {
          check(cuda::launch_gret_chunk(qkv.p, qkv.p + W, qkv.p + 2 * W, lg.p, state.p, o.p, s, p, st), "gret_chunk");
        },
        stream, 2, N >= 262144 ? 5 : 10);
    r.notes = "H" + std::to_string(H) + " D" + std::to_string(D) + "; " + std::to_string(B * H * p.slices) +
              " CTAs; floor bytes = B*N*H*(3*D*2+4+D*2), flops = B*N*H*(4*64*D+4*D*D) full blocks; " +
              (all_finite_bf16(o.p, o.n) ? "o finite" : "o NOT FINITE");
    report.add(r);
  }
}

YOCO_KERNEL_BENCH(gret_chunk) {
  cudaStream_t stream = nullptr;
  check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "stream");
  int dev = 0, sms = 132;
  check(cudaGetDevice(&dev), "device");
  check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev), "sm count");
  try {
    bench_shape(report, Shape{"kernels-anchor", 2, 16, 128, 16384}, stream, sms);
    for (int64_t N : {32768, 131072, 524288}) bench_shape(report, Shape{"yoco-3b", 1, 24, 128, N}, stream, sms);
    // The fp32 recurrent oracle (correctness tool, not a kernel to tune), at 32K.
    {
      const int64_t B = 1, H = 24, D = 128, N = 32768, W = H * D, stride = 3 * W;
      Buf<bf16> qkv(static_cast<size_t>(B * N * stride));
      Buf<float> lg(static_cast<size_t>(B * N * H)), state(static_cast<size_t>(B * H * D * D)),
          o(static_cast<size_t>(B * N * W));
      fill_bf16(qkv.p, qkv.n, 9, 0.3f);
      fill_f32(lg.p, lg.n, 10, -0.03f, 0.02f);
      fill_f32(state.p, state.n, 11, 0.0f, 0.1f);
      const double token_heads = static_cast<double>(B) * N * H;
      KernelResult r{"gret_recurrent_oracle", "fp32 one CTA per head", "yoco-3b", N, B,
                     token_heads * (3.0 * D * 2 + 4 + D * 4), token_heads * 4.0 * D * D, {}, ""};
      r.time = time_launches(
          [&](cudaStream_t st) {
            check(cuda::launch_gret_recurrent_oracle(qkv.p, qkv.p + W, qkv.p + 2 * W, lg.p, state.p, state.p, o.p, B, H,
                                                     D, N, stride, st),
                  "oracle");
          },
          stream, 1, 3);
      r.notes = "bytes count fp32 o; flops = 4*D*D per token-head";
      report.add(r);
    }
  } catch (...) {
    cudaStreamDestroy(stream);
    throw;
  }
  cudaStreamDestroy(stream);
}

}  // namespace
}  // namespace yoco::cuda_bench
