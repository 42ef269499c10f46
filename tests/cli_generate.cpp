// test_cli: `yoco generate` (greedy over the forward, batches, synthetic
// prompts, progress) and `yoco demo`.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "cli_fixture.hpp"
#include "cli_safetensors_bytes.hpp"
#include "config.hpp"
#include "counter_rng.hpp"
#include "param_layout.hpp"

namespace yoco_test {
namespace {

// Generated ids of "seq B: a b c" lines.
std::vector<std::vector<int64_t>> parse_generated(const std::string& out) {
  std::vector<std::vector<int64_t>> seqs;
  std::istringstream in(out);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("seq ", 0) != 0) continue;
    std::istringstream ls(line.substr(line.find(':') + 1));
    std::vector<int64_t> ids;
    int64_t x;
    while (ls >> x) ids.push_back(x);
    seqs.push_back(ids);
  }
  return seqs;
}

// The number after `key` in `text`, or NaN.
double number_after(const std::string& text, const std::string& key) {
  const auto p = text.find(key);
  if (p == std::string::npos) return NAN;
  return std::strtod(text.c_str() + p + key.size(), nullptr);
}

TEST_F(Cli, GenerateCheckPassesOnTheTinyModels) {
  for (const std::string model : {"yoco-tiny", "yoco-swa-tiny", "transformer-tiny"}) {
    const CliRun r = yoco("generate --model " + model + " --dtype f64 --prompt-len 40 --prefill-chunk 16 --gen 8 --check");
    ASSERT_EQ(r.status, 0) << model << "\n" << r.all();
    EXPECT_NE(r.out.find("PASS"), std::string::npos) << r.out;
    EXPECT_EQ(r.out.find("FAIL"), std::string::npos) << r.out;
    const double ratio = number_after(r.out, "max RMS ratio ");
    EXPECT_LE(ratio, 1e-9) << r.out;
    const auto seqs = parse_generated(r.out);
    ASSERT_EQ(seqs.size(), 1u) << r.out;
    EXPECT_EQ(seqs[0].size(), 8u);
    for (auto t : seqs[0]) EXPECT_TRUE(t >= 0 && t < 512);
    EXPECT_FALSE(std::isnan(number_after(r.out, "prefill: "))) << r.out;
    EXPECT_NE(r.out.find("ms/step"), std::string::npos) << r.out;
  }
}

TEST_F(Cli, GenerateIsGreedyOverTheForwardAndReportsTheCaches) {
  const auto prompt = test_tokens(21, 512, 29, 11);
  for (const std::string model : {"yoco-tiny", "transformer-tiny"}) {
    const CliRun r = yoco("generate --model " + model + " --dtype f64 --prefill-chunk 5 --gen 6 --tokens " + join(prompt, ","));
    ASSERT_EQ(r.status, 0) << r.all();
    const auto seqs = parse_generated(r.out);
    ASSERT_EQ(seqs.size(), 1u);
    ASSERT_EQ(seqs[0].size(), 6u);
    // Each generated token is the argmax (lowest id on ties) of the full
    // forward's logits at the position before it.
    std::vector<int64_t> full = prompt;
    full.insert(full.end(), seqs[0].begin(), seqs[0].end());
    const auto logits = reference_logits(model, full);
    for (size_t j = 0; j < 6; ++j) {
      const double* row = logits.data() + (prompt.size() - 1 + j) * 512;
      const int64_t best = std::max_element(row, row + 512) - row;  // first maximum
      EXPECT_EQ(seqs[0][j], best) << model << " token " << j;
    }
    // The caches hold prompt + generated tokens exactly: 2 (K, V) x 27 x Hkv*Da (32) x 8 bytes,
    // once for YOCO, once per layer (4) for the Transformer.
    const int64_t kv = 2 * 27 * 32 * 8 * (model == "yoco-tiny" ? 1 : 4);
    EXPECT_NE(r.out.find("kv_cache    " + std::to_string(kv) + " B"), std::string::npos) << r.out;
    // gRet state: 2 self layers x 4 heads x 16 x 16 doubles.
    if (model == "yoco-tiny") {
      EXPECT_NE(r.out.find("state       16384 B"), std::string::npos) << r.out;
    }
    EXPECT_NE(r.out.find("weights     " + std::to_string(yoco::param_count(yoco::preset_config(model)) * 8) + " B"),
              std::string::npos)
        << r.out;
  }
}

