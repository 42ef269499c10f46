// yoco compare: the CI performance-regression gate. Reads two result CSVs,
// judges every shared key (bench/results/compare.hpp) and prints a markdown table (for
// a CI log or a pull-request comment) or a CSV; exit 1 when something failed.
#include <cmath>
#include <iostream>
#include <string>
#include <vector>

#include "args.hpp"
#include "commands.hpp"
#include "compare.hpp"
#include "errors.hpp"
#include "format.hpp"
#include "result_csv.hpp"
#include "result_row.hpp"

namespace yoco::cli {

namespace {

CommandSpec compare_spec() {
  CommandSpec s;
  s.path = "yoco compare";
  s.usage =
      "yoco compare BASE.csv NEW.csv [--threshold P] [--exact] [--strict] [--metrics GLOBS] [--phases GLOBS]\n"
      "                    [--format markdown|csv] [--hide-same]\n"
      "       yoco compare RUN-A.csv RUN-B.csv --noise-floor [--metrics GLOBS] [--phases GLOBS] [--format F]";
  s.summary =
      "Compares two result CSVs (reports/SCHEMA.md) row by row, joined on (model, device_name, seq_len,\n"
      "batch, gen_tokens, phase, metric), and exits 1 if a metric got worse: the CI performance-regression\n"
      "gate. BASE is the reference run, NEW the run under test.";
  s.options = {
      {"--threshold", "P", "relative change still judged SAME: '5%' or '5' (both 5 percent; default 5%)"},
      {"--exact", "", "any difference at all, bit for bit, is CHANGED and fails (no threshold, no noise)"},
      {"--strict", "", "rows missing from either file, and values lost (base ran, new did not), fail"},
      {"--metrics", "GLOBS", "compare only these metrics: comma list of names or globs (* ? [..]), e.g. '*_bytes'"},
      {"--phases", "GLOBS", "compare only these phases, same syntax, e.g. 'prefill,decode*'"},
      {"--format", "markdown|csv", "output format (default markdown; csv: the table only, summary to stderr)"},
      {"--hide-same", "", "leave SAME rows out of the table (they still count in the summary)"},
      {"--noise-floor", "",
       "two runs of one build on one device: noise per metric, threshold (below)"},
  };
  s.min_positional = 2;
  s.max_positional = 2;
  s.notes =
      "Verdicts, one per key; change = (new - base) / |base|:\n"
      "  SAME       |change| <= threshold, or the difference is within noise (below)\n"
      "  BETTER     beyond both, in the metric's good direction\n"
      "  WORSE      beyond both, in its bad direction: fails\n"
      "  CHANGED    --exact only: the two values differ at all: fails\n"
      "  NOT_RUN    key in both files, but the value is empty in at least one (the point did not run; the\n"
      "             note says which side and its method); fails under --strict if only NEW lacks the value\n"
      "  ONLY_BASE  key only in BASE; fails under --strict\n"
      "  ONLY_NEW   key only in NEW; fails under --strict\n"
      "\n"
      "Noise rule: a difference beyond the threshold is still SAME when the new value lies inside the base\n"
      "row's [min, max], or the base value inside the new row's [min, max] (the extremes over the repeats).\n"
      "Rows without min/max get no such allowance.\n"
      "\n"
      "Threshold: 'N%' and a plain 'N' both mean N percent, N >= 0: '5%' = '5' = five percent, '0.5%' half\n"
      "a percent; note that '0.05' is 0.05 percent, not 5. A change of exactly the threshold is SAME.\n"
      "\n"
      "Direction (reports/SCHEMA.md): lower is better for *_latency_s, *_bytes, *_bytes_per_token,\n"
      "kernel_time_s, roofline_time_s, gpu_time_s, cupti_overhead_fraction, flops, bytes; higher is better\n"
      "for throughput_tokens_per_s, max_batch, achieved_*, fraction_*, *_reduction, *_speedup, *_gain,\n"
      "gemm_peak_tflops, copy_bw_gbs, gpu_busy_fraction, within_tolerance.\n"
      "Any other metric is judged as lower-is-better and shown with direction '?' (so that a new metric\n"
      "fails loudly rather than passes silently until it is added to the table).\n"
      "\n"
      "Use --exact for counted values (analytic FLOPs and bytes, memory accounting with method 'exact'),\n"
      "e.g. on two CPU runs (scripts/ci-bench.sh's list):\n"
      "  yoco compare base.csv new.csv --exact --phases 'memory,kv_cache' --metrics 'mem_weights_bytes,\n"
      "  mem_kv_cache_bytes,mem_state_bytes,mem_activations_bytes,mem_total_bytes,kv_cache_bytes_per_token'\n"
      "(one argument, no spaces; mem_host_peak_rss_bytes, mem_device_peak_bytes and mem_other_bytes are\n"
      "measured, and a GPU's arena rows too: leave those to the threshold).\n"
      "\n"
      "A row whose unit differs between the files is CHANGED and fails (its values are not compared).\n"
      "\n"
      "Exit status: 0 nothing failed; 1 a row failed (WORSE; CHANGED under --exact or in unit; missing under\n"
      "--strict);\n"
      "2 bad input: an unreadable or malformed CSV (the message names the file and line), a duplicate key,\n"
      "a bad option, a --metrics/--phases glob that matches no row of either file, two files with rows\n"
      "but no key in common (e.g. runs on different devices: device_name is part of the key), or two\n"
      "files with no rows at all (a header only: runs that measured nothing must not pass a gate).\n"
      "\n"
      "--noise-floor (the GPU CI recipe, scripts/gpu-ci-noise.sh): RUN-A and RUN-B are two runs of the same\n"
      "build on the same device. Per phase family (the phase up to its first '.' or ':') and metric, over the\n"
      "keys with a value in both files: the number of keys, the median and the max |relative change|, and the\n"
      "max relative spread of the rows' own [min, max] around value (both files). Kinds, by unit:\n"
      "  timed           s, tokens/s, fraction, TFLOP/s, GB/s, x: the run-to-run noise\n"
      "  counted         B, FLOP, count, B/token, and the ratios of counted values memory_reduction and\n"
      "                  kv_cache_reduction (x), with a method other than measured/sampled/extrapolated\n"
      "                  (exact, analytic): must be bit-identical; any that differs is an 'error:' line, exit 1\n"
      "  measured count  the same units read from a run (e.g. peak RSS): shown, not checked, not gated\n"
      "  other           any other unit: shown only\n"
      "The recommended threshold is the smallest of 1,2,3,5,7,10,15,20,25,35,50% that is >= 2 x the largest\n"
      "max |change| over the timed metrics; a timed metric whose own 2 x max |change| exceeds 50% is left out\n"
      "of the gate (listed as too noisy). Then the gate command to use with a committed baseline:\n"
      "  yoco compare BASE.csv NEW.csv --threshold <T>% --metrics '<the gated timed metrics>'\n"
      "--format csv prints the per-metric table as CSV (fractions, not percent); the rest goes to stderr.\n"
      "Exit status: 0, or 1 when a counted metric differs; 2 bad input as above.";
  return s;
}

enum class Format { Markdown, Csv };

Format parse_format(const std::string& text) {
  if (text == "markdown") return Format::Markdown;
  if (text == "csv") return Format::Csv;
  throw InputError("--format: expected markdown or csv, got '" + text + "'");
}

std::string percent(double fraction) { return strf("%.6g%%", 100 * fraction); }

std::string change_text(const RowComparison& c) {
  if (!c.change) return "";
  if (std::isinf(*c.change)) return *c.change > 0 ? "+inf%" : "-inf%";
  return strf("%+.3g%%", 100 * *c.change);
}

// A value with its unit; "-" for a row that did not run. Exact comparisons
// show every digit, or a 1-ULP CHANGED row would print two equal numbers.
std::string value_text(const std::optional<ResultRow>& r, bool exact) {
  if (!r) return "";
  if (!r->value) return "-";
  const std::string v = exact ? format_value(r->value) : strf("%.6g", *r->value);
  return r->unit.empty() ? v : v + " " + r->unit;
}

std::string md_cell(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '|') out += '\\';
    out += c;
  }
  return out;
}

