// Prefill attention ("attn_prefill", the phase name) at the KERNELS.md
// §1 shapes: transformer-3b heads (H 24, Hkv 8, D 128), batch 1, causal,
// one-shot S = 4K, 8K, 16K, 32K, 64K, 128K for v3 (warp-specialised TMA,
// cuda/attention/flash_prefill_v3.cu; 2- and 3-stage rings), v2 (wgmma,
// cuda/attention/flash_prefill_v2.cu) and v1 (mma.sync, cuda/attention/flash_prefill_v1.cu; the
// issue's four lengths) side by side; one chunked point (a 32K chunk at q0 =
// 96K, capacity 128K) and SWA (H = Hkv = 24, W 1024) at 32K on v2 and v3; D 64
// and D 256 at 16K (H 24 / Hkv 8; v1, as the dispatcher runs them).
// FLOPs by the FlashAttention convention: 4 * B * H * D * (visible (query, key)
// pairs), which is 1/2 * 4 * S^2 * H * D for one-shot causal prefill. Bytes: q,
// k, v (the keys the chunk can see) and o, each once. Device memory < 1.2 GB.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <vector>

#include "device/device_fill.hpp"
#include "attention/flash_prefill.hpp"
#include "kernel_bench.hpp"
#include "suite_skips.hpp"

namespace {

using yoco::cuda::PrefillAttentionShape;

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string("bench_flash_prefill: ") + what + ": " + cudaGetErrorString(e));
}

// Visible (query, key) pairs of q_len queries at positions q0 .. q0 + q_len - 1.
double visible_pairs(int64_t q0, int64_t q_len, int64_t window) {
  double pairs = 0;
  for (int64_t i = 0; i < q_len; ++i) {
    const int64_t p = q0 + i;
    pairs += static_cast<double>(window > 0 && window < p + 1 ? window : p + 1);
  }
  return pairs;
}

// kV2: the default (ping-pong) schedule; kV3: the default (2-stage) ring.
// The variants are the library's table (kFlashPrefillVariants), with its words for them.
using Ver = yoco::cuda::PrefillVariant;
const char* ver_notes(Ver v) {
  for (const yoco::cuda::PrefillVariantRow& r : yoco::cuda::kFlashPrefillVariants)
    if (r.variant == v) return r.what;
  return "dispatcher";
}

// The variant's parameters as bench rows: its version and, for v3, its K/V ring depth.
std::vector<std::pair<std::string, double>> variant_params(Ver v) {
  switch (v) {
    case Ver::v1: return {{"version", 1}};
    case Ver::v2: return {{"version", 2}};
    case Ver::v3: return {{"version", 3}, {"stages", 2}};
    case Ver::v3_stages3: return {{"version", 3}, {"stages", 3}};
    default: return {};
  }
}

struct Point {
  int64_t H, Hkv, D, window, q0, q_len;
  const char* model;
  const char* variant;
  Ver ver;
};

