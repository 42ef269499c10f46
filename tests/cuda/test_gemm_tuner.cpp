// The runners' GEMM on its tuned path (ops/gemm_tuner.hpp: each shape's fastest cuBLASLt candidate,
// timed at first use) against the fp64 product within DESIGN.md §6's bound:
// - at the runners' kinds of shape: a prefill step's rows, a decode step's one row, the fp32
//   gate logits;
// - one algorithm kept a shape: the second call's bits equal the first's, with no new timing, and a
//   second Gemm of the process takes the first's choice;
// - a shape first met inside a CUDA graph capture takes the first candidate, untimed, and replays
//   to the bits of an eager call after it;
// - back on cublasGemmEx's path, the record is gone;
// - accumulate_f32 adds the product into an fp32 buffer (beta 1), on either path;
// - a ragged prefill chunk (rows of the large class) takes its class's algorithm, untimed.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "device_test_data.hpp"
#include "gpu_test_support.hpp"
#include "ops/gemm.hpp"

namespace yoco::cuda {
namespace {

using namespace yoco::cuda_test;

std::vector<double> exact_product(const std::vector<float>& x, const std::vector<float>& w, int64_t m, int64_t k,
                                  int64_t n) {
  std::vector<double> y(static_cast<size_t>(m * n));
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double s = 0;
      for (int64_t t = 0; t < k; ++t)
        s += static_cast<double>(x[static_cast<size_t>(i * k + t)]) * w[static_cast<size_t>(j * k + t)];
      y[static_cast<size_t>(i * n + j)] = s;
    }
  return y;
}

struct Shape {
  int64_t m, k, n;
  size_t out() const { return static_cast<size_t>(m * n); }
};

// A product's random bf16 operands, on the host (for the fp64 product) and on the device.
struct Operands {
  std::vector<float> x, w;
  DeviceArray<__nv_bfloat16> dx, dw;
  Operands(const Shape& s, uint64_t seed)
      : x(random_bf16_values(static_cast<size_t>(s.m * s.k), seed)),
        w(random_bf16_values(static_cast<size_t>(s.n * s.k), seed + 1, 0.05f)),
        dx(x.size()),
        dw(w.size()) {
    upload_bf16(dx, x);
    upload_bf16(dw, w);
  }
};

TEST(GemmTuner, TunedProductsAreRightAtTheRunnersShapes) {
  YOCO_REQUIRE_GPU();
  Gemm gemm;
  ASSERT_TRUE(gemm.ok()) << gemm.error();
  DeviceArray<unsigned char> workspace(size_t{32} << 20);
  ASSERT_EQ(gemm.set_workspace(workspace.ptr, workspace.n), "");
  ASSERT_EQ(gemm.choose_algorithms(GemmAlgorithms::tuned), "");
  EXPECT_EQ(gemm.algorithms(), GemmAlgorithms::tuned);
  // A prefill step's rows (ragged), a decode step's one row, a wide projection.
  for (const Shape s : {Shape{300, 256, 1536}, Shape{1, 3072, 3072}, Shape{1024, 512, 2048}}) {
    SCOPED_TRACE("m " + std::to_string(s.m) + " k " + std::to_string(s.k) + " n " + std::to_string(s.n));
    const Operands op(s, 11);
    const auto& [x, w, dx, dw] = op;
    DeviceArray<__nv_bfloat16> dy(s.out());
    ASSERT_EQ(gemm.linear(dx.ptr, s.m, s.k, dw.ptr, s.n, dy.ptr, nullptr), "");
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    const auto exact = exact_product(x, w, s.m, s.k, s.n);
    EXPECT_LE(rms_error(download_bf16(dy), exact), bf16_output_bound(exact));
  }
  // The fp32 gate logits (gt_proj: n = the heads). fp32 output leaves only the accumulation's error,
  // whose size depends on the tensor cores' summation, not on the algorithm's choice: held to twice
  // cublasGemmEx's on the same inputs.
  {
    const Shape s{512, 3072, 24};
    const Operands op(s, 13);
    const auto& [x, w, dx, dw] = op;
    DeviceArray<float> dy(s.out()), dref(s.out());
    ASSERT_EQ(gemm.linear_f32(dx.ptr, s.m, s.k, dw.ptr, s.n, dy.ptr, nullptr), "");
    Gemm plain;
    ASSERT_EQ(plain.linear_f32(dx.ptr, s.m, s.k, dw.ptr, s.n, dref.ptr, nullptr), "");
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    const auto exact = exact_product(x, w, s.m, s.k, s.n);
    EXPECT_LE(rms_error(download(dy), exact), 2.0 * rms_error(download(dref), exact) + 1e-7);
  }
  const auto record = gemm.tuning_record();
  ASSERT_EQ(record.size(), 4u);
  for (const auto& line : record) {
    SCOPED_TRACE(line);
    EXPECT_NE(line.find("(timed)"), std::string::npos);
  }
}

TEST(GemmTuner, KeepsOneAlgorithmAShapeAndTimesItOnce) {
  YOCO_REQUIRE_GPU();
  Gemm gemm;
  ASSERT_EQ(gemm.choose_algorithms(GemmAlgorithms::tuned), "");
  const Shape s{1024, 1024, 2048};
  const Operands op(s, 21);
  const auto& [x, w, dx, dw] = op;
  DeviceArray<__nv_bfloat16> y1(s.out()), y2(s.out());
  ASSERT_EQ(gemm.linear(dx.ptr, s.m, s.k, dw.ptr, s.n, y1.ptr, nullptr), "");
  EXPECT_EQ(gemm.tuning_timings(), 1);
  const auto first = gemm.tuning_record();
  ASSERT_EQ(gemm.linear(dx.ptr, s.m, s.k, dw.ptr, s.n, y2.ptr, nullptr), "");
  EXPECT_EQ(gemm.tuning_timings(), 1) << "the shape was timed again";
  // A second Gemm of the process: the first's choice, untimed, the same bits.
  Gemm other;
  ASSERT_EQ(other.choose_algorithms(GemmAlgorithms::tuned), "");
  DeviceArray<__nv_bfloat16> y3(s.out());
  ASSERT_EQ(other.linear(dx.ptr, s.m, s.k, dw.ptr, s.n, y3.ptr, nullptr), "");
  EXPECT_EQ(other.tuning_timings(), 0) << "a second Gemm timed a shape the process had chosen for";
  EXPECT_EQ(other.tuning_record(), first);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(gemm.tuning_record(), first);
  const auto a = download_bf16(y1), b = download_bf16(y2), c = download_bf16(y3);
  ASSERT_EQ(a.size(), b.size());
  size_t differ = 0, differ_other = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    differ += a[i] != b[i];
    differ_other += a[i] != c[i];
  }
  EXPECT_EQ(differ, 0u) << "the kept algorithm wrote other bits on its second call";
  EXPECT_EQ(differ_other, 0u) << "a second Gemm of the process wrote other bits";
}

