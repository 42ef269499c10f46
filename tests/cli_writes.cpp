// test_cli: writes that fail (a full disk, a folder that is a file, a
// file-size limit, stdout) and outputs that would replace an input.
#include <signal.h>
#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "cli_fixture.hpp"

namespace yoco_test {
namespace {

// Issue 12: a failed write exits 2 naming the file, never "wrote"; an earlier
// file at the path stays byte-for-byte. The failures: /dev/full (ENOSPC on
// every write), a folder that is a file, and a file-size limit (RLIMIT_FSIZE
// with SIGXFSZ ignored: EFBIG part-way through a regular file, as a full disk
// would; it works as root, where permission tricks do not).
TEST_F(Cli, FailedWritesExit2AndKeepTheEarlierFile) {
  const std::string tiny_bench = "bench --model yoco-tiny --lengths 128 --metrics memory,prefill --repeats 1 --warmup 0";
  // /dev/full: not "wrote N rows".
  for (const std::string& cmd : std::vector<std::string>{tiny_bench + " --out /dev/full", "weights init --model yoco-tiny --seed 1 --out /dev/full",
                                "forward --model yoco-tiny --tokens 1,2,3 --out /dev/full",
                                "model --model yoco-tiny --lengths 1K --out /dev/full"}) {
    const CliRun r = yoco(cmd);
    expect_input_error(r, {"/dev/full"}, cmd);
    EXPECT_EQ(r.err.find("wrote"), std::string::npos) << cmd << "\n" << r.err;
  }
  // A folder that is a file: said before any measurement.
  spit(path("plain"), "x");
  for (const std::string& cmd : std::vector<std::string>{tiny_bench + " --out " + path("plain/r.csv"),
                                "weights init --model yoco-tiny --seed 1 --out " + path("plain/w.safetensors"),
                                "forward --model yoco-tiny --tokens 1,2,3 --out " + path("plain/l.npy")}) {
    const CliRun r = yoco(cmd);
    expect_input_error(r, {path("plain")}, cmd);
    EXPECT_EQ(r.err.find("prefill"), std::string::npos) << "measured before failing: " << r.err;
  }
  EXPECT_EQ(slurp(path("plain")), "x");
  // A weights file larger than the process may write (ulimit -f; the free disk space is checked the same
  // way, before the work) is said at once, naming --out, what it needs and what is allowed.
  {
    const std::string target = path("big.safetensors"), err = path("fsize.err");
    const std::string line = "ulimit -f 1024; exec " + shell_quote(YOCO_CLI_PATH) +
                             " weights init --model yoco-tiny --seed 1 --out " + shell_quote(target) + " 2>" +
                             shell_quote(err);  // 512 KiB, yoco-tiny's f32 weights are 1.1 MB
    const int raw = std::system(("sh -c " + shell_quote(line)).c_str());
    ASSERT_TRUE(WIFEXITED(raw));
    EXPECT_EQ(WEXITSTATUS(raw), 2) << slurp(err);
    EXPECT_NE(slurp(err).find("--out " + target + ": needs 1102336 B"), std::string::npos) << slurp(err);
    EXPECT_NE(slurp(err).find("the file-size limit (ulimit -f) allows 524288 B"), std::string::npos) << slurp(err);
    EXPECT_FALSE(std::filesystem::exists(target));
  }

  // Good files first, then the same commands under a 512-byte file-size limit.
  const std::string csv = path("r.csv"), st = path("w.safetensors"), npy = path("l.npy");
  const std::string bench_cmd = tiny_bench + " --out " + csv;
  const std::string init_cmd = "weights init --model yoco-tiny --seed 1 --out " + st;
  const std::string fwd_cmd = "forward --model yoco-tiny --tokens 1,2,3 --all-positions --out " + npy;
  for (const auto& c : std::vector<std::string>{bench_cmd, init_cmd, fwd_cmd}) ASSERT_EQ(yoco(c).status, 0) << c;
  const std::string csv0 = slurp(csv), st0 = slurp(st), npy0 = slurp(npy);
  ASSERT_GT(csv0.size(), 1024u);
  ASSERT_GT(npy0.size(), 1024u);
  const std::string limited = "trap '' XFSZ; ulimit -f 1; exec ";  // 1 block of 512 bytes
  for (const auto& c : std::vector<std::string>{bench_cmd + " --seed 7", "weights init --model yoco-tiny --seed 2 --out " + st, fwd_cmd}) {
    const std::string err = path("limited.err");
    const std::string line = limited + shell_quote(YOCO_CLI_PATH) + " " + c + " >/dev/null 2>" + shell_quote(err);
    const int raw = std::system(("sh -c " + shell_quote(line)).c_str());
    ASSERT_TRUE(WIFEXITED(raw)) << c;
    EXPECT_EQ(WEXITSTATUS(raw), 2) << c << "\n" << slurp(err);
    EXPECT_NE(slurp(err).find("yoco: error: "), std::string::npos) << slurp(err);
  }
  EXPECT_EQ(slurp(csv), csv0);
  EXPECT_EQ(slurp(st), st0);
  EXPECT_EQ(slurp(npy), npy0);
  // No temporary files are left behind.
  for (const auto& e : fs::directory_iterator(dir_))
    EXPECT_EQ(e.path().filename().string().find(".tmp."), std::string::npos) << e.path();
  // The compare of the kept CSV still reads it.
  EXPECT_EQ(yoco("compare " + csv + " " + csv).status, 0);
}

// README: "a missing folder is created" held for bench only; forward and
// weights init refused a missing folder. Every writing command now makes it.
TEST_F(Cli, AMissingOutputFolderIsCreated) {
  const std::vector<std::pair<std::string, std::string>> writes = {
      {"bench --model yoco-tiny --lengths 128 --metrics memory --repeats 1 --warmup 0 --out ", "b/c/r.csv"},
      {"weights init --model yoco-tiny --seed 1 --out ", "w/x/w.safetensors"},
      {"forward --model yoco-tiny --tokens 1,2,3 --out ", "f/y/l.npy"},
      {"model --model yoco-tiny --lengths 1K --out ", "m/z/m.csv"}};
  for (const auto& [cmd, file] : writes) {
    const CliRun r = yoco(cmd + path(file));
    EXPECT_EQ(r.status, 0) << cmd << file << "\n" << r.err;
    EXPECT_TRUE(fs::is_regular_file(path(file))) << cmd << file;
  }
}

// Ctrl-C during `weights init` (its file is opened before the weights are
// made) left a hidden temporary beside the target until the next write of it.
// Now the temporary goes, the message names the file, and the exit status is
// the signal's.
TEST_F(Cli, CtrlCWhileWritingLeavesNoTemporary) {
  const std::string target = path("stopped.safetensors"), err = path("stopped.err");
  spit(target, "earlier");
  for (const char* sig : {"INT", "TERM"}) {
    // yoco-160m in bf16: 486 MB in about 3 s here, stopped as soon as its temporary shows.
    // set -m: without job control bash starts a background command with SIGINT ignored.
    const std::string line = "set -m; " + shell_quote(YOCO_CLI_PATH) + " weights init --model yoco-160m --dtype bf16 --seed 1 --out " +
                             shell_quote(target) + " 2>" + shell_quote(err) + " & pid=$!; i=0; " +
                             // Non-empty: the output check's empty probe comes and goes before the real one.
                             "while [ -z \"$(find " + shell_quote(dir_.string()) +
                             " -maxdepth 1 -name '.stopped.safetensors.tmp.*' -size +0c)\" ]; do " +
                             "i=$((i+1)); [ $i -lt 2000 ] || exit 99; sleep 0.01; done; kill -" + sig +
                             " $pid; wait $pid; exit $?";
    // A signal ignored when the shell starts stays ignored (a test run started in the background has
    // SIGINT so): the command starts from the default actions, as from a terminal.
    struct sigaction dfl {}, old_int {}, old_term {};
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    ::sigaction(SIGINT, &dfl, &old_int);
    ::sigaction(SIGTERM, &dfl, &old_term);
    const int raw = std::system(("bash -c " + shell_quote(line)).c_str());
    ::sigaction(SIGINT, &old_int, nullptr);
    ::sigaction(SIGTERM, &old_term, nullptr);
    ASSERT_TRUE(WIFEXITED(raw)) << sig;
    ASSERT_NE(WEXITSTATUS(raw), 99) << "no temporary seen: " << slurp(err);
    EXPECT_EQ(WEXITSTATUS(raw), std::string(sig) == "INT" ? 130 : 143) << slurp(err);
    EXPECT_NE(slurp(err).find("interrupted (SIG" + std::string(sig) + "): " + target + " not written"), std::string::npos)
        << slurp(err);
    EXPECT_EQ(slurp(target), "earlier");
    for (const auto& e : fs::directory_iterator(dir_))
      EXPECT_EQ(e.path().filename().string().find(".tmp."), std::string::npos) << e.path();
  }
}

// --out naming a file the command reads (by any path) replaced it: forward
// --weights w --out w left logits where the weights were, calibrate SWEEP
// --out SWEEP a calibration where hours of measurements were. Refused, the
// input untouched (calibrate --calibration C --out C: --out is refused in a check, cli_calibrate.cpp).
TEST_F(Cli, AnOutputOverAnInputIsRefused) {
  const std::string w = path("w.safetensors"), tok = path("tok.txt"), cfg = path("cfg.json");
  ASSERT_EQ(yoco("weights init --model yoco-tiny --seed 1 --out " + w).status, 0);
  spit(tok, "1,2,3\n");
  spit(cfg, R"({"dim": 64, "n_layers": 4, "hidden_dim": 192, "vocab_size": 512, "n_self_heads": 4, "n_attn_heads": 4,
    "n_attn_kv_heads": 2})");
  const std::string wbytes = slurp(w), cbytes = slurp(cfg);
  const std::string dot = (fs::path(w).parent_path() / "." / "w.safetensors").string();  // the same file, another path
  expect_one_line_error(yoco("forward --model yoco-tiny --weights " + w + " --tokens 1,2 --out " + dot),
                        {"--out", "--weights", "replace the input"}, "forward over its weights");
  expect_one_line_error(yoco("forward --model yoco-tiny --tokens-file " + tok + " --out " + tok),
                        {"--out", "--tokens-file"}, "forward over its tokens");
  expect_one_line_error(yoco("forward --model " + cfg + " --tokens 1 --out " + cfg), {"--model"}, "forward over its config");
  expect_one_line_error(yoco("weights init --model " + cfg + " --seed 1 --out " + cfg), {"--model"}, "init over its config");
  expect_one_line_error(yoco("model --model yoco-tiny," + cfg + " --lengths 1K --out " + cfg), {"--model"},
                        "model over its config");
  EXPECT_EQ(slurp(w), wbytes);
  EXPECT_EQ(slurp(tok), "1,2,3\n");
  EXPECT_EQ(slurp(cfg), cbytes);

