// yoco check: judges anyone's kernel outputs against the fp64 reference
// (bench/check/): `yoco check gret INPUTS OUTPUTS`. Exit 0 within tolerance,
// 1 outside it, 2 on bad input.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "args.hpp"
#include "attention_check.hpp"
#include "check_generate.hpp"
#include "dtype.hpp"
#include "lists.hpp"
#include "commands.hpp"
#include "errors.hpp"
#include "format.hpp"
#include "gret_check.hpp"
#include "host_memory.hpp"
#include "param_layout.hpp"
#include "progress.hpp"
#include "result_row.hpp"
#include "tensor_file.hpp"

namespace yoco::cli {

namespace {

CommandSpec gret_spec() {
  CommandSpec s;
  s.path = "yoco check gret";
  s.usage =
      "yoco check gret INPUTS OUTPUTS [--layout bthd|bhtd] [--state-layout kv|vk] [--scale X|none]\n"
      "                       [--paradigm chunkwise|parallel|recurrent] [--tolerance X] [--format table|csv|json]\n"
      "                       [--q NAME] [--k NAME] [--v NAME] [--g NAME] [--g-gamma NAME] [--initial-state NAME]\n"
      "                       [--cu-seqlens NAME] [--o NAME] [--final-state NAME] [--block-tokens N]\n"
      "       yoco check gret --generate FILE --shape B,T,H,D [--seed N] [--gate-scale X] [--dtype bf16|f16|f32]\n"
      "                       [--layout bthd|bhtd] [--constant-decay] [--with-state [--state-layout kv|vk]]\n"
      "                       [--packed 0,T1,...,T]";
  s.summary =
      "Judges a gated-retention (simple GLA) implementation: reads its inputs and its outputs, runs the fp64\n"
      "reference over the inputs, streamed block by block, and compares. INPUTS and OUTPUTS are each a\n"
      ".safetensors file (safetensors.torch.save_file) or a folder of NAME.npy files (numpy.save).";
  s.options = {
      {"--layout", "bthd|bhtd", "token tensors as [B, T, H, D] (fla, FlashAttention; default) or [B, H, T, D]"},
      {"--state-layout", "kv|vk", "states as [K, V] (S[i][j] sums k_i v_j; fla's; default) or [V, K]; read and written"},
      {"--scale", "X|none", "factor applied to q (default D^-1/2, as fla's scale=None; 'none': 1, k pre-scaled)"},
      {"--paradigm", "NAME", "the reference's paradigm: chunkwise (default), parallel (O(T^2)) or recurrent"},
      {"--tolerance", "X", "RMS error ratio allowed (default: derived, see below)"},
      {"--format", "table|csv|json", "output (default table; csv: result rows of reports/SCHEMA.md)"},
      {"--q", "NAME", "name of q in INPUTS (default q); likewise --k, --v, --g, --g-gamma, --initial-state,"},
      {"--k", "NAME", "--cu-seqlens (INPUTS) and --o, --final-state (OUTPUTS): chunk_simple_gla's names"},
      {"--v", "NAME", ""},
      {"--g", "NAME", "log-decay per token and head, [B, T, H] (or [B, H, T]), finite and <= 0"},
      {"--g-gamma", "NAME", "or a constant log-decay per head, [H] (RetNet), finite and <= 0; not both"},
      {"--initial-state", "NAME", "optional, [N, H, K, V]: one per sequence"},
      {"--cu-seqlens", "NAME", "optional, [N + 1] i32/i64 offsets of packed sequences (batch 1), each from its state"},
      {"--o", "NAME", "the output, the shape of v"},
      {"--final-state", "NAME", "optional, [N, H, K, V]: judged when OUTPUTS holds it"},
      {"--block-tokens", "N", "tokens read at once per sequence, >= 64, K/M (default 2M / (H x D)); ~N x H x D x 60 B"},
      {"--generate", "FILE", "write a seeded input file (safetensors) instead of checking; with the options below"},
      {"--shape", "B,T,H,D", "its sizes; K and M suffixes (1M = 1048576)"},
      {"--seed", "N", "its seed (default 0): the same seed and shape give the same values in any layout and dtype"},
      {"--gate-scale", "X", "g = X * logsigmoid(x) / 16 (default 1: the models' gate; larger decays harder)"},
      {"--dtype", "bf16|f16|f32", "q, k, v storage (default bf16; g and states are f32)"},
      {"--constant-decay", "", "write g_gamma [H] = X * log(1 - 2^(-5-h)) (RetNet) instead of g"},
      {"--with-state", "", "also write initial_state [N, H, D, D], as [K, V] or as --state-layout says"},
      {"--packed", "0,T1,...,T", "also write cu_seqlens (i64): packed sequences, batch 1"},
  };
  s.min_positional = 0;
  s.max_positional = 2;
  s.notes =
      "Conventions: o_t = (scale q_t) S_t, S_t = exp(g_t) S_{t-1} + k_t^T v_t, S_0 = the initial state (or 0),\n"
      "per head; the paper's gRet is this with scale 1 and k already scaled by D^-1/2.\n"
      "\n"
      "Verdict, per output tensor: the RMS error ratio RMS(out - ref) / RMS(ref), the largest absolute error\n"
      "and where, the count of non-finite values, and for o the first token whose error (RMS over heads and\n"
      "columns, against the whole output's reference RMS) passes the tolerance: an offset that wraps shows\n"
      "where it starts. Tolerance (DESIGN.md 6, the rule for our own kernels), per output by its own dtype:\n"
      "2x the error of a computation that rounds the same tensors: for a bf16/f16 output a bf16 tensor-core\n"
      "chunkwise computation (fp32 accumulators and state, bf16 operands, output rounded to bf16), for an\n"
      "f32/f64 output an fp32 chunkwise one; an f32/f64 state beside a 16-bit o gets the bf16 computation's\n"
      "state, not rounded (a 16-bit kernel's state has 16-bit operands). NaN or Inf never passes.\n"
      "--tolerance replaces it; the output says which rule (and which dtype) set each tolerance.\n"
      "\n"
      "Generated inputs (--generate): q, k, v uniform with unit variance, each element a pure function of\n"
      "(seed, tensor, its row-major position in [B, T, H, D]): either layout and any dtype hold the same problem,\n"
      "another shape another one; g from x uniform with unit variance. A file over 64 MiB\n"
      "shows each tensor as it is written, on stderr (a terminal, or YOCO_PROGRESS=lines).\n"
      "\n"
      "Exit status: 0 every tensor within tolerance, 1 one outside, 2 bad input (a missing tensor, shapes\n"
      "that disagree, an unsupported dtype: one line naming the file and the tensor).";
  return s;
}

CommandSpec attention_spec() {
  CommandSpec s;
  s.path = "yoco check attention";
  s.usage =
      "yoco check attention INPUTS OUTPUTS [--layout bshd|bhsd] [--mask causal|none] [--window W] [--q-offset P]\n"
      "                       [--scale X] [--tolerance X] [--format table|csv|json] [--q NAME] [--k NAME] [--v NAME]\n"
      "                       [--o NAME]\n"
      "       yoco check attention --generate FILE --shape B,Sq,Sk,Hq,Hkv,D [--seed N] [--q-scale X]\n"
      "                       [--dtype bf16|f16|f32] [--layout bshd|bhsd]";
  s.summary =
      "Judges a softmax-attention implementation (FlashAttention, PyTorch SDPA, a kernel of yours): reads\n"
      "q, k, v and its output o, runs the fp64 reference per key/value head and block of queries, and compares.\n"
      "GQA when q has a multiple of k's heads; a query block inside a longer cache (chunked prefill) when\n"
      "Sq < Sk; decode is Sq = 1. INPUTS and OUTPUTS: a .safetensors file or a folder of NAME.npy files.";
  s.options = {
      {"--layout", "bshd|bhsd", "[B, S, H, D] (FlashAttention; default) or [B, H, S, D] (PyTorch SDPA)"},
      {"--mask", "causal|none", "causal (default; query at position p sees keys <= p) or none (every key)"},
      {"--window", "W", "sliding window, W >= 1: keys p - W < j <= p (FlashAttention's window_size=(W-1, 0))"},
      {"--q-offset", "P", "key position of query 0 (default Sk - Sq: the last Sq positions, FlashAttention's)"},
      {"--scale", "X", "factor on q k^T (default D^-1/2, both libraries' default)"},
      {"--tolerance", "X", "RMS error ratio allowed (default: derived, see below)"},
      {"--format", "table|csv|json", "output (default table; csv: result rows of reports/SCHEMA.md)"},
      {"--q", "NAME", "tensor names (default q, k, v in INPUTS and o in OUTPUTS)"},
      {"--k", "NAME", ""},
      {"--v", "NAME", ""},
      {"--o", "NAME", ""},
      {"--generate", "FILE", "write a seeded input file (safetensors) instead of checking; with the options below"},
      {"--shape", "B,Sq,Sk,Hq,Hkv,D", "its sizes; K and M suffixes"},
      {"--seed", "N", "its seed (default 0)"},
      {"--q-scale", "X", "q's values times X (default 1; larger: peakier softmax)"},
      {"--dtype", "bf16|f16|f32", "storage (default bf16)"},
  };
  s.min_positional = 0;
  s.max_positional = 2;
  s.notes =
      "Tolerance (DESIGN.md 6): 2x the error of a computation that rounds the same tensors: for bf16/f16\n"
      "outputs a flash-attention one (fp32 scores, max and sum, P rounded to the output's type before P V,\n"
      "fp32 accumulation, output rounded), for f32/f64 outputs fp32 throughout. NaN or Inf never passes.\n"
      "Memory: k and v of one key/value head in fp64 (Sk x D x 16 bytes) and a block of scores.\n"
      "\n"
      "Generated inputs (--generate): q, k, v uniform with unit variance (q times --q-scale). A file over\n"
      "64 MiB shows each tensor as it is written, on stderr (a terminal, or YOCO_PROGRESS=lines). With\n"
      "Sq > Sk, judge it with --q-offset or --mask none (the default offset, Sk - Sq, is negative).\n"
      "\n"
      "Exit status: 0 within tolerance, 1 outside, 2 bad input (one line naming the file and the tensor).";
  return s;
}

DType parse_gen_dtype(const std::string& t) {
  if (t == "bf16") return DType::bf16;
  if (t == "f16") return DType::f16;
  if (t == "f32") return DType::f32;
  throw InputError("--dtype: expected bf16, f16 or f32, got '" + t + "'");
}

// "1,1M,24,128" -> sizes, each >= 1, K/M suffixes.
std::vector<int64_t> parse_shape(const std::string& text, size_t rank, const std::string& names) {
  const std::vector<std::string> items = split_list("--shape", text);
  if (items.size() != rank) throw InputError("--shape: expected " + names + ", got '" + text + "'");
  std::vector<int64_t> out;
  for (const auto& it : items) out.push_back(parse_length_list("--shape", it).at(0));
  return out;
}

// The options of the other mode (judging INPUTS OUTPUTS, or --generate) would
// be ignored silently: each is refused, naming it.
void refuse_other_mode(const ParsedArgs& a, const std::vector<std::string>& generate_only,
                       const std::vector<std::string>& check_only) {
  const bool generate = a.has("--generate");
  for (const auto& o : generate ? check_only : generate_only)
    if (a.has(o))
      throw InputError(o + (generate ? " applies to judging INPUTS OUTPUTS, not to --generate"
                                     : " applies to --generate only (writing inputs, not judging them)"));
}

// One tensor --generate writes: its shape and element size.
struct GeneratedTensor {
  std::vector<int64_t> shape;
  size_t element_bytes;
};

// Before --generate writes anything: every tensor within 2^50 elements (what
// the safetensors readers take; the products cannot overflow then), and the
// whole within the free space of the target's folder. Otherwise an absurd
// shape overflowed the element count, or wrote until the disk was full.
// Returns the bytes of tensor data.
uint64_t check_generated_size(const std::string& path, const std::vector<GeneratedTensor>& tensors) {
  constexpr uint64_t kMaxElements = uint64_t{1} << 50;
  uint64_t bytes = 0;
  for (const auto& t : tensors) {
    uint64_t n = 1;
    for (const int64_t d : t.shape) {
      if (static_cast<uint64_t>(d) > kMaxElements / n)
        throw InputError("--shape: a tensor of " + shape_string(t.shape) +
                         " has more than 2^50 elements, beyond what a safetensors reader takes");
      n *= static_cast<uint64_t>(d);
    }
    bytes += n * t.element_bytes;  // <= 2^53 each: the sum of a few cannot overflow
  }
  std::error_code ec;
  if (std::filesystem::exists(path, ec) && !std::filesystem::is_regular_file(path, ec)) return bytes;  // /dev/null
  const std::filesystem::path folder = std::filesystem::path(path).parent_path();
  const auto space = std::filesystem::space(folder.empty() ? "." : folder, ec);
  if (!ec && bytes > space.available)
    throw InputError("--shape: its tensors need " + human_bytes(static_cast<double>(bytes)) + ", " +
                     (folder.empty() ? std::string("the current folder") : folder.string()) + " has " +
                     human_bytes(static_cast<double>(space.available)) + " free");
  return bytes;
}

// A file of gigabytes takes minutes to write: its tensors are the points of a
// progress line as yoco bench's (stderr: a terminal, or YOCO_PROGRESS=lines);
// a small file writes without one.
class GenerateProgress {
 public:
  GenerateProgress(size_t tensors, uint64_t bytes)
      : progress_(static_cast<int64_t>(tensors), bytes < (uint64_t{64} << 20), "check --generate") {}
  check::TensorStarted callback() {
    return [this](const std::string& name) { progress_.point(++written_, "writing " + name, -1); };
  }
  ~GenerateProgress() { progress_.done(); }

