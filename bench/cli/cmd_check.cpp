// yoco check: judges anyone's kernel outputs against the fp64 reference
// (bench/check/): `yoco check gret INPUTS OUTPUTS`. Exit 0 within tolerance,
// 1 outside it, 2 on bad input.
#include <cmath>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "args.hpp"
#include "commands.hpp"
#include "errors.hpp"
#include "format.hpp"
#include "gret_check.hpp"
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
      "                       [--cu-seqlens NAME] [--o NAME] [--final-state NAME] [--block-tokens N]";
  s.summary =
      "Judges a gated-retention (simple GLA) implementation: reads its inputs and its outputs, runs the fp64\n"
      "reference over the inputs, streamed block by block, and compares. INPUTS and OUTPUTS are each a\n"
      ".safetensors file (safetensors.torch.save_file) or a folder of NAME.npy files (numpy.save).";
  s.options = {
      {"--layout", "bthd|bhtd", "token tensors as [B, T, H, D] (fla, FlashAttention; default) or [B, H, T, D]"},
      {"--state-layout", "kv|vk", "states as [K, V] (S[i][j] sums k_i v_j; fla's; default) or [V, K]"},
      {"--scale", "X|none", "factor applied to q (default D^-1/2, as fla's scale=None; 'none': 1, k pre-scaled)"},
      {"--paradigm", "NAME", "the reference's paradigm: chunkwise (default), parallel (O(T^2)) or recurrent"},
      {"--tolerance", "X", "RMS error ratio allowed (default: derived, see below)"},
      {"--format", "table|csv|json", "output (default table; csv: result rows of reports/SCHEMA.md)"},
      {"--q", "NAME", "name of q in INPUTS (default q); likewise --k, --v, --g, --g-gamma, --initial-state,"},
      {"--k", "NAME", "--cu-seqlens (INPUTS) and --o, --final-state (OUTPUTS): chunk_simple_gla's names"},
      {"--v", "NAME", ""},
      {"--g", "NAME", "log-decay per token and head, [B, T, H] (or [B, H, T]), all <= 0"},
      {"--g-gamma", "NAME", "or a constant log-decay per head, [H] (RetNet)"},
      {"--initial-state", "NAME", "optional, [N, H, K, V]: one per sequence"},
      {"--cu-seqlens", "NAME", "optional, [N + 1] offsets of packed sequences (batch 1): each restarts from its state"},
      {"--o", "NAME", "the output, the shape of v"},
      {"--final-state", "NAME", "optional, [N, H, K, V]: judged when OUTPUTS holds it"},
      {"--block-tokens", "N", "tokens read at a time per sequence (default 8192; memory ~ N x H x D x 60 bytes)"},
  };
  s.min_positional = 2;
  s.max_positional = 2;
  s.notes =
      "Conventions: o_t = (scale q_t) S_t, S_t = exp(g_t) S_{t-1} + k_t^T v_t, S_0 = the initial state (or 0),\n"
      "per head; the paper's gRet is this with scale 1 and k already scaled by D^-1/2.\n"
      "\n"
      "Verdict, per output tensor: the RMS error ratio RMS(out - ref) / RMS(ref), the largest absolute error\n"
      "and where, the count of non-finite values, and for o the first token whose error (RMS over heads and\n"
      "columns, against the whole output's reference RMS) passes the tolerance: an offset that wraps shows\n"
      "where it starts. Tolerance (reports/SCHEMA.md's rule for our kernels, DESIGN.md 6): 2x the error of a\n"
      "computation that rounds the same tensors: for bf16/f16 outputs a bf16 tensor-core chunkwise\n"
      "computation (fp32 accumulators and state, bf16 operands and output), for f32/f64 outputs an fp32\n"
      "chunkwise one. NaN or Inf never passes. --tolerance replaces it; the output says which was used.\n"
      "\n"
      "Exit status: 0 every tensor within tolerance, 1 one outside, 2 bad input (a missing tensor, shapes\n"
      "that disagree, an unsupported dtype: one line naming the file and the tensor).";
  return s;
}

double parse_positive(const std::string& option, const std::string& text) {
  size_t used = 0;
  double x = 0;
  try {
    x = std::stod(text, &used);
  } catch (...) {
    used = 0;
  }
  if (used != text.size() || !std::isfinite(x) || !(x > 0))
    throw InputError(option + ": expected a positive number, got '" + text + "'");
  return x;
}

