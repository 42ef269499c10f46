// cuBLAS loaded at its first call (cuda/device/cublas_loader.cpp), checked
// without a GPU: a host-only cuBLASLt call goes through the loader and
// succeeds; every function it forwards is in the libraries it opens.
#include <gtest/gtest.h>

#include <cublasLt.h>

#include <string>
#include <vector>

#include "device/cublas_loader.hpp"

namespace yoco::cuda {
namespace {

// gtest_discover_tests runs each test in a process of its own: this one is first in its process.
TEST(CublasLoader, NothingIsLoadedBeforeTheFirstCallAndAHostOnlyCallWorks) {
  EXPECT_FALSE(cublas_loaded()) << "cuBLAS was mapped at program start: is it linked again?";
  cublasLtMatrixLayout_t layout = nullptr;
  // A layout is host state only: no device is needed.
  ASSERT_EQ(cublasLtMatrixLayoutCreate(&layout, CUDA_R_16BF, 64, 32, 64), CUBLAS_STATUS_SUCCESS);
  ASSERT_NE(layout, nullptr);
  EXPECT_TRUE(cublas_loaded());
  EXPECT_EQ(cublasLtMatrixLayoutDestroy(layout), CUBLAS_STATUS_SUCCESS);
}

TEST(CublasLoader, TheArgumentsReachTheLibraryInTheirPlaces) {
  cublasLtMatmulDesc_t desc = nullptr;
  ASSERT_EQ(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F), CUBLAS_STATUS_SUCCESS);
  const cublasOperation_t t = CUBLAS_OP_T;
  // The last argument, the value's size, decides: one byte short is refused by the library itself.
  EXPECT_EQ(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &t, sizeof t), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &t, sizeof t - 1),
            CUBLAS_STATUS_INVALID_VALUE);
  EXPECT_EQ(cublasLtMatmulDescDestroy(desc), CUBLAS_STATUS_SUCCESS);
  // A null output pointer: the library's own check answers, not the loader's NOT_INITIALIZED.
  EXPECT_EQ(cublasLtMatrixLayoutCreate(nullptr, CUDA_R_16BF, 64, 32, 64), CUBLAS_STATUS_INVALID_VALUE);
}

TEST(CublasLoader, EveryForwardedFunctionIsInTheLibraries) {
  EXPECT_GE(cublas_functions_forwarded(), 19);
  const std::vector<std::string> missing = cublas_symbols_missing();
  std::string all;
  for (const auto& m : missing) all += m + "\n";
  EXPECT_TRUE(missing.empty()) << all;
}

}  // namespace
}  // namespace yoco::cuda
