#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <string>
#include <vector>

#include "device/device_ceilings.hpp"

namespace yoco::cuda {

namespace {

Rate summarize(std::vector<double> v) {
  Rate r;
  if (v.empty()) return r;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  r.median = n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
  r.min = v.front();
  r.max = v.back();
  r.repeats = static_cast<int>(n);
  return r;
}

// Times `work` `repeats` times after two warm-ups; returns seconds per run.
template <class F>
std::vector<double> time_runs(int repeats, F&& work, std::string& error) {
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  std::vector<double> t;
  for (int i = 0; i < repeats + 2 && error.empty(); ++i) {
    cudaEventRecord(start);
    work();
    cudaEventRecord(stop);
    if (cudaEventSynchronize(stop) != cudaSuccess) {
      error = cudaGetErrorString(cudaGetLastError());
      break;
    }
    float ms = 0;
    cudaEventElapsedTime(&ms, start, stop);
    if (i >= 2) t.push_back(ms * 1e-3);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return t;
}

__global__ void fill_bf16(__nv_bfloat16* p, long long n, float scale) {
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<long long>(gridDim.x) * blockDim.x)
    p[i] = __float2bfloat16(scale * static_cast<float>((i * 2654435761LL) % 2001 - 1000) / 1000.0f);
}

}  // namespace

DeviceCeilings measure_device_ceilings(long long copy_bytes, int gemm_n, int repeats) {
  DeviceCeilings c;
  // Copy: two buffers, device to device.
  void *src = nullptr, *dst = nullptr;
  if (cudaMalloc(&src, copy_bytes) != cudaSuccess || cudaMalloc(&dst, copy_bytes) != cudaSuccess) {
    c.error = "copy buffers: " + std::string(cudaGetErrorString(cudaGetLastError()));
    cudaFree(src);
    return c;
  }
  cudaMemset(src, 1, copy_bytes);
  std::vector<double> t = time_runs(repeats, [&] { cudaMemcpyAsync(dst, src, copy_bytes, cudaMemcpyDeviceToDevice); },
                                    c.error);
  for (double& x : t) x = 2.0 * static_cast<double>(copy_bytes) / x;
  c.copy_bw = summarize(t);
  c.copy_desc = "cudaMemcpy device to device, " + std::to_string(copy_bytes >> 20) + " MiB, read + write counted";
  cudaFree(src);
  cudaFree(dst);
  if (!c.error.empty()) return c;

  // GEMM: C = A·B, bf16 in, fp32 accumulate, bf16 out (the projections' setting).
  const long long n = gemm_n, elems = n * n;
  __nv_bfloat16 *a = nullptr, *b = nullptr, *out = nullptr;
  if (cudaMalloc(&a, elems * 2) != cudaSuccess || cudaMalloc(&b, elems * 2) != cudaSuccess ||
      cudaMalloc(&out, elems * 2) != cudaSuccess) {
    c.error = "GEMM buffers: " + std::string(cudaGetErrorString(cudaGetLastError()));
    cudaFree(a);
    cudaFree(b);
    return c;
  }
  fill_bf16<<<1024, 256>>>(a, elems, 1.0f);
  fill_bf16<<<1024, 256>>>(b, elems, 0.5f);
  cublasHandle_t h = nullptr;
  if (cublasCreate(&h) != CUBLAS_STATUS_SUCCESS) {
    c.error = "cublasCreate failed";
  } else {
    const float alpha = 1.0f, beta = 0.0f;
    cublasStatus_t status = CUBLAS_STATUS_SUCCESS;
    t = time_runs(repeats,
                  [&] {
                    status = cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, gemm_n, gemm_n, gemm_n, &alpha, a, CUDA_R_16BF,
                                          gemm_n, b, CUDA_R_16BF, gemm_n, &beta, out, CUDA_R_16BF, gemm_n,
                                          CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
                  },
                  c.error);
    if (status != CUBLAS_STATUS_SUCCESS && c.error.empty()) c.error = "cublasGemmEx failed";
    for (double& x : t) x = 2.0 * static_cast<double>(n) * n * n / x;
    c.gemm_flops = summarize(t);
    c.gemm_desc = "cublasGemmEx bf16 x bf16 -> bf16, fp32 accumulate, m = n = k = " + std::to_string(gemm_n);
    cublasDestroy(h);
  }
  cudaFree(a);
  cudaFree(b);
  cudaFree(out);
  return c;
}

}  // namespace yoco::cuda
