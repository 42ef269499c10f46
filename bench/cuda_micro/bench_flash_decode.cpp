// FlashDecoding split-KV decode (issue 13; KERNELS.md §2):
// - yoco-3b cross-attention shape (24 heads, 8 KV heads, D 128) at (N, B) in
//   {32K, 128K, 512K, 1M} x batch {1, 8} with the chosen split count (batch 8
//   at 512K and 1M in a cache of its own, 2 x 16 GiB, skipped with a note where
//   the card cannot hold it);
//   floor bytes = B·N·2·Hkv·D·2 (+ q and o), FLOPs = 4·B·H·N·D; L2 flushed first;
// - a split-count sweep at 128K x 1 (8, 16, 33, 66), beside the chosen count;
// - yoco-swa ring decode (24 heads, no GQA, W 1024, batch 1, ring full): one
//   layer cold, and 13 layers (13 distinct rings) as one CUDA-graph replay.
// K and V hold 1M rows x 8 KV heads x 128 (2 x 2.15 GB); shapes use a prefix.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

#include "dtype.hpp"
#include "attention/flash_decode.hpp"
#include "bench_buffers.hpp"
#include "kernel_bench.hpp"

namespace yoco::cuda_bench {
namespace {

std::string tokens(int64_t n) { return n % 1024 == 0 ? std::to_string(n / 1024) + "K" : std::to_string(n); }

YOCO_KERNEL_BENCH(flash_decode) {
  int dev = 0;
  check(cudaGetDevice(&dev), "cudaGetDevice");
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, dev), "cudaGetDeviceProperties");
  const int sms = prop.multiProcessorCount;

