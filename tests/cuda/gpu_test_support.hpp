#pragma once
// GPU tests skip, visibly, where no device is present (CI, the dev machine).
#include <gtest/gtest.h>

#include "device_query.hpp"

#define YOCO_REQUIRE_GPU()                                                                  \
  do {                                                                                     \
    const auto yoco_devices_ = ::yoco::cuda::query_devices();                               \
    if (yoco_devices_.count == 0) GTEST_SKIP() << "no CUDA device: " << yoco_devices_.error; \
  } while (0)
