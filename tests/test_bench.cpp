// `yoco bench` end to end on tiny models: every point ends as rows (measured,
// sampled, exact, or rows saying why it did not run) beside the analytic
// projection; the CSV reads back through the compare reader; bad options exit 2.
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "cli_runner.hpp"
#include "config.hpp"
#include "result_csv.hpp"

namespace {

using yoco::cli::ResultRow;
using Bench = yoco_test::CliTest;

const ResultRow* find(const std::vector<ResultRow>& rows, const std::string& model, int64_t n,
                      const std::string& metric, const std::string& device = "cpu") {
  for (const auto& r : rows)
    if (r.model == model && r.seq_len == n && r.metric == metric && r.prov.device == device) return &r;
  return nullptr;
}

TEST_F(Bench, EveryPointHasMeasuredRowsBesideAnalyticOnesAndRatios) {
  const std::string out = path("b.csv");
  const auto r = yoco("bench --model yoco-tiny,transformer-tiny --lengths 256,512 --gen 64 --decode-sample 8 "
                      "--repeats 2 --warmup 0 --max-batch 2 --out " + out);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("YOCO vs Transformer"), std::string::npos) << r.out;
  EXPECT_EQ(r.err.find("[bench "), std::string::npos) << "progress must stay off when stderr is not a terminal";
  const auto rows = yoco::cli::read_results_csv(out);
  for (const char* model : {"yoco-tiny", "transformer-tiny"}) {
    for (int64_t n : {256, 512}) {
      SCOPED_TRACE(std::string(model) + " " + std::to_string(n));
      const ResultRow* pre = find(rows, model, n, "prefill_latency_s");
      ASSERT_NE(pre, nullptr);
      EXPECT_EQ(pre->method, "measured");
      EXPECT_EQ(pre->repeats, 2);
      EXPECT_GT(*pre->value, 0);
      EXPECT_LE(*pre->min, *pre->value);
      EXPECT_GE(*pre->max, *pre->value);
      ASSERT_NE(find(rows, model, n, "decode_step_latency_s"), nullptr);
      // gen 64 > 8 sampled steps: the throughput says it was sampled.
      const ResultRow* tp = find(rows, model, n, "throughput_tokens_per_s");
      ASSERT_NE(tp, nullptr);
      EXPECT_EQ(tp->method, "sampled");
      EXPECT_EQ(tp->batch, 2);
      EXPECT_NE(tp->notes.find("sampled"), std::string::npos);
      // Memory: the reference's accounting, exact, equal to the analytic projection in fp32.
      const ResultRow* kv = find(rows, model, n, "mem_kv_cache_bytes");
      const ResultRow* kv_an = find(rows, model, n, "mem_kv_cache_bytes", "analytic");
      ASSERT_NE(kv, nullptr);
      ASSERT_NE(kv_an, nullptr);
      EXPECT_EQ(kv->method, "exact");
      EXPECT_EQ(*kv->value, *kv_an->value);
      ASSERT_NE(find(rows, model, n, "mem_host_peak_rss_bytes"), nullptr);
      // The projection of the same point.
      const ResultRow* an = find(rows, model, n, "prefill_latency_s", "analytic");
      ASSERT_NE(an, nullptr);
      EXPECT_EQ(an->method, "analytic");
    }
  }
  // Ceilings measured in the same run, and the pair's ratio rows.
  std::set<std::string> ceilings, ratios;
  for (const auto& row : rows) {
    if (row.phase == "ceiling") ceilings.insert(row.metric);
    if (row.model == "yoco-tiny vs transformer-tiny" && row.prov.device == "cpu") ratios.insert(row.metric);
  }
  EXPECT_EQ(ceilings, (std::set<std::string>{"copy_bw_gbs", "gemm_peak_tflops"}));
  EXPECT_EQ(ratios, (std::set<std::string>{"memory_reduction", "prefill_speedup", "decode_speedup", "throughput_gain"}));
  // YOCO's KV cache is L times smaller per token than the Transformer's here too (L = 4, same KV heads).
  EXPECT_EQ(*find(rows, "transformer-tiny", 512, "mem_kv_cache_bytes")->value,
            4 * *find(rows, "yoco-tiny", 512, "mem_kv_cache_bytes")->value);
}

// A point predicted to exceed the budget is not run: its rows say over_budget,
// carry no value, and the analytic row of the same point is there.
TEST_F(Bench, OverBudgetPointsBecomeRowsBesideTheirProjection) {
  const std::string out = path("b.csv");
  // 512 runs and teaches the predictor; 64K is then predicted at ~16000x the
  // attention work of 512 -- far beyond one second.
  const auto r = yoco("bench --model transformer-tiny --lengths 512,64K --metrics prefill --budget-s 1 --out " + out);
  ASSERT_EQ(r.status, 0) << r.err;
  const auto rows = yoco::cli::read_results_csv(out);
  const ResultRow* ran = find(rows, "transformer-tiny", 512, "prefill_latency_s");
  ASSERT_NE(ran, nullptr);
  EXPECT_EQ(ran->method, "measured");
  const ResultRow* skipped = find(rows, "transformer-tiny", 65536, "prefill_latency_s");
  ASSERT_NE(skipped, nullptr);
  EXPECT_EQ(skipped->method, "over_budget");
  EXPECT_FALSE(skipped->value.has_value());
  EXPECT_NE(skipped->notes.find("--budget-s 1"), std::string::npos) << skipped->notes;
  const ResultRow* proj = find(rows, "transformer-tiny", 65536, "prefill_latency_s", "analytic");
  ASSERT_NE(proj, nullptr);
  EXPECT_GT(*proj->value, 0);
  EXPECT_EQ(find(rows, "transformer-tiny", 512, "throughput_tokens_per_s"), nullptr) << "--metrics prefill only";
}

