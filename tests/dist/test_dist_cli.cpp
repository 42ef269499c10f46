// `yoco forward|generate|bench` under `mpirun -np R` (issue 33): the command
// line with the sequence sharded over real ranks, end to end, against the same
// commands in one process. This binary runs as one process and starts the MPI
// jobs itself (YOCO_MPIEXEC), 2 cores oversubscribed in CI.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "cli_runner.hpp"
#include "config.hpp"
#include "result_csv.hpp"

namespace {

using yoco_test::CliRun;
using yoco_test::shell_quote;

class DistCli : public yoco_test::CliTest {
 protected:
  // `yoco <args>` on R ranks (`timeout`: a launcher that stayed up fails the test instead of hanging it).
  CliRun mpi(int R, const std::string& args) {
    return shell("env " YOCO_MPI_ENV_LINE " timeout -k 5 300 " + shell_quote(YOCO_MPIEXEC) + " -np " + std::to_string(R) + " --oversubscribe " +
                 shell_quote(YOCO_CLI_PATH) + " " + args);
  }
};

// The f64 logits of a .npy that `yoco forward --dtype f64` wrote (format 1.0).
std::vector<double> read_npy_f64(const std::string& path) {
  const std::string bytes = yoco_test::slurp(path);
  EXPECT_GE(bytes.size(), 10u) << path;
  if (bytes.size() < 10) return {};
  EXPECT_NE(bytes.find("'descr': '<f8'"), std::string::npos) << path;
  const size_t header = 10 + static_cast<unsigned char>(bytes[8]) + 256 * static_cast<unsigned char>(bytes[9]);
  std::vector<double> v((bytes.size() - header) / sizeof(double));
  std::memcpy(v.data(), bytes.data() + header, v.size() * sizeof(double));
  return v;
}

std::string lines_starting(const std::string& text, const std::string& prefix) {
  std::string out;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);)
    if (l.rfind(prefix, 0) == 0) out += l + "\n";
  return out;
}

const char* const kPresets[] = {"yoco-tiny", "yoco-swa-tiny", "transformer-tiny"};

// Greedy generation on 3 ranks (a prompt that does not divide evenly, batch
// 2) gives the ids of one process, and its own --check passes: the sharded
// cached logits against the sharded forward.
TEST_F(DistCli, GenerateOnThreeRanksGivesTheIdsOfOneProcess) {
  for (const char* preset : kPresets) {
    const std::string args =
        std::string("generate --model ") + preset + " --prompt-len 37 --gen 8 --batch 2 --dtype f64";
    const CliRun one = yoco(args), three = mpi(3, args + " --check");
    ASSERT_EQ(one.status, 0) << one.all();
    ASSERT_EQ(three.status, 0) << three.all();
    EXPECT_EQ(lines_starting(three.out, "seq "), lines_starting(one.out, "seq ")) << preset;
    EXPECT_NE(lines_starting(three.out, "seq ").find("seq 1:"), std::string::npos);
    EXPECT_NE(three.out.find("sequence sharded over 3 MPI ranks"), std::string::npos) << three.out;
    EXPECT_NE(three.out.find("check:"), std::string::npos);
    EXPECT_NE(three.out.find("PASS"), std::string::npos) << three.out;
    // Rank 0 alone prints: one header line for the job.
    EXPECT_EQ(lines_starting(three.out, "model ").find('\n'), lines_starting(three.out, "model ").size() - 1)
        << "one header line: " << three.out;
    EXPECT_NE(three.out.find("comm_decode"), std::string::npos) << "the bytes the ranks moved: " << three.out;
  }
}

// Every position's logits on 2 and 4 ranks equal one process's to 1e-12.
TEST_F(DistCli, ForwardOnRanksWritesTheLogitsOfOneProcess) {
  std::string tokens;
  for (int i = 0; i < 53; ++i) tokens += (i ? "," : "") + std::to_string((37 * i + 5) % 500);
  for (const char* preset : kPresets) {
    const std::string args = std::string("forward --model ") + preset + " --tokens " + tokens +
                             " --dtype f64 --all-positions --out ";
    ASSERT_EQ(yoco(args + path("one.npy")).status, 0);
    const std::vector<double> want = read_npy_f64(path("one.npy"));
    double scale = 0;
    for (double x : want) scale = std::max(scale, std::abs(x));
    for (const int R : {2, 4}) {
      const CliRun r = mpi(R, args + path("ranks.npy"));
      ASSERT_EQ(r.status, 0) << r.all();
      const std::vector<double> got = read_npy_f64(path("ranks.npy"));
      ASSERT_EQ(got.size(), want.size()) << preset << " on " << R;
      double worst = 0;
      for (size_t i = 0; i < got.size(); ++i) worst = std::max(worst, std::abs(got[i] - want[i]));
      EXPECT_LE(worst / scale, 1e-12) << preset << " on " << R << " ranks";
    }
  }
}

