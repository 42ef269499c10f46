// test_cli: `yoco forward` (the paradigms, the dtypes, the positions, against
// the reference models) and the token lists and files it reads.
#include <string>
#include <vector>

#include "cli_fixture.hpp"

namespace yoco_test {
namespace {

TEST_F(Cli, ForwardParadigmsAgreeAndMatchTheReference) {
  const auto tokens = test_tokens(30, 512);
  const std::string base = "forward --model yoco-tiny --dtype f64 --all-positions --tokens " + join(tokens, ",");
  std::vector<Npy> res;
  for (const std::string p : {"--paradigm parallel", "--paradigm recurrent", "--paradigm chunkwise --chunk 7", ""}) {
    const std::string out = path(unique_name("logits") + ".npy");
    const CliRun r = yoco(base + " " + p + " --out " + out);
    ASSERT_EQ(r.status, 0) << p << "\n" << r.all();
    EXPECT_NE(r.out.find("yoco-tiny"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("(30, 512)"), std::string::npos) << r.out;
    res.push_back(read_npy(out));
    EXPECT_EQ(res.back().descr, "<f8");
    EXPECT_EQ(res.back().shape, (std::vector<int64_t>{30, 512})) << p;
  }
  // The default paradigm is parallel: identical bits.
  EXPECT_EQ(res[3].data, res[0].data);
  // The three paradigms compute one function (DESIGN.md §6: <= 1e-10 in f64)...
  EXPECT_LE(rms_ratio_vec(res[1].data, res[0].data), 1e-10);
  EXPECT_LE(rms_ratio_vec(res[2].data, res[0].data), 1e-10);
  // ...but not bit for bit (so the paradigm really was switched).
  EXPECT_NE(res[1].data, res[0].data);
  EXPECT_NE(res[2].data, res[0].data);
  // And the file holds exactly what the reference model computes, row-major.
  EXPECT_EQ(res[0].data, reference_logits("yoco-tiny", tokens));
}

TEST_F(Cli, ForwardLastPositionAndFloat32) {
  const auto tokens = test_tokens(12, 512, 11, 3);
  const std::string all = path("all.npy"), last = path("last.npy"), last32 = path("last32.npy");
  const std::string base = "forward --model transformer-tiny --tokens " + shell_quote(join(tokens, " ")) + " ";
  ASSERT_EQ(yoco(base + "--dtype f64 --all-positions --out " + all).status, 0);
  ASSERT_EQ(yoco(base + "--dtype f64 --out " + last).status, 0);
  ASSERT_EQ(yoco(base + "--out " + last32).status, 0);  // default dtype f32
  const Npy a = read_npy(all), l = read_npy(last), l32 = read_npy(last32);
  EXPECT_EQ(a.shape, (std::vector<int64_t>{12, 512}));
  EXPECT_EQ(l.shape, (std::vector<int64_t>{512}));
  EXPECT_EQ(l.descr, "<f8");
  EXPECT_EQ(l32.descr, "<f4");
  EXPECT_EQ(l32.shape, (std::vector<int64_t>{512}));
  ASSERT_EQ(a.data.size(), 12u * 512u);
  EXPECT_EQ(l.data, std::vector<double>(a.data.end() - 512, a.data.end()));
  const auto ref = reference_logits("transformer-tiny", tokens);
  EXPECT_EQ(a.data, ref);
  EXPECT_LE(rms_ratio_vec(l32.data, l.data), 1e-5);
  EXPECT_GT(rms_ratio_vec(l32.data, l.data), 0.0);  // really computed in f32
}

TEST_F(Cli, ForwardSwaAndTokensFile) {
  const auto tokens = test_tokens(80, 512, 101, 7);  // longer than the window of 64
  const std::string tf = path("tokens.txt");
  spit(tf, join(std::vector<int64_t>(tokens.begin(), tokens.begin() + 40), ", ") + "\n" +
               join(std::vector<int64_t>(tokens.begin() + 40, tokens.end()), "\t") + "\n");
  const std::string out = path("swa.npy");
  const CliRun r = yoco("forward --model yoco-swa-tiny --dtype f64 --all-positions --tokens-file " + tf + " --out " + out);
  ASSERT_EQ(r.status, 0) << r.all();
  const Npy n = read_npy(out);
  EXPECT_EQ(n.shape, (std::vector<int64_t>{80, 512}));
  EXPECT_EQ(n.data, reference_logits("yoco-swa-tiny", tokens));
}

// A token file saved with a UTF-8 byte order mark (Windows editors) reads as
// the same ids; before, its first item was '\xEF\xBB\xBF1', "not a token id",
// in a message that showed it as '1'.
TEST_F(Cli, TokenFileWithAByteOrderMark) {
  const std::string plain = path("plain.txt"), bom = path("bom.txt");
  spit(plain, "1, 2, 3\n");
  spit(bom, "\xEF\xBB\xBF" "1, 2, 3\n");
  const CliRun a = yoco("forward --model yoco-tiny --tokens-file " + plain + " --out " + path("a.npy"));
  const CliRun b = yoco("forward --model yoco-tiny --tokens-file " + bom + " --out " + path("b.npy"));
  ASSERT_EQ(a.status, 0) << a.all();
  ASSERT_EQ(b.status, 0) << b.all();
  EXPECT_EQ(slurp(path("a.npy")), slurp(path("b.npy")));
}

// A control byte in a token file (a NUL, an escape) is shown escaped in the
// error, not written raw to the terminal.
TEST_F(Cli, TokenFileControlBytesAreShownEscaped) {
  const std::string f = path("nul.txt");
  spit(f, std::string("1\0" "2\x1b[31m 3", 10));
  const CliRun r = yoco("forward --model yoco-tiny --tokens-file " + f + " --out " + path("o.npy"));
  expect_input_error(r, {f, "item 1", "\\x00", "\\x1b"}, "control bytes");
  EXPECT_EQ(r.err.find('\0'), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find('\x1b'), std::string::npos) << r.err;
}

}  // namespace
}  // namespace yoco_test
