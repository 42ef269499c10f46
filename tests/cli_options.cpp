// test_cli: the help, and the options and arguments refused as bad input
// (exit 2, one line on stderr).
#include <sstream>
#include <string>
#include <vector>

#include "cli_fixture.hpp"

namespace yoco_test {
namespace {

TEST_F(Cli, HelpAndUnknownCommands) {
  for (const std::string c : {"--help", "-h", "forward --help", "generate --help", "weights --help",
                              "weights init --help", "weights inspect -h", "demo --help", "help generate",
                              "forward --model nonsense --help"}) {
    const CliRun r = yoco(c);
    EXPECT_EQ(r.status, 0) << c << "\n" << r.all();
    EXPECT_EQ(r.out.rfind("usage: yoco", 0), 0u) << c << "\n" << r.out;
  }
  EXPECT_NE(yoco("forward --help").out.find("--all-positions"), std::string::npos);
  // The help form yoco accepts is the one its help gives.
  EXPECT_NE(yoco("--help").out.find("yoco help <command>"), std::string::npos) << yoco("--help").out;
  EXPECT_NE(yoco("generate --help").out.find("--prefill-chunk"), std::string::npos);
  expect_input_error(yoco("frobnicate"), {"frobnicate"}, "unknown command");
  // The list it gives names every command, the newer ones included.
  for (const std::string c : {"forward", "generate", "weights", "bench", "model", "compare", "ratios", "check",
                              "calibrate", "history", "demo"})
    EXPECT_NE(yoco("frobnicate").err.find(c), std::string::npos) << c;
  expect_input_error(yoco(""), {"no command"}, "no command");
  expect_input_error(yoco("weights frob"), {"frob"}, "unknown weights action");
}

TEST_F(Cli, BadInputIsOneLineOnStderr) {
  expect_one_line_error(yoco(""), {"no command", "see yoco --help"}, "no command");
  expect_one_line_error(yoco("weights"), {"yoco weights", "init or inspect"}, "weights without an action");
  const CliRun check = yoco("check");
  expect_one_line_error(check, {"yoco check", "gret", "attention"}, "check without a kind");
  EXPECT_EQ(check.out, "") << "the usage is for --help";
}

// A name with a line break in it (a file name may hold one, a preset or
// command typed with one) is echoed escaped: the error stays one line.
TEST_F(Cli, ALineBreakInANameKeepsTheErrorOnOneLine) {
  const std::string nl = path("two\nlines.csv");
  expect_one_line_error(yoco("compare " + shell_quote(nl) + " " + shell_quote(nl)), {"two\\nlines.csv"}, "file name");
  expect_one_line_error(yoco("forward --model " + shell_quote("yoco\ntiny") + " --tokens 1 --out " + path("x.npy")),
                        {"'yoco\\ntiny'"}, "preset");
  expect_one_line_error(yoco(shell_quote("frob\r\nx")), {"'frob\\r\\nx'"}, "command");
  expect_one_line_error(yoco("model --model " + shell_quote(std::string("a\x1b[2Jb"))), {"a\\x1b[2Jb"}, "escape sequence");
  // Bytes that are not UTF-8 (a UTF-16 token file) are escaped too; UTF-8 text is kept.
  const std::string utf16 = path("utf16.txt");
  spit(utf16, std::string("\xff\xfe" "1\0" "2\0", 6));
  const CliRun r = yoco("forward --model yoco-tiny --tokens-file " + utf16 + " --out " + path("x.npy"));
  expect_one_line_error(r, {"'\\xff\\xfe1\\x002\\x00'"}, "UTF-16 tokens");
  expect_one_line_error(yoco("model --model " + shell_quote("caf\xc3\xa9\xe9")), {"caf\xc3\xa9\\xe9"}, "Latin-1 after UTF-8");
}

// A misspelt YOCO_PROGRESS was taken silently (no progress lines in a long
// run's log); every command now refuses it before any work.
TEST_F(Cli, AnUnknownProgressSettingIsRefused) {
  const CliRun r = shell("YOCO_PROGRESS=line " + shell_quote(YOCO_CLI_PATH) + " model --model yoco-tiny --lengths 1K");
  expect_one_line_error(r, {"YOCO_PROGRESS", "'line'"}, "misspelt");
  EXPECT_EQ(r.out, "");
  for (const std::string v : {"lines", ""})
    EXPECT_EQ(shell("YOCO_PROGRESS=" + v + " " + shell_quote(YOCO_CLI_PATH) + " model --model yoco-tiny --lengths 1K").status, 0) << v;
}

// Every line of an options list is an option or the continuation of one's
// help, indented under it: calibrate's --ceilings, three lines long, ran its
// second and third lines from the left margin, where they read as new text.
TEST_F(Cli, OptionHelpsOfSeveralLinesStayInTheirColumn) {
  for (const std::string c : {"forward", "generate", "weights init", "weights inspect", "bench", "model", "compare",
                              "ratios", "check gret", "check attention", "calibrate", "demo"}) {
    const std::string out = yoco(c + " --help").out;
    const size_t from = out.find("\noptions:\n");
    ASSERT_NE(from, std::string::npos) << c;
    std::istringstream lines(out.substr(from + 10, out.find("\n\n", from + 10) - from - 10));
    for (std::string line; std::getline(lines, line);)
      EXPECT_TRUE(line.rfind("  -", 0) == 0 || line.rfind("      ", 0) == 0) << c << ": '" << line << "'";
  }
}

// A number option takes a decimal number, the whole text: std::stod took
// '0x10' as 16 and ' 1' as 1, where --threshold and the integer options refuse
// them. Hex, spaces and a '+' are now bad input at every such option.
TEST_F(Cli, NumberOptionsTakeDecimalsOnly) {
  const std::string gen = path("at.safetensors");
  ASSERT_EQ(yoco("check attention --generate " + gen + " --shape 1,4,8,2,1,16").status, 0);
  for (const std::string bad : {"0x10", "' 1'", "0x1p-2", "+2", "1e3x"}) {
    expect_one_line_error(yoco("model --model yoco-tiny --lengths 1K --peak-tflops " + bad + " --peak-gbs 100"),
                          {"--peak-tflops"}, "peak-tflops " + bad);
    expect_one_line_error(yoco("model --model yoco-tiny --lengths 1K --devices 2 --link " + bad), {"--link"},
                          "link " + bad);
    expect_one_line_error(yoco("check attention " + gen + " " + gen + " --o q --scale " + bad), {"--scale"},
                          "scale " + bad);
  }
  // Decimal forms still read.
  EXPECT_EQ(yoco("model --model yoco-tiny --lengths 1K --peak-tflops 1.5e2 --peak-gbs 100").status, 0);
  // A projection a device cannot hold says so, as the one-device table's "fits device" does: transformer-3b
  // at 4M on 4 H100s (120 GB a device) was a plain 717 s prefill.
  {
    const CliRun r = yoco("model --model transformer-3b,yoco-3b --lengths 4M --devices 4");
    ASSERT_EQ(r.status, 0) << r.all();
    EXPECT_NE(r.out.find("fits device"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("120 GB           NO"), std::string::npos) << r.out;
    const CliRun csv = yoco("model --model transformer-3b --lengths 4M --devices 4 --format csv");
    ASSERT_EQ(csv.status, 0) << csv.all();
    EXPECT_NE(csv.out.find("does not fit a device (120 GB > "), std::string::npos) << csv.out;
  }
  EXPECT_EQ(yoco("model --model yoco-tiny --lengths 1K --devices 2 --link 0.5").status, 0);
}

// A missing positional argument names it and points to --help: the synopsis
// of these commands spans lines, so pasting it broke the one-line rule.
TEST_F(Cli, MissingPositionalIsOneLineNamingIt) {
  const std::string a = path("a.csv");
  expect_one_line_error(yoco("compare " + a), {"yoco compare", "missing argument NEW.csv", "yoco compare --help"},
                        "compare with one file");
  expect_one_line_error(yoco("calibrate"), {"yoco calibrate", "missing argument SWEEP.csv", "yoco calibrate --help"},
                        "calibrate without a sweep");
  expect_one_line_error(yoco("weights inspect"), {"missing argument FILE.safetensors", "yoco weights inspect --help"},
                        "weights inspect without a file");
}

TEST_F(Cli, BadOptionsAreInputErrors) {
  const std::string o = " --out " + path("o.npy");
  const std::string fwd = "forward --model yoco-tiny --tokens 1,2,3";
  const std::string gen = "generate --model yoco-tiny --prompt-len 8";
  expect_input_error(yoco("forward --model yoco-tiny --tokens 1,512" + o), {"512", "vocabulary"}, "token >= vocab");
  expect_input_error(yoco("generate --model transformer-tiny --tokens 7,600 --gen 2"), {"600", "vocabulary"},
                     "generate token >= vocab");
  expect_input_error(yoco("forward --model yoco-tiny --tokens 1,-2" + o), {"item 2", "-2"}, "negative token");
  expect_input_error(yoco("forward --model yoco-tiny --tokens 1,,2" + o), {"empty item"}, "empty item");
  expect_input_error(yoco("forward --model yoco-tiny --tokens ''" + o), {"no token"}, "no tokens");
  const std::string tf = path("bad_tokens.txt");
  spit(tf, "1, 2\n3 4q 5\n");
  expect_input_error(yoco("forward --model yoco-tiny --tokens-file " + tf + o), {tf, "item 4", "4q"}, "token file");
  expect_input_error(yoco("forward --model yoco-tiny --tokens-file " + path("none.txt") + o), {"none.txt"}, "no file");
  expect_input_error(yoco(fwd), {"--out"}, "missing --out");
  expect_input_error(yoco("forward --tokens 1" + o), {"--model"}, "missing --model");
  expect_input_error(yoco("forward --model yoco-tiny" + o), {"--tokens"}, "missing tokens");
  expect_input_error(yoco(fwd + " --bogus 3" + o), {"--bogus"}, "unknown option");
  expect_input_error(yoco(fwd + " --chunk 0" + o), {"--chunk"}, "chunk 0");
  expect_input_error(yoco(fwd + " --chunk x" + o), {"--chunk"}, "chunk x");
  expect_input_error(yoco(fwd + " --dtype xyz" + o), {"--dtype", "xyz"}, "dtype");
  expect_input_error(yoco(fwd + " --paradigm sideways" + o), {"--paradigm", "sideways"}, "paradigm");
  expect_input_error(yoco(fwd + " --seed -3" + o), {"--seed"}, "negative seed");
  expect_input_error(yoco(fwd + " --seed 1 --weights " + path("w.safetensors") + o), {"--weights", "--seed"}, "both");
  expect_input_error(yoco("forward --model transformer-tiny --tokens 1,2 --paradigm chunkwise" + o),
                     {"--paradigm applies to YOCO gRet models only"}, "transformer paradigm");
  expect_input_error(yoco("forward --model transformer-tiny --tokens 1,2 --chunk 4" + o), {"--chunk", "gRet"},
                     "transformer chunk");
  // The chunk of the chunkwise paradigm: with another paradigm it would be ignored without a word.
  expect_input_error(yoco(fwd + " --chunk 4" + o), {"--chunk", "--paradigm chunkwise"}, "chunk, parallel");
  expect_input_error(yoco(fwd + " --paradigm recurrent --chunk 4" + o), {"--chunk", "recurrent"}, "chunk, recurrent");
  expect_input_error(yoco(gen + " --gen abc"), {"--gen", "abc"}, "gen abc");
  expect_input_error(yoco(gen + " --gen -1"), {"--gen", "-1"}, "gen -1");
  expect_input_error(yoco(gen), {"--gen"}, "missing --gen");
  expect_input_error(yoco(gen + " --gen 2 --prefill-chunk 0"), {"--prefill-chunk"}, "prefill chunk 0");
  expect_input_error(yoco(gen + " --gen 2 --batch 0"), {"--batch"}, "batch 0");
  expect_input_error(yoco(gen + " --gen 2 --tokens 1,2"), {"--prompt-len", "--tokens"}, "two prompts");
  expect_input_error(yoco("generate --model yoco-tiny --prompt-len 0 --gen 2"), {"--prompt-len"}, "empty prompt");
  expect_input_error(yoco(gen + " --gen 99999999999999999999"), {"--gen"}, "huge gen");
  expect_input_error(yoco("generate --model yoco-tiny --prompt-len 1000000000000 --gen 1"), {"memory"}, "too long");
  // K and M as in --lengths: the same point written the same way in every command.
  {
    const CliRun k = yoco("generate --model yoco-tiny --prompt-len 1K --gen 1 --dry-run");
    EXPECT_EQ(k.status, 0) << k.all();
    EXPECT_NE(k.out.find("prompt 1024 tokens"), std::string::npos) << k.out;
  }
  expect_input_error(yoco("generate --model yoco-tiny --prompt-len 2X --gen 1"), {"--prompt-len"}, "bad suffix");
  expect_input_error(yoco("demo --prompt-len K"), {"--prompt-len"}, "suffix alone");
  expect_input_error(yoco("demo --gen x"), {"--gen"}, "demo gen");
  // --gen takes K and M as every length does, and 0 (prefill only).
  for (const std::string g : {"1K", "0"})
    EXPECT_EQ(yoco("generate --model yoco-tiny --prompt-len 4 --gen " + g + " --dry-run").status, 0) << g;
  EXPECT_NE(yoco("generate --model yoco-tiny --prompt-len 4 --gen 1K --dry-run").out.find("generate 1024"), std::string::npos);
  expect_input_error(yoco("demo --gen 2M"), {"--gen", "2M"}, "demo gen past 1M");
  expect_input_error(yoco("demo --dtype bf16"), {"--dtype"}, "demo dtype");
  expect_input_error(yoco("weights init --model yoco-tiny --seed 1 --dtype i8 --out " + path("w.safetensors")),
                     {"--dtype", "i8"}, "init dtype");
  expect_input_error(yoco("weights init --model yoco-tiny --out " + path("w.safetensors")), {"--seed"}, "init seed");
  expect_input_error(yoco("weights inspect"), {"inspect"}, "inspect without file");
  expect_input_error(yoco("weights inspect " + path("absent.safetensors")), {"absent.safetensors"}, "inspect absent");
}

// A length's bound was checked on the number before its suffix and said so:
// "demo --prompt-len 2M" gave "must be <= 1, got 2" (the cap is 1M), and a
// bad suffix was quoted without it ("1KK" as '1K'). Now the length is quoted
// as given and the bound as a length.
TEST_F(Cli, ALengthsBoundIsSaidAsALength) {
  expect_one_line_error(yoco("demo --prompt-len 2M"), {"--prompt-len", "must be <= 1M (1048576), got 2M"}, "2M");
  expect_one_line_error(yoco("demo --prompt-len 2000K"), {"--prompt-len", "must be <= 1M (1048576), got 2000K"},
                        "2000K");
  expect_one_line_error(yoco("model --model yoco-tiny --lengths 2000000M"),
                        {"--lengths", "must be <= 1048576M (1099511627776), got 2000000M"}, "2000000M");
  expect_one_line_error(yoco("model --model yoco-tiny --lengths 99999999999999999999"),
                        {"--lengths", "must be <= 1048576M", "got 99999999999999999999"}, "past int64");
  expect_one_line_error(yoco("model --model yoco-tiny --lengths 1KK"), {"--lengths", "'1KK'"}, "1KK");
  expect_one_line_error(yoco("model --model yoco-tiny --lengths 1.5K"), {"--lengths", "'1.5K'"}, "1.5K");
  expect_one_line_error(yoco("model --model yoco-tiny --lengths -1K"), {"--lengths", "must be >= 1, got -1K"}, "-1K");
  EXPECT_EQ(yoco("model --model yoco-tiny --lengths 1048576M --gen 1 --format csv").status, 0);
}

}  // namespace
}  // namespace yoco_test
