// `yoco bench` end to end on tiny models: every point ends as rows (measured,
// sampled, exact, or rows saying why it did not run) beside the analytic
// projection; the CSV reads back through the compare reader; bad options exit 2.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <optional>
#include <set>

#include "cli_runner.hpp"
#include "config.hpp"
#include "result_csv.hpp"
#include "sanitizer_build.hpp"

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
      // KV bytes per token as held, equal to the cost model's (fp32 here).
      const ResultRow* per_token = find(rows, model, n, "kv_cache_bytes_per_token");
      ASSERT_NE(per_token, nullptr);
      for (const auto& r : rows)
        if (r.model == model && r.metric == "kv_cache_bytes_per_token" && r.prov.device == "analytic") {
          EXPECT_EQ(*per_token->value, *r.value);
        }
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
  EXPECT_EQ(ratios, (std::set<std::string>{"memory_reduction", "kv_cache_reduction", "prefill_speedup",
                                             "decode_speedup", "throughput_gain"}));
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

TEST_F(Bench, NotesOnATerminalStartALineOfTheirOwn) {
  // script(1) gives the run a terminal, so that the progress line is drawn.
  if (std::system("command -v script >/dev/null 2>&1") != 0) GTEST_SKIP() << "no script(1) for a terminal";
  const std::string log = path("tty.log");
  const std::string cmd = yoco_test::shell_quote(YOCO_CLI_PATH) +
                          " bench --model yoco-tiny --lengths 128 --metrics prefill --repeats 1 --warmup 0 --format csv"
                          " --out " + yoco_test::shell_quote(path("t.csv")) + " >/dev/null";
  const auto r = shell("script -qec " + yoco_test::shell_quote(cmd) + " " + yoco_test::shell_quote(log));
  ASSERT_EQ(r.status, 0) << r.err;
  const std::string tty = yoco_test::slurp(log);
  const size_t note = tty.find("yoco bench: 1 points;");
  ASSERT_NE(note, std::string::npos) << tty;
  ASSERT_NE(tty.find("[bench "), std::string::npos) << "no progress line drawn: " << tty;
  // After the progress line's text, a note that does not clear it runs on from it.
  EXPECT_TRUE(note == 0 || tty[note - 1] == '\n' || tty.compare(note - 4, 4, "\r\033[K") == 0)
      << tty.substr(note > 80 ? note - 80 : 0, 120);
}

// Issue 12: --out is rewritten after each point, so that a run stopped by a
// signal keeps its completed points, and --resume finishes it with the rows an
// uninterrupted run writes (timings aside).
struct Stopped {
  int status = -1;  // the shell's $?: 128 + signal
  std::string err;
};

// Starts `yoco <args>` in the background, waits until `out` holds its first
// point, sends `signal`, and waits for the end.
Stopped stop_after_first_point(const std::string& dir, const std::string& args, const std::string& out,
                               const std::string& signal) {
  using yoco_test::shell_quote;
  const std::string err = dir + "/stop.err", rc = dir + "/stop.rc";
  const std::string script = shell_quote(YOCO_CLI_PATH) + " " + args + " >/dev/null 2>" + shell_quote(err) +
                             " & p=$!; while [ ! -s " + shell_quote(out) + " ]; do sleep 0.01; done; kill -" + signal +
                             " $p; { wait $p; } 2>/dev/null; echo $? >" + shell_quote(rc);
  EXPECT_EQ(std::system(("bash -c " + shell_quote(script)).c_str()), 0);
  Stopped s;
  s.status = std::stoi(yoco_test::slurp(rc));
  s.err = yoco_test::slurp(err);
  return s;
}

// What does not depend on timing: each row's key, unit and method, in file
// order, and the values of the exact rows and of the analytic counts.
std::vector<std::string> untimed(const std::vector<ResultRow>& rows) {
  std::vector<std::string> t;
  for (const auto& r : rows) {
    std::string line = r.prov.device + "|" + yoco::cli::result_key(r) + "|" + r.unit + "|" + r.method;
    if (r.method == "exact" || (r.method == "analytic" && (r.unit == "B" || r.unit == "FLOP" || r.unit == "count")))
      line.append("|").append(yoco::cli::format_value(r.value));
    t.push_back(line);
  }
  return t;
}