void print_markdown(std::ostream& os, const Comparison& cmp, const CompareOptions& opt, bool hide_same) {
  const std::vector<std::string> header = {"model", "device", "seq_len", "batch", "gen", "phase", "metric",
                                           "better", "base", "new", "change", "verdict", "note"};
  auto line = [&os](const std::vector<std::string>& cells) {
    os << "|";
    for (const auto& c : cells) os << " " << md_cell(c) << " |";
    os << "\n";
  };
  line(header);
  os << "|";
  for (size_t i = 0; i < header.size(); ++i) os << (i >= 2 && i <= 4 ? "--:|" : "---|");
  os << "\n";
  for (const auto& c : cmp.rows) {
    if (hide_same && c.verdict == Verdict::Same) continue;
    const ResultRow& k = c.key_row();
    line({k.model, k.prov.device_name, std::to_string(k.seq_len), std::to_string(k.batch), std::to_string(k.gen_tokens),
          k.phase, k.metric, direction_name(c.direction), value_text(c.base, opt.exact), value_text(c.head, opt.exact),
          change_text(c), verdict_name(c.verdict), c.note});
  }
}

void print_csv(std::ostream& os, const Comparison& cmp, bool hide_same) {
  os << "model,device_name,seq_len,batch,gen_tokens,phase,metric,direction,base_value,base_unit,new_value,new_unit,"
        "change,verdict,failure,note\n";
  auto value = [](const std::optional<ResultRow>& r) { return r ? format_value(r->value) : std::string(); };
  auto unit = [](const std::optional<ResultRow>& r) { return r ? r->unit : std::string(); };
  for (const auto& c : cmp.rows) {
    if (hide_same && c.verdict == Verdict::Same) continue;
    const ResultRow& k = c.key_row();
    // change as a fraction at full precision; "inf" for a change from zero.
    const std::string change = !c.change ? "" : std::isinf(*c.change) ? (*c.change > 0 ? "inf" : "-inf")
                                                                       : format_value(c.change);
    const std::vector<std::string> f = {k.model, k.prov.device_name, std::to_string(k.seq_len), std::to_string(k.batch),
                                        std::to_string(k.gen_tokens), k.phase, k.metric, direction_name(c.direction),
                                        value(c.base), unit(c.base), value(c.head), unit(c.head), change,
                                        verdict_name(c.verdict), c.fails ? "1" : "0", c.note};
    for (size_t i = 0; i < f.size(); ++i) os << (i ? "," : "") << csv_field(f[i]);
    os << "\n";
  }
}

