// End-to-end tests of the `yoco` command line: run the built binary
// (YOCO_CLI_PATH) through the shell, check exit status, stdout/stderr and the
// files it writes. Expected logits are recomputed in-process with the
// reference models, so a CLI that wrote the wrong rows, dtype or shape fails.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "cli_runner.hpp"
#include "config.hpp"
#include "cuda_status.hpp"
#include "counter_rng.hpp"
#include "param_layout.hpp"
#include "tensor.hpp"
#include "transformer_model.hpp"
#include "weights.hpp"
#include "yoco_model.hpp"

namespace fs = std::filesystem;

namespace {

// ---------------------------------------------------------------- helpers --

using yoco_test::CliRun;
using yoco_test::expect_input_error;
using yoco_test::slurp;
using yoco_test::shell_quote;
using yoco_test::spit;
using yoco_test::unique_name;
using Cli = yoco_test::CliTest;

// A minimal .npy (format 1.0) reader that checks the header strictly.
struct Npy {
  std::string descr;
  std::vector<int64_t> shape;
  std::vector<double> data;
};

Npy read_npy(const std::string& file) {
  const std::string b = slurp(file);
  Npy n;
  EXPECT_GE(b.size(), 10u) << file;
  if (b.size() < 10) return n;
  EXPECT_EQ(b.substr(0, 6), std::string("\x93NUMPY")) << file;
  EXPECT_EQ(b[6], 1) << "major version";
  EXPECT_EQ(b[7], 0) << "minor version";
  const size_t hlen = static_cast<unsigned char>(b[8]) | (static_cast<size_t>(static_cast<unsigned char>(b[9])) << 8);
  EXPECT_LE(10 + hlen, b.size());
  if (10 + hlen > b.size()) return n;
  EXPECT_EQ((10 + hlen) % 64, 0u) << "data must start on a 64-byte boundary";
  const std::string h = b.substr(10, hlen);
  EXPECT_EQ(h.back(), '\n');
  std::smatch m;
  EXPECT_TRUE(std::regex_search(h, m, std::regex("'descr': '(<f[48])'"))) << h;
  n.descr = m.size() > 1 ? m[1].str() : "";
  EXPECT_NE(h.find("'fortran_order': False"), std::string::npos) << h;
  std::smatch s;
  EXPECT_TRUE(std::regex_search(h, s, std::regex("'shape': \\(([0-9, ]*)\\)"))) << h;
  if (s.size() > 1) {
    const std::string dims = s[1].str();
    std::regex num("[0-9]+");
    for (auto it = std::sregex_iterator(dims.begin(), dims.end(), num); it != std::sregex_iterator(); ++it)
      n.shape.push_back(std::stoll(it->str()));
    if (n.shape.size() == 1) {
      EXPECT_NE(dims.find(','), std::string::npos) << "a 1-tuple needs its comma: " << h;
    }
  }
  int64_t count = 1;
  for (auto d : n.shape) count *= d;
  const size_t item = n.descr == "<f8" ? 8 : 4;
  EXPECT_EQ(b.size() - 10 - hlen, static_cast<size_t>(count) * item) << "data size of " << file;
  if (b.size() - 10 - hlen != static_cast<size_t>(count) * item) return n;
  n.data.resize(static_cast<size_t>(count));
  const char* p = b.data() + 10 + hlen;
  for (int64_t i = 0; i < count; ++i) {
    if (item == 8) {
      double x;
      std::memcpy(&x, p + 8 * i, 8);
      n.data[i] = x;
    } else {
      float x;
      std::memcpy(&x, p + 4 * i, 4);
      n.data[i] = x;
    }
  }
  return n;
}

double rms_ratio_vec(const std::vector<double>& a, const std::vector<double>& ref) {
  EXPECT_EQ(a.size(), ref.size());
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size() && i < ref.size(); ++i) {
    num += (a[i] - ref[i]) * (a[i] - ref[i]);
    den += ref[i] * ref[i];
  }
  return std::sqrt(num) / std::sqrt(den);
}

std::vector<int64_t> test_tokens(int n, int vocab, int mul = 37, int add = 5) {
  std::vector<int64_t> t;
  for (int i = 0; i < n; ++i) t.push_back((i * mul + add) % vocab);
  return t;
}

std::string join(const std::vector<int64_t>& v, const std::string& sep) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? sep : "") + std::to_string(v[i]);
  return s;
}

// In-process logits at every position, as a flat row-major vector.
std::vector<double> reference_logits(const std::string& model, const std::vector<int64_t>& tokens, uint64_t seed = 0) {
  const yoco::ModelConfig cfg = yoco::preset_config(model);
  yoco::Mat<double> l;
  if (cfg.is_yoco()) {
    yoco::YocoModel<double> m(cfg, yoco::Weights<double>::init(cfg, seed));
    l = m.forward(yoco::TokenBatch::single(tokens));
  } else {
    yoco::TransformerModel<double> m(cfg, yoco::Weights<double>::init(cfg, seed));
    l = m.forward(yoco::TokenBatch::single(tokens));
  }
  return std::vector<double>(l.data(), l.data() + l.size());
}

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

// ----------------------------------------------------------------- forward --

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

// ----------------------------------------------------------------- weights --