// A prefill's ragged last chunk: rows of the large class (GemmTuner::kLargeRows and up) take the
// algorithm the class's first row count was timed for, untimed and right; rows below the class are
// their own shape, timed.
TEST(GemmTuner, ARaggedChunkTakesItsClasssAlgorithmUntimed) {
  YOCO_REQUIRE_GPU();
  Gemm gemm;
  ASSERT_EQ(gemm.choose_algorithms(GemmAlgorithms::tuned), "");
  const int64_t k = 64, n = 256;
  int expected_timings = 0;
  for (const int64_t m : {int64_t{4608}, int64_t{4200}, int64_t{4000}}) {
    SCOPED_TRACE("m " + std::to_string(m));
    const Shape s{m, k, n};
    const Operands op(s, 31);
    const auto& [x, w, dx, dw] = op;
    DeviceArray<__nv_bfloat16> dy(s.out());
    ASSERT_EQ(gemm.linear(dx.ptr, s.m, s.k, dw.ptr, s.n, dy.ptr, nullptr), "");
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    if (m != 4200) ++expected_timings;  // 4200 is 4608's class
    EXPECT_EQ(gemm.tuning_timings(), expected_timings);
    const auto exact = exact_product(x, w, s.m, s.k, s.n);
    EXPECT_LE(rms_error(download_bf16(dy), exact), bf16_output_bound(exact));
  }
  const auto record = gemm.tuning_record();
  ASSERT_EQ(record.size(), 2u);  // m 4000's shape, and the class of 4608 with 4200 in it
  bool reused = false;
  for (const auto& line : record)
    reused = reused || (line.rfind("m 4608 ", 0) == 0 && line.find("; m 4200: ") != std::string::npos);
  EXPECT_TRUE(reused) << "the record does not say that m 4200 took m 4608's class";
}