TEST_F(Cli, GenerateBatches) {
  CliRun r = yoco("generate --model yoco-swa-tiny --dtype f32 --prompt-len 70 --prefill-chunk 32 --batch 3 --gen 5 --check");
  ASSERT_EQ(r.status, 0) << r.all();
  EXPECT_NE(r.out.find("PASS"), std::string::npos);
  EXPECT_NE(r.out.find("x 3 sequences"), std::string::npos) << r.out;
  auto seqs = parse_generated(r.out);
  ASSERT_EQ(seqs.size(), 3u);
  EXPECT_NE(seqs[0], seqs[1]);  // different synthetic prompts
  // --tokens prompts are replicated: every sequence generates the same ids.
  r = yoco("generate --model yoco-tiny --tokens 4,8,15,16,23,42 --batch 2 --gen 4 --check");
  ASSERT_EQ(r.status, 0) << r.all();
  seqs = parse_generated(r.out);
  ASSERT_EQ(seqs.size(), 2u);
  EXPECT_EQ(seqs[0], seqs[1]);
  // --gen 0: prefill only, one position checked.
  r = yoco("generate --model transformer-tiny --prompt-len 9 --gen 0 --check --dtype f64");
  ASSERT_EQ(r.status, 0) << r.all();
  EXPECT_NE(r.out.find("at 1 position x 1 sequence"), std::string::npos) << r.out;
}

TEST_F(Cli, GenerateSyntheticPromptsAndTies) {
  // --prompt-len: token i of sequence b is splitmix64(seed * 1000003 + b * 7919 + i) % vocab.
  std::vector<int64_t> p1;
  for (uint64_t i = 0; i < 10; ++i) p1.push_back(static_cast<int64_t>(yoco::splitmix64(3 * 1000003 + 1 * 7919 + i) % 512));
  const CliRun syn = yoco("generate --model yoco-tiny --seed 3 --prompt-len 10 --batch 2 --gen 5");
  const CliRun given = yoco("generate --model yoco-tiny --seed 3 --gen 5 --tokens " + join(p1, ","));
  ASSERT_EQ(syn.status, 0) << syn.all();
  ASSERT_EQ(given.status, 0) << given.all();
  const auto a = parse_generated(syn.out), b = parse_generated(given.out);
  ASSERT_EQ(a.size(), 2u);
  ASSERT_EQ(b.size(), 1u);
  EXPECT_EQ(a[1], b[0]);

  // Ties go to the lowest id: with a zero LM head every logit is 0, so greedy picks token 0.
  const std::string w = path("w.safetensors"), z = path("zero_head.safetensors");
  ASSERT_EQ(yoco("weights init --model yoco-tiny --seed 0 --out " + w).status, 0);
  const std::string bytes = slurp(w);
  StFile st = split_safetensors(bytes);
  const auto off = st.header["output_projection.weight"]["data_offsets"];
  const uint64_t b0 = off[0].get<uint64_t>(), b1 = off[1].get<uint64_t>();
  std::fill(st.data.begin() + static_cast<std::ptrdiff_t>(b0), st.data.begin() + static_cast<std::ptrdiff_t>(b1), '\0');
  spit(z, join_safetensors(st.header.dump(), st.data));
  const CliRun r = yoco("generate --model yoco-tiny --weights " + z + " --prompt-len 7 --gen 4 --check --dtype f64");
  ASSERT_EQ(r.status, 0) << r.all();
  EXPECT_EQ(parse_generated(r.out), (std::vector<std::vector<int64_t>>{{0, 0, 0, 0}})) << r.out;

  // Activations are the peak over prefill and decode: never below the prefill's alone.
  const std::string g = "generate --model transformer-tiny --prompt-len 40 --prefill-chunk 16 --dtype f64 --gen ";
  const CliRun g0 = yoco(g + "0"), g3 = yoco(g + "3");
  ASSERT_EQ(g0.status, 0) << g0.all();
  ASSERT_EQ(g3.status, 0) << g3.all();
  const double act0 = number_after(g0.out, "\n  activations "), act3 = number_after(g3.out, "\n  activations ");
  EXPECT_GT(act0, 0.0) << g0.out;
  EXPECT_GE(act3, act0) << g3.out;
}