TEST_F(Cli, WeightsInitInspectAndLoad) {
  const std::string w = path("w.safetensors");
  CliRun r = yoco("weights init --model yoco-tiny --seed 5 --out " + w);
  ASSERT_EQ(r.status, 0) << r.all();
  const yoco::ModelConfig cfg = yoco::preset_config("yoco-tiny");
  const auto layout = yoco::param_layout(cfg);

  r = yoco("weights inspect " + w);
  ASSERT_EQ(r.status, 0) << r.all();
  for (const auto& p : layout) EXPECT_NE(r.out.find(p.name), std::string::npos) << p.name;
  EXPECT_NE(r.out.find("[512, 64]"), std::string::npos);
  EXPECT_NE(r.out.find("F32"), std::string::npos);
  EXPECT_NE(r.out.find("yoco_config"), std::string::npos);
  EXPECT_NE(r.out.find(std::to_string(layout.size()) + " tensors"), std::string::npos) << r.out;
  const std::string total = std::to_string(yoco::param_count(cfg) * 4) + " B";
  EXPECT_NE(r.out.find(total), std::string::npos) << "byte total " << total << " in\n" << r.out;

  r = yoco("weights inspect " + w + " --model yoco-tiny");
  EXPECT_EQ(r.status, 0) << r.all();
  EXPECT_NE(r.out.find("valid"), std::string::npos);
  // The same file is not a Transformer's weights.
  expect_input_error(yoco("weights inspect " + w + " --model transformer-tiny"), {w, "transformer-tiny", "extra tensor"},
                     "wrong model");

  // Loading the f32 file gives exactly the logits of the same seed.
  const std::string a = path("a.npy"), b = path("b.npy"), c = path("c.npy");
  const std::string toks = " --tokens 3,1,4,1,5,9,2,6 --all-positions --dtype f32 --out ";
  ASSERT_EQ(yoco("forward --model yoco-tiny --weights " + w + toks + a).status, 0);
  ASSERT_EQ(yoco("forward --model yoco-tiny --seed 5" + toks + b).status, 0);
  ASSERT_EQ(yoco("forward --model yoco-tiny --seed 6" + toks + c).status, 0);
  EXPECT_EQ(slurp(a), slurp(b));
  EXPECT_NE(slurp(a), slurp(c));

  // bf16 storage: listed as BF16, loads, and rounds (close to, not equal to, f32).
  const std::string w16 = path("w16.safetensors"), d = path("d.npy");
  ASSERT_EQ(yoco("weights init --model yoco-tiny --seed 5 --dtype bf16 --out " + w16).status, 0);
  r = yoco("weights inspect " + w16 + " --model yoco-tiny");
  ASSERT_EQ(r.status, 0) << r.all();
  EXPECT_NE(r.out.find("BF16"), std::string::npos);
  EXPECT_LT(fs::file_size(w16), fs::file_size(w) * 6 / 10);
  ASSERT_EQ(yoco("forward --model yoco-tiny --weights " + w16 + toks + d).status, 0);
  const double err = rms_ratio_vec(read_npy(d).data, read_npy(a).data);
  EXPECT_GT(err, 0.0);
  EXPECT_LT(err, 5e-2);
}

// Splits a safetensors file into its JSON header and data section.
struct StFile {
  nlohmann::ordered_json header;
  std::string data;
};

StFile split_safetensors(const std::string& bytes) {
  uint64_t hlen = 0;
  for (int i = 7; i >= 0; --i) hlen = (hlen << 8) | static_cast<unsigned char>(bytes[i]);
  StFile f;
  f.header = nlohmann::ordered_json::parse(bytes.substr(8, hlen));
  f.data = bytes.substr(8 + hlen);
  return f;
}

std::string le64(uint64_t v) {
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i) s[i] = static_cast<char>((v >> (8 * i)) & 0xff);
  return s;
}

std::string join_safetensors(const std::string& header_text, const std::string& data) {
  return le64(header_text.size()) + header_text + data;
}

TEST_F(Cli, MalformedSafetensorsAreInputErrors) {
  const std::string good = path("good.safetensors");
  ASSERT_EQ(yoco("weights init --model yoco-tiny --seed 1 --out " + good).status, 0);
  const std::string bytes = slurp(good);
  const StFile st = split_safetensors(bytes);
  ASSERT_TRUE(st.header.contains("layer_norm.weight"));

  struct Case {
    std::string name, contents;
    std::vector<std::string> needles;
    bool readable_without_model;  // `weights inspect FILE` alone succeeds
  };
  std::vector<Case> cases;
  cases.push_back({"truncated_data", bytes.substr(0, bytes.size() - 100), {"truncated"}, false});
  cases.push_back({"short_file", bytes.substr(0, 5), {"truncated"}, false});
  {
    std::string b = bytes;
    b.replace(0, 8, le64(bytes.size()));
    cases.push_back({"header_past_end", b, {"header length", "past the end"}, false});
  }
  {
    const uint64_t hlen = bytes.size() - 8 - st.data.size();
    std::string bad = "{\"embed_tokens.weight\": {\"dtype\": \"F32\", \"shape\": [";
    bad.resize(hlen, ' ');
    cases.push_back({"bad_json", le64(hlen) + bad + st.data, {"not valid JSON"}, false});
  }
  {
    auto h = st.header;
    h["layer_norm.weight"]["dtype"] = "I8";
    cases.push_back({"dtype_i8", join_safetensors(h.dump(), st.data), {"layer_norm.weight", "unsupported dtype I8"}, false});
  }
  {
    auto h = st.header;
    h["layer_norm.weight"]["shape"] = {8, 8};  // same byte count, wrong shape
    cases.push_back({"wrong_shape", join_safetensors(h.dump(), st.data), {"layer_norm.weight", "[8, 8]", "[64]"}, true});
  }
  {
    // A well-formed file without one tensor: drop the tensor whose data comes
    // last and cut its bytes, so that offsets stay valid (no hole).
    auto h = st.header;
    std::string last;
    uint64_t last_begin = 0;
    for (const auto& [name, e] : h.items()) {
      if (name == "__metadata__") continue;
      const uint64_t b = e["data_offsets"][0].get<uint64_t>();
      if (last.empty() || b > last_begin) {
        last = name;
        last_begin = b;
      }
    }
    ASSERT_FALSE(last.empty());
    h.erase(last);
    cases.push_back({"missing", join_safetensors(h.dump(), st.data.substr(0, last_begin)), {"missing tensor", last}, true});
  }
  {
    // A well-formed file with one tensor too many, its bytes appended.
    auto h = st.header;
    const uint64_t end = st.data.size();
    h["bogus.extra.weight"] = {{"dtype", "F32"}, {"shape", {2}}, {"data_offsets", {end, end + 8}}};
    cases.push_back({"extra", join_safetensors(h.dump(), st.data + std::string(8, '\0')), {"bogus.extra.weight", "extra tensor"}, true});
  }
  {
    auto h = st.header;
    h["layer_norm.weight"]["shape"] = {65};  // byte count no longer matches the offsets
    cases.push_back({"size_mismatch", join_safetensors(h.dump(), st.data), {"layer_norm.weight", "bytes"}, false});
  }

  // The untouched file loads: every failure below comes from the edit.
  ASSERT_EQ(yoco("forward --model yoco-tiny --weights " + good + " --tokens 1,2,3 --out " + path("ok.npy")).status, 0);
  for (const auto& c : cases) {
    const std::string f = path(c.name + ".safetensors");
    spit(f, c.contents);
    std::vector<std::string> needles = c.needles;
    needles.push_back(f);  // the message names the file
    expect_input_error(yoco("forward --model yoco-tiny --weights " + f + " --tokens 1,2,3 --out " + path("x.npy")),
                       needles, c.name + " (forward)");
    expect_input_error(yoco("weights inspect " + f + " --model yoco-tiny"), needles, c.name + " (inspect --model)");
    const CliRun plain = yoco("weights inspect " + f);
    if (c.readable_without_model) {
      EXPECT_EQ(plain.status, 0) << c.name << "\n" << plain.all();
    } else {
      expect_input_error(plain, needles, c.name + " (inspect)");
    }
  }

  // A well-formed file holding a NaN weight: every logit NaN, the greedy tokens arbitrary, and no word of it.
  // Loading refuses it (inspect --model loads), naming the file, the tensor and the element; inspect alone
  // (no values read) still lists it.
  {
    const uint64_t at = st.header["layer_norm.weight"]["data_offsets"][0].get<uint64_t>() + 4 * 3;  // element 3
    std::string data = st.data;
    data.replace(at, 4, std::string("\x00\x00\xc0\x7f", 4));  // a quiet NaN, F32 little-endian
    const std::string f = path("nan.safetensors");
    spit(f, join_safetensors(st.header.dump(), data));
    expect_input_error(yoco("forward --model yoco-tiny --weights " + f + " --tokens 1,2,3 --out " + path("x.npy")),
                       {f, "tensor 'layer_norm.weight' element 3 is NaN", "weights must be finite"}, "nan (forward)");
    expect_input_error(yoco("weights inspect " + f + " --model yoco-tiny"), {f, "element 3 is NaN"}, "nan (inspect)");
    EXPECT_EQ(yoco("weights inspect " + f).status, 0);
  }
}

