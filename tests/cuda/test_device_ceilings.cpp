// The ceilings every efficiency figure divides by must be plausible for the
// device: a copy between 100 GB/s and 20 TB/s, a bf16 GEMM above 10 TFLOP/s
// (an H100 does ~3 TB/s and ~600-800 TFLOP/s; these bounds catch unit slips and
// a timer that measured nothing, not a slow card).
#include <gtest/gtest.h>

#include "device/device_ceilings.hpp"
#include "gpu_test_support.hpp"

namespace yoco::cuda {
namespace {

TEST(DeviceCeilingsGpu, CopyAndGemmRatesArePlausible) {
  YOCO_REQUIRE_GPU();
  const DeviceCeilings c = measure_device_ceilings(256LL << 20, 4096, 5);
  ASSERT_TRUE(c.error.empty()) << c.error;
  EXPECT_EQ(c.copy_bw.repeats, 5);
  EXPECT_GT(c.copy_bw.median, 100e9);
  EXPECT_LT(c.copy_bw.median, 20e12);
  EXPECT_GT(c.gemm_flops.median, 10e12);
  EXPECT_LT(c.gemm_flops.median, 5e15);
  EXPECT_EQ(c.gemm_flops.repeats, 5);
  // The repeats agree: after the warm-up, samples of an 8192^3 GEMM and a 1 GiB
  // copy varied by 3% and 2% on the H100 (reports/results/nvidia-h100); the
  // bound is loose (3x) for the clock ramp of an idle card, and still fails for
  // a sample whose timer read nothing (an infinite rate) or that timed module
  // load or handle creation.
  EXPECT_LT(c.copy_bw.max, 3.0 * c.copy_bw.min);
  EXPECT_LT(c.gemm_flops.max, 3.0 * c.gemm_flops.min);
  std::printf("[ceilings] copy %.0f GB/s, bf16 GEMM %.1f TFLOP/s\n", c.copy_bw.median / 1e9,
              c.gemm_flops.median / 1e12);
}

}  // namespace
}  // namespace yoco::cuda