// The sweep on 2 ranks: rows of device cpu-x2, written once, with what the
// ranks moved. YOCO's self-decoder sends the same bytes at 1K and 2K (a
// fixed-size gRet state a layer); the Transformer's ring doubles with the
// prompt.
TEST_F(DistCli, BenchOnTwoRanksCountsTheBytesTheRanksMove) {
  const std::string out = path("sweep.csv");
  const CliRun r = mpi(2, "bench --model yoco-tiny,transformer-tiny --lengths 1K,2K --metrics prefill,decode "
                          "--repeats 1 --warmup 0 --decode-sample 4 --format csv --out " + out);
  ASSERT_EQ(r.status, 0) << r.all();
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'),
            static_cast<long>(yoco::cli::read_results_csv(out).size()) + 1)
      << "stdout is rank 0's CSV alone";
  std::map<std::string, double> v;  // model len phase metric -> value
  int measured = 0;
  for (const auto& row : yoco::cli::read_results_csv(out)) {
    if (row.method == "analytic") continue;
    EXPECT_EQ(row.prov.device, "cpu-x2") << row.phase;
    EXPECT_NE(row.prov.device_name.find("2 MPI ranks on "), std::string::npos) << row.prov.device_name;
    if (row.value) v[row.model + " " + std::to_string(row.seq_len) + " " + row.phase + " " + row.metric] = *row.value;
    measured += row.phase == "prefill" && row.metric == "prefill_latency_s";
  }
  EXPECT_EQ(measured, 4);
  auto at = [&](const std::string& key) {
    EXPECT_TRUE(v.count(key)) << key;
    return v[key];
  };
  const yoco::ModelConfig y = yoco::preset_config("yoco-tiny");
  // Rank 1 receives rank 0's (log decay, state) of every head and layer: B x Hs x (D^2 + 1) doubles a layer.
  const double gret = static_cast<double>(y.n_self_layers() * y.n_self_heads) *
                      static_cast<double>(y.self_head_dim() * y.self_head_dim() + 1) * 8;
  EXPECT_EQ(at("yoco-tiny 1024 comm:gret_state comm_bytes_received"), gret);
  EXPECT_EQ(at("yoco-tiny 2048 comm:gret_state comm_bytes_received"), gret);
  EXPECT_GT(at("yoco-tiny 1024 comm_decode comm_bytes_received"), 0);
  EXPECT_EQ(at("transformer-tiny 2048 comm:ring_kv comm_bytes_received"),
            2 * at("transformer-tiny 1024 comm:ring_kv comm_bytes_received"));
  EXPECT_GT(at("transformer-tiny 1024 comm:ring_kv comm_bytes_received"),
            at("yoco-tiny 1024 comm comm_bytes_received"));
  // The same sweep resumed on the ranks: every point kept (the comm rows belong to decode).
  const CliRun again = mpi(2, "bench --model yoco-tiny,transformer-tiny --lengths 1K,2K --metrics prefill,decode "
                              "--repeats 1 --warmup 0 --decode-sample 4 --format csv --resume --out " + out);
  ASSERT_EQ(again.status, 0) << again.all();
  EXPECT_NE(again.err.find("resuming: 4 of 4 points done"), std::string::npos) << again.err;
}

// A sweep of the prefill alone on the ranks has the prefill's comm rows (they came with decode only, so a
// --metrics prefill sweep, the natural one for the bytes the prefill moves, had none), the same bytes as
// with decode, and resumes; a file of prefill and decode resumes with decode alone too.
TEST_F(DistCli, APrefillSweepOnTheRanksCountsTheBytesItsPrefillMoved) {
  const std::string pre = path("prefill.csv"), both = path("both.csv");
  const std::string sweep = "bench --model yoco-tiny,transformer-tiny --lengths 1K --repeats 1 --warmup 0 "
                            "--decode-sample 2 --format csv --metrics ";
  ASSERT_EQ(mpi(2, sweep + "prefill --out " + pre).status, 0);
  ASSERT_EQ(mpi(2, sweep + "prefill,decode --out " + both).status, 0);
  std::map<std::string, double> got, with_decode;
  for (const auto& [file, into] : {std::pair{pre, &got}, std::pair{both, &with_decode}})
    for (const auto& row : yoco::cli::read_results_csv(file))
      if (row.phase.rfind("comm", 0) == 0 && row.value)
        (*into)[row.model + " " + row.phase + " " + row.metric] = *row.value;
  EXPECT_EQ(got.count("yoco-tiny comm:gret_state comm_bytes_received"), 1u);
  EXPECT_EQ(got.count("transformer-tiny comm:ring_kv comm_bytes_received"), 1u);
  for (const auto& [k, v] : got) {
    EXPECT_EQ(k.find("comm_decode"), std::string::npos) << k;
    EXPECT_EQ(with_decode[k], v) << k;
  }
  const CliRun again = mpi(2, sweep + "prefill --resume --out " + pre);
  ASSERT_EQ(again.status, 0) << again.all();
  EXPECT_NE(again.err.find("resuming: 2 of 2 points done"), std::string::npos) << again.err;
}