TEST_F(Cli, CorruptedSafetensorsNeverCrash) {
  const std::string good = path("good.safetensors");
  ASSERT_EQ(yoco("weights init --model yoco-tiny --seed 2 --dtype f16 --out " + good).status, 0);
  const std::string bytes = slurp(good);
  const uint64_t hlen = bytes.size() - 8 - split_safetensors(bytes).data.size();
  uint64_t state = 12345;
  auto next = [&state] {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return state >> 33;
  };
  int errors = 0;
  for (int i = 0; i < 30; ++i) {
    std::string b = bytes;
    const int kind = i % 3;
    if (kind == 0) {  // flip a few header bytes
      for (int k = 0; k < 3; ++k) b[8 + next() % hlen] = static_cast<char>(next() & 0xff);
    } else if (kind == 1) {  // cut anywhere
      b.resize(next() % b.size());
    } else {  // a random header length
      b.replace(0, 8, le64(next() % (2 * b.size())));
    }
    const std::string f = path("fuzz" + std::to_string(i) + ".safetensors");
    spit(f, b);
    const CliRun r = yoco("weights inspect " + f + " --model yoco-tiny");
    EXPECT_TRUE(r.status == 0 || r.status == 2) << "case " << i << " status " << r.status << "\n" << r.all();
    if (r.status == 2) {
      ++errors;
      EXPECT_EQ(r.err.rfind("yoco: error: ", 0), 0u) << r.err;
    }
  }
  EXPECT_GE(errors, 20);  // cuts and bogus lengths are always errors
}

// ----------------------------------------------------------------- configs --

const char* kTinyYocoJson = R"({"dim": 64, "n_layers": 4, "hidden_dim": 192, "n_self_heads": 4,
  "n_attn_heads": 4, "n_attn_kv_heads": 2, "vocab_size": 512, "rope_theta": 10000.0, "norm_eps": 1e-5,
  "sliding_window": null, "max_seq_len": 4096})";

// JSON strings are UTF-8; a file name or a --device-name need not be. Such a
// name in --format json rows made nlohmann throw type_error 316: "internal
// error", exit 1, after the whole run. Now the bytes are written as U+FFFD.
TEST_F(Cli, JsonOutputTakesNamesThatAreNotUtf8) {
  const std::string cfg = path("\xff.json");
  spit(cfg, kTinyYocoJson);
  const std::string replaced = "\xef\xbf\xbd";  // U+FFFD
  for (const std::string& cmd :
       {"model --model " + shell_quote(cfg) + " --lengths 1K --format json",
        "bench --model " + shell_quote(cfg) + " --lengths 128 --metrics memory --repeats 1 --warmup 0 --format json",
        "bench --model yoco-tiny --lengths 128 --metrics memory --repeats 1 --warmup 0 --format json --device-name " +
            shell_quote("lab\xfe")}) {
    const CliRun r = yoco(cmd);
    EXPECT_EQ(r.status, 0) << cmd << "\n" << r.err;
    EXPECT_NE(r.out.find(replaced), std::string::npos) << cmd;
  }
  const std::string in = path("\xfein.safetensors");
  ASSERT_EQ(yoco("check gret --generate " + shell_quote(in) + " --shape 1,8,2,16").status, 0);
  const CliRun c = yoco("check gret " + shell_quote(in) + " " + shell_quote(in) + " --o q --format json");
  EXPECT_EQ(c.err.find("internal error"), std::string::npos) << c.err;
  EXPECT_NE(c.out.find("\"inputs\""), std::string::npos) << c.out;
  EXPECT_NE(c.out.find(replaced), std::string::npos) << c.out;
}