TEST_F(Bench, InterruptedSweepKeepsItsPointsAndResumeFinishesIt) {
  // Enough points that the run is still going when the first one is on disk.
  // Under AddressSanitizer the reference runs about ten times slower and the
  // test makes seven runs: the same eight points, shorter, keep it in minutes.
  const std::string sweep =
      yoco_test::kAddressSanitizer
          ? "bench --model transformer-tiny,yoco-tiny --lengths 128,256,512,1K --gen 16 "
            "--decode-sample 4 --repeats 1 --warmup 0 --max-batch 2 --format csv"
          : "bench --model transformer-tiny,yoco-tiny --lengths 256,1K,2K,4K --gen 64 "
            "--decode-sample 4 --repeats 1 --warmup 0 --max-batch 2 --format csv";
  const std::string full = path("full.csv");
  ASSERT_EQ(yoco(sweep + " --out " + full).status, 0);
  const auto want = untimed(yoco::cli::read_results_csv(full));
  for (const std::string signal : {"TERM", "INT", "KILL"}) {
    SCOPED_TRACE("SIG" + signal);
    const std::string out = path("stopped-" + signal + ".csv");
    const Stopped st = stop_after_first_point(dir_.string(), sweep + " --out " + out, out, signal);
    if (signal == "KILL") {
      EXPECT_EQ(st.status, 128 + 9);
    } else {
      EXPECT_EQ(st.status, signal == "TERM" ? 143 : 130) << st.err;
      EXPECT_NE(st.err.find("interrupted (SIG" + signal + ")"), std::string::npos) << st.err;
      EXPECT_NE(st.err.find("of 8 points kept in " + out), std::string::npos) << st.err;
      EXPECT_NE(st.err.find("--resume"), std::string::npos) << st.err;
    }
    // The file is whole and readable, and holds whole points: a prefix of a full run's rows.
    const auto kept = untimed(yoco::cli::read_results_csv(out));
    ASSERT_GT(kept.size(), 2u);
    ASSERT_LT(kept.size(), want.size());
    EXPECT_TRUE(std::equal(kept.begin(), kept.end(), want.begin())) << "rows on disk after the interrupt";
    // Resumed: the points on disk are kept, the others measured; the rows are those of a full run.
    const auto r = yoco(sweep + " --out " + out + " --resume");
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_NE(r.err.find("resuming: "), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find("resuming: 0 of"), std::string::npos) << r.err;
    EXPECT_EQ(untimed(yoco::cli::read_results_csv(out)), want);
  }
}

// timeout(1) signals the process and then its group, and a user may press
// Ctrl-C twice: the handler was installed with SA_RESETHAND, so a second stop
// signal arriving as the first was delivered killed the process at once,
// without the "interrupted" message (about one run in four), and a SIGTERM
// after a SIGINT printed a second message and exited 143. The signals back to
// back, a few times: each run says it once, by the first signal, exit 130.
TEST_F(Bench, StopSignalsBackToBackSayWhatWasKeptOnce) {
  using yoco_test::shell_quote;
  const std::string sweep = "bench --model transformer-tiny,yoco-tiny --lengths 256,1K,2K,4K --gen 64 "
                            "--decode-sample 4 --repeats 1 --warmup 0 --max-batch 2 --format csv";
  for (int attempt = 0; attempt < 6; ++attempt) {
    SCOPED_TRACE("attempt " + std::to_string(attempt));
    const std::string out = path("burst-" + std::to_string(attempt) + ".csv");
    const std::string err = path("burst.err"), rc = path("burst.rc");
    const std::string script = shell_quote(YOCO_CLI_PATH) + " " + sweep + " --out " + shell_quote(out) +
                               " >/dev/null 2>" + shell_quote(err) + " & p=$!; while [ ! -s " + shell_quote(out) +
                               " ]; do sleep 0.01; done; kill -INT $p; kill -INT $p; kill -TERM $p; "
                               "{ wait $p; } 2>/dev/null; echo $? >" + shell_quote(rc);
    ASSERT_EQ(std::system(("bash -c " + shell_quote(script)).c_str()), 0);
    const std::string e = yoco_test::slurp(err);
    EXPECT_EQ(std::stoi(yoco_test::slurp(rc)), 130) << e;
    const size_t at = e.find("interrupted (SIGINT)");
    EXPECT_NE(at, std::string::npos) << e;
    EXPECT_EQ(e.find("interrupted (", at == std::string::npos ? 0 : at + 1), std::string::npos) << e;
    EXPECT_NE(e.find("of 8 points kept in " + out), std::string::npos) << e;
    EXPECT_GT(yoco::cli::read_results_csv(out).size(), 2u);
  }
}