// "FAIL: 2 rows failed (1 WORSE, 1 ONLY_NEW under --strict)" or "PASS".
std::string result_line(const Comparison& cmp) {
  if (!cmp.failed()) return "result: PASS";
  std::string why;
  for (Verdict v : {Verdict::Worse, Verdict::Changed, Verdict::NotRun, Verdict::OnlyBase, Verdict::OnlyNew}) {
    size_t n = 0;
    for (const auto& r : cmp.rows) n += r.fails && r.verdict == v;
    if (n) why += (why.empty() ? "" : ", ") + std::to_string(n) + " " + verdict_name(v);
  }
  return "result: FAIL (" + std::to_string(cmp.failures()) + " failing row" + (cmp.failures() == 1 ? "" : "s") + ": " +
         why + ")";
}

size_t unknown_direction_rows(const Comparison& cmp) {
  size_t n = 0;
  for (const auto& r : cmp.rows) n += r.direction == Direction::Unknown && r.base && r.head;
  return n;
}

std::string rule_line(const CompareOptions& opt) {
  std::string s = opt.exact ? "rule: --exact (any difference fails)" : "rule: threshold " + percent(opt.threshold) +
                                                                           ", noise from the rows' [min, max]";
  if (opt.strict) s += ", --strict";
  if (!opt.metrics.empty() || !opt.phases.empty()) s += ", filtered";
  return s;
}