int cmd_check_gret(const Args& args) {
  const CommandSpec spec = gret_spec();
  if (print_help_if_asked(spec, args)) return 0;
  const ParsedArgs a = parse_args(spec, args);
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
  opt.block_tokens = a.get_int("--block-tokens", opt.block_tokens, 64, int64_t{1} << 24);
  for (auto [flag, field] : std::vector<std::pair<const char*, std::string*>>{
           {"--q", &opt.q}, {"--k", &opt.k}, {"--v", &opt.v}, {"--g", &opt.g}, {"--g-gamma", &opt.g_gamma},
           {"--initial-state", &opt.initial_state}, {"--cu-seqlens", &opt.cu_seqlens}, {"--o", &opt.o},
           {"--final-state", &opt.final_state}})
    if (const auto n = a.get(flag)) *field = *n;

  const auto inputs = check::TensorFile::open(a.positional()[0]);
  const auto outputs = check::TensorFile::open(a.positional()[1]);
  const check::GretCheckReport rep = check::check_gret(*inputs, *outputs, opt);

  if (format == "json") {
    nlohmann::ordered_json j;
    j["check"] = "gret";
    j["inputs"] = inputs->path();
    j["outputs"] = outputs->path();
    j["shape"] = {{"batch", rep.batch}, {"tokens", rep.tokens}, {"heads", rep.heads}, {"head_dim", rep.head_dim},
                  {"sequences", rep.sequences}};
    j["conventions"] = rep.conventions;
    for (const auto& v : rep.verdicts)
      j["tensors"].push_back({{"name", v.name}, {"dtype", v.dtype}, {"elements", v.elements},
                              {"rms_error_ratio", v.rms_ratio}, {"max_abs_error", v.max_abs}, {"max_at", v.max_where},
                              {"nonfinite", v.nonfinite}, {"first_bad_token", v.first_bad_token},
                              {"first_bad_at", v.first_bad_where}, {"tolerance", v.tolerance},
                              {"tolerance_from", v.tolerance_from}, {"within_tolerance", v.pass}});
    j["pass"] = rep.pass();
    std::cout << j.dump(2) << "\n";
  } else if (format == "csv") {
    const Provenance prov = Provenance::here("cpu", "yoco check (fp64 reference)", "-");
    std::vector<ResultRow> rows;
    for (const auto& v : rep.verdicts) {
      const std::string phase = "check_gret:" + v.name;
      auto row = [&](const std::string& metric, double value, const std::string& unit) {
        rows.push_back(make_row(prov, "-", rep.tokens, rep.batch, 0, phase, metric, value, unit, "exact", 1,
                                v.dtype + "; tolerance from " + v.tolerance_from));
      };
      row("rms_error_ratio", v.rms_ratio, "ratio");
      row("max_abs_error", v.max_abs, "abs");
      row("nonfinite_values", static_cast<double>(v.nonfinite), "count");
      row("tolerance", v.tolerance, "ratio");
      row("within_tolerance", v.pass ? 1.0 : 0.0, "bool");
    }
    write_results_csv(std::cout, rows);
  } else {
    std::cout << "yoco check gret: B " << rep.batch << ", T " << rep.tokens << ", H " << rep.heads << ", D "
              << rep.head_dim << ", " << rep.sequences << " sequence(s)\n  " << rep.conventions << "\n";
    for (const auto& v : rep.verdicts) {
      std::cout << "  " << v.name << " (" << v.dtype << ", " << v.elements << " values): "
                << (v.pass ? "PASS" : "FAIL") << "  rms error ratio " << strf("%.3e", v.rms_ratio) << " (tolerance "
                << strf("%.3e", v.tolerance) << "), max |error| " << strf("%.3e", v.max_abs);
      if (!v.max_where.empty()) std::cout << " at " << v.max_where;
      if (v.nonfinite) std::cout << ", " << v.nonfinite << " non-finite";
      if (v.first_bad_token >= 0) std::cout << "; first token past the tolerance: " << v.first_bad_where;
      std::cout << "\n";
    }
    std::cout << "  tolerance: " << (rep.verdicts.empty() ? "" : rep.verdicts[0].tolerance_from) << "\n"
              << (rep.pass() ? "PASS" : "FAIL") << "\n";
  }
  return rep.pass() ? 0 : 1;
}

}  // namespace

int cmd_check(const Args& args) {
  if (args.empty() || args[0] == "--help" || args[0] == "-h") {
    std::cout << "usage: yoco check gret INPUTS OUTPUTS [options]   (yoco check gret --help)\n"
                 "Judges an implementation's outputs against the fp64 reference. Kinds: gret.\n";
    return args.empty() ? 2 : 0;
  }
  if (args[0] == "gret") return cmd_check_gret(Args(args.begin() + 1, args.end()));
  throw InputError("yoco check: unknown kind '" + args[0] + "' (kinds: gret; see yoco check --help)");
}

}  // namespace yoco::cli
