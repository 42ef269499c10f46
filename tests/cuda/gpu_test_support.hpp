#pragma once
// GPU tests skip, visibly, where no device is present (CI, the dev machine),
// and fail instead under YOCO_EXPECT_GPU=1 (the GPU suite sets it, so that a
// machine whose device went missing cannot pass by skipping everything).
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>

#include "device/device_query.hpp"

namespace yoco::cuda_test {
inline bool gpu_expected() {
  const char* e = std::getenv("YOCO_EXPECT_GPU");
  return e && std::strcmp(e, "1") == 0;
}
}  // namespace yoco::cuda_test

#define YOCO_REQUIRE_GPU()                                                                             \
  do {                                                                                                \
    const auto yoco_devices_ = ::yoco::cuda::query_devices();                                          \
    if (yoco_devices_.count == 0) {                                                                   \
      if (::yoco::cuda_test::gpu_expected()) FAIL() << "YOCO_EXPECT_GPU=1 but no CUDA device: " << yoco_devices_.error; \
      GTEST_SKIP() << "no CUDA device: " << yoco_devices_.error;                                       \
    }                                                                                                 \
  } while (0)