TEST_F(Cli, ConfigFiles) {
  const std::string out = " --tokens 1,2,3 --dtype f64 --all-positions --out " + path("cfg.npy");
  auto write = [&](const std::string& name, const std::string& text) {
    const std::string f = path(name);
    spit(f, text);
    return f;
  };
  // A valid file equal to the preset gives the preset's logits: the failures below come from the edits.
  const std::string ok = write("ok.json", kTinyYocoJson);
  ASSERT_EQ(yoco("forward --model " + ok + out).status, 0);
  EXPECT_EQ(read_npy(path("cfg.npy")).data, reference_logits("yoco-tiny", {1, 2, 3}));
  const std::string tr = write("tr.json", R"({"model_type": "transformer", "dim": 64, "n_layers": 4, "head_dim": 16,
    "hidden_dim": 192, "n_heads": 4, "n_kv_heads": 2, "vocab_size": 512, "rope_theta": 10000.0, "norm_eps": 1e-5})");
  ASSERT_EQ(yoco("forward --model " + tr + out).status, 0);
  EXPECT_EQ(read_npy(path("cfg.npy")).data, reference_logits("transformer-tiny", {1, 2, 3}));

  std::string s = kTinyYocoJson;
  const std::string kv = write("kv.json", std::regex_replace(s, std::regex("\"n_attn_kv_heads\": 2"), "\"n_attn_kv_heads\": 3"));
  expect_input_error(yoco("forward --model " + kv + out), {kv, "n_attn_kv_heads"}, "kv heads");
  const std::string unk = write("unk.json", std::regex_replace(s, std::regex("\"dim\""), "\"dimm\""));
  expect_input_error(yoco("forward --model " + unk + out), {unk, "dimm"}, "unknown field");
  const std::string bad = write("bad.json", "{\"dim\": 64, ");
  expect_input_error(yoco("forward --model " + bad + out), {bad, "JSON"}, "bad json");
  // A number too large for a double (issue 12): exit 2 naming the file, not "internal error".
  const std::string huge = write("huge.json", std::regex_replace(s, std::regex("10000\\.0"), "1e400"));
  for (const std::string& cmd : std::vector<std::string>{"forward --model " + huge + out, "model --model " + huge,
                                "weights init --seed 0 --model " + huge + " --out " + path("w.safetensors")}) {
    const CliRun r = yoco(cmd);
    expect_input_error(r, {huge, "JSON"}, "1e400: " + cmd);
    EXPECT_EQ(r.err.find("internal error"), std::string::npos) << r.err;
  }
  {
    const std::string w = path("huge.safetensors");
    spit(w, le64(std::string(R"({"x": 1e400})").size()) + R"({"x": 1e400})");
    const CliRun r = yoco("weights inspect " + w);
    expect_input_error(r, {w, "not valid JSON"}, "1e400 in a safetensors header");
  }
  // 2e9 layers of tiny width: every command refuses at once (exit 2), `yoco model` as well (issue 12).
  const std::string deep = write("deep.json", std::regex_replace(
      std::regex_replace(s, std::regex("\"n_layers\": 4"), "\"n_layers\": 2000000000"), std::regex("\"dim\": 64"), "\"dim\": 4"));
  for (const std::string& cmd : std::vector<std::string>{"model --model " + deep, "model --model " + deep + ",yoco-tiny --lengths 1K --format csv",
                                "forward --model " + deep + out, "weights init --seed 0 --model " + deep + " --out " + path("w.safetensors")})
    expect_input_error(yoco(cmd), {deep, "n_layers"}, "deep: " + cmd);
  const std::string odd = write("odd.json", std::regex_replace(s, std::regex("\"n_layers\": 4"), "\"n_layers\": 3"));
  expect_input_error(yoco("forward --model " + odd + out), {"n_layers"}, "odd layers");
  expect_input_error(yoco("forward --model " + path("absent.json") + out), {"absent.json"}, "missing file");
  expect_input_error(yoco("forward --model yoco-nonesuch" + out), {"unknown model preset", "yoco-nonesuch"}, "preset");
  expect_input_error(yoco("generate --model " + kv + " --prompt-len 4 --gen 1"), {"n_attn_kv_heads"}, "generate");
  expect_input_error(yoco("weights init --seed 0 --model " + unk + " --out " + path("w.safetensors")), {"dimm"}, "init");
}

// ---------------------------------------------------------- failed writes --

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

// ----------------------------------------------------- options and tokens --

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

// The project's rule for bad input: exit 2 and one line on stderr naming what
// is wrong, never a usage text or a stack of lines.
void expect_one_line_error(const CliRun& r, const std::vector<std::string>& needles, const std::string& what) {
  expect_input_error(r, needles, what);
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << what << "\nstderr: " << r.err;
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
}

// --out naming a file the command reads (by any path) replaced it: forward
// --weights w --out w left logits where the weights were, calibrate SWEEP
// --out SWEEP a calibration where hours of measurements were. Refused, the
// input untouched; calibrate --calibration C --out C still rewrites C.
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
  EXPECT_EQ(yoco("calibrate " + sweep + " --calibration " + cal + " --out " + cal).status, 0);  // on purpose
}

// yoco ratios pairs points measured apart (transformer-3b's 1M prefill ran in a call of its own) by
// the sweep's one rule: the ratio is the two files' values divided, the keys of both files kept.
TEST_F(Cli, RatiosPairPointsFromTwoFiles) {
  const std::string y = path("y.csv"), t = path("t.csv"), out = path("ratios.csv");
  ASSERT_EQ(yoco("model --model yoco-tiny --lengths 1K --out " + y).status, 0);
  ASSERT_EQ(yoco("model --model transformer-tiny --lengths 1K --out " + t).status, 0);
  const CliRun r = yoco("ratios " + y + " " + t + " --out " + out);
  ASSERT_EQ(r.status, 0) << r.all();
  EXPECT_NE(r.out.find("prefill_speedup"), std::string::npos) << r.out;
  auto value = [](const std::string& csv, const std::string& model, const std::string& metric) {
    std::istringstream in(csv);
    std::string line;
    while (std::getline(in, line))
      if (line.find("," + model + ",1024,") != std::string::npos && line.find("," + metric + ",") != std::string::npos) {
        const size_t at = line.find("," + metric + ",") + metric.size() + 2;
        return std::stod(line.substr(at, line.find(',', at) - at));
      }
    return -1.0;
  };
  const std::string all = slurp(out);
  const double ty = value(slurp(y), "yoco-tiny", "prefill_latency_s");
  const double tt = value(slurp(t), "transformer-tiny", "prefill_latency_s");
  ASSERT_GT(ty, 0);
  ASSERT_GT(tt, 0);
  EXPECT_DOUBLE_EQ(value(all, "yoco-tiny vs transformer-tiny", "prefill_speedup"), tt / ty);
  EXPECT_GT(value(all, "yoco-tiny", "prefill_latency_s"), 0) << "the inputs are kept";
  // The written file reads back, and its ratios are not computed twice.
  expect_one_line_error(yoco("ratios " + out), {"no new ratio", "every ratio their points give"},
                        "ratios already there");
  expect_one_line_error(yoco("ratios " + y + " " + y), {"give each point once", y}, "one point in two files");
  expect_one_line_error(yoco("ratios " + y), {"no new ratio", "yoco-tiny"}, "no Transformer to pair");
  expect_one_line_error(yoco("ratios"), {"missing argument FILE.csv"}, "no file");
}