// A stop signal before the first point finished: nothing was written, and the message said "0 of 8
// points kept in k.csv; run ... --resume" of a file that did not exist (or was an older run's).
TEST_F(Bench, StopBeforeAnyPointSaysNoFileWasWritten) {
  using yoco_test::shell_quote;
  // One long point: the signal comes once the sweep has said its plan (the handler is in place), long
  // before a Transformer prefill at 32K ends.
  // A budget no prediction passes: under the sanitizers on a loaded machine the roofline's forecast passed
  // the default 60 s, the point became an over_budget row at once, and "1 of 1 points kept" was the answer.
  const std::string sweep =
      "bench --model transformer-tiny --lengths 32K --metrics prefill --repeats 3 --warmup 1 --budget-s 36000";
  for (const bool earlier : {false, true}) {
    SCOPED_TRACE(earlier ? "an earlier file there" : "no file there");
    // An error file of its own: the wait for the plan read the first pass's (before the shell opened this
    // one), signalled the shell before it ran yoco, and found the first pass's message.
    const std::string tag = earlier ? "earlier" : "k";
    const std::string out = path(tag + ".csv"), err = path(tag + ".err"), rc = path(tag + ".rc");
    if (earlier) yoco_test::spit(out, "an earlier run's file\n");
    const std::string script = shell_quote(YOCO_CLI_PATH) + " " + sweep + " --out " + shell_quote(out) +
                               " >/dev/null 2>" + shell_quote(err) + " & p=$!; until grep -q 'points; their timed' " +
                               shell_quote(err) + " 2>/dev/null; do sleep 0.01; done; kill -INT $p; "
                               "{ wait $p; } 2>/dev/null; echo $? >" + shell_quote(rc);
    ASSERT_EQ(std::system(("timeout 120 bash -c " + shell_quote(script)).c_str()), 0);
    const std::string e = yoco_test::slurp(err);
    EXPECT_EQ(std::stoi(yoco_test::slurp(rc)), 130) << e;
    EXPECT_NE(e.find("interrupted (SIGINT): no point finished, so no file was written (" + out + " untouched)"),
              std::string::npos)
        << e;
    EXPECT_EQ(e.find("points kept"), std::string::npos) << e;
    if (earlier) EXPECT_EQ(yoco_test::slurp(out), "an earlier run's file\n");
    else EXPECT_FALSE(std::filesystem::exists(out));
  }
}

TEST_F(Bench, ResumeRefusesAnotherConfigurationAndSaysWhatItNeeds) {
  using yoco_test::expect_input_error;
  const std::string out = path("r.csv");
  const std::string sweep = "bench --model yoco-tiny --lengths 128,256 --metrics memory,prefill --repeats 1 --warmup 0";
  ASSERT_EQ(yoco(sweep + " --out " + out).status, 0);
  const std::string before = yoco_test::slurp(out);
  expect_input_error(yoco(sweep + " --out " + out + " --resume --dtype f64"), {out, "other settings", "--dtype"},
                     "another precision");
  expect_input_error(yoco(sweep + " --out " + out + " --resume --device-name other"), {out, "'other'", "--device-name"},
                     "another device name");
  expect_input_error(yoco("bench --model yoco-tiny --lengths 256 --metrics memory,prefill --repeats 1 --warmup 0 --out " +
                          out + " --resume"),
                     {out, "128", "not a point of this sweep"}, "a point outside the sweep");
  EXPECT_EQ(yoco_test::slurp(out), before) << "a refused resume leaves the file as it was";
  expect_input_error(yoco(sweep + " --resume"), {"--resume", "--out"}, "--resume without --out");
  const std::string junk = path("junk.csv");
  yoco_test::spit(junk, "not,a,results,file\n");
  expect_input_error(yoco(sweep + " --out " + junk + " --resume"), {junk}, "not a results CSV");
  // A file that does not exist yet: the sweep starts from its first point, said so.
  const std::string fresh = path("fresh.csv");
  const auto f = yoco(sweep + " --out " + fresh + " --resume");
  ASSERT_EQ(f.status, 0) << f.err;
  EXPECT_NE(f.err.find("does not exist yet"), std::string::npos) << f.err;
  EXPECT_EQ(untimed(yoco::cli::read_results_csv(fresh)), untimed(yoco::cli::read_results_csv(out)));
  // --help says it.
  const auto h = yoco("bench --help");
  EXPECT_NE(h.out.find("--resume"), std::string::npos);
}