// A long generation (a 3B model on the CPU: about 0.5 s a step) said nothing
// between its header and the end. Progress goes to stderr like bench's: on a
// terminal, or one line per report with YOCO_PROGRESS=lines; never in stdout.
TEST_F(Cli, GenerateReportsProgressOnStderr) {
  const std::string g = "generate --model yoco-tiny --prompt-len 8 --gen 3 --check";
  const CliRun quiet = yoco(g);
  ASSERT_EQ(quiet.status, 0) << quiet.all();
  EXPECT_EQ(quiet.err, "") << "stderr is not a terminal: no progress";
  const CliRun r = shell("YOCO_PROGRESS=lines " + shell_quote(YOCO_CLI_PATH) + " " + g);
  ASSERT_EQ(r.status, 0) << r.all();
  for (const std::string n : {"[generate ", "prefill", "decode", "check"})
    EXPECT_NE(r.err.find(n), std::string::npos) << n << " in: " << r.err;
  EXPECT_EQ(parse_generated(r.out), parse_generated(quiet.out)) << r.out;
  EXPECT_EQ(r.out.find("[generate"), std::string::npos) << r.out;
}

TEST_F(Cli, DemoPasses) {
  const CliRun r = yoco("demo --prompt-len 40 --gen 4");
  ASSERT_EQ(r.status, 0) << r.all();
  for (const std::string m : {"yoco-tiny", "yoco-swa-tiny", "transformer-tiny"})
    EXPECT_NE(r.out.find(m), std::string::npos) << m;
  size_t passes = 0;
  for (size_t p = 0; (p = r.out.find("PASS", p)) != std::string::npos; ++p) ++passes;
  EXPECT_GE(passes, 3u) << r.out;
  EXPECT_EQ(r.out.find("FAIL"), std::string::npos);
}

// The demo applies generate's host-memory gate to each of its models before any
// runs: a prompt or generation it accepts (up to 1M tokens) but this machine
// cannot hold is exit 2 at once, not minutes of prefill and then an
// out-of-memory failure.
TEST_F(Cli, DemoRefusesWhatCannotFitBeforeRunning) {
  for (const std::string o : {"--prompt-len 1048576", "--gen 1048576"}) {
    const CliRun r = shell("timeout 20 " + shell_quote(YOCO_CLI_PATH) + " demo " + o);
    expect_one_line_error(r, {"not enough memory", "yoco-tiny"}, "demo " + o);
    EXPECT_EQ(r.out, "") << "refused before the table starts";
  }
}

// generate's host-memory gate counted every step's logits (8 B x vocab a step)
// with or without --check, and only the check keeps them: 5M tokens of yoco-tiny
// were refused for 26.9 GB. Without --check they pass the gate; with it they
// are still refused.
TEST_F(Cli, GenerateCountsKeptLogitsOnlyForTheCheck) {
  const std::string cmd = "generate --model yoco-tiny --tokens 3 --gen 2000000 --dry-run";
  const CliRun plain = yoco(cmd);
  EXPECT_EQ(plain.status, 0) << plain.all();
  expect_one_line_error(yoco(cmd + " --check"), {"not enough memory", "2000000"}, cmd + " --check");
}

}  // namespace
}  // namespace yoco_test
