// test_cli: model config files (JSON) in every command that reads one: valid,
// malformed, of the wrong types, past the config's limits or this machine's.
#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <utility>
#include <vector>

#include "cli_fixture.hpp"
#include "cli_safetensors_bytes.hpp"

namespace yoco_test {
namespace {

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
}  // namespace yoco_test