// A point that cannot fit in this machine's memory is an out_of_memory row, not a crash.
TEST_F(Bench, PointsThatCannotFitAreOutOfMemoryRows) {
  const std::string out = path("b.csv");
  const auto r = yoco("bench --model transformer-tiny --lengths 1099511627776 --metrics memory --out " + out);
  ASSERT_EQ(r.status, 0) << r.err;
  const auto rows = yoco::cli::read_results_csv(out);
  const ResultRow* m = find(rows, "transformer-tiny", int64_t{1} << 40, "mem_total_bytes");
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->method, "out_of_memory");
  EXPECT_NE(m->notes.find("host memory"), std::string::npos) << m->notes;
  EXPECT_NE(find(rows, "transformer-tiny", int64_t{1} << 40, "mem_total_bytes", "analytic"), nullptr);
}

TEST_F(Bench, JsonAndCsvGoToStdout) {
  const auto j = yoco("bench --model yoco-tiny --lengths 128 --metrics prefill --repeats 1 --warmup 0 --format json");
  ASSERT_EQ(j.status, 0) << j.err;
  EXPECT_EQ(j.out.rfind("[", 0), 0u) << j.out.substr(0, 200);
  EXPECT_NE(j.out.find("\"metric\": \"prefill_latency_s\""), std::string::npos);
  const auto c = yoco("bench --model yoco-tiny --lengths 128 --metrics prefill --repeats 1 --warmup 0 --format csv");
  ASSERT_EQ(c.status, 0) << c.err;
  EXPECT_EQ(c.out.rfind("git_sha,timestamp,host,device,device_name,driver,model,", 0), 0u);
}

TEST_F(Bench, BadOptionsExit2) {
  using yoco_test::expect_input_error;
  expect_input_error(yoco("bench --model yoco-tiny --metrics speed"), {"--metrics", "speed"}, "unknown metric");
  expect_input_error(yoco("bench --model nope --lengths 1K"), {"nope"}, "unknown model");
  expect_input_error(yoco("bench --lengths 1K --device tpu"), {"--device"}, "unknown device");
  expect_input_error(yoco("bench --lengths 1K --batch zero"), {"--batch"}, "bad batch");
  expect_input_error(yoco("bench --lengths 1K --results-dir /tmp"), {"--default-job"}, "default-job option alone");
  // Duplicate points (issue 12): refused before anything runs, not written twice.
  const std::string dup_out = path("dup.csv");
  for (const std::string& l : {std::string("1K,1K"), std::string("1K,2K,1024")}) {
    const auto r = yoco("bench --model yoco-tiny --lengths " + l + " --metrics memory --out " + dup_out);
    expect_input_error(r, {"--lengths", "1K", "twice"}, "duplicate lengths " + l);
  }
  expect_input_error(yoco("bench --model yoco-tiny,transformer-tiny,yoco-tiny --lengths 128 --metrics memory --out " + dup_out),
                     {"--model", "yoco-tiny", "twice"}, "duplicate models");
  expect_input_error(yoco("model --model yoco-tiny --lengths 1K,1K"), {"--lengths", "twice"}, "model: duplicate lengths");
  expect_input_error(yoco("model --model yoco-tiny,yoco-tiny --lengths 1K"), {"--model", "twice"}, "model: duplicate models");
  EXPECT_FALSE(std::filesystem::exists(dup_out));
  // --gen at or above a length: throughput has no prompt there; said, naming the length, not a silent gap.
  expect_input_error(yoco("bench --model yoco-tiny --lengths 512,1K --gen 512 --out " + dup_out),
                     {"--gen 512", "length 512", "throughput"}, "gen = length");
  expect_input_error(yoco("bench --model yoco-tiny --lengths 128 --gen 1000 --metrics throughput"), {"--gen", "128"},
                     "gen > length");
  EXPECT_FALSE(std::filesystem::exists(dup_out));
  // Without throughput, --gen does not matter.
  EXPECT_EQ(yoco("bench --model yoco-tiny --lengths 128 --gen 1000 --metrics memory --format csv").status, 0);
  // CUDA: not built here, or no device, or no runner yet -- said, not crashed.
  const auto cuda = yoco("bench --device cuda --model yoco-tiny --lengths 1K");
  expect_input_error(cuda, {"--device cuda"}, "cuda");
}

}  // namespace