// A roofline on a run's measured ceilings is that run's: two runs' rooflines on ceilings that differ
// (the CPU's GEMM rate 0.068 in one run, 0.106 in the next) made a ratio that is neither's. The later
// file's analytic rows are kept but not paired, and that is said; its measured rows still pair.
TEST_F(Cli, RatiosDoNotPairRooflinesOfTwoSetsOfCeilings) {
  const std::string header =
      "git_sha,timestamp,host,device,device_name,driver,model,seq_len,batch,gen_tokens,phase,metric,value,unit,"
      "method,repeats,min,max,notes\n";
  auto file = [&](const std::string& name, const std::string& model, double gemm, double analytic, double measured) {
    const std::string f = path(name);
    const std::string run = "abc,2026-11-28T00:00:00Z,h,cpu,";
    spit(f, header + run + "X,,-,0,1,0,ceiling,gemm_peak_tflops," + std::to_string(gemm) + ",TFLOP/s,measured,3,,,\n" + run +
                "X,,-,0,1,0,ceiling,copy_bw_gbs,100,GB/s,measured,3,,,\n" + run + "roofline of X (measured ceilings),," +
                model + ",1024,1,0,prefill,prefill_latency_s," + std::to_string(analytic) + ",s,analytic,0,,,\n" + run + "X,," +
                model + ",1024,1,0,prefill,prefill_latency_s," + std::to_string(measured) + ",s,measured,3,,,\n");
    return f;
  };
  const std::string y = file("y.csv", "yoco-tiny", 1.0, 0.5, 0.6);
  const std::string t_other = file("t_other.csv", "transformer-tiny", 1.5, 1.0, 1.5);
  const std::string t_same = file("t_same.csv", "transformer-tiny", 1.005, 1.0, 1.5);
  const CliRun other = yoco("ratios " + y + " " + t_other + " --format csv");
  ASSERT_EQ(other.status, 0) << other.all();
  EXPECT_NE(other.err.find(t_other + "'s analytic rows are not paired"), std::string::npos) << other.err;
  EXPECT_NE(other.err.find("gemm_peak_tflops"), std::string::npos) << other.err;
  EXPECT_NE(other.out.find(",X,,yoco-tiny vs transformer-tiny,1024,1,0,prefill,prefill_speedup,2.5,"),
            std::string::npos) << other.out;
  EXPECT_EQ(other.out.find("roofline of X (measured ceilings),,yoco-tiny vs"), std::string::npos) << other.out;
  EXPECT_NE(other.out.find("roofline of X (measured ceilings),,transformer-tiny,"), std::string::npos)
      << "the unpaired rows are kept";
  // Ceilings within 1% of each other: one roofline, paired.
  const CliRun same = yoco("ratios " + y + " " + t_same + " --format csv");
  ASSERT_EQ(same.status, 0) << same.all();
  EXPECT_EQ(same.err.find("not paired"), std::string::npos) << same.err;
  EXPECT_NE(same.out.find("roofline of X (measured ceilings),,yoco-tiny vs transformer-tiny,1024,1,0,prefill,"
                          "prefill_speedup,2,"),
            std::string::npos) << same.out;
}

// ratios Y T --out Y merged T into Y: the measured file replaced by the merge, as the other commands
// refuse. Either input, by any path, is refused and left as it was.
TEST_F(Cli, RatiosRefuseAnOutputOverAnInput) {
  const std::string y = path("y.csv"), t = path("t.csv");
  ASSERT_EQ(yoco("model --model yoco-tiny --lengths 1K --out " + y).status, 0);
  ASSERT_EQ(yoco("model --model transformer-tiny --lengths 1K --out " + t).status, 0);
  const std::string ybytes = slurp(y), tbytes = slurp(t);
  const std::string dot_t = (fs::path(t).parent_path() / "." / "t.csv").string();  // the same file, another path
  expect_one_line_error(yoco("ratios " + y + " " + t + " --out " + y), {"--out", y, "replace the input"},
                        "ratios over its first input");
  expect_one_line_error(yoco("ratios " + y + " " + t + " --out " + dot_t), {"--out", t, "replace the input"},
                        "ratios over its second input, by another path");
  EXPECT_EQ(slurp(y), ybytes);
  EXPECT_EQ(slurp(t), tbytes);
}


// Throughput pairs each model at its own batch, so a model's throughput at one length from two runs
// at other batches (two --throughput-batch) both paired with the Transformer's one: two ratio rows
// of one key (batch 0), written with exit 0 to a file that no command could read back.
TEST_F(Cli, RatiosRefuseTwoThroughputPointsOfOneModelAtOneLength) {
  auto throughput_only = [&](const std::string& model, int batch) {
    const std::string all = path(model + std::to_string(batch) + "_all.csv");
    const std::string f = path(model + std::to_string(batch) + ".csv");
    EXPECT_EQ(yoco("model --model " + model + " --lengths 1K --gen 64 --throughput-batch " + std::to_string(batch) +
                   " --out " + all).status, 0);
    std::istringstream in(slurp(all));
    std::string line, kept;
    for (bool header = true; std::getline(in, line); header = false)
      if (header || line.find(",throughput,throughput_tokens_per_s,") != std::string::npos) kept += line + "\n";
    spit(f, kept);
    return f;
  };
  const std::string y1 = throughput_only("yoco-tiny", 1), y2 = throughput_only("yoco-tiny", 2);
  const std::string t = throughput_only("transformer-tiny", 4), out = path("ratios.csv");
  expect_one_line_error(yoco("ratios " + y1 + " " + y2 + " " + t + " --out " + out),
                        {"throughput", "yoco-tiny", y1, y2}, "two throughput batches of one model");
  EXPECT_FALSE(fs::exists(out));
  EXPECT_EQ(yoco("ratios " + y1 + " " + t + " --out " + out).status, 0) << "one point a model pairs";
  EXPECT_EQ(yoco("compare " + out + " " + out).status, 0) << "and reads back";
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
  expect_input_error(yoco("demo --dtype bf16"), {"--dtype"}, "demo dtype");
  expect_input_error(yoco("weights init --model yoco-tiny --seed 1 --dtype i8 --out " + path("w.safetensors")),
                     {"--dtype", "i8"}, "init dtype");
  expect_input_error(yoco("weights init --model yoco-tiny --out " + path("w.safetensors")), {"--seed"}, "init seed");
  expect_input_error(yoco("weights inspect"), {"inspect"}, "inspect without file");
  expect_input_error(yoco("weights inspect " + path("absent.safetensors")), {"absent.safetensors"}, "inspect absent");
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
  expect_one_line_error(yoco("calibrate " + sweep + " --calibration " + cal + " --ceilings bogus --out " + out),
                        {"--ceilings", "bogus"}, "--ceilings bogus");
  EXPECT_FALSE(fs::exists(out)) << "written before the option was refused";
  ASSERT_EQ(yoco("calibrate " + sweep + " --calibration " + cal + " --ceilings h200 --out " + out).status, 0);
  EXPECT_TRUE(fs::exists(out));
}

