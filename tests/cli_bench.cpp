// test_cli: `yoco bench` (its help, --resume), the dry runs of bench and
// generate, and the default job's.
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "cli_fixture.hpp"
#include "cuda_status.hpp"

namespace yoco_test {
namespace {

// --resume with a file of another sweep is refused before the sweep says what
// it will run: one line on stderr, not the plan and then the error.
TEST_F(Cli, BenchResumeOfAnotherSweepIsOneLine) {
  const std::string out = path("r.csv");
  const std::string bench = "bench --model yoco-tiny --metrics memory --repeats 1 --warmup 0 --out " + out;
  ASSERT_EQ(yoco(bench + " --lengths 128").status, 0);
  const std::string before = slurp(out);
  const CliRun r = yoco(bench + " --lengths 256 --resume");
  expect_one_line_error(r, {out, "128", "not a point of this sweep"}, "resume of another sweep");
  EXPECT_EQ(slurp(out), before);
}

// --resume of a complete file: the help says what is kept line for line (the measured rows) and what is
// made again and why (ceilings, analytic and ratio rows); it said only that resume "keeps the points".
TEST_F(Cli, BenchResumeOfACompleteFileKeepsTheMeasuredRowsAndSaysWhatItRemakes) {
  const std::string help = yoco("bench --help").out;
  for (const std::string want : {"Kept as they are, line for line: the measured rows",
                                 "Made again, even when every point is complete: the ceiling rows",
                                 "a file never mixes two runs' ceilings"})
    EXPECT_NE(help.find(want), std::string::npos) << want << "\n" << help;
  const std::string out = path("done.csv");
  const std::string bench = "bench --model yoco-tiny,transformer-tiny --lengths 128 --metrics memory,prefill "
                            "--repeats 1 --warmup 0 --out " + out;
  ASSERT_EQ(yoco(bench).status, 0);
  const auto lines = [](const std::string& text, bool measured) {
    std::vector<std::string> out;
    std::istringstream in(text);
    std::string l;
    std::getline(in, l);  // the header
    while (std::getline(in, l)) {
      const bool other = l.find(",analytic,") != std::string::npos || l.find(",ceiling,") != std::string::npos ||
                         l.find(" vs ") != std::string::npos;
      if (other != measured) out.push_back(l);
    }
    return out;
  };
  const std::string before = slurp(out);
  ASSERT_EQ(yoco(bench + " --resume").status, 0);
  const std::string after = slurp(out);
  EXPECT_EQ(lines(after, true), lines(before, true)) << "a measured row of a complete point changed";
  EXPECT_EQ(lines(after, false).size(), lines(before, false).size());
}

// The defaults bench --help states are the ones the sweeps use.
TEST_F(Cli, BenchHelpStatesTheBudgetDefaults) {
  const std::string help = yoco("bench --help").out;
  const size_t at = help.find("  --budget-s S");
  ASSERT_NE(at, std::string::npos) << help;
  const std::string line = help.substr(at, help.find('\n', at) - at);
  // bench/cli/default_job.cpp: 60 s for a sweep on the CPU or CUDA, 120 s in the GPU default job.
  EXPECT_NE(line.find("default 60;"), std::string::npos) << line;
  EXPECT_NE(line.find("GPU default job 120"), std::string::npos) << line;
}

// --dry-run: every check that needs no device, then what would run; nothing measured, no file
// written, on any machine (scripts/gpu-suite.sh --dry-run checks a device call's commands so).
TEST_F(Cli, BenchAndGenerateDryRunsCheckAndRunNothing) {
  const std::string out = path("never.csv");
  CliRun r = yoco("bench --model yoco-tiny,transformer-tiny --lengths 2K,4K --repeats 2 --out " + out + " --dry-run");
  EXPECT_EQ(r.status, 0) << r.all();
  for (const std::string& want : {std::string("nothing runs"), std::string("yoco-tiny, transformer-tiny"),
                                  std::string("2K, 4K (4 points)"), std::string("2 repeats"), "results " + out + " (new)"})
    EXPECT_NE(r.out.find(want), std::string::npos) << want << "\n" << r.out;
  EXPECT_FALSE(fs::exists(out)) << "a dry run wrote its --out";
  EXPECT_EQ(r.out.find("prefill_latency_s"), std::string::npos) << "a dry run measured: " << r.out;
  // The same refusals as a real run, one line, exit 2.
  expect_input_error(yoco("bench --model yoco-tiny --lengths 12Q --dry-run"), {"--lengths"}, "bad length");
  // --gen is a length: K and M as --lengths takes them (it refused "1K").
  r = yoco("bench --model yoco-tiny --lengths 4K --gen 1K --dry-run");
  EXPECT_EQ(r.status, 0) << r.all();
  EXPECT_NE(r.out.find("throughput generates 1024"), std::string::npos) << r.out;
  expect_input_error(yoco("bench --model yoco-tiny --lengths 8M --gen 5M --dry-run"), {"--gen", "5M", "4194304"},
                     "--gen past its cap");
  expect_input_error(yoco("bench --model nosuch --lengths 2K --dry-run"), {"nosuch"}, "bad model");
  expect_input_error(yoco("bench --model yoco-tiny --lengths 2K --metrics memory,prefil --dry-run"), {"prefil"},
                     "bad metric");
  r = yoco("generate --model yoco-tiny --prompt-len 12 --gen 3 --dry-run");
  EXPECT_EQ(r.status, 0) << r.all();
  EXPECT_NE(r.out.find("prompt 12 tokens, generate 3"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("seq 0:"), std::string::npos) << "a dry run generated: " << r.out;
  // --weights: the file's header checked against the model, as the loaders do first.
  const std::string w = path("tiny.safetensors"), junk = path("junk.safetensors");
  ASSERT_EQ(yoco("weights init --model yoco-tiny --seed 5 --out " + w).status, 0);
  spit(junk, "not a safetensors file at all");
  EXPECT_EQ(yoco("generate --model yoco-tiny --weights " + w + " --prompt-len 12 --gen 3 --dry-run").status, 0);
  expect_input_error(yoco("generate --model yoco-tiny --weights " + junk + " --prompt-len 12 --gen 3 --dry-run"),
                     {junk}, "a weights file that is no safetensors");
  expect_input_error(yoco("generate --model transformer-tiny --weights " + w + " --prompt-len 12 --gen 3 --dry-run"),
                     {w, "transformer-tiny"}, "another model's weights");
  expect_input_error(yoco("generate --model yoco-tiny --weights " + path("none.safetensors") +
                          " --prompt-len 12 --gen 3 --dry-run"),
                     {"none.safetensors"}, "no weights file");
#if defined(YOCO_HAVE_CUDA)
  // The CUDA build without a GPU (or with one): the runners' switches are checked, the device untouched.
  r = yoco("bench --device cuda --model yoco-3b --lengths 512K --metrics prefill --dry-run");
  EXPECT_EQ(r.status, 0) << r.all();
  EXPECT_NE(r.out.find("runner switches: none set"), std::string::npos) << r.out;
  r = shell("YOCO_GEMV=1 " + shell_quote(YOCO_CLI_PATH) + " bench --device cuda --model yoco-3b --lengths 512K --dry-run");
  EXPECT_NE(r.out.find("runner switches: YOCO_GEMV=1"), std::string::npos) << r.all();
  r = shell("YOCO_GRET_CHUNK=v9 " + shell_quote(YOCO_CLI_PATH) + " bench --device cuda --model yoco-3b --lengths 512K --dry-run");
  expect_input_error(r, {"YOCO_GRET_CHUNK"}, "a bad runner switch");
  r = yoco("bench --default-job --device cuda --no-report --results-dir " + path("results") + " --dry-run");
  EXPECT_EQ(r.status, 0) << r.all();
  EXPECT_FALSE(fs::exists(path("results"))) << "the default job's dry run made its results folder";
#endif
}

// What a real bench refuses of its files before measuring, a dry run refuses too, one line, exit 2,
// and without writing: --resume without --out, a file to resume that is no results CSV, holds other
// points or comes from other settings, an --out that is a folder or lies under a file. A new folder
// is not made.
TEST_F(Cli, BenchDryRunRefusesTheFilesARealRunRefuses) {
  const std::string bench = "bench --model yoco-tiny --metrics memory --repeats 1 --warmup 0";
  expect_one_line_error(yoco(bench + " --lengths 128 --resume --dry-run"), {"--resume", "--out"}, "--resume alone");
  const std::string junk = path("junk.csv");
  spit(junk, "not,a,results,file\n");
  expect_one_line_error(yoco(bench + " --lengths 128 --resume --out " + junk + " --dry-run"), {junk},
                        "--resume of a file that is no results CSV");
  const std::string out = path("r.csv");
  ASSERT_EQ(yoco(bench + " --lengths 128 --out " + out).status, 0);
  const std::string before = slurp(out);
  expect_one_line_error(yoco(bench + " --lengths 256 --resume --out " + out + " --dry-run"),
                        {out, "128", "not a point of this sweep"}, "--resume of another sweep");
  EXPECT_EQ(slurp(out), before);
  CliRun r = yoco(bench + " --lengths 128 --resume --out " + out + " --dry-run");
  EXPECT_EQ(r.status, 0) << r.all();
  // A file of the same points written with other settings (or an older cost model) is refused as the
  // real run refuses it, in the same words; a dry run had said nothing and the run refused it.
  const std::string chunked = bench + " --lengths 128 --prefill-chunk 64 --resume --out " + out;
  const CliRun real = yoco(chunked);
  expect_one_line_error(real, {out, "yoco-tiny at 128", "come from other settings", "--prefill-chunk"},
                        "a real run's resume with another --prefill-chunk");
  r = yoco(chunked + " --dry-run");
  expect_one_line_error(r, {out, "come from other settings"}, "the dry run's, with another --prefill-chunk");
  EXPECT_EQ(r.err, real.err) << "the dry run refuses in the real run's words";
  EXPECT_EQ(slurp(out), before);
  // A file written on another device (here: under another --device-name) likewise; the dry run said
  // "checked as a run checks them", exit 0, and the run refused it.
  const std::string renamed = bench + " --lengths 128 --device-name foo --resume --out " + out;
  const CliRun real_name = yoco(renamed);
  expect_one_line_error(real_name, {out, "written on device cpu", "this run is cpu 'foo'"},
                        "a real run's resume under another --device-name");
  r = yoco(renamed + " --dry-run");
  expect_one_line_error(r, {out, "written on device cpu", "this run is cpu 'foo'"},
                        "the dry run's, under another --device-name");
  EXPECT_EQ(r.err, real_name.err) << "the dry run refuses in the real run's words";
  EXPECT_EQ(slurp(out), before);
  // The measured rows' settings too (an automatic throughput batch's --max-batch), and the first point
  // refused is the run's (models as given, then lengths), in the same words.
  const std::string two = path("two.csv"),
                    tp = "bench --model yoco-tiny,transformer-tiny --lengths 128,256 --metrics memory,throughput "
                         "--gen 64 --repeats 1 --warmup 0 --out " + two;
  ASSERT_EQ(yoco(tp).status, 0);
  for (const std::string other : {" --max-batch 4", " --prefill-chunk 64"}) {
    const std::string copy = slurp(two);
    const CliRun run = yoco(tp + other + " --resume");
    spit(two, copy);  // (a refused run writes nothing; kept as it was for the next case either way)
    expect_one_line_error(run, {"yoco-tiny at 128", "come from other settings"}, "a real resume with" + other);
    const CliRun dry = yoco(tp + other + " --resume --dry-run");
    EXPECT_EQ(dry.status, 2) << other << ": " << dry.all();
    EXPECT_EQ(dry.err, run.err) << other;
  }
  expect_one_line_error(yoco(bench + " --lengths 128 --out " + path("") + " --dry-run"), {"is a folder"},
                        "--out a folder");
  expect_one_line_error(yoco(bench + " --lengths 128 --out " + junk + "/sub/x.csv --dry-run"),
                        {junk, "not a folder"}, "--out under a file");
  r = yoco(bench + " --lengths 128 --out " + path("new/sub/x.csv") + " --dry-run");
  EXPECT_EQ(r.status, 0) << r.all();
  EXPECT_FALSE(fs::exists(path("new"))) << "a dry run made its --out's folder";
}

// The default job's report: --results-dir outside the repo's reports/results writes its report beside
// its results (README.md, figures/ there); it ran report.py without --out/--readme, which rewrote the
// repo's reports/README.md and figures from the scratch folder alone (the GPUs' sections dropped).
// Checked on the command the job would run (its dry run prints it), so the repo's report is untouched.
TEST_F(Cli, DefaultJobReportOfAnotherResultsFolderGoesBesideIt) {
  const std::string results = path("results");
  CliRun r = yoco("bench --default-job --device cpu --results-dir " + results + " --dry-run");
  ASSERT_EQ(r.status, 0) << r.all();
  const size_t at = r.out.find("then the report: ");
  ASSERT_NE(at, std::string::npos) << r.out;
  const std::string line = r.out.substr(at, r.out.find('\n', at) - at);
  EXPECT_NE(line.find("report.py' --results '" + results + "'"), std::string::npos) << line;
  EXPECT_NE(line.find("--out '" + results + "/figures'"), std::string::npos) << line;
  EXPECT_NE(line.find("--readme '" + results + "/README.md'"), std::string::npos) << line;
  EXPECT_FALSE(fs::exists(results)) << "the dry run made its results folder";
  // The repo's own folder (however it is spelt) regenerates the repo's report: report.py's defaults.
  const std::string own = std::string(YOCO_TEST_DATA_DIR) + "/../../reports/results";
  r = yoco("bench --default-job --device cpu --results-dir " + own + " --dry-run");
  ASSERT_EQ(r.status, 0) << r.all();
  const size_t at2 = r.out.find("then the report: ");
  ASSERT_NE(at2, std::string::npos) << r.out;
  const std::string line2 = r.out.substr(at2, r.out.find('\n', at2) - at2);
  EXPECT_EQ(line2.find("--readme"), std::string::npos) << line2;
  EXPECT_NE(line2.find("--results '" + own + "'"), std::string::npos) << line2;
  r = yoco("bench --default-job --device cpu --no-report --results-dir " + results + " --dry-run");
  EXPECT_NE(r.out.find("then the report: skipped (--no-report)"), std::string::npos) << r.out;
}

// `yoco bench` alone runs the default job, so `yoco bench --dry-run` alone previews it, as
// --default-job --dry-run does: its results file, the analytic projection and the report. It previewed
// a sweep of the CPU defaults with no file, no projection and no report.
TEST_F(Cli, PlainBenchDryRunPreviewsTheDefaultJob) {
  const CliRun plain = yoco("bench --dry-run");
  ASSERT_EQ(plain.status, 0) << plain.all();
  for (const std::string want : {"yoco bench: the default job", "the default job's sweep checked", "  results ",
                                 "then the analytic projection", "analytic-h100", "then the report: "})
    EXPECT_NE(plain.out.find(want), std::string::npos) << want << "\n" << plain.out;
  const CliRun job = yoco("bench --default-job --dry-run");
  ASSERT_EQ(job.status, 0) << job.all();
  EXPECT_EQ(plain.out, job.out);
}

#if defined(YOCO_HAVE_CUDA)
// The default job's dry run on --device cuda with no GPU here cannot know the card's folder: with
// --resume, every card's file of that name is checked (gpu-suite's step sweep, narrowed onto a
// file of other points, fails here rather than at the start of a device call).
TEST_F(Cli, DefaultJobDryRunWithoutAGpuChecksEachCardsFileToResume) {
  // Whether a GPU is here is asked as the other tests ask it, not read off the output under test.
  if (yoco::cli::cuda_status().device) GTEST_SKIP() << "a GPU here: its own folder is known";
  const std::string results = path("results"), card = results + "/nvidia-x1/sweep.csv";
  fs::create_directories(results + "/nvidia-x1");
  ASSERT_EQ(yoco("bench --model yoco-tiny --metrics memory --repeats 1 --warmup 0 --lengths 128 --out " + card).status, 0);
  const std::string job = "bench --default-job --device cuda --no-report --resume --results-dir " + results;
  CliRun r = yoco(job + " --dry-run");
  EXPECT_NE(r.out.find("GPU none here (--dry-run)"), std::string::npos) << r.out;
  // (Written here on the CPU: refused first for its device, as the run on the card refuses it.)
  expect_input_error(r, {card, "written on device cpu", "this run is cuda"}, "a card's sweep.csv of another device");
  r = yoco(job + " --sweep-file other.csv --dry-run");  // no card has it yet: from the start
  EXPECT_EQ(r.status, 0) << r.all();
  EXPECT_NE(r.out.find("none there yet"), std::string::npos) << r.out;
}
#endif

}  // namespace
}  // namespace yoco_test