// --noise-floor output ------------------------------------------------------

std::string abs_percent(double fraction) {
  if (std::isinf(fraction)) return "inf%";
  if (100 * fraction >= 1000) return strf("%.0f%%", 100 * fraction);
  return strf("%.3g%%", 100 * fraction);
}

std::string noise_note(const NoiseMetric& m) {
  switch (m.kind) {
    case NoiseKind::Timed: {
      if (!m.gated) return "too noisy to gate: 2 x max |change| above 50%";
      return "gated";
    }
    case NoiseKind::Counted:
      return m.differing ? strf("DIFFERS in %zu of %zu keys", m.differing, m.keys) : "bit-identical";
    case NoiseKind::MeasuredCount: return "counted unit from a run: not checked, not gated";
    case NoiseKind::Other: return "unit not classified: not gated";
  }
  return "";
}

void print_noise_markdown(std::ostream& os, const NoiseFloor& nf) {
  os << "| phase | metric | unit | kind | keys | median \\|change\\| | max \\|change\\| | max spread | note |\n"
        "|---|---|---|---|--:|--:|--:|--:|---|\n";
  for (const auto& m : nf.metrics)
    os << "| " << md_cell(m.family) << " | " << md_cell(m.metric) << " | " << md_cell(m.unit) << " | "
       << noise_kind_name(m.kind) << " | " << m.keys << " | " << abs_percent(m.median_change) << " | "
       << abs_percent(m.max_change) << " | " << (m.max_spread ? abs_percent(*m.max_spread) : "-") << " | "
       << md_cell(noise_note(m)) << " |\n";
}

void print_noise_csv(std::ostream& os, const NoiseFloor& nf) {
  os << "phase_family,metric,unit,kind,keys,median_abs_change,max_abs_change,max_spread,differing,gated\n";
  auto frac = [](double v) { return std::isinf(v) ? std::string("inf") : format_value(v); };
  for (const auto& m : nf.metrics) {
    const std::vector<std::string> f = {m.family, m.metric, m.unit, noise_kind_name(m.kind), std::to_string(m.keys),
                                        frac(m.median_change), frac(m.max_change),
                                        m.max_spread ? frac(*m.max_spread) : "", std::to_string(m.differing),
                                        m.gated ? "1" : "0"};
    for (size_t i = 0; i < f.size(); ++i) os << (i ? "," : "") << csv_field(f[i]);
    os << "\n";
  }
}

void print_noise_summary(std::ostream& os, const NoiseFloor& nf) {
  os << nf.keys << " keys with a value in both runs; " << nf.unpaired
     << " in one run only or without a value in one (not counted)\n";
  for (const auto& m : nf.metrics)
    if (m.kind == NoiseKind::Counted && m.differing)
      os << "error: counted metric " << m.family << "/" << m.metric << " (" << m.unit << ") differs in "
         << m.differing << " of " << m.keys << " keys, e.g. " << m.first_change << "\n";
  if (!nf.too_noisy.empty()) {
    os << "too noisy to gate (2 x max |change| above 50% in some phase family):";
    for (size_t i = 0; i < nf.too_noisy.size(); ++i) os << (i ? ", " : " ") << nf.too_noisy[i];
    os << "\n";
  }
  if (nf.threshold) {
    os << "noise floor: largest max |change| of the gated timed metrics " << abs_percent(nf.largest_change) << " ("
       << nf.largest_at << "); 2 x that = " << abs_percent(2 * nf.largest_change) << "\n";
    os << "recommended threshold: " << strf("%g%%", 100 * *nf.threshold) << "\n";
    os << "gate: " << nf.gate_command() << "\n";
  } else {
    os << "recommended threshold: none (no timed metric that the ladder 1..50% can gate)\n";
  }
  os << (nf.failed() ? strf("result: FAIL (%zu counted metric%s not bit-identical)\n", nf.counted_differing(),
                            nf.counted_differing() == 1 ? "" : "s")
                     : std::string("result: PASS (counted metrics bit-identical)\n"));
}

}  // namespace