// Checking a calibration and writing it again (--calibration C --out C) does
// not refit it: its notes still name the sweep it was fitted on, not C.
TEST_F(Cli, CalibrateRewritingACalibrationKeepsTheSweepItWasFittedOn) {
  const std::string sweep =
      (fs::path(YOCO_TEST_DATA_DIR).parent_path().parent_path() / "reports/results/nvidia-h100/sweep.csv").string();
  const std::string cal = path("cal.csv"), again = path("again.csv");
  ASSERT_EQ(yoco("calibrate " + sweep + " --out " + cal).status, 0);
  ASSERT_EQ(yoco("calibrate " + sweep + " --calibration " + cal + " --out " + again).status, 0);
  ASSERT_EQ(yoco("calibrate " + sweep + " --calibration " + again + " --out " + again).status, 0);
  const std::string text = slurp(again);
  EXPECT_NE(text.find("fitted on " + sweep + " ("), std::string::npos) << text.substr(0, 800);
  EXPECT_EQ(text.find("fitted on " + cal), std::string::npos);
  EXPECT_EQ(text.find("fitted on " + again), std::string::npos);
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
        line.replace(at, line.find(',', at) - at, "0");
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
  for (const std::string o : {"--tolerance 1", "--state-layout vk", "--scale none", "--paradigm parallel", "--format json",
                              "--block-tokens 64", "--o q", "--final-state s"})
    expect_one_line_error(yoco("check gret --generate " + path("x.st") + " --shape 1,64,2,16 " + o),
                          {o.substr(0, o.find(' ')), "--generate"}, "gret --generate with " + o);
  EXPECT_FALSE(fs::exists(path("x.st")));
}

// ------------------------------------------------------------ --device cuda --

TEST_F(Cli, SmallPresetsRunOnTheReference) {
  // The smallest shapes the CUDA kernels serve: head dim 64, GQA group 2.
  const auto y = yoco::preset_config("yoco-small"), s = yoco::preset_config("yoco-swa-small"),
             t = yoco::preset_config("transformer-small");
  for (const auto* c : {&y, &s, &t}) {
    EXPECT_EQ(c->dim, 256) << c->name;
    EXPECT_EQ(c->n_layers, 4) << c->name;
    EXPECT_EQ(c->n_attn_heads, 4) << c->name;
    EXPECT_EQ(c->n_attn_kv_heads, 2) << c->name;
    EXPECT_EQ(c->attn_head_dim(), 64) << c->name;
    EXPECT_EQ(c->hidden_dim, 768) << c->name;
    EXPECT_EQ(c->vocab_size, 4096) << c->name;
  }
  EXPECT_EQ(y.self_head_dim(), 64);
  EXPECT_EQ(y.self_decoder(), yoco::SelfDecoderKind::gret);
  EXPECT_EQ(s.window(), 128);
  EXPECT_FALSE(t.is_yoco());
  for (const std::string model : {"yoco-small", "yoco-swa-small", "transformer-small"}) {
    const std::string out = path(model + ".npy");
    const CliRun r = yoco("forward --model " + model + " --tokens 1,2,3,4095 --out " + out);
    ASSERT_EQ(r.status, 0) << model << "\n" << r.all();
    EXPECT_EQ(read_npy(out).shape, (std::vector<int64_t>{4096})) << model;
  }
}

TEST_F(Cli, DeviceCudaOptions) {
  const std::string o = " --out " + path("cuda.npy");
  const std::string fwd = "forward --model yoco-small --tokens 1,2,3 --device cuda";
  // What only the CPU reference has: said whatever the build and the machine.
  expect_input_error(yoco(fwd + " --dtype f64" + o), {"--dtype", "bf16", "--device cpu"}, "forward --dtype");
  expect_input_error(yoco(fwd + " --paradigm recurrent" + o), {"--paradigm", "--device cpu"}, "forward --paradigm");
  expect_input_error(yoco(fwd + " --chunk 64" + o), {"--chunk", "--device cpu"}, "forward --chunk");
  expect_input_error(yoco("forward --model yoco-small --tokens 1 --device gpu" + o), {"--device", "gpu"}, "device gpu");
  const std::string gen = "generate --model transformer-small --prompt-len 8 --gen 2 --device cuda";
  expect_input_error(yoco(gen + " --dtype f32"), {"--dtype", "bf16", "--device cpu"}, "generate --dtype");
  expect_input_error(yoco(gen + " --check"), {"--check", "--device cpu"}, "generate --check");
  expect_input_error(yoco("bench --device cuda --dtype f64 --model yoco-small --lengths 1K"),
                     {"--dtype", "bf16", "--device cpu"}, "bench --dtype");
  // The default job runs on the GPU when there is one; asked for without one it says why.
  if (!yoco::cli::cuda_status().device)
    expect_input_error(yoco("bench --device cuda --default-job --no-report"), {"--device cuda"}, "bench default job");
  expect_input_error(yoco("bench --device cpu --quick"), {"--quick", "GPU"}, "bench --quick on the CPU");
  // The default job's own file: a plain .csv name (checked before anything runs), the default job only.
  for (const std::string bad : {"../x.csv", "a/b.csv", "x.txt", ".csv", ".hidden.csv"})
    expect_input_error(yoco("bench --default-job --no-report --sweep-file " + bad), {"--sweep-file", bad},
                       "bench --sweep-file " + bad);
  expect_input_error(yoco("bench --model yoco-tiny --lengths 1K --sweep-file x.csv"),
                     {"--sweep-file", "default job only"}, "bench --sweep-file outside the default job");
  expect_input_error(yoco("bench --cupti --lengths 4K"), {"--cupti", "--device cuda"}, "bench --cupti on the CPU");
  expect_input_error(yoco("bench --cupti --no-cupti"), {"--cupti and --no-cupti"}, "bench both");

  // Without CUDA in the build, or without a device: exit 2 saying which; with both, it runs.
  const CliRun f = yoco(fwd + o);
  const CliRun g = yoco(gen);
  if (f.status == 0) {
    const Npy n = read_npy(path("cuda.npy"));
    EXPECT_EQ(n.descr, "<f4");
    EXPECT_EQ(n.shape, (std::vector<int64_t>{4096}));
    EXPECT_NE(f.out.find("bf16 weights and caches on "), std::string::npos) << f.out;
    ASSERT_EQ(g.status, 0) << g.all();
    EXPECT_NE(g.out.find("bf16 weights and caches on "), std::string::npos) << g.out;
    EXPECT_NE(g.out.find("seq 0:"), std::string::npos) << g.out;
  } else {
    expect_input_error(f, {"--device cuda: "}, "forward without CUDA");
    expect_input_error(g, {"--device cuda: "}, "generate without CUDA");
#if !defined(YOCO_HAVE_CUDA)
    EXPECT_NE(f.err.find("built without CUDA"), std::string::npos) << f.err;
    EXPECT_NE(f.err.find("cuda preset"), std::string::npos) << f.err;
#else
    EXPECT_NE(f.err.find("no CUDA device"), std::string::npos) << f.err;
#endif
  }
}

