// test_cli: `yoco check gret` and `check attention`, generating inputs
// (--generate) and the options of each mode.
#include <filesystem>
#include <string>

#include "cli_fixture.hpp"

namespace yoco_test {
namespace {

// --generate with a shape no file can hold: said at once, naming --shape,
// with nothing written. Before, 1M,1M,1M,1M wrote gigabytes until the disk
// filled (the element count overflowed int64), and the attention shape below
// wrote a 0-byte-data file that no reader opens, and exited 0.
TEST_F(Cli, CheckGenerateRefusesShapesNoFileCanHold) {
  const std::string f = path("gen.safetensors");
  const std::string bin = "timeout 20 " + shell_quote(YOCO_CLI_PATH);
  for (const std::string& cmd : {"check gret --generate " + f + " --shape 1M,1M,1M,1M",
                                 "check gret --generate " + f + " --shape 1,1,1,64M --with-state",
                                 "check attention --generate " + f + " --shape 1M,1M,1M,1M,1M,1M",
                                 "check attention --generate " + f + " --shape 1,1,32M,1M,1M,64"}) {
    expect_one_line_error(shell(bin + " " + cmd), {"--shape", "2^50"}, cmd);
    EXPECT_FALSE(fs::exists(f)) << cmd;
  }
  // Within the readers' limit but beyond the folder's free space: said before writing.
  const std::string big = "check gret --generate " + f + " --shape 1,1M,1M,64";
  expect_one_line_error(shell(bin + " " + big), {"--shape", "free", dir_.string()}, big);
  EXPECT_FALSE(fs::exists(f));
  for (const auto& e : fs::directory_iterator(dir_))
    EXPECT_EQ(e.path().filename().string().find(".tmp."), std::string::npos) << e.path();
  // A shape that fits is written as before.
  ASSERT_EQ(yoco("check gret --generate " + f + " --shape 1,64,2,16 --with-state").status, 0);
  ASSERT_EQ(yoco("check attention --generate " + path("a.safetensors") + " --shape 1,16,32,4,2,16").status, 0);
}

// --generate xdir/ failed late ("cannot rename the temporary file over it (Not
// a directory)") and --generate x.npy wrote a safetensors file under numpy's
// name: both are refused at once, one line naming --generate, nothing written.
TEST_F(Cli, CheckGenerateRefusesAFolderOrANpyName) {
  fs::create_directories(path("existing"));
  for (const std::string& target : {path("xdir") + "/", path("existing"), path("x.npy")})
    for (const std::string& kind : {std::string("gret --shape 1,64,2,16"), std::string("attention --shape 1,16,16,2,2,16")}) {
      const std::string cmd = "check " + kind.substr(0, kind.find(' ')) + " --generate " + target + kind.substr(kind.find(' '));
      expect_one_line_error(yoco(cmd), {"--generate", target}, cmd);
    }
  EXPECT_FALSE(fs::exists(path("xdir")));
  EXPECT_FALSE(fs::exists(path("x.npy")));
  EXPECT_TRUE(fs::is_empty(path("existing")));
  EXPECT_NE(yoco("check gret --generate " + path("x.npy") + " --shape 1,64,2,16").err.find("x.safetensors"),
            std::string::npos);
}

// A large --generate shows its tensors being written (it takes minutes at
// gigabytes), as bench's progress: stderr, a terminal or YOCO_PROGRESS=lines;
// a small one writes without a line. More queries than keys is written, with
// a note on how to judge it (the default query offset, Sk - Sq, is refused).
TEST_F(Cli, CheckGenerateShowsProgressAndNotesMoreQueriesThanKeys) {
  const std::string f = path("big.safetensors");
  const CliRun big = shell("YOCO_PROGRESS=lines " + shell_quote(YOCO_CLI_PATH) + " check gret --generate " + f +
                           " --shape 1,8192,8,256 --dtype f32");  // 3 x 64 MiB + g
  ASSERT_EQ(big.status, 0) << big.all();
  for (const std::string t : {"1/4", "writing q", "writing k", "writing v", "4/4", "writing g"})
    EXPECT_NE(big.err.find(t), std::string::npos) << t << "\n" << big.err;
  const CliRun small = shell("YOCO_PROGRESS=lines " + shell_quote(YOCO_CLI_PATH) + " check gret --generate " +
                             path("s.st") + " --shape 1,64,2,16");
  ASSERT_EQ(small.status, 0) << small.all();
  EXPECT_EQ(small.err, "");

  const std::string a = path("a.st");
  const CliRun more = yoco("check attention --generate " + a + " --shape 1,8,4,2,1,16");
  ASSERT_EQ(more.status, 0) << more.all();
  EXPECT_NE(more.out.find("--q-offset"), std::string::npos) << more.out;
  // The note's advice works: judged with --q-offset 0 the file is read (its q judged as the output fails
  // the check, status 1, not refused, status 2).
  EXPECT_EQ(yoco("check attention " + a + " " + a + " --o q").status, 2);
  EXPECT_EQ(yoco("check attention " + a + " " + a + " --o q --q-offset 0").status, 1);
  EXPECT_EQ(yoco("check attention --generate " + path("b.st") + " --shape 1,4,8,2,1,16").out.find("note"),
            std::string::npos);
}

// --block-tokens took no K/M suffix (lengths do everywhere), and a block the
// machine cannot hold ran a minute before std::bad_alloc: refused at once with
// the help's estimate, N (at most T) x H x D x 60 bytes. q here is a sparse
// file of 16M tokens x 64 heads x 128: a 16M block needs terabytes.
TEST_F(Cli, CheckBlockTokensTakeLengthsAndMustFitInMemory) {
  const std::string small = path("s.safetensors");
  ASSERT_EQ(yoco("check gret --generate " + small + " --shape 1,256,2,16").status, 0);
  const CliRun k = yoco("check gret " + small + " " + small + " --o q --block-tokens 1K");
  EXPECT_NE(k.status, 2) << k.all();  // judged (q is no output of q: a FAIL), not refused
  EXPECT_NE(k.out.find("yoco check gret"), std::string::npos) << k.all();
  expect_one_line_error(yoco("check gret " + small + " " + small + " --o q --block-tokens 32"), {"--block-tokens", ">= 64"},
                        "--block-tokens 32");
  const int64_t T = int64_t{1} << 24, bytes = T * 64 * 128 * 2;
  const std::string header = "{\"q\":{\"dtype\":\"BF16\",\"shape\":[1," + std::to_string(T) +
                             ",64,128],\"data_offsets\":[0," + std::to_string(bytes) + "]}}";
  std::string len(8, '\0');
  for (int i = 0; i < 8; ++i) len[static_cast<size_t>(i)] = static_cast<char>((header.size() >> (8 * i)) & 0xff);
  const std::string big = path("big.safetensors");
  spit(big, len + header);
  fs::resize_file(big, 8 + header.size() + static_cast<uint64_t>(bytes));  // sparse: no disk used
  const std::string cmd = "check gret " + big + " " + big + " --o q --block-tokens 16M";
  expect_one_line_error(shell("timeout 20 " + shell_quote(YOCO_CLI_PATH) + " " + cmd),
                        {"not enough memory", "--block-tokens 16M", "N x H x D x 60"}, cmd);
}

// An option of the other mode of check (judging INPUTS OUTPUTS, or --generate)
// would be ignored: refused, naming it, as every unknown option is.
TEST_F(Cli, CheckRefusesTheOptionsOfItsOtherMode) {
  const std::string in = path("in.safetensors"), gin = path("g.safetensors");
  ASSERT_EQ(yoco("check attention --generate " + in + " --shape 1,16,16,2,2,16").status, 0);
  ASSERT_EQ(yoco("check gret --generate " + gin + " --shape 1,64,2,16").status, 0);
  for (const std::string o : {"--seed 3", "--dtype f32", "--q-scale 2", "--shape 1,16,16,2,2,16"})
    expect_one_line_error(yoco("check attention " + in + " " + in + " --o q " + o), {o.substr(0, o.find(' ')), "--generate"},
                          "attention check with " + o);
  for (const std::string o : {"--tolerance 1", "--mask none", "--window 4", "--q-offset 0", "--scale 2", "--format csv",
                              "--o q"})
    expect_one_line_error(yoco("check attention --generate " + path("x.st") + " --shape 1,16,16,2,2,16 " + o),
                          {o.substr(0, o.find(' ')), "--generate"}, "attention --generate with " + o);
  for (const std::string o : {"--seed 3", "--dtype f32", "--gate-scale 2", "--constant-decay", "--with-state",
                              "--packed 0,64", "--shape 1,64,2,16"})
    expect_one_line_error(yoco("check gret " + gin + " " + gin + " --o q " + o), {o.substr(0, o.find(' ')), "--generate"},
                          "gret check with " + o);
  // --state-layout is both modes' (the generator writes the state in it), with --with-state.
  expect_one_line_error(yoco("check gret --generate " + path("x.st") + " --shape 1,64,2,16 --state-layout vk"),
                        {"--state-layout", "--with-state"}, "gret --generate --state-layout without a state");
  for (const std::string o : {"--tolerance 1", "--scale none", "--paradigm parallel", "--format json",
                              "--block-tokens 64", "--o q", "--final-state s"})
    expect_one_line_error(yoco("check gret --generate " + path("x.st") + " --shape 1,64,2,16 " + o),
                          {o.substr(0, o.find(' ')), "--generate"}, "gret --generate with " + o);
  EXPECT_FALSE(fs::exists(path("x.st")));
}

}  // namespace
}  // namespace yoco_test
