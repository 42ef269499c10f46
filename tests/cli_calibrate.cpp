// test_cli: `yoco calibrate`, fitting and checking a calibration on the
// H100 sweep of reports/results.
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "cli_fixture.hpp"

namespace yoco_test {
namespace {

// A bad option of calibrate is said before --out is written: a failed run
// leaves no calibration behind (nor replaces an earlier one).
TEST_F(Cli, CalibrateRefusesBadOptionsBeforeWritingOut) {
  const std::string sweep =
      (fs::path(YOCO_TEST_DATA_DIR).parent_path().parent_path() / "reports/results/nvidia-h100/sweep.csv").string();
  const std::string cal = path("cal.csv"), out = path("out.csv");
  ASSERT_EQ(yoco("calibrate " + sweep + " --out " + cal).status, 0);
  expect_one_line_error(yoco("calibrate " + sweep + " --out " + out + " --ceilings run"), {"--ceilings", "--calibration"},
                        "--ceilings without --calibration");
  EXPECT_FALSE(fs::exists(out)) << "written before the option was refused";
  expect_one_line_error(yoco("calibrate " + sweep + " --calibration " + cal + " --ceilings bogus"),
                        {"--ceilings", "bogus"}, "--ceilings bogus");
  ASSERT_EQ(yoco("calibrate " + sweep + " --calibration " + cal + " --ceilings h200").status, 0);
}

// --kernels: the same card's kernel benchmark prices the flash prefill versions (the table says how);
// refused with --calibration, from another card, over --out, or missing, each before --out is written.
TEST_F(Cli, CalibrateKernelsPricesThePrefillVersionsAndRefusesWhatItCannotUse) {
  const fs::path results = fs::path(YOCO_TEST_DATA_DIR).parent_path().parent_path() / "reports/results";
  const std::string sweep = (results / "nvidia-h100/sweep.csv").string(),
                    kernels = (results / "nvidia-h100/kernels.csv").string(),
                    h200 = (results / "nvidia-h200/kernels.csv").string();
  const std::string cal = path("cal.csv"), out = path("out.csv");
  const auto fit = yoco("calibrate " + sweep + " --kernels " + kernels + " --out " + cal);
  ASSERT_EQ(fit.status, 0) << fit.err;
  EXPECT_NE(fit.out.find("prefill attention: fitted on flash prefill v2; v1 at 1.4"), std::string::npos) << fit.out;
  EXPECT_NE(slurp(cal).find("calibration:attention_prefill,v3_time_ratio,0.7"), std::string::npos);
  // yoco model prices the runners' versions and says which (v3 at head dim 128, v1 at 64; none for gRet).
  const auto model = yoco("model --calibration " + cal + " --model transformer-3b,transformer-small,yoco-3b --lengths 16K");
  ASSERT_EQ(model.status, 0) << model.err;
  EXPECT_NE(model.out.find("prefill: attention prefill v3 at 0.7"), std::string::npos) << model.out;
  EXPECT_NE(model.out.find("of v2's time (the kernel benchmark, 8 shapes) (transformer-3b)"), std::string::npos);
  EXPECT_NE(model.out.find("prefill: attention prefill v1 at 1.4"), std::string::npos) << model.out;
  EXPECT_EQ(model.out.find("yoco-3b)"), std::string::npos) << model.out;
  expect_one_line_error(yoco("calibrate " + sweep + " --calibration " + cal + " --kernels " + kernels + " --out " + out),
                        {"--kernels", "--calibration"}, "--kernels with --calibration");
  expect_one_line_error(yoco("calibrate " + sweep + " --kernels " + h200 + " --out " + out),
                        {h200, "NVIDIA H200", "calibration's card"}, "another card's kernel benchmark");
  expect_one_line_error(yoco("calibrate " + sweep + " --kernels " + path("none.csv") + " --out " + out),
                        {path("none.csv")}, "a missing kernel benchmark");
  EXPECT_FALSE(fs::exists(out)) << "written before the option was refused";
  const std::string copy = path("k.csv");
  fs::copy_file(kernels, copy);
  expect_one_line_error(yoco("calibrate " + sweep + " --kernels " + copy + " --out " + copy), {"--out", copy},
                        "--out over the kernel benchmark");
  EXPECT_EQ(slurp(copy), slurp(kernels));
}

// A check with --out rewrote the calibration it read (or copied it) with a new commit and date, unsaid,
// as if refitted: --out is for a fit only, refused with --calibration before anything is written.
TEST_F(Cli, CalibrateRefusesOutInCheckMode) {
  const std::string sweep =
      (fs::path(YOCO_TEST_DATA_DIR).parent_path().parent_path() / "reports/results/nvidia-h100/sweep.csv").string();
  const std::string cal = path("cal.csv"), again = path("again.csv");
  ASSERT_EQ(yoco("calibrate " + sweep + " --out " + cal).status, 0);
  const std::string bytes = slurp(cal);
  expect_one_line_error(yoco("calibrate " + sweep + " --calibration " + cal + " --out " + cal),
                        {"--out", "only when fitting", "--calibration"}, "--out over the calibration checked");
  EXPECT_EQ(slurp(cal), bytes);
  expect_one_line_error(yoco("calibrate " + sweep + " --calibration " + cal + " --out " + again),
                        {"--out", "only when fitting"}, "--out in check mode");
  EXPECT_FALSE(fs::exists(again));
  EXPECT_EQ(yoco("calibrate " + sweep + " --calibration " + cal).status, 0);
}

// A sweep whose ceiling overflows when scaled (1e300 TFLOP/s is 1e312 FLOP/s,
// inf) gave a calibration with 'inf' in it, exit 0: a file that yoco model
// --calibration then refused. Now the non-finite value is said, naming the
// sweep, and nothing is written.
TEST_F(Cli, CalibrateNeverWritesANonFiniteCalibration) {
  const std::string sweep =
      (fs::path(YOCO_TEST_DATA_DIR).parent_path().parent_path() / "reports/results/nvidia-h100/sweep.csv").string();
  std::string text = slurp(sweep);
  const std::string key = ",ceiling,gemm_peak_tflops,";
  const size_t at = text.find(key);
  ASSERT_NE(at, std::string::npos);
  // value, unit, method, repeats, min, max: the spread too, so that the row
  // stays one the result CSV reader takes ([min, max] holds the value).
  size_t field = at + key.size();
  for (int i = 0; i < 6; ++i) {
    const size_t end = text.find(',', field);
    if (i == 0 || i == 4 || i == 5) text.replace(field, end - field, "1e300");
    field = text.find(',', field) + 1;
  }
  const std::string bad = path("sweep.csv"), out = path("cal.csv");
  spit(bad, text);
  for (const std::string& extra : std::vector<std::string>{" --out " + out, " --format csv"}) {
    const CliRun r = yoco("calibrate " + bad + extra);
    expect_one_line_error(r, {bad, "gemm_peak_tflops", "finite"}, "calibrate" + extra);
    EXPECT_EQ(r.out.find("inf"), std::string::npos) << r.out.substr(0, 500);
  }
  EXPECT_FALSE(fs::exists(out));
}

// A measured row of a preset with batch 0 (only a pair's ratio rows carry 0)
// reached the cost model: exit 2 with "prefill_work: prompt, chunk, batch and
// tile rows must be >= 1" (or decode_work's), naming neither the file nor the
// row. Now the sweep and the row are named, by the fit and by the check.
TEST_F(Cli, CalibrateNamesTheSweepsRowWithBatchZero) {
  const std::string sweep =
      (fs::path(YOCO_TEST_DATA_DIR).parent_path().parent_path() / "reports/results/nvidia-h100/sweep.csv").string();
  ASSERT_EQ(yoco("calibrate " + sweep + " --out " + path("cal.csv")).status, 0);
  const std::string text = slurp(sweep);
  for (const std::string metric : {"prefill_latency_s", "throughput_tokens_per_s"}) {
    SCOPED_TRACE(metric);
    // The first GPU row of the metric: git_sha,...,device(3),...,model,seq_len,batch(8),...
    std::string bad_text;
    bool done = false;
    std::istringstream lines(text);
    for (std::string line; std::getline(lines, line);) {
      std::vector<std::string> f;
      std::istringstream fields(line);
      for (std::string x; f.size() < 12 && std::getline(fields, x, ',');) f.push_back(x);
      if (!done && f.size() == 12 && f[3] == "cuda" && f[11] == metric) {
        size_t at = 0;
        for (int i = 0; i < 8; ++i) at = line.find(',', at) + 1;
        // Not line.replace(...): in this file GCC 12 takes it for an overlapping
        // memcpy (-Wrestrict, a known false positive of its std::string).
        line = line.substr(0, at) + "0" + line.substr(line.find(',', at));
        done = true;
      }
      bad_text += line + "\n";
    }
    ASSERT_TRUE(done);
    const std::string bad = path("batch0.csv");
    spit(bad, bad_text);
    expect_one_line_error(yoco("calibrate " + bad), {bad, metric, "batch 0", "'batch'"}, "fit, batch 0");
    expect_one_line_error(yoco("calibrate " + bad + " --calibration " + path("cal.csv")),
                          {bad, metric, "batch 0", "'batch'"}, "check, batch 0");
  }
}

// A fit on two decode points of one model (beyond-decode.csv) gave norms an inverse efficiency of 359
// at 0.0%, and yoco model printed the never-fitted prefill as a calibrated 59.46 [59.46, 59.46]. Now the
// fits table lists the families not fitted and those without a band, the check marks the points they
// price, and yoco model gives such rows no band (empty min/max in the CSV) and says why.
TEST_F(Cli, CalibrateAndModelSayWhichFamiliesAreNotFittedAndGiveThemNoBand) {
  const fs::path results = fs::path(YOCO_TEST_DATA_DIR).parent_path().parent_path() / "reports/results";
  const std::string cal = path("cal.csv");
  const auto fit = yoco("calibrate " + (results / "nvidia-h200/beyond-decode.csv").string() + " --out " + cal);
  ASSERT_EQ(fit.status, 0) << fit.err;
  EXPECT_NE(fit.out.find("prefill  gemm       compute  not fitted"), std::string::npos) << fit.out;
  EXPECT_NE(fit.out.find("2       unknown (< 3 points)"), std::string::npos) << fit.out;
  EXPECT_NE(fit.out.find("1.000 *"), std::string::npos) << fit.out;
  EXPECT_NE(fit.out.find("* 2 points priced without a band: gemm memory: 2 points, fewer than 3"), std::string::npos)
      << fit.out;
  const auto model = yoco("model --calibration " + cal + " --device-spec h200 --model transformer-3b --lengths 512K");
  ASSERT_EQ(model.status, 0) << model.err;
  EXPECT_NE(model.out.find("prefill_latency_s        59.46       unknown *"), std::string::npos) << model.out;
  EXPECT_NE(model.out.find("* band unknown, prefill_latency_s: gemm compute: the roofline, no points"),
            std::string::npos)
      << model.out;
  EXPECT_EQ(model.out.find("[59.46, 59.46]"), std::string::npos) << model.out;
  const auto csv = yoco("model --calibration " + cal + " --device-spec h200 --model transformer-3b --lengths 512K "
                        "--format csv");
  ASSERT_EQ(csv.status, 0) << csv.err;
  const size_t row = csv.out.find(",calibrated,0,,,\"");  // method, repeats, no min, no max, notes
  ASSERT_NE(row, std::string::npos) << csv.out;
  EXPECT_NE(csv.out.find("band unknown (", row), std::string::npos);
  // The committed H100 calibration has every family fitted on 4 or more points: bands as before.
  const auto h100 = yoco("model --calibration " + (results.parent_path() / "model/calibration-nvidia-h100.csv").string() +
                         " --model transformer-3b --lengths 1M");
  ASSERT_EQ(h100.status, 0) << h100.err;
  EXPECT_NE(h100.out.find("315.1       [300.4, 329.8]"), std::string::npos) << h100.out;
  EXPECT_EQ(h100.out.find("unknown"), std::string::npos) << h100.out;
}

// A check of what the calibration cannot price exited 0: a CPU run's tiny models checked on the CUDA
// runners' model (errors to 427%), an analytic model.csv or a kernel benchmark as an empty table, a
// measured point of value 0 dropped unsaid. Each is now one line naming the file.
TEST_F(Cli, CalibrateChecksOnlyMeasuredPointsOfACudaRun) {
  const fs::path results = fs::path(YOCO_TEST_DATA_DIR).parent_path().parent_path() / "reports/results";
  const std::string cal = (results.parent_path() / "model/calibration-nvidia-h100.csv").string();
  const std::string cpu = (results / "cpu-amd-epyc/bench.csv").string();
  expect_one_line_error(yoco("calibrate " + cpu + " --calibration " + cal), {cpu, "device 'cpu'", "not a CUDA run"},
                        "a CPU run");
  for (const std::string& nothing : {(results / "analytic-h100/model.csv").string(),
                                    (results / "nvidia-h200/kernels.csv").string()})
    expect_one_line_error(yoco("calibrate " + nothing + " --calibration " + cal), {nothing, "no measured points"},
                          "nothing to check in " + nothing);
  // The first measured prefill of the H100 sweep at 0 s (value, min and max).
  std::string text = slurp((results / "nvidia-h100/sweep.csv").string()), bad_text;
  bool done = false;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    std::vector<std::string> f;
    std::istringstream fields(line);
    for (std::string x; f.size() < 18 && std::getline(fields, x, ',');) f.push_back(x);
    if (!done && f.size() == 18 && f[3] == "cuda" && f[11] == "prefill_latency_s" && f[14] == "measured") {
      f[12] = f[16] = f[17] = "0";
      std::string joined;
      for (const auto& x : f) joined += x + ",";
      size_t at = 0;
      for (int i = 0; i < 18; ++i) at = line.find(',', at) + 1;
      line = joined + line.substr(at);
      done = true;
    }
    bad_text += line + "\n";
  }
  ASSERT_TRUE(done);
  const std::string bad = path("zero.csv");
  spit(bad, bad_text);
  expect_one_line_error(yoco("calibrate " + bad + " --calibration " + cal), {bad, "prefill_latency_s", "value 0"},
                        "a measured point of 0 s");
  // The sweep itself checks.
  EXPECT_EQ(yoco("calibrate " + (results / "nvidia-h100/sweep.csv").string() + " --calibration " + cal).status, 0);
}

// model --help said "Every row it writes has method=analytic" (--calibration writes calibrated rows) and
// neither help had an example. The examples of both helps run as printed (from the repository root).
TEST_F(Cli, CalibrateAndModelHelpExamplesRun) {
  const std::string root = fs::path(YOCO_TEST_DATA_DIR).parent_path().parent_path().string();
  const auto model_help = yoco("model --help");
  ASSERT_EQ(model_help.status, 0);
  EXPECT_EQ(model_help.out.find("Every row it writes has method=analytic"), std::string::npos) << model_help.out;
  EXPECT_NE(model_help.out.find("method=calibrated"), std::string::npos) << model_help.out;
  int examples = 0;
  for (const std::string cmd : {"model", "calibrate"}) {
    std::istringstream help(yoco(cmd + " --help").out);
    for (std::string line; std::getline(help, line);) {
      const std::string head = "  yoco " + cmd + " ";
      if (line.rfind(head, 0) != 0) continue;
      std::string args = line.substr(7);  // after "  yoco "
      for (size_t at = 0; (at = args.find(" reports/", at)) != std::string::npos; at += root.size() + 2)
        args.insert(at + 1, root + "/");
      if (const size_t at = args.find(" --out cal.csv"); at != std::string::npos)
        args.replace(at, 14, " --out " + path("cal.csv"));
      SCOPED_TRACE(args);
      const auto r = yoco(args);
      EXPECT_EQ(r.status, 0) << r.err;
      ++examples;
    }
  }
  EXPECT_EQ(examples, 3);
  const auto with_cal = yoco("model --calibration " + root + "/reports/model/calibration-nvidia-h100.csv --lengths 32K");
  ASSERT_EQ(with_cal.status, 0) << with_cal.err;
  EXPECT_NE(with_cal.out.find("yoco model: analytic (computed from the shapes, not measured); the calibrated model "
                              "below"),
            std::string::npos)
      << with_cal.out.substr(0, 300);
}

// --ffn-rows is a count of rows: it took only digits ("--ffn-rows: expected an integer, got '1M'") where
// every other count and length of yoco takes K and M, as the README says. Now 8K is 8192 rows, the same rows
// as --ffn-rows 8192; 0 and words stay refused. --what-if is one a run, and model --help says so.
TEST_F(Cli, ModelFfnRowsTakesKAndMAndHelpSaysWhatIfIsOneARun) {
  const std::string root = fs::path(YOCO_TEST_DATA_DIR).parent_path().parent_path().string();
  const std::string m = "model --calibration " + root +
                        "/reports/model/calibration-nvidia-h100.csv --model yoco-3b --lengths 1M --format csv";
  const auto k = yoco(m + " --ffn-rows 8K"), plain = yoco(m + " --ffn-rows 8192");
  ASSERT_EQ(k.status, 0) << k.err;
  ASSERT_EQ(plain.status, 0) << plain.err;
  EXPECT_NE(k.out.find("FFN in row blocks of 8192"), std::string::npos) << k.out.substr(0, 2000);
  EXPECT_EQ(k.out.substr(k.out.find('\n')), plain.out.substr(plain.out.find('\n')))
      << "--ffn-rows 8K and 8192 differ";
  const auto mega = yoco(m + " --ffn-rows 1M");
  EXPECT_EQ(mega.status, 0) << mega.err;
  EXPECT_NE(mega.out.find("FFN in row blocks of 1048576"), std::string::npos) << mega.out.substr(0, 2000);
  expect_one_line_error(yoco(m + " --ffn-rows 0"), {"--ffn-rows"}, "rows 0");
  expect_one_line_error(yoco(m + " --ffn-rows 1Q"), {"--ffn-rows", "1Q"}, "rows with a bad suffix");
  const auto help = yoco("model --help");
  ASSERT_EQ(help.status, 0);
  EXPECT_NE(help.out.find("one what-if a"), std::string::npos) << help.out;
  expect_one_line_error(yoco(m + " --what-if gemm=ceiling --what-if norms=ceiling"), {"--what-if", "more than once"},
                        "two what-ifs");
}

// reports/SCHEMA.md left out the decode.<family> rows that model --calibration writes, and its columns table
// had no device 'calibrated'. Every phase and device of those rows is named there now.
TEST_F(Cli, SchemaNamesEveryPhaseAndDeviceOfModelCalibrationRows) {
  const std::string root = fs::path(YOCO_TEST_DATA_DIR).parent_path().parent_path().string();
  const auto r = yoco("model --calibration " + root +
                      "/reports/model/calibration-nvidia-h100.csv --model yoco-3b --lengths 32K --format csv");
  ASSERT_EQ(r.status, 0) << r.err;
  const std::string schema = slurp(root + "/reports/SCHEMA.md");
  const size_t columns = schema.find("| `device` |");
  ASSERT_NE(columns, std::string::npos);
  const std::string device_row = schema.substr(columns, schema.find('\n', columns) - columns);
  std::istringstream rows(r.out);
  int calibrated = 0;
  for (std::string line; std::getline(rows, line);) {
    if (line.find(",calibrated,") == std::string::npos) continue;
    std::vector<std::string> f;
    std::istringstream cells(line);
    for (std::string c; std::getline(cells, c, ',');) f.push_back(c);
    ASSERT_GT(f.size(), 11u) << line;
    if (f[3] != "calibrated") continue;  // the device column
    ++calibrated;
    EXPECT_NE(device_row.find("`calibrated`"), std::string::npos) << device_row;
    std::string phase = f[10];  // prefill.gemm -> prefill.<family>
    if (const size_t dot = phase.find('.'); dot != std::string::npos) phase = phase.substr(0, dot) + ".<family>";
    EXPECT_NE(schema.find("`" + phase + "`"), std::string::npos) << phase << " (" << line << ")";
    EXPECT_NE(schema.find("`" + f[11] + "`"), std::string::npos) << f[11];
  }
  EXPECT_EQ(calibrated, 12);
}

// scripts/calibrate.sh wrote only reports/model/ and said "Every file lands at once, or none does" over a dozen
// separate mv's. --out DIR writes elsewhere, and the set lands whole or not at all: here the last file's rename
// fails (a folder in its place), and the files landed before it are put back as they were (the one DIR did not
// have is gone again), the work folder beside DIR removed; a good run then replaces the set and leaves the
// other files of DIR alone.
TEST_F(Cli, CalibrateScriptWritesOutAndPutsTheOldSetBackWhenLandingFails) {
  const std::string root = fs::path(YOCO_TEST_DATA_DIR).parent_path().parent_path().string();
  const std::string script = shell_quote(root + "/scripts/calibrate.sh") + " --yoco " + shell_quote(YOCO_CLI_PATH);
  const fs::path out = fs::path(path("model"));
  const std::vector<std::string> names = {
      "calibration-nvidia-h100.csv", "check-nvidia-h100.csv", "check-small-nvidia-h100.csv", "chunks-h100.csv",
      "prefill-steps-h100.csv",      "projection-b200.csv",   "projection-h100.csv",         "projection-h200.csv",
      "whatif-h100.csv"};
  fs::create_directories(out);
  for (const auto& n : names)
    if (n != "chunks-h100.csv" && n != "whatif-h100.csv") spit((out / n).string(), "old\n");
  spit((out / "multi-device.csv").string(), "other\n");
  fs::create_directories(out / "whatif-h100.csv" / "in-the-way");  // the last to land: its rename fails
  const auto failed = shell(script + " --out " + shell_quote(out.string()));
  EXPECT_NE(failed.status, 0) << failed.err;
  EXPECT_NE(failed.err.find("holds its old files again"), std::string::npos) << failed.err;
  for (const auto& n : names) {
    if (n == "whatif-h100.csv") continue;
    if (n == "chunks-h100.csv") EXPECT_FALSE(fs::exists(out / n)) << n << " landed and stayed";
    else EXPECT_EQ(slurp((out / n).string()), "old\n") << n << " is not the old file";
  }
  auto work_folders = [&] {
    int n = 0;
    for (const auto& e : fs::directory_iterator(out.parent_path()))
      n += e.path().filename().string().rfind(".model.calibrate.", 0) == 0;
    return n;
  };
  EXPECT_EQ(work_folders(), 0);
  fs::remove_all(out / "whatif-h100.csv");
  const auto good = shell(script + " --out " + shell_quote(out.string() + "/"));
  ASSERT_EQ(good.status, 0) << good.err;
  for (const auto& n : names) EXPECT_NE(slurp((out / n).string()).rfind("git_sha,", 0), std::string::npos) << n;
  EXPECT_NE(slurp((out / "projection-h100.csv").string()).find(out.string() + "/calibration-nvidia-h100.csv"),
            std::string::npos)
      << "the projections name the calibration where it landed";
  EXPECT_EQ(slurp((out / "multi-device.csv").string()), "other\n");
  EXPECT_EQ(work_folders(), 0);
  // --out's refusals: one line, exit 2, nothing run.
  const auto bare = shell(script + " --out");
  EXPECT_EQ(bare.status, 2);
  EXPECT_EQ(bare.err, "calibrate.sh: --out needs a folder\n");
  const auto file = shell(script + " --out " + shell_quote((out / "multi-device.csv").string()));
  EXPECT_EQ(file.status, 2);
  EXPECT_NE(file.err.find("--out: '" + (out / "multi-device.csv").string() + "' is not a folder"), std::string::npos)
      << file.err;
  EXPECT_EQ(std::count(file.err.begin(), file.err.end(), '\n'), 1) << file.err;
  const auto help = shell(script + " --help");
  EXPECT_EQ(help.status, 0);
  EXPECT_NE(help.out.find("--out: the folder the files land in (default reports/model"), std::string::npos) << help.out;
}

}  // namespace
}  // namespace yoco_test