// ---------------------------------------------------------------- generate --

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

// -------------------------------------------------------------------- demo --

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

// ------------------------------------------- issue 12: parse errors by class --

// Every command that reads a config or a safetensors file answers a wrong JSON
// type, a non-finite or absurd size and deep nesting with exit 2 naming the
// file: never a signal (a stack overflow in a recursive dump), never exit 1.
TEST_F(Cli, ParseErrorsAreInputErrorsByClass) {
  const std::string tiny = R"("n_layers": 4, "hidden_dim": 192, "vocab_size": 512, "n_self_heads": 4, "n_attn_heads": 4,
    "n_attn_kv_heads": 2)";
  struct Case {
    std::string name, text;
    std::vector<std::string> needles;
  };
  const std::string deep(200000, '[');
  const std::vector<Case> configs = {
      {"string", R"({"dim": "64", )" + tiny + "}", {"'dim'", "integer"}},
      {"array", R"({"dim": [64], )" + tiny + "}", {"'dim'", "integer"}},
      {"object", R"({"dim": {"v": 64}, )" + tiny + "}", {"'dim'", "integer"}},
      {"null", R"({"dim": null, )" + tiny + "}", {"'dim'", "integer"}},
      {"bool", R"({"dim": true, )" + tiny + "}", {"'dim'", "integer"}},
      {"float", R"({"dim": 3.5, )" + tiny + "}", {"'dim'", "integer"}},
      {"negative", R"({"dim": -64, )" + tiny + "}", {"'dim'", ">= 1"}},
      {"nan", R"({"dim": NaN, )" + tiny + "}", {"JSON"}},
      {"infinity", R"({"dim": 64, "rope_theta": Infinity, )" + tiny + "}", {"JSON"}},
      {"theta_zero", R"({"dim": 64, "rope_theta": 0, )" + tiny + "}", {"rope_theta", "positive"}},
      {"eps_negative", R"({"dim": 64, "norm_eps": -1e-5, )" + tiny + "}", {"norm_eps", "positive"}},
      {"eps_string", R"({"dim": 64, "norm_eps": "1e-5", )" + tiny + "}", {"norm_eps", "number"}},
      {"type_number", R"({"model_type": 1, "dim": 64, )" + tiny + "}", {"model_type", "string"}},
      {"not_object", "[64]", {"JSON object"}},
      {"overflow", R"({"dim": 4294967296, "n_layers": 4, "hidden_dim": 4294967296, "vocab_size": 512,
         "n_self_heads": 4, "n_attn_heads": 4, "n_attn_kv_heads": 2})", {"too large"}},
      {"deep_field", R"({"dim": )" + deep + std::string(deep.size(), ']') + ", " + tiny + "}", {"nested"}},
      {"deep_unclosed", R"({"dim": 64, "max_seq_len": )" + deep, {"nested"}},
      {"deep_top", deep + std::string(deep.size(), ']'), {"nested"}},
  };
  for (const auto& c : configs) {
    const std::string f = path("cfg_" + c.name + ".json");
    spit(f, c.text);
    std::vector<std::string> needles = c.needles;
    needles.push_back(f);
    for (const std::string& cmd : {"model --model " + f + " --lengths 1K", "model --model yoco-tiny," + f,
                                   "forward --model " + f + " --tokens 1,2,3 --out " + path("x.npy"),
                                   "generate --model " + f + " --prompt-len 4 --gen 1",
                                   "weights init --seed 0 --model " + f + " --out " + path("w.safetensors"),
                                   "weights inspect " + path("absent.safetensors") + " --model " + f}) {
      const CliRun r = yoco(cmd);
      expect_input_error(r, needles, c.name + ": " + cmd);
      EXPECT_EQ(r.err.find("internal error"), std::string::npos) << r.err;
    }
  }

  const std::string good = path("good.safetensors");
  ASSERT_EQ(yoco("weights init --model yoco-tiny --seed 1 --out " + good).status, 0);
  const std::string data = split_safetensors(slurp(good)).data;
  // One entry edited in a header that is otherwise the good file's.
  auto with_norm = [&](const std::string& entry) {
    auto h = split_safetensors(slurp(good)).header;
    h.erase("layer_norm.weight");
    std::string text = h.dump();
    text.pop_back();
    return text + R"(, "layer_norm.weight": )" + entry + "}";
  };
  const std::vector<Case> headers = {
      {"dtype_number", with_norm(R"({"dtype": 32, "shape": [64], "data_offsets": [0, 256]})"), {"layer_norm.weight", "dtype"}},
      {"dtype_null", with_norm(R"({"dtype": null, "shape": [64], "data_offsets": [0, 256]})"), {"layer_norm.weight", "dtype"}},
      {"shape_string", with_norm(R"({"dtype": "F32", "shape": "[64]", "data_offsets": [0, 256]})"), {"layer_norm.weight", "shape"}},
      {"shape_float", with_norm(R"({"dtype": "F32", "shape": [64.0], "data_offsets": [0, 256]})"), {"layer_norm.weight", "dimension"}},
      {"shape_negative", with_norm(R"({"dtype": "F32", "shape": [-64], "data_offsets": [0, 256]})"), {"layer_norm.weight", "dimension"}},
      {"shape_overflow", with_norm(R"({"dtype": "F32", "shape": [1099511627776, 1099511627776], "data_offsets": [0, 256]})"),
       {"layer_norm.weight", "2^50"}},
      {"offsets_one", with_norm(R"({"dtype": "F32", "shape": [64], "data_offsets": [0]})"), {"layer_norm.weight", "data_offsets"}},
      {"offsets_string", with_norm(R"({"dtype": "F32", "shape": [64], "data_offsets": "0,256"})"), {"layer_norm.weight", "data_offsets"}},
      {"offsets_float", with_norm(R"({"dtype": "F32", "shape": [64], "data_offsets": [0, 256.0]})"), {"layer_norm.weight", "data_offsets"}},
      {"entry_array", with_norm(R"(["F32", [64], [0, 256]])"), {"layer_norm.weight", "not an object"}},
      {"metadata_array", R"({"__metadata__": ["pt"]})", {"__metadata__"}},
      {"metadata_value", R"({"__metadata__": {"format": 1}})", {"__metadata__", "format"}},
      {"nan", with_norm(R"({"dtype": "F32", "shape": [NaN], "data_offsets": [0, 256]})"), {"not valid JSON"}},
      {"deep_shape", with_norm(R"({"dtype": "F32", "shape": )" + deep + std::string(deep.size(), ']') +
                               R"(, "data_offsets": [0, 256]})"), {"nested"}},
      {"deep_metadata", R"({"__metadata__": {"format": )" + deep, {"nested"}},
  };
  for (const auto& c : headers) {
    const std::string f = path("st_" + c.name + ".safetensors");
    spit(f, join_safetensors(c.text, data));
    std::vector<std::string> needles = c.needles;
    needles.push_back(f);
    for (const std::string& cmd : {"weights inspect " + f, "weights inspect " + f + " --model yoco-tiny",
                                   "forward --model yoco-tiny --weights " + f + " --tokens 1,2,3 --out " + path("x.npy")}) {
      const CliRun r = yoco(cmd);
      expect_input_error(r, needles, c.name + ": " + cmd);
      EXPECT_EQ(r.err.find("internal error"), std::string::npos) << r.err;
    }
  }
}