 private:
  Progress progress_;
  int64_t written_ = 0;
};

void say_generated(const std::string& path, uint64_t bytes) {
  std::cout << "wrote " << path << " (" << human_bytes(static_cast<double>(bytes)) << " of tensors)\n";
}

// --generate writes one safetensors file: a folder ("xdir/", failing late at
// the rename) or a .npy name (a safetensors file under numpy's name) is refused
// before anything is written.
void check_generate_target(const std::string& path) {
  std::error_code ec;
  if (path.empty() || path.back() == '/' || std::filesystem::is_directory(path, ec))
    throw InputError("--generate '" + path + "' names a folder: give the file to write (one .safetensors file)");
  if (std::filesystem::path(path).extension() == ".npy")
    throw InputError("--generate '" + path + "': it writes a safetensors file, not .npy; give a name such as " +
                     std::filesystem::path(path).replace_extension(".safetensors").string());
}

// Checks the target and the sizes, writes the file (with its progress), says what it wrote.
template <class Options>
void generate_file(const std::string& path, const std::vector<GeneratedTensor>& tensors, Options g,
                   uint64_t (*generate)(const std::string&, const Options&)) {
  check_generate_target(path);
  const uint64_t planned = check_generated_size(path, tensors);
  uint64_t bytes = 0;
  {
    GenerateProgress progress(tensors.size(), planned);
    g.on_tensor = progress.callback();
    bytes = generate(path, g);
  }
  say_generated(path, bytes);
}

double parse_positive(const std::string& option, const std::string& text) {
  const double x = parse_decimal(text).value_or(0);
  if (!(x > 0))
    throw InputError(option + ": expected a positive number, got '" + text + "'");
  return x;
}

// The report in the chosen format; the exit status: 0 pass, 1 fail.
int print_report(const check::CheckReport& rep, const check::TensorFile& inputs, const check::TensorFile& outputs,
                 const std::string& format) {
  if (format == "json") {
    nlohmann::ordered_json j;
    j["check"] = rep.kind;
    j["inputs"] = inputs.path();
    j["outputs"] = outputs.path();
    for (const auto& [k, v] : rep.shape) j["shape"][k] = v;
    j["conventions"] = rep.conventions;
    for (const auto& v : rep.verdicts)
      j["tensors"].push_back({{"name", v.name}, {"dtype", v.dtype}, {"elements", v.elements},
                              {"rms_error_ratio", v.rms_ratio}, {"max_abs_error", v.max_abs}, {"max_at", v.max_where},
                              {"nonfinite", v.nonfinite}, {"first_bad_token", v.first_bad_token},
                              {"first_bad_at", v.first_bad_where}, {"tolerance", v.tolerance},
                              {"tolerance_from", v.tolerance_from}, {"within_tolerance", v.pass}});
    for (const auto& n : rep.not_judged) j["not_judged"].push_back(n);
    j["pass"] = rep.pass();
    // INPUTS and OUTPUTS are file names, which need not be UTF-8 (JSON's): such bytes become U+FFFD.
    std::cout << j.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace) << "\n";
  } else if (format == "csv") {
    const Provenance prov = Provenance::here("cpu", "yoco check (fp64 reference)", "-");
    std::vector<ResultRow> rows;
    for (const auto& v : rep.verdicts) {
      const std::string phase = "check_" + rep.kind + ":" + v.name;
      auto row = [&](const std::string& metric, double value, const std::string& unit) {
        rows.push_back(make_row(prov, "-", rep.tokens, rep.batch, 0, phase, metric, value, unit, "exact", 1,
                                v.dtype + "; tolerance from " + v.tolerance_from));
      };
      row("rms_error_ratio", v.rms_ratio, "ratio");
      row("max_abs_error", v.max_abs, "abs");
      row("nonfinite_values", static_cast<double>(v.nonfinite), "count");
      row("first_bad_token", static_cast<double>(v.first_bad_token), "index");
      row("tolerance", v.tolerance, "ratio");
      row("within_tolerance", v.pass ? 1.0 : 0.0, "bool");
    }
    write_results_csv(std::cout, rows);
  } else {
    std::cout << "yoco check " << rep.kind << ":";
    for (size_t i = 0; i < rep.shape.size(); ++i)
      std::cout << (i ? ", " : " ") << rep.shape[i].first << " " << rep.shape[i].second;
    std::cout << "\n  " << rep.conventions << "\n";
    for (const auto& v : rep.verdicts) {
      std::cout << "  " << v.name << " (" << v.dtype << ", " << v.elements << " values): "
                << (v.pass ? "PASS" : "FAIL") << "  rms error ratio " << strf("%.3e", v.rms_ratio) << " (tolerance "
                << strf("%.3e", v.tolerance) << "), max |error| " << strf("%.3e", v.max_abs);
      if (!v.max_where.empty()) std::cout << " at " << v.max_where;
      if (v.nonfinite) std::cout << ", " << v.nonfinite << " non-finite";
      if (v.first_bad_token >= 0) std::cout << "; first token past the tolerance: " << v.first_bad_where;
      std::cout << "\n";
    }
    for (const auto& n : rep.not_judged) std::cout << "  " << n << "\n";
    // Each tensor's tolerance follows its own dtype: one line when they agree.
    const bool one_rule = std::all_of(rep.verdicts.begin(), rep.verdicts.end(), [&](const check::TensorVerdict& v) {
      return v.tolerance_from == rep.verdicts[0].tolerance_from;
    });
    if (one_rule) std::cout << "  tolerance: " << (rep.verdicts.empty() ? "" : rep.verdicts[0].tolerance_from) << "\n";
    else
      for (const auto& v : rep.verdicts) std::cout << "  tolerance of " << v.name << ": " << v.tolerance_from << "\n";
    std::cout << (rep.pass() ? "PASS" : "FAIL") << "\n";
  }
  return rep.pass() ? 0 : 1;
}

int cmd_check_gret(const Args& args) {
  const CommandSpec spec = gret_spec();
  if (print_help_if_asked(spec, args)) return 0;
  const ParsedArgs a = parse_args(spec, args);
  refuse_other_mode(a, {"--shape", "--seed", "--gate-scale", "--dtype", "--constant-decay", "--with-state", "--packed"},
                    {"--scale", "--paradigm", "--tolerance", "--format", "--q", "--k", "--v", "--g",
                     "--g-gamma", "--initial-state", "--cu-seqlens", "--o", "--final-state", "--block-tokens"});
  if (const auto file = a.get("--generate")) {
    if (!a.positional().empty()) throw InputError("yoco check gret --generate FILE takes no INPUTS OUTPUTS");
    check::GretGenerateOptions g;
    const auto sh = parse_shape(a.require("--shape"), 4, "B,T,H,D");
    g.B = sh[0], g.T = sh[1], g.H = sh[2], g.D = sh[3];
    g.seed = a.get_u64("--seed", 0);
    if (const auto x = a.get("--gate-scale")) g.gate_scale = parse_positive("--gate-scale", *x);
    g.dtype = parse_gen_dtype(a.get_or("--dtype", "bf16"));
    const std::string layout = a.get_or("--layout", "bthd");
    if (layout != "bthd" && layout != "bhtd") throw InputError("--layout: expected bthd or bhtd, got '" + layout + "'");
    g.bhtd = layout == "bhtd";
    g.g_gamma = a.has("--constant-decay");
    g.initial_state = a.has("--with-state");
    if (const auto sl = a.get("--state-layout")) {
      if (*sl != "kv" && *sl != "vk") throw InputError("--state-layout: expected kv or vk, got '" + *sl + "'");
      if (!g.initial_state) throw InputError("--state-layout applies to the written state: give --with-state");
      g.state_vk = *sl == "vk";
    }
    if (const auto p = a.get("--packed"))
      for (const auto& item : split_list("--packed", *p))  // digits only ("+2" was read as 2), as every count
        g.cu_seqlens.push_back(parse_int("--packed", item, 0, INT64_MAX));
    // The tensors check_generate.cpp writes (layouts aside: the counts are the same).
    const int64_t N = g.cu_seqlens.empty() ? g.B : static_cast<int64_t>(g.cu_seqlens.size()) - 1;
    const size_t qkv = static_cast<size_t>(dtype_size(g.dtype));
    std::vector<GeneratedTensor> tensors(3, {{g.B, g.T, g.H, g.D}, qkv});
    tensors.push_back({g.g_gamma ? std::vector<int64_t>{g.H} : std::vector<int64_t>{g.B, g.T, g.H}, 4});
    if (g.initial_state) tensors.push_back({{std::max<int64_t>(N, 1), g.H, g.D, g.D}, 4});
    generate_file(*file, tensors, g, &check::generate_gret_inputs);
    return 0;
  }
  if (a.positional().size() != 2) throw InputError("yoco check gret: expected INPUTS OUTPUTS (see yoco check gret --help)");
  check::GretCheckOptions opt;
  const std::string layout = a.get_or("--layout", "bthd");
  if (layout == "bhtd") opt.layout = check::TokenLayout::bhtd;
  else if (layout != "bthd") throw InputError("--layout: expected bthd or bhtd, got '" + layout + "'");
  const std::string sl = a.get_or("--state-layout", "kv");
  if (sl == "vk") opt.state_layout = check::StateLayout::vk;
  else if (sl != "kv") throw InputError("--state-layout: expected kv or vk, got '" + sl + "'");
  if (const auto sc = a.get("--scale")) opt.scale = *sc == "none" ? 1.0 : parse_positive("--scale", *sc);
  if (const auto p = a.get("--paradigm")) opt.paradigm = parse_paradigm(*p);
  if (const auto t = a.get("--tolerance")) opt.tolerance = parse_positive("--tolerance", *t);
  const std::string format = a.get_or("--format", "table");
  if (format != "table" && format != "csv" && format != "json")
    throw InputError("--format: expected table, csv or json, got '" + format + "'");
  std::string block_text;
  if (const auto bt = a.get("--block-tokens")) {
    block_text = *bt;
    opt.block_tokens = parse_length("--block-tokens", *bt, int64_t{1} << 24);
    if (opt.block_tokens < 64) throw InputError("--block-tokens: must be >= 64 (one chunk), got " + *bt);
  }
  for (auto [flag, field] : std::vector<std::pair<const char*, std::string*>>{
           {"--q", &opt.q}, {"--k", &opt.k}, {"--v", &opt.v}, {"--g", &opt.g}, {"--g-gamma", &opt.g_gamma},
           {"--initial-state", &opt.initial_state}, {"--cu-seqlens", &opt.cu_seqlens}, {"--o", &opt.o},
           {"--final-state", &opt.final_state}})
    if (const auto n = a.get(flag)) *field = *n;

  const auto inputs = check::TensorFile::open(a.positional()[0]);
  const auto outputs = check::TensorFile::open(a.positional()[1]);
  // The optional tensors are looked for by name: one named here and absent (a
  // typo) was skipped without a word, --final-state passing unjudged.
  for (const char* flag : {"--g", "--g-gamma", "--initial-state", "--cu-seqlens"})
    if (const auto n = a.get(flag)) inputs->info(*n);
  if (const auto n = a.get("--final-state")) outputs->info(*n);
  // A block of N tokens (at most the sequence) holds about N x H x D x 60 bytes
  // (the help's estimate): one the machine cannot hold ran for a minute and
  // ended in std::bad_alloc. Refused before the work.
  if (opt.block_tokens > 0) {
    const check::TensorInfo& q = inputs->info(opt.q);
    if (q.shape.size() == 4) {
      const bool bhtd = opt.layout == check::TokenLayout::bhtd;
      const double n = static_cast<double>(std::min(opt.block_tokens, bhtd ? q.shape[2] : q.shape[1]));
      require_host_memory(n * static_cast<double>(bhtd ? q.shape[1] : q.shape[2]) * static_cast<double>(q.shape[3]) * 60,
                          "--block-tokens " + block_text + " (about N x H x D x 60 bytes)");
    }
  }
  // A long judgement (a million tokens: minutes) shows its tokens as bench's
  // progress does (stderr: a terminal, or YOCO_PROGRESS=lines); a small one
  // (under 4 M values of q, a few seconds) runs without a line.
  const check::TensorInfo& q = inputs->info(opt.q);
  const bool small = q.numel() < (int64_t{4} << 20);
  Progress progress(100, small, "check gret");
  opt.on_progress = [&progress](int64_t done, int64_t total) {
    progress.point(total > 0 ? done * 100 / total : 0,
                   "judged " + std::to_string(done) + " of " + std::to_string(total) + " tokens", -1);
  };
  const check::CheckReport rep = check::check_gret(*inputs, *outputs, opt);
  progress.done();
  return print_report(rep, *inputs, *outputs, format);
}

int cmd_check_attention(const Args& args) {
  const CommandSpec spec = attention_spec();
  if (print_help_if_asked(spec, args)) return 0;
  const ParsedArgs a = parse_args(spec, args);
  refuse_other_mode(a, {"--shape", "--seed", "--q-scale", "--dtype"},
                    {"--mask", "--window", "--q-offset", "--scale", "--tolerance", "--format", "--q", "--k", "--v", "--o"});
  const std::string layout = a.get_or("--layout", "bshd");
  if (layout != "bshd" && layout != "bhsd") throw InputError("--layout: expected bshd or bhsd, got '" + layout + "'");
  if (const auto file = a.get("--generate")) {
    if (!a.positional().empty()) throw InputError("yoco check attention --generate FILE takes no INPUTS OUTPUTS");
    check::AttentionGenerateOptions g;
    const auto sh = parse_shape(a.require("--shape"), 6, "B,Sq,Sk,Hq,Hkv,D");
    g.B = sh[0], g.Sq = sh[1], g.Sk = sh[2], g.Hq = sh[3], g.Hkv = sh[4], g.D = sh[5];
    g.seed = a.get_u64("--seed", 0);
    if (const auto x = a.get("--q-scale")) g.q_scale = parse_positive("--q-scale", *x);
    g.dtype = parse_gen_dtype(a.get_or("--dtype", "bf16"));
    g.bhsd = layout == "bhsd";
    const size_t qkv = static_cast<size_t>(dtype_size(g.dtype));
    generate_file(*file, {{{g.B, g.Sq, g.Hq, g.D}, qkv}, {{g.B, g.Sk, g.Hkv, g.D}, qkv}, {{g.B, g.Sk, g.Hkv, g.D}, qkv}},
                  g, &check::generate_attention_inputs);
    // Judging puts the first query at Sk - Sq by default (the last query sees every key): with more
    // queries than keys that is negative and refused then; said now, while the shape is fresh.
    if (g.Sq > g.Sk)
      std::cout << "note: Sq " << g.Sq << " > Sk " << g.Sk << ": judge it with --q-offset P (P >= 0) or --mask none;"
                << " the default offset, Sk - Sq, is negative\n";
    return 0;
  }
  if (a.positional().size() != 2)
    throw InputError("yoco check attention: expected INPUTS OUTPUTS (see yoco check attention --help)");
  check::AttentionCheckOptions opt;
  opt.bhsd = layout == "bhsd";
  const std::string mask = a.get_or("--mask", "causal");
  if (mask != "causal" && mask != "none") throw InputError("--mask: expected causal or none, got '" + mask + "'");
  opt.causal = mask == "causal";
  // W keys p - W < j <= p: W = 0 would see no key at all, so it is refused
  // rather than taken for "no window" (leave the option out for that).
  if (const auto w = a.get("--window")) opt.window = parse_length("--window", *w, int64_t{1} << 40);
  if (a.has("--q-offset")) opt.q_offset = a.get_int("--q-offset", 0, 0, int64_t{1} << 40);
  if (const auto sc = a.get("--scale")) opt.scale = parse_positive("--scale", *sc);
  if (const auto t = a.get("--tolerance")) opt.tolerance = parse_positive("--tolerance", *t);
  const std::string format = a.get_or("--format", "table");
  if (format != "table" && format != "csv" && format != "json")
    throw InputError("--format: expected table, csv or json, got '" + format + "'");
  for (auto [flag, field] : std::vector<std::pair<const char*, std::string*>>{
           {"--q", &opt.q}, {"--k", &opt.k}, {"--v", &opt.v}, {"--o", &opt.o}})
    if (const auto n = a.get(flag)) *field = *n;
  const auto inputs = check::TensorFile::open(a.positional()[0]);
  const auto outputs = check::TensorFile::open(a.positional()[1]);
  return print_report(check::check_attention(*inputs, *outputs, opt), *inputs, *outputs, format);
}

}  // namespace

int cmd_check(const Args& args) {
  // Without a kind: bad input, one line on stderr like any other (the usage is for --help).
  if (args.empty()) throw InputError("yoco check: missing kind: gret or attention (see yoco check --help)");
  if (args[0] == "--help" || args[0] == "-h") {
    std::cout << "usage: yoco check gret|attention INPUTS OUTPUTS [options]   (yoco check KIND --help)\n"
                 "       yoco check gret|attention --generate FILE --shape ...\n"
                 "Judges an implementation's outputs against the fp64 reference, or writes seeded inputs to run it on.\n"
                 "Kinds: gret (gated retention, fla's chunk_simple_gla), attention (softmax; FlashAttention, SDPA).\n";
    return 0;
  }
  if (args[0] == "gret") return cmd_check_gret(Args(args.begin() + 1, args.end()));
  if (args[0] == "attention") return cmd_check_attention(Args(args.begin() + 1, args.end()));
  throw InputError("yoco check: unknown kind '" + args[0] + "' (kinds: gret, attention; see yoco check --help)");
}

}  // namespace yoco::cli