void run_point(yoco::cuda_bench::Report& report, const Point& pt) {
  const int64_t cap = pt.q0 + pt.q_len;
  const int64_t q_elems = pt.q_len * pt.H * pt.D, kv_elems = cap * pt.Hkv * pt.D;
  __nv_bfloat16 *q = nullptr, *k = nullptr, *v = nullptr, *o = nullptr;
  int64_t* meta = nullptr;  // [q_start, q_len]
  check(cudaMalloc(&q, q_elems * 2), "cudaMalloc q");
  check(cudaMalloc(&k, kv_elems * 2), "cudaMalloc k");
  check(cudaMalloc(&v, kv_elems * 2), "cudaMalloc v");
  check(cudaMalloc(&o, q_elems * 2), "cudaMalloc o");
  check(cudaMalloc(&meta, 2 * sizeof(int64_t)), "cudaMalloc meta");
  const int64_t host_meta[2] = {pt.q0, pt.q_len};
  check(cudaMemcpy(meta, host_meta, sizeof(host_meta), cudaMemcpyHostToDevice), "upload meta");
  check(yoco::cuda::launch_fill_normal_bf16(q, q_elems, 11, 1.0f, nullptr), "fill q");
  check(yoco::cuda::launch_fill_normal_bf16(k, kv_elems, 12, 1.0f, nullptr), "fill k");
  check(yoco::cuda::launch_fill_normal_bf16(v, kv_elems, 13, 1.0f, nullptr), "fill v");
  check(cudaDeviceSynchronize(), "fill");

  PrefillAttentionShape s;
  s.batch = 1;
  s.n_heads = pt.H;
  s.n_kv_heads = pt.Hkv;
  s.head_dim = pt.D;
  s.q_rows = pt.q_len;
  s.capacity = cap;
  s.q_stride = pt.H * pt.D;
  s.kv_stride = pt.Hkv * pt.D;
  s.window = pt.window;
  s.scale = 1.0f / std::sqrt(static_cast<float>(pt.D));

  cudaStream_t stream;
  check(cudaStreamCreate(&stream), "stream");
  // 128K causal takes ~0.2-0.3 s per launch: few repeats there (the whole bench stays well under 90 s).
  const int repeats = pt.q_len >= 131072 ? 3 : (pt.q_len >= 65536 ? 5 : (pt.q_len >= 32768 ? 10 : 20));
  const int warmup = pt.q_len >= 65536 ? 1 : 2;
  yoco::cuda_bench::KernelResult r;
  try {
    r.time = yoco::cuda_bench::time_launches(
        [&](cudaStream_t st) {
          const cudaError_t e =
              yoco::cuda::launch_flash_prefill_variant(pt.ver, q, k, v, meta, meta + 1, s, o, nullptr, st);
          check(e, "launch");
        },
        stream, warmup, repeats, true);
  } catch (...) {
    cudaStreamDestroy(stream);
    cudaFree(q), cudaFree(k), cudaFree(v), cudaFree(o), cudaFree(meta);
    throw;
  }
  // Keys any query of the chunk can see, read once.
  const int64_t key_lo = pt.window > 0 && pt.q0 - pt.window + 1 > 0 ? pt.q0 - pt.window + 1 : 0;
  r.kernel = "attn_prefill";
  r.variant = pt.variant;
  r.model = pt.model;
  r.seq_len = cap;
  r.batch = 1;
  r.params = variant_params(pt.ver);
  r.flops = 4.0 * static_cast<double>(pt.H * pt.D) * visible_pairs(pt.q0, pt.q_len, pt.window);
  r.bytes = 2.0 * (2.0 * static_cast<double>(q_elems) + 2.0 * static_cast<double>((cap - key_lo) * pt.Hkv * pt.D));
  r.notes = std::string(ver_notes(pt.ver)) + "; q0 " + std::to_string(pt.q0) + ", q_len " + std::to_string(pt.q_len) + ", H " +
            std::to_string(pt.H) + "/" + std::to_string(pt.Hkv) + ", D " + std::to_string(pt.D) +
            (pt.window > 0 ? ", window " + std::to_string(pt.window) : std::string(", causal"));
  report.add(r);
  cudaStreamDestroy(stream);
  cudaFree(q), cudaFree(k), cudaFree(v), cudaFree(o), cudaFree(meta);
}

}  // namespace

YOCO_KERNEL_BENCH(flash_prefill) {
  const Ver v1 = Ver::v1, v2 = Ver::v2, v3 = Ver::v3, v3s3 = Ver::v3_stages3;
  const bool has_v2 = yoco::cuda::flash_prefill_v2_supported(128);  // v3 runs the same head dims
  std::vector<Point> points;
  for (int64_t S : {4096, 8192, 16384, 32768, 65536, 131072}) {
    if (has_v2) {
      points.push_back({24, 8, 128, 0, 0, S, "transformer-3b", "D128 v3", v3});
      points.push_back({24, 8, 128, 0, 0, S, "transformer-3b", "D128 v3 3 stages", v3s3});
      points.push_back({24, 8, 128, 0, 0, S, "transformer-3b", "D128 v2", v2});
    }
    if (S == 4096 || S == 16384 || S == 65536 || S == 131072)
      points.push_back({24, 8, 128, 0, 0, S, "transformer-3b", "D128 v1", v1});
  }
  if (has_v2) {
    for (Ver ver : {v3, v2}) {
      const bool is3 = ver == v3;
      points.push_back({24, 8, 128, 0, 98304, 32768, "transformer-3b", is3 ? "D128 v3 chunk q0 96K" : "D128 v2 chunk q0 96K", ver});
      points.push_back({24, 24, 128, 1024, 0, 32768, "yoco-swa-3b", is3 ? "D128 v3 window 1024" : "D128 v2 window 1024", ver});
    }
  }
  points.push_back({24, 8, 64, 0, 0, 16384, "transformer-3b heads", "D64 v1", v1});
  points.push_back({24, 8, 256, 0, 0, 16384, "transformer-3b heads", "D256 v1", v1});
  const bool skip_v3 = yoco::cuda_bench::skipped_by_suite("YOCO_PREFILL_SKIP_V3");
  for (const Point& pt : points) {
    if (skip_v3 && (pt.ver == Ver::v3 || pt.ver == Ver::v3_stages3)) {
      yoco::cuda_bench::KernelResult r;
      r.kernel = "attn_prefill";
      r.variant = pt.variant;
      r.model = pt.model;
      r.seq_len = pt.q0 + pt.q_len;
      r.params = variant_params(pt.ver);
      r.skipped = "YOCO_PREFILL_SKIP_V3 is set: v3 failed its smoke test in this call and was left out";
      report.add(r);
      continue;
    }
    run_point(report, pt);
  }
}