// Bad input under mpirun: exit 2, the message once (rank 0's), every rank ended.
void expect_refused(const CliRun& r, const std::string& needle) {
  EXPECT_EQ(r.status, 2) << r.all();
  size_t n = 0;
  for (size_t p = r.err.find("yoco: error: "); p != std::string::npos; p = r.err.find("yoco: error: ", p + 1)) ++n;
  EXPECT_EQ(n, 1u) << r.err;
  EXPECT_NE(r.err.find(needle), std::string::npos) << r.err;
}

// The sampled throughput (the batch's prefill over a quarter of --budget-s)
// and the batch's allocation (chunk / batch tokens a sequence) start the
// batch's caches from a short prompt: on the ranks it must still be split
// (a rank at least one token), or every sharded throughput of that kind is lost.
TEST_F(DistCli, BenchThroughputOnRanksStartsTheBatchFromAPromptTheRanksCanSplit) {
  // (A --prefill-chunk small enough to start the allocation from a prompt below the ranks is refused under
  // mpirun since the sharded runners take no chunk: BadInputEndsTheJobWithOneMessage.)
  // The sweep samples the batch's prefill when batch x one sequence's predicted prefill (the roofline of the
  // ceilings it measures: metrics throughput alone learns nothing else) is over a quarter of --budget-s, and
  // runs it when the predicted sampled run (one sequence's prefill + gen decode steps of the batch) is within
  // it. Those rooflines differ a hundredfold between machines and builds (the sanitized build's measured
  // ceilings are far lower), so a first run on the ranks reads them (its analytic prefill and decode rows)
  // and the budget is set from them: 8x the slower model's predicted sampled run, with the batch's whole
  // prefill asserted to stay over twice a quarter of it (room for the next run's ceilings to differ). The
  // first run's own timed runs are not needed: --budget-s 1 --no-extrapolate leaves a slow build's out.
  const std::string probe = path("probe.csv");
  const CliRun pr = mpi(2, "bench --model yoco-tiny,transformer-tiny --lengths 4K --metrics prefill,decode "
                           "--repeats 1 --warmup 0 --decode-sample 2 --budget-s 1 --no-extrapolate --format csv "
                           "--out " + probe);
  ASSERT_EQ(pr.status, 0) << pr.all();
  std::map<std::string, double> pre, step;
  for (const auto& row : yoco::cli::read_results_csv(probe)) {
    if (row.method != "analytic" || row.prov.device_name.rfind("roofline of", 0) != 0 || !row.value) continue;
    if (row.phase == "prefill" && row.metric == "prefill_latency_s") pre[row.model] = *row.value;
    if (row.phase == "decode" && row.metric == "decode_step_latency_s") step[row.model] = *row.value;
  }
  ASSERT_EQ(pre.size(), 2u) << yoco_test::slurp(probe);
  ASSERT_EQ(step.size(), 2u) << yoco_test::slurp(probe);
  const int64_t batch = 128, gen = 2, prompt = 4096 - gen;
  double sampled_run = 0;
  for (const auto& [m, p] : pre) sampled_run = std::max(sampled_run, p * prompt / 4096 + gen * step[m] * batch);
  const int64_t budget = std::max<int64_t>(1, static_cast<int64_t>(std::ceil(8 * sampled_run)));
  for (const auto& [m, p] : pre)
    ASSERT_GT(batch * p * prompt / 4096, 2.0 * budget / 4) << m << ": no window between sampling and the budget";
  const std::string out = path("tp.csv");
  const CliRun r = mpi(2, "bench --model yoco-tiny,transformer-tiny --lengths 4K --budget-s " + std::to_string(budget) +
                          " --gen 2 --metrics throughput --repeats 1 --warmup 0 --max-batch 128 --format csv --out " +
                          out);
  ASSERT_EQ(r.status, 0) << r.all();
  int rows = 0;
  for (const auto& row : yoco::cli::read_results_csv(out)) {
    if (row.metric != "throughput_tokens_per_s" || row.method == "analytic") continue;
    ++rows;
    EXPECT_EQ(row.method, "sampled") << row.model << ": " << row.notes;
    EXPECT_EQ(row.batch, 128) << row.model << ": " << row.notes;
    ASSERT_TRUE(row.value.has_value()) << row.model << ": " << row.notes;
    EXPECT_GT(*row.value, 0) << row.model;
    EXPECT_NE(row.notes.find("prefill sampled: one sequence of 4094 tokens timed"), std::string::npos)
        << row.model << ": " << row.notes;
    // The batch's caches started from a prompt split over the ranks, then skipped to the prompt's length.
    EXPECT_NE(row.notes.find("sharded: the skipped positions sit on one rank"), std::string::npos)
        << row.model << ": " << row.notes;
    EXPECT_EQ(row.notes.find("cannot be split"), std::string::npos) << row.model << ": " << row.notes;
  }
  EXPECT_EQ(rows, 2) << yoco_test::slurp(out);
}

