// gret_chunk_on_file INPUTS OUTPUTS: runs our chunkwise gRet prefill (the plan
// select_gret_chunk picks, as the runner does) on a `yoco check gret` input
// file and writes what `yoco check gret` judges: o [B, T, H, D] bf16 and
// final_state [B, H, D, D] fp32 (as [K, V]). Our kernel takes k already
// scaled and applies no scale itself: judge with `--scale none`. Inputs in
// [B, T, H, D] (q, k, v any float dtype, rounded to bf16 on the way in; g
// [B, T, H]; initial_state optional). The same step runs fla's outputs through
// the same command (bench/peers/fla_gret_check.py, scripts/gpu-suite.sh).
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "bench_buffers.hpp"
#include "errors.hpp"
#include "gret/gret_chunk.hpp"
#include "gret/gret_select.hpp"
#include "safetensors.hpp"
#include "tensor_file.hpp"

namespace {

using yoco::cuda_bench::bf16;
using yoco::cuda_bench::check;
using yoco::cuda_bench::DeviceBuffer;

// Tensor `name` (n elements) from the file into device memory as T, in blocks.
template <class T>
void upload(const yoco::check::TensorFile& f, const std::string& name, T* dst, int64_t n) {
  constexpr int64_t kBlock = 1 << 22;
  std::vector<double> x(static_cast<size_t>(std::min(n, kBlock)));
  std::vector<T> y(x.size());
  for (int64_t first = 0; first < n; first += kBlock) {
    const int64_t m = std::min(kBlock, n - first);
    f.read(name, first, m, x.data());
    for (int64_t i = 0; i < m; ++i) y[static_cast<size_t>(i)] = static_cast<T>(static_cast<float>(x[static_cast<size_t>(i)]));
    check(cudaMemcpy(dst + first, y.data(), static_cast<size_t>(m) * sizeof(T), cudaMemcpyHostToDevice), "upload " + name);
  }
}

template <class T>
void download_append(yoco::SafetensorsWriter& w, const T* src, int64_t n) {
  constexpr int64_t kBlock = 1 << 22;
  std::vector<T> y(static_cast<size_t>(std::min(n, kBlock)));
  std::vector<float> x(y.size());
  for (int64_t first = 0; first < n; first += kBlock) {
    const int64_t m = std::min(kBlock, n - first);
    check(cudaMemcpy(y.data(), src + first, static_cast<size_t>(m) * sizeof(T), cudaMemcpyDeviceToHost), "download");
    for (int64_t i = 0; i < m; ++i) x[static_cast<size_t>(i)] = static_cast<float>(y[static_cast<size_t>(i)]);
    w.append(x.data(), m);
  }
}

int run(const std::string& in_path, const std::string& out_path) {
  const auto in = yoco::check::TensorFile::open(in_path);
  const auto& sh = in->info("q").shape;
  if (sh.size() != 4) throw yoco::InputError(in_path + ": tensor 'q' must be [B, T, H, D]");
  const int64_t B = sh[0], T = sh[1], H = sh[2], D = sh[3];
  for (const char* name : {"k", "v"})
    if (in->info(name).shape != sh) throw yoco::InputError(in_path + ": tensor '" + std::string(name) + "' must have q's shape");
  if (in->info("g").shape != std::vector<int64_t>{B, T, H})
    throw yoco::InputError(in_path + ": tensor 'g' must be [B, T, H] (this tool takes per-token decay, no cu_seqlens)");
  if (in->has("cu_seqlens"))
    throw yoco::InputError(in_path + ": tensor 'cu_seqlens': packed sequences are not served by this tool (batch rows only)");
  for (const char* name : {"q", "k", "v", "g"})
    if (!yoco::check::is_float_dtype(in->info(name).dtype))
      throw yoco::InputError(in_path + ": tensor '" + std::string(name) + "' must be a float tensor, is " + in->info(name).dtype);
  if (in->has("initial_state") && in->info("initial_state").shape != std::vector<int64_t>{B, H, D, D})
    throw yoco::InputError(in_path + ": tensor 'initial_state' must be [B, H, D, D] = " +
                           yoco::check::shape_str({B, H, D, D}) + ", is " + yoco::check::shape_str(in->info("initial_state").shape));
  if (!yoco::cuda::gret_chunk_supported(D))
    throw yoco::InputError(in_path + ": no chunkwise kernel serves head dim " + std::to_string(D));
  const int64_t n = B * T * H * D;
  DeviceBuffer<bf16> q(static_cast<size_t>(n)), k(static_cast<size_t>(n)), v(static_cast<size_t>(n)),
      o(static_cast<size_t>(n));
  DeviceBuffer<float> lg(static_cast<size_t>(B * T * H)), state(static_cast<size_t>(B * H * D * D));
  upload(*in, "q", q.p, n);
  upload(*in, "k", k.p, n);
  upload(*in, "v", v.p, n);
  upload(*in, "g", lg.p, B * T * H);
  if (in->has("initial_state")) upload(*in, "initial_state", state.p, B * H * D * D);
  else check(cudaMemset(state.p, 0, state.n * sizeof(float)), "zero state");
  int sm_count = 0;
  check(cudaDeviceGetAttribute(&sm_count, cudaDevAttrMultiProcessorCount, 0), "sm count");
  const yoco::cuda::GretChunkShape s{B, H, D, T, H * D};
  const yoco::cuda::GretChunkPlan plan = yoco::cuda::select_gret_chunk(s, sm_count);
  const size_t wsb = yoco::cuda::gret_chunk_workspace_bytes(s, plan);
  DeviceBuffer<unsigned char> ws(std::max<size_t>(wsb, 16));
  check(yoco::cuda::launch_gret_chunk(q.p, k.p, v.p, lg.p, state.p, o.p, s, plan, ws.p, wsb, nullptr), "launch");
  check(cudaDeviceSynchronize(), "gret chunk");
  yoco::SafetensorsWriter w(out_path, {{"o", yoco::DType::bf16, sh}, {"final_state", yoco::DType::f32, {B, H, D, D}}},
                            {{"kernel", "gret chunk v" + std::to_string(plan.kernel)},
                             {"chunk", std::to_string(plan.chunk)},
                             {"segments", std::to_string(plan.segments)}});
  download_append(w, o.p, n);
  download_append(w, state.p, B * H * D * D);
  w.commit();
  std::printf("gret chunk v%d (chunk %d, %d segment(s)) on %s: wrote %s\n", plan.kernel, plan.chunk, plan.segments,
              in_path.c_str(), out_path.c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: gret_chunk_on_file INPUTS.safetensors OUTPUTS.safetensors\n");
    return 2;
  }
  try {
    return run(argv[1], argv[2]);
  } catch (const yoco::InputError& e) {
    std::fprintf(stderr, "gret_chunk_on_file: error: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gret_chunk_on_file: failed: %s\n", e.what());
    return 1;
  }
}