  ScopedStream scoped;
  const cudaStream_t stream = scoped.s;
  {
    const int64_t H = 24, Hkv = 8, D = 128, rows = int64_t{1} << 20, maxB = 8;
    const float scale = 1.0f / std::sqrt(static_cast<float>(D));
    DeviceBuffer<bf16> k(static_cast<size_t>(rows * Hkv * D)), v(static_cast<size_t>(rows * Hkv * D));
    DeviceBuffer<bf16> q(static_cast<size_t>(maxB * H * D)), out(static_cast<size_t>(maxB * H * D));
    DeviceBuffer<int64_t> lengths(static_cast<size_t>(maxB));
    DeviceBuffer<float> ws(static_cast<size_t>(maxB * 24 * 128 * (128 + 1)));  // up to 128 splits at B 8, H 24, D 128
    fill_normal_bf16(k.p, k.n, 1);
    fill_normal_bf16(v.p, v.n, 2);
    fill_normal_bf16(q.p, q.n, 3);

    auto run_shape_on = [&](const bf16* kp, const bf16* vp, int64_t N, int64_t B, int splits,
                            const std::string& variant, const std::string& note) {
      const cuda::DecodeAttentionShape s{B, H, Hkv, D, N, 0, scale};
      const std::vector<int64_t> lens(static_cast<size_t>(B), N);
      check(cudaMemcpy(lengths.p, lens.data(), lens.size() * sizeof(int64_t), cudaMemcpyHostToDevice), "lengths");
      check(cudaMemset(out.p, 0xff, out.n * sizeof(bf16)), "poison out");
      const double bytes = static_cast<double>(B) * N * 2.0 * Hkv * D * 2.0 + 2.0 * B * H * D * 2.0;
      const double flops = 4.0 * B * H * static_cast<double>(N) * D;
      KernelResult r{"attn_decode", variant, "transformer-3b", N, B, bytes, flops, {}, ""};  // the heads (24/8/128) YOCO-3B's cross-decoder shares
      r.params = {{"splits", splits}};
      r.time = time_launches(
          [&](cudaStream_t st) {
            check(cuda::launch_flash_decode(q.p, kp, vp, lengths.p, s, splits, ws.p, out.p, st), "flash_decode");
          },
          stream);
      check(cudaStreamSynchronize(stream), "sync");
      r.notes = "splits " + std::to_string(splits) + " (" + note + "), " + std::to_string(B * Hkv * splits) +
                " blocks on " + std::to_string(sms) + " SMs x " + std::to_string(cuda::decode_blocks_per_sm(D)) +
                "; " + (all_finite_bf16(out.p, static_cast<size_t>(B * H * D)) ? "out finite" : "out NOT FINITE");
      report.add(r);
    };
    auto run_shape = [&](int64_t N, int64_t B, int splits, const std::string& variant, const std::string& note) {
      run_shape_on(k.p, v.p, N, B, splits, variant, note);
    };
    auto run_chosen = [&](const bf16* kp, const bf16* vp, int64_t N, int64_t B) {
      const cuda::DecodeAttentionShape s{B, H, Hkv, D, N, 0, scale};
      const int splits = cuda::choose_decode_splits(s, N, sms);
      run_shape_on(kp, vp, N, B, splits,
                   "N " + tokens(N) + " B " + std::to_string(B) + " splits " + std::to_string(splits), "chosen");
    };

    const std::vector<std::pair<int64_t, int64_t>> shapes = {
        {int64_t{32} << 10, 1}, {int64_t{128} << 10, 1}, {int64_t{512} << 10, 1}, {int64_t{1} << 20, 1},
        {int64_t{32} << 10, 8}, {int64_t{128} << 10, 8}};
    for (const auto& [N, B] : shapes) run_chosen(k.p, v.p, N, B);
    // Batch 8 at 512K and 1M: 8M rows per buffer. A card that cannot hold them says so and goes on.
    {
      const size_t big = static_cast<size_t>(maxB * rows * Hkv * D);
      bf16 *bk = nullptr, *bv = nullptr;
      const cudaError_t ek = cudaMalloc(&bk, big * sizeof(bf16));
      const cudaError_t ev = ek == cudaSuccess ? cudaMalloc(&bv, big * sizeof(bf16)) : ek;
      if (ev == cudaSuccess) {
        fill_normal_bf16(bk, big, 4);
        fill_normal_bf16(bv, big, 5);
        for (int64_t N : {int64_t{512} << 10, int64_t{1} << 20}) run_chosen(bk, bv, N, maxB);
      } else {
        cudaGetLastError();  // clear the allocation error
        std::fprintf(stderr, "flash_decode: batch 8 at 512K and 1M skipped: 2 x %.1f GiB do not fit (%s)\n",
                     static_cast<double>(big * sizeof(bf16)) / (1u << 30), cudaGetErrorString(ev));
      }
      cudaFree(bk);
      cudaFree(bv);
    }
    for (int splits : {8, 16, 33, 66})
      run_shape(int64_t{128} << 10, 1, splits, "N 128K B 1 splits " + std::to_string(splits) + " sweep", "sweep");

    // yoco-swa ring decode: 24 heads, no GQA, W 1024, ring full (5000 tokens seen).
    {
      const int64_t Hs = 24, W = 1024, layers = 13, len = 5000;
      const size_t ring = static_cast<size_t>(W * Hs * D);
      DeviceBuffer<bf16> rk(ring * layers), rv(ring * layers), rq(static_cast<size_t>(Hs * D)), ro(static_cast<size_t>(Hs * D));
      fill_normal_bf16(rk.p, rk.n, 11);
      fill_normal_bf16(rv.p, rv.n, 12);
      fill_normal_bf16(rq.p, rq.n, 13);
      check(cudaMemcpy(lengths.p, &len, sizeof(int64_t), cudaMemcpyHostToDevice), "lengths");
      cuda::DecodeAttentionShape s{1, Hs, Hs, D, W, W, scale};
      s.ring = true;
      const int splits = cuda::choose_decode_splits(s, len, sms);
      const double bytes = static_cast<double>(W) * 2.0 * Hs * D * 2.0 + 2.0 * Hs * D * 2.0;
      const double flops = 4.0 * Hs * static_cast<double>(W) * D;
      auto layer = [&](cudaStream_t st, int64_t l) {
        check(cuda::launch_flash_decode(rq.p, rk.p + l * ring, rv.p + l * ring, lengths.p, s, splits, ws.p, ro.p, st),
              "ring decode");
      };
      const std::string note = "splits " + std::to_string(splits) + " (chosen), " + std::to_string(Hs * splits) +
                               " blocks; ring W 1024 full";
      {
        KernelResult r{"attn_decode_ring", "yoco-swa W 1024 B 1 splits " + std::to_string(splits) + " eager",
                       "yoco-swa-3b", W, 1, bytes, flops, {}, note};
        r.time = time_launches([&](cudaStream_t st) { layer(st, 0); }, stream);
        report.add(r);
      }
      cudaGraph_t graph = nullptr;
      cudaGraphExec_t exec = nullptr;
      check(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), "begin capture");
      for (int64_t l = 0; l < layers; ++l) layer(stream, l);
      check(cudaStreamEndCapture(stream, &graph), "end capture");
      check(cudaGraphInstantiate(&exec, graph, 0), "graph instantiate");
      KernelResult g{"attn_decode_ring_13_layers", "yoco-swa W 1024 B 1 splits " + std::to_string(splits) + " graph x13",
                     "yoco-swa-3b", W, 1, layers * bytes, layers * flops, {}, ""};
      g.time = time_launches([&](cudaStream_t st) { check(cudaGraphLaunch(exec, st), "graph launch"); }, stream);
      check(cudaStreamSynchronize(stream), "graph sync");
      g.notes = note + "; 13 distinct rings; per layer " + std::to_string(g.time.median_s / layers * 1e6) + " us; " +
                (all_finite_bf16(ro.p, ro.n) ? "out finite after replays" : "out NOT FINITE after replays");
      report.add(g);
      cudaGraphExecDestroy(exec);
      cudaGraphDestroy(graph);
    }
  }
}

}  // namespace
}  // namespace yoco::cuda_bench
