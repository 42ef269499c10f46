#pragma once
// The decode GEMV's arithmetic (cuda/ops/gemv.cu) replayed on the CPU in the kernel's own order: each
// lane's fp32 sum over its pieces (a piece's 8 products chained by fma from 0, then added to the lane's
// sum), the warp's xor-butterfly of shuffles, lane 0's result. IEEE fp32 on both sides, so the GPU's
// fp32 outputs must equal these bit for bit (tests/cuda/test_gemv.cpp), and the CPU checks the order
// itself against the fp64 product (tests/test_gemv_plan.cpp). Host-only C++.
#include <array>
#include <cmath>
#include <cstdint>
#include <vector>

#include "dtype.hpp"
#include "ops/gemv_plan.hpp"

namespace yoco::cuda_test {

// out[r * n + j] = the kernel's fp32 sum for row r of x and weight row j; x [m, k] and w [n, k] given
// as values already in bf16 (each element's float equals its bf16).
inline std::vector<float> gemv_emulate(const std::vector<float>& x, int64_t m, int64_t k, const std::vector<float>& w,
                                       int64_t n) {
  namespace g = yoco::cuda::gemv;
  const int64_t P = g::pieces(k);
  std::vector<float> out(static_cast<size_t>(m * n));
  for (int64_t j = 0; j < n; ++j) {
    for (int64_t r = 0; r < m; ++r) {
      std::array<float, 32> lane{};
      for (int64_t p0 = 0; p0 < P; p0 += g::round_pieces())
        for (int u = 0; u < g::kUnroll; ++u)
          for (int l = 0; l < 32; ++l) {
            const int64_t p = g::piece_of(p0, u, l);
            if (p >= P) continue;
            float s = 0.0f;
            for (int64_t e = 0; e < g::kPieceElems; ++e) {
              const int64_t c = p * g::kPieceElems + e;
              s = std::fmaf(w[static_cast<size_t>(j * k + c)], x[static_cast<size_t>(r * k + c)], s);
            }
            lane[static_cast<size_t>(l)] += s;
          }
      for (int o = 16; o > 0; o >>= 1) {
        std::array<float, 32> next{};
        for (int l = 0; l < 32; ++l) next[static_cast<size_t>(l)] = lane[static_cast<size_t>(l)] + lane[static_cast<size_t>(l ^ o)];
        lane = next;
      }
      out[static_cast<size_t>(r * n + j)] = lane[0];
    }
  }
  return out;
}

}  // namespace yoco::cuda_test