// `yoco model` applies the limits of the config itself (the layer cap, the
// 2^50 parameter cap: validation, at load, like every command) but not the
// host-memory gate of `weights init`, `forward` and `generate`: that gate is a
// limit of this machine, and the analytic model is for models larger than the
// machine it runs on. So a config that `weights init` refuses for memory alone
// is modelled, and one past the config's own limits is refused by all, at once.
TEST_F(Cli, ModelAppliesTheConfigLimitsButNotTheHostMemoryGate) {
  // About 7.5e13 parameters (some 300 TB in f32): no machine holds them, the cap allows them.
  const std::string big = path("big.json");
  spit(big, R"({"dim": 262144, "n_layers": 64, "hidden_dim": 1048576, "vocab_size": 32000, "n_self_heads": 1024,
    "n_attn_heads": 2048, "n_attn_kv_heads": 512})");
  for (const std::string& cmd : {"weights init --seed 0 --model " + big + " --out " + path("w.safetensors"),
                                 "forward --model " + big + " --tokens 1,2,3 --out " + path("x.npy"),
                                 "generate --model " + big + " --prompt-len 4 --gen 1"})
    expect_input_error(yoco(cmd), {"not enough memory", big}, "big: " + cmd);
  EXPECT_FALSE(fs::exists(path("w.safetensors")));
  const CliRun m = yoco("model --model " + big + ",yoco-65b --lengths 32K --format csv");
  ASSERT_EQ(m.status, 0) << m.all();
  EXPECT_NE(m.out.find(big + ",0,1,0,model,param_count,"), std::string::npos) << m.out.substr(0, 2000);
  EXPECT_NE(m.out.find("yoco-65b,"), std::string::npos);
  // yoco-65b (and every preset) is modelled as before.
  EXPECT_EQ(yoco("model --model yoco-65b,transformer-65b --lengths 32K,1M").status, 0);

  // Past the parameter cap (2^51 = 2 * 2^25 * 2^25 in the embedding and LM head
  // alone) or the layer cap: every command, `yoco model` included, refuses at once.
  const std::string huge = path("huge.json");
  spit(huge, R"({"dim": 33554432, "n_layers": 2, "hidden_dim": 192, "vocab_size": 33554432, "n_self_heads": 4,
    "n_attn_heads": 4, "n_attn_kv_heads": 2})");
  const std::string layers = path("layers.json");
  spit(layers, R"({"dim": 64, "n_layers": 65538, "hidden_dim": 192, "vocab_size": 512, "n_self_heads": 4,
    "n_attn_heads": 4, "n_attn_kv_heads": 2})");
  for (const auto& [f, why] : std::vector<std::pair<std::string, std::string>>{{huge, "too large"}, {layers, "n_layers"}})
    for (const std::string& cmd : {"model --model " + f, "model --model yoco-tiny," + f + " --lengths 1K --format csv",
                                   "weights init --seed 0 --model " + f + " --out " + path("w.safetensors"),
                                   "forward --model " + f + " --tokens 1,2,3 --out " + path("x.npy"),
                                   "generate --model " + f + " --prompt-len 4 --gen 1"}) {
      const CliRun r = yoco(cmd);
      expect_input_error(r, {f, why}, cmd);
      EXPECT_EQ(r.out, "") << cmd;  // refused before any table or row is printed
    }
}

}  // namespace

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
// and without writing: --resume without --out, a file to resume that is no results CSV or holds
// other points, an --out that is a folder or lies under a file. A new folder is not made.
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
  expect_one_line_error(yoco(bench + " --lengths 128 --out " + path("") + " --dry-run"), {"is a folder"},
                        "--out a folder");
  expect_one_line_error(yoco(bench + " --lengths 128 --out " + junk + "/sub/x.csv --dry-run"),
                        {junk, "not a folder"}, "--out under a file");
  r = yoco(bench + " --lengths 128 --out " + path("new/sub/x.csv") + " --dry-run");
  EXPECT_EQ(r.status, 0) << r.all();
  EXPECT_FALSE(fs::exists(path("new"))) << "a dry run made its --out's folder";
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
  expect_input_error(r, {card, "not a point of this sweep"}, "a card's sweep.csv of other points");
  r = yoco(job + " --sweep-file other.csv --dry-run");  // no card has it yet: from the start
  EXPECT_EQ(r.status, 0) << r.all();
  EXPECT_NE(r.out.find("none there yet"), std::string::npos) << r.out;
}
#endif