// The README's synopsis of yoco bench gives each option's default: --budget-s
// said 120 s (the GPU default job's) where the code's default is 60 s.
TEST_F(Bench, TheReadmeSynopsisGivesTheBudgetDefaultOfTheHelp) {
  const std::string readme = yoco_test::slurp(
      std::filesystem::path(YOCO_TEST_DATA_DIR).parent_path().parent_path() / "README.md");
  const size_t synopsis = readme.find("yoco bench    [--model");
  ASSERT_NE(synopsis, std::string::npos);
  const size_t at = readme.find("[--budget-s ", synopsis);
  ASSERT_NE(at, std::string::npos);
  const std::string said = readme.substr(at + 12, readme.find(']', at) - at - 12);
  const auto help = yoco("bench --help");
  ASSERT_EQ(help.status, 0);
  EXPECT_NE(help.out.find("(default " + said + "; the GPU default job"), std::string::npos)
      << "README says --budget-s " << said << "; the help: " << help.out.substr(help.out.find("--budget-s"), 200);
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
  // A metric named twice was merged silently, where a repeat is more likely a typo for another metric.
  for (const std::string extra : {"", " --dry-run"})
    expect_input_error(yoco("bench --model yoco-tiny --lengths 128 --metrics memory,prefill,memory --out " + dup_out + extra),
                       {"--metrics", "'memory'", "twice"}, "duplicate metrics" + extra);
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
  // The analytic throughput row costs a decode step per generated token: --gen
  // up to 2^40 looped for hours before the first row (yoco model caps it at 2^22).
  {
    const std::string big = "bench --model yoco-tiny --lengths 1048576M --metrics throughput --repeats 1 --warmup 0 ";
    expect_input_error(shell("timeout 30 " + yoco_test::shell_quote(YOCO_CLI_PATH) + " " + big + "--gen 4194305"),
                       {"--gen", "4194304"}, "gen past 2^22");
    expect_input_error(yoco(big + "--gen 1099511627775 --dry-run"), {"--gen", "4194304"}, "gen past 2^22, dry run");
    EXPECT_NE(yoco("bench --help").out.find("at most 4194304 = 2^22"), std::string::npos);
  }
  // --device-name is a column of every row: a line break in it cut the CSV
  // record (a file compare then refused); an empty one silently meant the CPU's name.
  for (const std::string& name : {std::string("'lab\nrunner'"), std::string("''"), std::string("' '")})
    expect_input_error(yoco("bench --model yoco-tiny --lengths 128 --metrics memory --device-name " + name + " --out " + dup_out),
                       {"--device-name"}, "device name " + name);
  EXPECT_FALSE(std::filesystem::exists(dup_out));
  // CUDA: not built here, or no device, or no runner yet -- said, not crashed.
  const auto cuda = yoco("bench --device cuda --model yoco-tiny --lengths 1K");
  expect_input_error(cuda, {"--device cuda"}, "cuda");
}