// A length the ranks cannot split (YOCO: a token a rank; the Transformer: two
// chunks a rank; throughput: its prompt, length - gen) is bad input, said
// before anything runs (--dry-run too), not a point of `failed` rows and exit 0.
TEST_F(DistCli, BenchRefusesALengthTheRanksCannotSplit) {
  expect_refused(mpi(3, "bench --model yoco-tiny,transformer-tiny --lengths 64,4 --metrics prefill --repeats 1 "
                        "--warmup 0"),
                 "--lengths 4");
  expect_refused(mpi(3, "bench --model transformer-tiny --lengths 4 --metrics prefill --dry-run"), "--lengths 4");
  expect_refused(mpi(2, "bench --model yoco-tiny --lengths 64 --gen 63 --metrics throughput --repeats 1 --warmup 0"),
                 "--gen 63");
  // What the ranks can split runs: 3 tokens on 3 ranks of YOCO.
  const CliRun ok = mpi(3, "bench --model yoco-tiny --lengths 3 --metrics prefill --repeats 1 --warmup 0 --format csv");
  ASSERT_EQ(ok.status, 0) << ok.all();
  EXPECT_EQ(ok.out.find(",failed,"), std::string::npos) << ok.out;
}

TEST_F(DistCli, BadInputEndsTheJobWithOneMessage) {
  expect_refused(mpi(2, "generate --model nope --prompt-len 4 --gen 1"), "unknown model preset 'nope'");
  expect_refused(mpi(3, "generate --model transformer-tiny --prompt-len 5 --gen 1"),
                 "a prompt of 5 tokens cannot be split over 3 ranks");
  expect_refused(mpi(2, "bench"), "the default job runs one process");
  // yoco-tiny's head dims (16) no CUDA kernel serves: refused whatever the build and machine -- no
  // sharded CUDA path (cpu preset), no GPU, or the kernels' refusal -- with one message, exit 2.
  {
    const CliRun r = mpi(2, "generate --model yoco-tiny --prompt-len 8 --gen 1 --device cuda");
    expect_refused(r, "yoco: error: ");
    EXPECT_TRUE(r.err.find("--device cuda") != std::string::npos ||
                r.err.find("the CUDA runners cannot run yoco-tiny") != std::string::npos)
        << r.err;
  }
  expect_refused(mpi(2, "forward --model yoco-tiny --tokens 1,2,3 --paradigm recurrent --out " + path("x.npy")),
                 "--paradigm recurrent under mpirun");
  // A prompt the ranks cannot split, said by --dry-run too and naming the option that gave it.
  expect_refused(mpi(2, "generate --model yoco-tiny --prompt-len 1 --gen 1 --dry-run"),
                 "--prompt-len 1: a prompt of 1 tokens cannot be split over 2 ranks");
  expect_refused(mpi(3, "forward --model transformer-tiny --tokens 1,2,3,4,5 --out " + path("x.npy")),
                 "--tokens: a prompt of 5 tokens cannot be split over 3 ranks");
  // --prefill-chunk: the sharded runners prefill each rank's shard in one step; it would be ignored.
  expect_refused(mpi(2, "generate --model yoco-tiny --prompt-len 8 --gen 1 --prefill-chunk 4"),
                 "--prefill-chunk under mpirun");
  expect_refused(mpi(2, "bench --model yoco-tiny --lengths 256 --metrics prefill --prefill-chunk 8 --dry-run"),
                 "--prefill-chunk under mpirun");
  // stdin (or a pipe) reaches rank 0 only: the ranks would read different prompts.
  expect_refused(shell("echo 1 2 3 4 | env " YOCO_MPI_ENV_LINE " timeout -k 5 300 " + shell_quote(YOCO_MPIEXEC) +
                       " -np 2 --oversubscribe " + shell_quote(YOCO_CLI_PATH) +
                       " forward --model yoco-tiny --tokens-file /dev/stdin --out " + path("x.npy")),
                 "--tokens-file /dev/stdin under mpirun: not a regular file");
}