int cmd_compare(const Args& args) {
  const CommandSpec spec = compare_spec();
  if (print_help_if_asked(spec, args)) return 0;
  const ParsedArgs a = parse_args(spec, args);
  a.exclusive({"--exact", "--threshold"}, false);
  if (a.has("--noise-floor"))
    for (const char* other : {"--threshold", "--exact", "--strict", "--hide-same"}) a.exclusive({"--noise-floor", other}, false);
  CompareOptions opt;
  if (const auto t = a.get("--threshold")) opt.threshold = parse_threshold("--threshold", *t);
  opt.exact = a.has("--exact");
  opt.strict = a.has("--strict");
  if (const auto m = a.get("--metrics")) opt.metrics = split_list("--metrics", *m);
  if (const auto p = a.get("--phases")) opt.phases = split_list("--phases", *p);
  const Format format = parse_format(a.get_or("--format", "markdown"));
  const bool hide_same = a.has("--hide-same");

  const std::string& base_path = a.positional()[0];
  const std::string& head_path = a.positional()[1];
  const std::vector<ResultRow> base = read_results_csv(base_path);
  const std::vector<ResultRow> head = read_results_csv(head_path);
  // Two header-only files are two runs that measured nothing: as a gate they must not pass.
  if (base.empty() && head.empty())
    throw InputError("nothing to compare: " + base_path + " and " + head_path +
                     " hold no result rows (a header only): did either run measure anything?");
  if (a.has("--noise-floor")) {
    const NoiseFloor nf = noise_floor(base, head, opt);
    if (format == Format::Csv) {
      print_noise_csv(std::cout, nf);
      print_noise_summary(std::cerr, nf);
    } else {
      std::cout << "yoco compare --noise-floor: run A " << base_path << " (" << base.size() << " rows), run B "
                << head_path << " (" << head.size() << " rows): two runs of the same build on the same device"
                << (opt.metrics.empty() && opt.phases.empty() ? "" : "; filtered") << "\n\n";
      print_noise_markdown(std::cout, nf);
      std::cout << "\n";
      print_noise_summary(std::cout, nf);
    }
    return nf.failed() ? 1 : 0;
  }
  const Comparison cmp = compare_results(base, head, opt);

  if (format == Format::Csv) {
    print_csv(std::cout, cmp, hide_same);
    std::cerr << cmp.summary() << "\n" << result_line(cmp) << "\n";
  } else {
    std::cout << "yoco compare: base " << base_path << " (" << base.size() << " rows), new " << head_path << " ("
              << head.size() << " rows); " << rule_line(opt) << (hide_same ? "; SAME rows hidden" : "") << "\n\n";
    print_markdown(std::cout, cmp, opt, hide_same);
    std::cout << "\n" << cmp.summary() << "\n";
    if (const size_t n = unknown_direction_rows(cmp))
      std::cout << "\nnote: " << n << " row" << (n == 1 ? " has a metric" : "s have metrics")
                << " of unknown direction ('?'), judged as lower-is-better\n";
    std::cout << "\n" << result_line(cmp) << "\n";
  }
  return cmp.failed() ? 1 : 0;
}

}  // namespace yoco::cli