// `yoco model --calibration`: the calibrated rows name the layout they price
// (the chunk, the FFN row block, the FFN fused) in the words the check and the
// report read back, a row block shrinks YOCO's memory and leaves the
// Transformer's alone, and the layout options need a calibration.
TEST_F(Bench, CalibratedModelRowsNameTheirLayout) {
  const std::string cal =
      (std::filesystem::path(YOCO_TEST_DATA_DIR).parent_path().parent_path() / "reports/model/calibration-nvidia-h100.csv")
          .string();
  auto memory_1m = [&](const std::string& model, const std::string& extra) -> std::optional<ResultRow> {
    const std::string out = path("m.csv");
    const auto r = yoco("model --model " + model + " --lengths 1M --calibration " + cal + " --device-spec h100 " +
                        extra + " --format csv --out " + out);
    EXPECT_EQ(r.status, 0) << r.err;
    for (const auto& row : yoco::cli::read_results_csv(out))
      if (row.method == "calibrated" && row.metric == "mem_total_bytes") return row;
    return std::nullopt;
  };
  const auto whole = memory_1m("yoco-3b", "--prefill-chunk 16384");
  ASSERT_TRUE(whole && whole->value);
  EXPECT_NE(whole->notes.find("prefill chunk 16384 tokens"), std::string::npos) << whole->notes;
  EXPECT_EQ(whole->notes.find("FFN in row blocks"), std::string::npos) << whole->notes;
  const auto blocks = memory_1m("yoco-3b", "--prefill-chunk 16384 --ffn-rows 4096 --ffn-fused");
  ASSERT_TRUE(blocks && blocks->value);
  EXPECT_LT(*blocks->value, *whole->value);
  EXPECT_NE(blocks->notes.find("FFN in row blocks of 4096"), std::string::npos) << blocks->notes;
  EXPECT_NE(blocks->notes.find("FFN up half fused"), std::string::npos) << blocks->notes;
  const auto t_whole = memory_1m("transformer-3b", ""), t_blocks = memory_1m("transformer-3b", "--ffn-rows 4096");
  ASSERT_TRUE(t_whole && t_whole->value && t_blocks && t_blocks->value);
  EXPECT_EQ(*t_blocks->value, *t_whole->value) << "the Transformer's runner has no FFN row blocks";
  EXPECT_EQ(t_blocks->notes.find("FFN in row blocks"), std::string::npos) << t_blocks->notes;
  using yoco_test::expect_input_error;
  expect_input_error(yoco("model --model yoco-3b --ffn-rows 4096"), {"--ffn-rows", "--calibration"}, "rows alone");
  expect_input_error(yoco("model --model yoco-3b --ffn-fused"), {"--ffn-fused", "--calibration"}, "fused alone");
  expect_input_error(yoco("model --model yoco-3b --residual-per-layer"), {"--residual-per-layer", "--calibration"},
                     "residual once a layer alone");
  expect_input_error(yoco("model --model yoco-3b --calibration " + cal + " --ffn-rows 0"), {"--ffn-rows"},
                     "rows 0");
  expect_input_error(yoco("model --model yoco-3b --calibration " + cal + " --ffn-rows many"), {"--ffn-rows"},
                     "rows not a number");
  // A buffer each for the sublayers: more memory, said in the notes; the Transformer untouched.
  const auto apart = memory_1m("yoco-3b", "--prefill-chunk 16384 --sublayer-buffers apart");
  ASSERT_TRUE(apart && apart->value);
  EXPECT_GT(*apart->value, *whole->value);
  EXPECT_NE(apart->notes.find("a buffer each for the prefill's sublayers"), std::string::npos) << apart->notes;
  const auto t_apart = memory_1m("transformer-3b", "--sublayer-buffers apart");
  ASSERT_TRUE(t_apart && t_apart->value);
  EXPECT_EQ(*t_apart->value, *t_whole->value);
  EXPECT_EQ(t_apart->notes.find("a buffer each"), std::string::npos) << t_apart->notes;
  expect_input_error(yoco("model --model yoco-3b --sublayer-buffers apart"), {"--sublayer-buffers", "--calibration"},
                     "sublayers alone");
  expect_input_error(yoco("model --model yoco-3b --calibration " + cal + " --sublayer-buffers pooled"),
                     {"--sublayer-buffers", "pooled"}, "an unknown layout");
  // The residual stored once a layer: no memory of its own, said in the notes.
  const auto once = memory_1m("yoco-3b", "--prefill-chunk 16384 --residual-per-layer");
  ASSERT_TRUE(once && once->value);
  EXPECT_EQ(*once->value, *whole->value);
  EXPECT_NE(once->notes.find("residual stored once a layer"), std::string::npos) << once->notes;
}

// `yoco calibrate --calibration FILE --ceilings MODE`: the check says which
// ceilings it divides by, and a mode it does not know, or --ceilings without a
// calibration to check, is exit 2 naming the option.
TEST_F(Bench, CalibrateChecksOnTheCeilingsItSays) {
  const auto root = std::filesystem::path(YOCO_TEST_DATA_DIR).parent_path().parent_path();
  const std::string cal = (root / "reports/model/calibration-nvidia-h100.csv").string();
  const std::string sweep = (root / "reports/results/nvidia-h100/sweep.csv").string();
  const auto own = yoco("calibrate " + sweep + " --calibration " + cal);
  ASSERT_EQ(own.status, 0) << own.err;
  EXPECT_NE(own.out.find("checked on: the calibration's measured ceilings"), std::string::npos) << own.out;
  const auto h200 = yoco("calibrate " + sweep + " --calibration " + cal + " --ceilings h200 --format csv");
  ASSERT_EQ(h200.status, 0) << h200.err;
  EXPECT_NE(h200.out.find("ceilings: H200 SXM 141GB (datasheet) scaled by"), std::string::npos) << h200.out;
  using yoco_test::expect_input_error;
  expect_input_error(yoco("calibrate " + sweep + " --calibration " + cal + " --ceilings a100"), {"--ceilings", "a100"},
                     "unknown mode");
  expect_input_error(yoco("calibrate " + sweep + " --ceilings run"), {"--ceilings", "--calibration"},
                     "ceilings without a calibration");
}

}  // namespace