// The rows' classes: host arithmetic, no GPU.
TEST(GemmTuner, RowsBelow4096AreTheirOwnClassAndTheRestOne) {
  static_assert(GemmTuner::rows_class(1) == 1 && GemmTuner::rows_class(4095) == 4095);
  EXPECT_EQ(GemmTuner::rows_class(4096), GemmTuner::rows_class(32768));
  EXPECT_EQ(GemmTuner::rows_class(31744), GemmTuner::rows_class(4096));
  EXPECT_NE(GemmTuner::rows_class(4095), GemmTuner::rows_class(4096));
}

TEST(GemmTuner, AShapeFirstMetInACaptureTakesTheFirstCandidateAndReplaysToTheEagerBits) {
  YOCO_REQUIRE_GPU();
  Gemm gemm;
  ASSERT_EQ(gemm.choose_algorithms(GemmAlgorithms::tuned), "");
  const Shape s{4, 768, 1536};
  const Operands op(s, 31);
  const auto& [x, w, dx, dw] = op;
  DeviceArray<__nv_bfloat16> graph_y(s.out()), eager_y(s.out());
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  cudaGraph_t graph = nullptr;
  ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  const std::string captured = gemm.linear(dx.ptr, s.m, s.k, dw.ptr, s.n, graph_y.ptr, stream);
  ASSERT_EQ(cudaStreamEndCapture(stream, &graph), cudaSuccess);
  ASSERT_EQ(captured, "");
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  ASSERT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
  ASSERT_EQ(gemm.linear(dx.ptr, s.m, s.k, dw.ptr, s.n, eager_y.ptr, stream), "");
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  EXPECT_EQ(gemm.tuning_timings(), 0);
  const auto record = gemm.tuning_record();
  ASSERT_EQ(record.size(), 1u);
  EXPECT_NE(record[0].find("candidate 0 of"), std::string::npos) << record[0];
  EXPECT_NE(record[0].find("untimed"), std::string::npos) << record[0];
  EXPECT_EQ(download_bf16(graph_y), download_bf16(eager_y));
  const auto exact = exact_product(x, w, s.m, s.k, s.n);
  EXPECT_LE(rms_error(download_bf16(graph_y), exact), bf16_output_bound(exact));
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(stream);
}

TEST(GemmTuner, BackOnCublasTheRecordIsGone) {
  YOCO_REQUIRE_GPU();
  Gemm gemm;
  ASSERT_EQ(gemm.choose_algorithms(GemmAlgorithms::tuned), "");
  const Shape s{64, 128, 256};
  const Operands op(s, 41);
  const auto& [x, w, dx, dw] = op;
  DeviceArray<__nv_bfloat16> dy(s.out());
  ASSERT_EQ(gemm.linear(dx.ptr, 64, 128, dw.ptr, 256, dy.ptr, nullptr), "");
  EXPECT_EQ(gemm.tuning_record().size(), 1u);
  ASSERT_EQ(gemm.choose_algorithms(GemmAlgorithms::cublas), "");
  EXPECT_EQ(gemm.algorithms(), GemmAlgorithms::cublas);
  EXPECT_TRUE(gemm.tuning_record().empty());
  ASSERT_EQ(gemm.linear(dx.ptr, 64, 128, dw.ptr, 256, dy.ptr, nullptr), "");
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const auto exact = exact_product(x, w, 64, 128, 256);
  EXPECT_LE(rms_error(download_bf16(dy), exact), bf16_output_bound(exact));
}

TEST(GemmTuner, AccumulateAddsTheProductIntoTheFp32Residual) {
  YOCO_REQUIRE_GPU();
  for (const GemmAlgorithms path : {GemmAlgorithms::cublas, GemmAlgorithms::tuned}) {
    Gemm gemm;
    ASSERT_EQ(gemm.choose_algorithms(path), "");
    const Shape s{96, 256, 512};
    const Operands op(s, 51);
    const auto& [x, w, dx, dw] = op;
    std::vector<float> y0(s.out());
    for (size_t i = 0; i < y0.size(); ++i) y0[i] = static_cast<float>(i % 97) * 0.03125f - 1.5f;
    DeviceArray<float> dy(y0.size());
    upload(dy, y0);
    ASSERT_EQ(gemm.accumulate_f32(dx.ptr, s.m, s.k, dw.ptr, s.n, dy.ptr, nullptr), "");
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    auto want = exact_product(x, w, s.m, s.k, s.n);
    for (size_t i = 0; i < want.size(); ++i) want[i] += y0[i];
    // fp32 accumulation over k = 256 and one fp32 add: far inside 1e-5 relative.
    EXPECT_LE(rms_error(download(dy), want), 1e-5) << (path == GemmAlgorithms::tuned ? "tuned" : "cublas");
  }
}

}  // namespace
}  // namespace yoco::cuda