// What does not shard is refused under mpirun: every rank ran it whole (two ranks wrote one weights file;
// history's exec of Python left MPI unfinalised, mpirun exit 1 after a success). --help still answers.
TEST_F(DistCli, CommandsThatDoNotShardAreRefusedOnTheRanks) {
  const std::vector<std::string> commands = {"weights init --model yoco-tiny --seed 1 --out " + path("w.safetensors"),
                                             "model --model yoco-tiny --lengths 1K", "demo",
                                             "history ingest --db " + path("h.db") + " " + path("none.csv")};
  for (const std::string& cmd : commands) {
    SCOPED_TRACE(cmd);
    expect_refused(mpi(2, cmd), "runs one process: run it without mpirun");
  }
  EXPECT_FALSE(std::filesystem::exists(path("w.safetensors")));
  const CliRun help = mpi(2, "weights --help");
  EXPECT_EQ(help.status, 0) << help.all();
}

// The ranks read what must be one prompt: an MPMD launch with another prompt on one rank (or a file that
// differs between nodes) gave the ids of neither prompt, exit 0. A missing --tokens-file was called "not a
// regular file ... stdin or a pipe".
TEST_F(DistCli, RanksThatReadDifferentPromptsAreRefused) {
  const std::string launch = "env " YOCO_MPI_ENV_LINE " timeout -k 5 300 " + shell_quote(YOCO_MPIEXEC) +
                             " --oversubscribe -np 1 " + shell_quote(YOCO_CLI_PATH);
  expect_refused(shell(launch + " generate --model yoco-tiny --prompt-len 37 --gen 2 : -np 1 " +
                       shell_quote(YOCO_CLI_PATH) + " generate --model yoco-tiny --prompt-len 40 --gen 2"),
                 "the ranks read different prompts (rank 1's differs from rank 0's");
  expect_refused(shell(launch + " forward --model yoco-tiny --tokens 1,2,3,4 --out " + path("a.npy") + " : -np 1 " +
                       shell_quote(YOCO_CLI_PATH) + " forward --model yoco-tiny --tokens 1,2,3,5 --out " + path("a.npy")),
                 "--tokens: the ranks read different prompts");
  EXPECT_FALSE(std::filesystem::exists(path("a.npy")));
  // The same prompt on both sides of an MPMD launch runs.
  const CliRun same = shell(launch + " generate --model yoco-tiny --prompt-len 37 --gen 2 : -np 1 " +
                            shell_quote(YOCO_CLI_PATH) + " generate --model yoco-tiny --prompt-len 37 --gen 2");
  EXPECT_EQ(same.status, 0) << same.all();
  const CliRun missing = mpi(2, "generate --model yoco-tiny --tokens-file " + path("absent.txt") + " --gen 1");
  expect_refused(missing, path("absent.txt"));
  EXPECT_EQ(missing.err.find("not a regular file"), std::string::npos) << missing.err;
}

// What the rows and the header say of the prefill under mpirun: each rank's shard in one step, not a
// prefill chunk the sharded runners never used.
TEST_F(DistCli, RowsUnderMpirunSayHowThePrefillRan) {
  const std::string out = path("rows.csv");
  const CliRun r = mpi(2, "bench --model yoco-tiny --lengths 256 --metrics memory,prefill --repeats 1 --warmup 0 "
                          "--format csv --out " + out);
  ASSERT_EQ(r.status, 0) << r.all();
  int said = 0;
  for (const auto& row : yoco::cli::read_results_csv(out)) {
    if (row.prov.device != "cpu-x2") continue;
    EXPECT_EQ(row.notes.find("prefill chunk"), std::string::npos) << row.phase << " " << row.metric << ": " << row.notes;
    said += row.notes.find("each rank's shard prefilled in one step (2 ranks)") != std::string::npos;
  }
  EXPECT_GE(said, 2) << "the prefill row and the memory rows";
  const CliRun g = mpi(2, "generate --model yoco-tiny --prompt-len 8 --gen 2");
  ASSERT_EQ(g.status, 0) << g.all();
  EXPECT_NE(g.out.find("each rank's shard prefilled in one step (2 ranks)"), std::string::npos) << g.out;
}

}  // namespace