  const std::string sweep_src =
      (fs::path(YOCO_TEST_DATA_DIR).parent_path().parent_path() / "reports/results/nvidia-h100/sweep.csv").string();
  const std::string sweep = path("sweep.csv"), cal = path("cal.csv");
  fs::copy_file(sweep_src, sweep);
  expect_one_line_error(yoco("calibrate " + sweep + " --out " + sweep), {"--out", "the sweep", "replace the input"},
                        "calibrate over its sweep");
  EXPECT_EQ(slurp(sweep), slurp(sweep_src));
  ASSERT_EQ(yoco("calibrate " + sweep + " --out " + cal).status, 0);
  const std::string cal_bytes = slurp(cal);
  expect_one_line_error(yoco("model --model yoco-tiny --lengths 1K --calibration " + cal + " --out " + cal),
                        {"--out", "--calibration"}, "model over its calibration");
  EXPECT_EQ(slurp(cal), cal_bytes);
  expect_one_line_error(yoco("calibrate " + sweep + " --calibration " + cal + " --out " + cal), {"--out"},
                        "calibrate over its calibration");
  EXPECT_EQ(slurp(cal), cal_bytes);
}

// Rows and tables on stdout are often redirected to a file: a write that fails
// there (a full disk) is an error, not exit 0 with a cut file.
TEST_F(Cli, AFailedWriteToStdoutIsAnError) {
  const std::string csv = path("good.csv");
  ASSERT_EQ(yoco("model --model yoco-tiny --lengths 1K --out " + csv).status, 0);
  for (const std::string& cmd : std::vector<std::string>{"model --model yoco-tiny --lengths 1K --format csv", "compare " + csv + " " + csv,
                                 "model --help", "--help"}) {
    const CliRun r = shell("sh -c " + shell_quote(shell_quote(YOCO_CLI_PATH) + " " + cmd + " >/dev/full"));
    expect_one_line_error(r, {"standard output"}, cmd);
  }
}

}  // namespace
}  // namespace yoco_test
