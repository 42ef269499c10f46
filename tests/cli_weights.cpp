// test_cli: `yoco weights init` and `inspect`, and safetensors files that are
// malformed, corrupted or hold a NaN, through every command that loads them.
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "cli_fixture.hpp"
#include "cli_safetensors_bytes.hpp"
#include "config.hpp"
#include "param_layout.hpp"

namespace yoco_test {
namespace {

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
    // A dtype of the format that weights cannot be (the same bytes as I8): listed by inspect, refused as weights.
    h["layer_norm.weight"]["dtype"] = "I8";
    h["layer_norm.weight"]["shape"] = {256};
    cases.push_back({"dtype_i8", join_safetensors(h.dump(), st.data), {"layer_norm.weight", "is I8", "weights must be"}, true});
  }
  {
    auto h = st.header;
    h["layer_norm.weight"]["dtype"] = "Q4";  // no dtype of the format
    cases.push_back({"dtype_unknown", join_safetensors(h.dump(), st.data), {"layer_norm.weight", "unknown dtype Q4"}, false});
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

}  // namespace
}  // namespace yoco_test
