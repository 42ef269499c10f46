// `yoco compare`, the CI regression gate: the result-CSV reader (round trip
// and every malformation), the verdict policy on rows built in memory, and
// the built binary end to end (exit status, table, messages). Fixtures are
// written in a temp dir with write_results_csv, so they follow the schema as
// the writers produce it; malformed files are written by hand.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "cli_runner.hpp"
#include "compare.hpp"
#include "errors.hpp"
#include "result_csv.hpp"
#include "result_row.hpp"

namespace fs = std::filesystem;
using namespace yoco::cli;

namespace {

// ---------------------------------------------------------------- fixtures --

ResultRow row(const std::string& model, int64_t seq_len, const std::string& phase, const std::string& metric,
              std::optional<double> value, const std::string& unit, const std::string& method, int64_t repeats,
              std::optional<double> min, std::optional<double> max, const std::string& notes = "") {
  const Provenance prov{"0123456789ab", "2026-11-21T10:00:00Z", "ci-host", "cpu", "Test CPU @ 3.0GHz", "6.1.0"};
  ResultRow r = make_row(prov, model, seq_len, 1, phase == "throughput" ? 1024 : 0, phase, metric, value, unit, method,
                         repeats, notes);
  r.min = min;
  r.max = max;
  return r;
}

// One of each kind of row the suite writes: timed with a spread, exact,
// analytic, a ratio row, a point that did not run.
std::vector<ResultRow> base_rows() {
  return {
      row("yoco-tiny", 4096, "prefill", "prefill_latency_s", 0.1, "s", "measured", 5, 0.099, 0.101),
      row("yoco-tiny", 4096, "decode", "decode_step_latency_s", 0.002, "s", "measured", 5, 0.00199, 0.00201),
      row("yoco-tiny", 4096, "throughput", "throughput_tokens_per_s", 1000.0, "tokens/s", "measured", 3, 990.0, 1010.0),
      row("yoco-tiny", 4096, "memory", "mem_total_bytes", 123456789.0, "B", "exact", 1, 123456789.0, 123456789.0),
      row("yoco-tiny", 4096, "prefill", "flops", 1.5e12, "FLOP", "analytic", 0, 1.5e12, 1.5e12,
          "FlashAttention rule, a"),
      row("yoco-tiny vs transformer-tiny", 4096, "prefill", "prefill_speedup", 1.8, "x", "measured", 5, 1.75, 1.85),
      row("yoco-3b", 1048576, "prefill", "prefill_latency_s", std::nullopt, "s", "over_budget", 0, std::nullopt,
          std::nullopt, "predicted 4000 s > budget 600 s"),
  };
}

// `rows` with `edit` applied to the row whose metric (and phase) match.
std::vector<ResultRow> edited(std::vector<ResultRow> rows, const std::string& phase, const std::string& metric,
                              const std::function<void(ResultRow&)>& edit) {
  int hits = 0;
  for (auto& r : rows)
    if (r.phase == phase && r.metric == metric && r.model == "yoco-tiny") {
      edit(r);
      ++hits;
    }
  EXPECT_EQ(hits, 1) << phase << "/" << metric;
  return rows;
}

// A timed value moved by `factor`, its spread moved with it (so that the
// noise rule does not apply unless a test widens it).
std::function<void(ResultRow&)> scale_by(double factor) {
  return [factor](ResultRow& r) {
    r.value = *r.value * factor;
    if (r.min) r.min = *r.min * factor;
    if (r.max) r.max = *r.max * factor;
  };
}

// A copy, so that find(compare_results(...), ...) outlives the comparison.
RowComparison find(const Comparison& c, const std::string& phase, const std::string& metric,
                   const std::string& model = "yoco-tiny") {
  for (const auto& r : c.rows)
    if (r.key_row().phase == phase && r.key_row().metric == metric && r.key_row().model == model) return r;
  ADD_FAILURE() << "no row " << model << " " << phase << " " << metric;
  return {};
}

// ---------------------------------------------------------------- helpers --

using yoco_test::CliRun;
using yoco_test::shell_quote;

class CompareTest : public yoco_test::CliTest {
 protected:
  std::string write_rows(const std::string& name, const std::vector<ResultRow>& rows) {
    std::ofstream f(path(name), std::ios::binary);
    write_results_csv(f, rows);
    EXPECT_TRUE(f.good());
    return path(name);
  }
  std::string write_text(const std::string& name, const std::string& text) {
    std::ofstream f(path(name), std::ios::binary);
    f << text;
    EXPECT_TRUE(f.good());
    return path(name);
  }
  // The base fixture as text, for hand-made malformations.
  std::string base_text() const {
    std::ostringstream s;
    write_results_csv(s, base_rows());
    return s.str();
  }

  // `yoco compare <args>`; `args` is pasted into a shell command line as is.
  CliRun compare(const std::string& args) { return yoco("compare " + args); }
  CliRun compare_files(const std::string& base, const std::string& head, const std::string& extra = "") {
    return compare(shell_quote(base) + " " + shell_quote(head) + (extra.empty() ? "" : " " + extra));
  }
};

// The markdown line of the table for `metric` (phase given to disambiguate).
std::string table_line(const std::string& out, const std::string& phase, const std::string& metric) {
  std::istringstream in(out);
  std::string line;
  while (std::getline(in, line))
    if (line.find("| " + phase + " | " + metric + " |") != std::string::npos) return line;
  return "";
}

// Exit 2, "yoco: error: " and every needle in stderr.
void expect_input_error(const CliRun& r, const std::vector<std::string>& needles) {
  EXPECT_EQ(r.status, 2) << "stdout: " << r.out << "\nstderr: " << r.err;
  EXPECT_NE(r.err.find("yoco: error: "), std::string::npos) << r.err;
  for (const auto& n : needles) EXPECT_NE(r.err.find(n), std::string::npos) << "no '" << n << "' in: " << r.err;
}

// The InputError message of read_results_csv(path), or "" if it did not throw one.
std::string read_error(const std::string& path) {
  try {
    read_results_csv(path);
  } catch (const yoco::InputError& e) {
    return e.what();
  }
  return "";
}

// ------------------------------------------------------------ the reader --

TEST_F(CompareTest, ReaderRoundTripsEveryFieldBitForBit) {
  std::vector<ResultRow> rows = base_rows();
  // Values whose %.17g text is not the shortest form: a reader that is not
  // correctly rounded (fccp's own float parser) gets some of them wrong.
  const double tricky[] = {0.1 + 0.2, 1e-300, 123456789012345678.0, 2.2250738585072014e-308, 0.3, 1.0 / 3.0,
                           9007199254740993.0, 5e-324};
  for (size_t i = 0; i < std::size(tricky); ++i) {
    rows.push_back(row(std::to_string(i) + "-model", 1, "decode", "kernel_time_s", tricky[i], "s", "measured", 2,
                       std::nextafter(tricky[i], 0.0), std::nextafter(tricky[i], 1e308)));  // [min, max] holds it
  }
  rows[0].notes = "quoted, with \"quotes\" and a comma";
  rows[1].prov.device_name = "Test, CPU";
  const auto back = read_results_csv(write_rows("round.csv", rows));
  ASSERT_EQ(back.size(), rows.size());
  auto bits = [](std::optional<double> v) { return v ? std::bit_cast<uint64_t>(*v) : uint64_t{0xdead}; };
  for (size_t i = 0; i < rows.size(); ++i) {
    const ResultRow &a = rows[i], &b = back[i];
    SCOPED_TRACE(result_key(a));
    EXPECT_EQ(a.prov.git_sha, b.prov.git_sha);
    EXPECT_EQ(a.prov.timestamp, b.prov.timestamp);
    EXPECT_EQ(a.prov.host, b.prov.host);
    EXPECT_EQ(a.prov.device, b.prov.device);
    EXPECT_EQ(a.prov.device_name, b.prov.device_name);
    EXPECT_EQ(a.prov.driver, b.prov.driver);
    EXPECT_EQ(result_key(a), result_key(b));
    EXPECT_EQ(a.value.has_value(), b.value.has_value());
    EXPECT_EQ(bits(a.value), bits(b.value));
    EXPECT_EQ(bits(a.min), bits(b.min));
    EXPECT_EQ(bits(a.max), bits(b.max));
    EXPECT_EQ(a.unit, b.unit);
    EXPECT_EQ(a.method, b.method);
    EXPECT_EQ(a.repeats, b.repeats);
    EXPECT_EQ(a.notes, b.notes);
  }
}

// The reader trims spaces and tabs around an unquoted field, so the writer
// quotes a text that starts or ends with them: `yoco bench --device-name ' x '`
// wrote ` x `, read back as `x`, and --resume then refused its own file as
// written on another device.
TEST_F(CompareTest, TextWithSpacesAtItsEdgesReadsBackAsWritten) {
  std::vector<ResultRow> rows = base_rows();
  rows[0].prov.device_name = " lab runner ";
  rows[0].prov.host = "\thost";
  rows[0].notes = "trailing tab\t";
  const auto back = read_results_csv(write_rows("edges.csv", rows));
  ASSERT_EQ(back.size(), rows.size());
  EXPECT_EQ(back[0].prov.device_name, " lab runner ");
  EXPECT_EQ(back[0].prov.host, "\thost");
  EXPECT_EQ(back[0].notes, "trailing tab\t");
  EXPECT_EQ(result_key(back[0]), result_key(rows[0]));
}

// RFC 4180 lets the last record go without its line break; this schema does not (reports/SCHEMA.md): every
// writer of ours ends each row with one, so a file without it was cut short, possibly inside the notes, whose
// words are read back ("prefill chunk 16384" cut to "prefill chunk 163").
TEST_F(CompareTest, ReaderAcceptsBlankLinesAndCrLfButNoFileCutShort) {
  std::string text = base_text();
  std::string crlf;
  for (char c : text) crlf += c == '\n' ? std::string("\r\n") : std::string(1, c);
  crlf.insert(crlf.find("\r\n") + 2, "\r\n");  // a blank line after the header
  EXPECT_EQ(read_results_csv(write_text("crlf.csv", crlf)).size(), base_rows().size());
  EXPECT_TRUE(read_results_csv(write_text("header_only.csv", text.substr(0, text.find('\n') + 1))).empty());
  crlf.resize(crlf.size() - 2);  // no final line break
  try {
    read_results_csv(write_text("no_final_newline.csv", crlf));
    ADD_FAILURE() << "a file without its final line break was read";
  } catch (const yoco::InputError& e) {
    EXPECT_NE(std::string(e.what()).find("no_final_newline.csv: line 9: the file does not end with a line break"),
              std::string::npos)
        << e.what();
  }
}

TEST_F(CompareTest, ReaderNamesFileAndLineForEachMalformation) {
  const std::string text = base_text();
  const std::string header = text.substr(0, text.find('\n') + 1);
  auto replace_in_line = [&](int line, const std::string& from, const std::string& to) {
    std::istringstream in(text);
    std::string l, out;
    for (int i = 1; std::getline(in, l); ++i) {
      if (i == line) {
        const size_t p = l.find(from);
        EXPECT_NE(p, std::string::npos) << from << " not in line " << line;
        if (p != std::string::npos) l.replace(p, from.size(), to);
      }
      out += l + "\n";
    }
    return out;
  };
  struct Case {
    std::string name, text;
    std::vector<std::string> needles;
  };
  const std::vector<Case> cases = {
      {"missing_col",
       replace_in_line(1, ",metric,", ","),
       {"missing_col.csv", "not a result CSV", "lacks column 'metric'"}},
      {"foreign", "name,age\nada,36\n", {"foreign.csv", "not a result CSV", "lacks column 'git_sha'"}},
      {"extra_col", replace_in_line(1, ",notes", ",notes,extra"), {"extra_col.csv", "line 1", "column 'extra'"}},
      {"dup_col", replace_in_line(1, ",unit,", ",unit,unit,"), {"dup_col.csv", "line 1", "'unit' twice"}},
      {"value_nan", replace_in_line(2, ",0.10000000000000001,", ",abc,"),
       {"value_nan.csv", "line 2", "column 'value'", "'abc' is not a number"}},
      {"value_comma", replace_in_line(3, ",0.002,", ",\"0,002\","), {"value_comma.csv", "line 3", "'0,002'"}},
      {"value_inf", replace_in_line(3, ",0.002,", ",inf,"), {"value_inf.csv", "line 3", "not a finite number"}},
      {"min_bad", replace_in_line(4, ",990,", ",9x9,"), {"min_bad.csv", "line 4", "column 'min'"}},
      {"seq_len_bad", replace_in_line(5, ",4096,", ",4k,"), {"seq_len_bad.csv", "line 5", "column 'seq_len'"}},
      {"batch_neg", replace_in_line(5, ",4096,1,", ",4096,-1,"), {"batch_neg.csv", "line 5", "column 'batch'"}},
      {"repeats_empty",
       replace_in_line(2, ",measured,5,", ",measured,,"),
       {"repeats_empty.csv", "line 2", "'repeats'"}},
      {"metric_empty", replace_in_line(6, ",flops,", ",,"), {"metric_empty.csv", "line 6", "column 'metric' is empty"}},
      {"dup_key", text + text.substr(text.find('\n') + 1, text.find('\n', text.find('\n') + 1) - text.find('\n')),
       {"dup_key.csv", "line 9", "duplicate key", "line 2", "prefill_latency_s"}},
      {"short_row", replace_in_line(3, ",measured,5,", ","), {"short_row.csv", "line 3", "too few"}},
      {"long_row", replace_in_line(3, ",measured,", ",measured,x,"), {"long_row.csv", "line 3", "too many"}},
      {"open_quote", replace_in_line(6, "\"FlashAttention rule, a\"", "\"FlashAttention rule, a"),
       {"open_quote.csv", "line 6", "quoted field is not closed"}},
      {"empty", "", {"empty.csv", "is empty"}},
      {"blank", "\n\n", {"blank.csv", "is empty"}},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    const std::string msg = read_error(write_text(c.name + ".csv", c.text));
    ASSERT_FALSE(msg.empty()) << "no InputError";
    for (const auto& n : c.needles) EXPECT_NE(msg.find(n), std::string::npos) << "no '" << n << "' in: " << msg;
  }
  const std::string missing = read_error(path("no_such.csv"));
  EXPECT_NE(missing.find("no_such.csv"), std::string::npos) << missing;
  EXPECT_NE(missing.find("No such file"), std::string::npos) << missing;
  EXPECT_NE(read_error(dir_.string()).find("directory"), std::string::npos);
  // The unmodified text is fine: each case above fails because of its edit.
  EXPECT_EQ(read_error(write_text("good.csv", text)), "");
  EXPECT_EQ(read_error(write_text("good_header.csv", header)), "");
}

// ------------------------------------------------------- the verdict policy --

TEST(CompareDirection, FollowsTheSchemaTable) {
  for (const char* m : {"prefill_latency_s", "decode_step_latency_s", "mem_weights_bytes", "mem_kv_cache_bytes",
                        "mem_state_bytes", "mem_activations_bytes", "mem_other_bytes", "mem_total_bytes",
                        "mem_host_peak_rss_bytes", "mem_device_peak_bytes", "kv_cache_bytes_per_token",
                        "kernel_time_s", "roofline_time_s", "flops", "bytes", "prefill_host_enqueue_s",
                        "api_enqueue_s", "api_wait_s", "api_time_s"})
    EXPECT_EQ(metric_direction(m), Direction::Lower) << m;
  for (const char* m : {"throughput_tokens_per_s", "max_batch", "achieved_tflops", "achieved_gbs",
                        "fraction_of_gemm_peak", "fraction_of_copy_bw", "memory_reduction", "kv_cache_reduction",
                        "prefill_speedup", "decode_speedup", "throughput_gain", "gemm_peak_tflops", "copy_bw_gbs"})
    EXPECT_EQ(metric_direction(m), Direction::Higher) << m;
  // Not in the table, or matching both sides of it.
  for (const char* m : {"tokens", "latency", "bytes_total", "achieved_bytes", "flops_per_s", ""})
    EXPECT_EQ(metric_direction(m), Direction::Unknown) << m;
  EXPECT_STREQ(direction_name(Direction::Unknown), "?");
}

TEST(CompareThreshold, PercentWithOrWithoutSign) {
  EXPECT_DOUBLE_EQ(parse_threshold("--threshold", "5%"), 0.05);
  EXPECT_DOUBLE_EQ(parse_threshold("--threshold", "5"), 0.05);
  EXPECT_DOUBLE_EQ(parse_threshold("--threshold", "0.5%"), 0.005);
  EXPECT_DOUBLE_EQ(parse_threshold("--threshold", "0.05"), 0.0005);
  EXPECT_EQ(parse_threshold("--threshold", "0"), 0.0);
  EXPECT_DOUBLE_EQ(parse_threshold("--threshold", "250%"), 2.5);
  for (const char* bad : {"", "%", "abc", "-1", "-1%", "5%%", "5 %", "nan", "inf", "0x10", "5e", "%5"}) {
    try {
      parse_threshold("--threshold", bad);
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const yoco::InputError& e) {
      EXPECT_NE(std::string(e.what()).find("--threshold"), std::string::npos) << e.what();
    }
  }
}

TEST(CompareSplitList, TrimsAndRejectsEmptyItems) {
  EXPECT_EQ(split_list("--metrics", "a, b* ,c"), (std::vector<std::string>{"a", "b*", "c"}));
  EXPECT_EQ(split_list("--metrics", "one"), (std::vector<std::string>{"one"}));
  EXPECT_THROW(split_list("--metrics", "a,,b"), yoco::InputError);
  EXPECT_THROW(split_list("--metrics", ""), yoco::InputError);
  EXPECT_THROW(split_list("--metrics", "a, "), yoco::InputError);
}

TEST(ComparePolicy, IdenticalRowsAreAllSame) {
  const auto rows = base_rows();
  const Comparison c = compare_results(rows, rows, {});
  ASSERT_EQ(c.rows.size(), rows.size());
  EXPECT_EQ(c.count(Verdict::Same), rows.size() - 1);
  EXPECT_EQ(c.count(Verdict::NotRun), 1u);
  EXPECT_FALSE(c.failed());
  EXPECT_EQ(c.summary(), "7 compared: 6 SAME, 0 BETTER, 0 WORSE, 0 CHANGED, 1 NOT_RUN; 0 ONLY_BASE, 0 ONLY_NEW");
}

TEST(ComparePolicy, DirectionDecidesBetterOrWorse) {
  const auto base = base_rows();
  struct Case {
    std::string phase, metric;
    double factor;
    Verdict expect;
  };
  for (const Case& k : {Case{"prefill", "prefill_latency_s", 1.10, Verdict::Worse},
                        Case{"prefill", "prefill_latency_s", 0.90, Verdict::Better},
                        Case{"throughput", "throughput_tokens_per_s", 1.10, Verdict::Better},
                        Case{"throughput", "throughput_tokens_per_s", 0.90, Verdict::Worse},
                        Case{"memory", "mem_total_bytes", 1.10, Verdict::Worse},
                        Case{"prefill", "flops", 0.5, Verdict::Better}}) {
    SCOPED_TRACE(k.metric + " x" + std::to_string(k.factor));
    const Comparison c = compare_results(base, edited(base, k.phase, k.metric, scale_by(k.factor)), {});
    const RowComparison& r = find(c, k.phase, k.metric);
    EXPECT_EQ(r.verdict, k.expect);
    EXPECT_EQ(r.fails, k.expect == Verdict::Worse);
    EXPECT_EQ(c.failed(), k.expect == Verdict::Worse);
    ASSERT_TRUE(r.change.has_value());
    EXPECT_NEAR(*r.change, k.factor - 1, 1e-12);
    EXPECT_EQ(c.count(Verdict::Same), base.size() - 2);  // every other row untouched
  }
}

TEST(ComparePolicy, ThresholdIsInclusiveAndConfigurable) {
  const auto base = base_rows();
  // The spread is scaled with the value, so only the threshold decides.
  auto verdict_at = [&](double factor, double threshold) {
    CompareOptions o;
    o.threshold = threshold;
    const Comparison c = compare_results(base, edited(base, "prefill", "prefill_latency_s", scale_by(factor)), o);
    return find(c, "prefill", "prefill_latency_s").verdict;
  };
  EXPECT_EQ(verdict_at(1.05, 0.05), Verdict::Same);  // exactly the threshold
  EXPECT_EQ(verdict_at(1.0501, 0.05), Verdict::Worse);
  EXPECT_EQ(verdict_at(1.04, 0.05), Verdict::Same);
  EXPECT_EQ(verdict_at(1.04, 0.03), Verdict::Worse);
  EXPECT_EQ(verdict_at(1.02, 0.02), Verdict::Same);
  EXPECT_EQ(verdict_at(1.02, 0.0), Verdict::Worse);
  EXPECT_EQ(verdict_at(0.96, 0.03), Verdict::Better);
}

TEST(ComparePolicy, NoiseRuleUsesEitherRowsMinMax) {
  const auto base = base_rows();
  // +10% but inside the base row's [min, max].
  {
    auto base_wide = edited(base, "prefill", "prefill_latency_s", [](ResultRow& r) { r.max = 0.12; });
    const Comparison c = compare_results(base_wide, edited(base, "prefill", "prefill_latency_s", scale_by(1.1)), {});
    const RowComparison& r = find(c, "prefill", "prefill_latency_s");
    EXPECT_EQ(r.verdict, Verdict::Same);
    EXPECT_NE(r.note.find("noise"), std::string::npos) << r.note;
    EXPECT_FALSE(c.failed());
  }
  // +10%; the base value inside the new row's [min, max].
  {
    auto head = edited(base, "prefill", "prefill_latency_s", [](ResultRow& r) {
      r.value = 0.11;
      r.min = 0.0995;
      r.max = 0.12;
    });
    const Comparison c = compare_results(base, head, {});
    EXPECT_EQ(find(c, "prefill", "prefill_latency_s").verdict, Verdict::Same);
  }
  // Ranges that overlap but contain neither value are no excuse.
  {
    auto head = edited(base, "prefill", "prefill_latency_s", [](ResultRow& r) {
      r.value = 0.11;
      r.min = 0.1005;
      r.max = 0.12;
    });
    EXPECT_EQ(find(compare_results(base, head, {}), "prefill", "prefill_latency_s").verdict, Verdict::Worse);
  }
  // Without min/max there is no noise allowance.
  {
    auto strip = [](ResultRow& r) { r.min.reset(), r.max.reset(); };
    auto b = edited(base, "prefill", "prefill_latency_s", strip);
    auto h = edited(edited(base, "prefill", "prefill_latency_s", strip), "prefill", "prefill_latency_s",
                    [](ResultRow& r) { r.value = 0.1005; });
    EXPECT_EQ(find(compare_results(b, h, {}), "prefill", "prefill_latency_s").verdict, Verdict::Same);
    h = edited(h, "prefill", "prefill_latency_s", [](ResultRow& r) { r.value = 0.11; });
    EXPECT_EQ(find(compare_results(b, h, {}), "prefill", "prefill_latency_s").verdict, Verdict::Worse);
  }
}

TEST(ComparePolicy, ExactFlagsOneUlpAndIgnoresNoise) {
  const auto base = base_rows();
  const auto head = edited(base, "memory", "mem_total_bytes", [](ResultRow& r) {
    r.value = std::nextafter(*r.value, 1e300);
    r.min = 0;  // a spread that would excuse it without --exact
    r.max = 1e300;
  });
  CompareOptions exact;
  exact.exact = true;
  const Comparison c = compare_results(base, head, exact);
  const RowComparison& r = find(c, "memory", "mem_total_bytes");
  EXPECT_EQ(r.verdict, Verdict::Changed);
  EXPECT_TRUE(r.fails);
  EXPECT_TRUE(c.failed());
  EXPECT_EQ(c.count(Verdict::Changed), 1u);
  EXPECT_EQ(find(compare_results(base, head, {}), "memory", "mem_total_bytes").verdict, Verdict::Same);
  EXPECT_FALSE(compare_results(base, base, exact).failed());
}

TEST(ComparePolicy, ZeroBaseGivesInfiniteChange) {
  auto base = edited(base_rows(), "memory", "mem_total_bytes", [](ResultRow& r) { r.value = r.min = r.max = 0.0; });
  const auto head = edited(base, "memory", "mem_total_bytes", [](ResultRow& r) { r.value = r.min = r.max = 1.0; });
  const RowComparison& r = find(compare_results(base, head, {}), "memory", "mem_total_bytes");
  EXPECT_EQ(r.verdict, Verdict::Worse);
  ASSERT_TRUE(r.change.has_value());
  EXPECT_TRUE(std::isinf(*r.change) && *r.change > 0);
  EXPECT_EQ(find(compare_results(base, base, {}), "memory", "mem_total_bytes").verdict, Verdict::Same);
}

TEST(ComparePolicy, RowsInOneFileAreListedAndFailOnlyWhenStrict) {
  auto base = base_rows();
  auto head = base_rows();
  base.push_back(row("yoco-tiny", 8192, "prefill", "prefill_latency_s", 0.3, "s", "measured", 5, 0.29, 0.31));
  head.push_back(row("yoco-tiny", 16384, "prefill", "prefill_latency_s", 0.7, "s", "measured", 5, 0.69, 0.71));
  for (bool strict : {false, true}) {
    CompareOptions o;
    o.strict = strict;
    const Comparison c = compare_results(base, head, o);
    ASSERT_EQ(c.rows.size(), base.size() + 1);
    EXPECT_EQ(c.rows[base.size() - 1].verdict, Verdict::OnlyBase);
    EXPECT_EQ(c.rows[base.size() - 1].key_row().seq_len, 8192);
    EXPECT_EQ(c.rows.back().verdict, Verdict::OnlyNew);
    EXPECT_EQ(c.rows.back().key_row().seq_len, 16384);
    EXPECT_EQ(c.failed(), strict);
    EXPECT_EQ(c.failures(), strict ? 2u : 0u);
  }
}

TEST(ComparePolicy, NotRunFailsUnderStrictOnlyWhenNewLostTheValue) {
  const auto base = base_rows();
  const auto lost = edited(base, "decode", "decode_step_latency_s", [](ResultRow& r) {
    r.value.reset(), r.min.reset(), r.max.reset();
    r.method = "out_of_memory";
  });
  CompareOptions strict;
  strict.strict = true;
  const RowComparison& r = find(compare_results(base, lost, {}), "decode", "decode_step_latency_s");
  EXPECT_EQ(r.verdict, Verdict::NotRun);
  EXPECT_FALSE(r.fails);
  EXPECT_NE(r.note.find("new did not run (out_of_memory)"), std::string::npos) << r.note;
  EXPECT_TRUE(compare_results(base, lost, strict).failed());
  // The other way round (a point that now runs) is not a failure, strict or not.
  const RowComparison& g = find(compare_results(lost, base, strict), "decode", "decode_step_latency_s");
  EXPECT_EQ(g.verdict, Verdict::NotRun);
  EXPECT_FALSE(g.fails);
  EXPECT_FALSE(compare_results(lost, base, strict).failed());
}

TEST(ComparePolicy, FiltersSelectRowsAndRejectUnusedGlobs) {
  const auto base = base_rows();
  const auto head = edited(base, "prefill", "prefill_latency_s", scale_by(1.5));
  CompareOptions o;
  o.metrics = {"*_bytes", "throughput_*"};
  Comparison c = compare_results(base, head, o);
  EXPECT_EQ(c.rows.size(), 2u);
  EXPECT_FALSE(c.failed());  // the regression is filtered out
  o.metrics = {"prefill_*"};
  o.phases = {"pre*"};
  c = compare_results(base, head, o);
  EXPECT_EQ(c.rows.size(), 3u);  // yoco-tiny and yoco-3b prefill latency, the prefill speedup
  EXPECT_TRUE(c.failed());
  o.phases = {"decode"};
  EXPECT_THROW(compare_results(base, head, o), yoco::InputError);  // no prefill_* in decode: nothing selected
  o = {};
  o.metrics = {"prefill_latency_s", "typo_metric"};
  try {
    compare_results(base, head, o);
    ADD_FAILURE() << "an unused glob was accepted";
  } catch (const yoco::InputError& e) {
    EXPECT_NE(std::string(e.what()).find("typo_metric"), std::string::npos) << e.what();
  }
}

TEST(ComparePolicy, DisjointFilesAreAnInputError) {
  auto head = base_rows();
  for (auto& r : head) r.prov.device_name = "Other CPU";
  try {
    compare_results(base_rows(), head, {});
    ADD_FAILURE() << "disjoint files compared";
  } catch (const yoco::InputError& e) {
    EXPECT_NE(std::string(e.what()).find("Other CPU"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(compare_results({}, {}, {}).rows.empty());
}

TEST(ComparePolicy, UnknownMetricIsJudgedLowerIsBetter) {
  auto base = base_rows();
  base.push_back(row("yoco-tiny", 4096, "decode", "mystery_metric", 10.0, "count", "measured", 1, 10.0, 10.0));
  auto up = edited(base, "decode", "mystery_metric", scale_by(1.2));
  const RowComparison& r = find(compare_results(base, up, {}), "decode", "mystery_metric");
  EXPECT_EQ(r.direction, Direction::Unknown);
  EXPECT_EQ(r.verdict, Verdict::Worse);
  EXPECT_EQ(find(compare_results(up, base, {}), "decode", "mystery_metric").verdict, Verdict::Better);
}

TEST(ComparePolicy, MethodAndUnitChangesAreNoted) {
  const auto base = base_rows();
  const auto head = edited(base, "decode", "decode_step_latency_s", [](ResultRow& r) { r.method = "sampled"; });
  const RowComparison& r = find(compare_results(base, head, {}), "decode", "decode_step_latency_s");
  EXPECT_EQ(r.verdict, Verdict::Same);
  EXPECT_NE(r.note.find("method measured -> sampled"), std::string::npos) << r.note;
}

// 1 s against 1 ms is not a 0% change: values in two units are not compared, and the row fails.
TEST(ComparePolicy, AUnitChangeIsChangedAndFails) {
  const auto base = base_rows();
  const auto head = edited(base, "prefill", "prefill_latency_s", [](ResultRow& r) { r.unit = "ms"; });
  const RowComparison& r = find(compare_results(base, head, {}), "prefill", "prefill_latency_s");
  EXPECT_EQ(r.verdict, Verdict::Changed);
  EXPECT_TRUE(r.fails);
  EXPECT_NE(r.note.find("unit s -> ms"), std::string::npos) << r.note;
  EXPECT_NE(r.note.find("not compared"), std::string::npos) << r.note;
}

// yoco check --format csv: within_tolerance going from 1 to 0 is a regression, not an improvement.
TEST(ComparePolicy, WithinToleranceIsHigherIsBetter) {
  EXPECT_EQ(metric_direction("within_tolerance"), Direction::Higher);
  auto base = base_rows();
  for (auto& r : base)
    if (r.phase == "prefill" && r.metric == "prefill_latency_s") {
      r.phase = "check_gret:o";
      r.metric = "within_tolerance";
      r.unit = "bool";
      r.value = 1.0;
      r.min = r.max = std::nullopt;
    }
  const auto head = edited(base, "check_gret:o", "within_tolerance", [](ResultRow& r) { r.value = 0.0; });
  const RowComparison& r = find(compare_results(base, head, {}), "check_gret:o", "within_tolerance");
  EXPECT_EQ(r.verdict, Verdict::Worse);
  EXPECT_TRUE(r.fails);
}

// ---------------------------------------------------------- the CLI, end to end --

TEST_F(CompareTest, CliPlantedLatencyRegressionExits1) {
  const auto base = write_rows("base.csv", base_rows());
  const auto head = write_rows("new.csv", edited(base_rows(), "prefill", "prefill_latency_s", scale_by(1.10)));
  const CliRun r = compare_files(base, head);
  EXPECT_EQ(r.status, 1) << r.out << r.err;
  const std::string line = table_line(r.out, "prefill", "prefill_latency_s");
  EXPECT_NE(line.find("| WORSE |"), std::string::npos) << r.out;
  EXPECT_NE(line.find("+10%"), std::string::npos) << line;
  EXPECT_NE(r.out.find("7 compared: 5 SAME, 0 BETTER, 1 WORSE, 0 CHANGED, 1 NOT_RUN; 0 ONLY_BASE, 0 ONLY_NEW"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("result: FAIL (1 failing row: 1 WORSE)"), std::string::npos) << r.out;
  // A looser threshold lets it through; "12" means 12 percent.
  EXPECT_EQ(compare_files(base, head, "--threshold 12").status, 0);
  EXPECT_EQ(compare_files(base, head, "--threshold=12%").status, 0);
  EXPECT_EQ(compare_files(base, head, "--threshold 9%").status, 1);
}

TEST_F(CompareTest, CliIdenticalFileExits0AllSame) {
  const auto base = write_rows("base.csv", base_rows());
  const CliRun r = compare_files(base, base);
  EXPECT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("7 compared: 6 SAME, 0 BETTER, 0 WORSE, 0 CHANGED, 1 NOT_RUN"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("result: PASS"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("WORSE |"), std::string::npos) << r.out;
  EXPECT_EQ(compare_files(base, base, "--exact --strict").status, 0);
}

TEST_F(CompareTest, CliThroughputGainIsBetterAndExits0) {
  const auto base = write_rows("base.csv", base_rows());
  const auto up = write_rows("up.csv", edited(base_rows(), "throughput", "throughput_tokens_per_s", scale_by(1.10)));
  CliRun r = compare_files(base, up);
  EXPECT_EQ(r.status, 0) << r.out << r.err;
  const std::string line = table_line(r.out, "throughput", "throughput_tokens_per_s");
  EXPECT_NE(line.find("| higher |"), std::string::npos) << line;
  EXPECT_NE(line.find("| BETTER |"), std::string::npos) << r.out;
  // The same change the other way is a regression.
  r = compare_files(up, base);
  EXPECT_EQ(r.status, 1) << r.out;
  EXPECT_NE(table_line(r.out, "throughput", "throughput_tokens_per_s").find("| WORSE |"), std::string::npos) << r.out;
}

TEST_F(CompareTest, CliNoiseRuleMakesWideSpreadSame) {
  const auto noisy = edited(base_rows(), "decode", "decode_step_latency_s", [](ResultRow& r) { r.max = 0.0025; });
  const auto base = write_rows("base.csv", noisy);
  const auto head = write_rows("new.csv", edited(noisy, "decode", "decode_step_latency_s", [](ResultRow& r) {
                                 r.value = 0.0022;  // +10%, inside base [0.00199, 0.0025]
                                 r.min = 0.00219;
                                 r.max = 0.00221;
                               }));
  CliRun r = compare_files(base, head);
  EXPECT_EQ(r.status, 0) << r.out << r.err;
  const std::string line = table_line(r.out, "decode", "decode_step_latency_s");
  EXPECT_NE(line.find("| SAME | within noise"), std::string::npos) << line;
  EXPECT_NE(line.find("+10%"), std::string::npos) << line;
  // The control: the tight base spread of the fixture gives no allowance.
  const auto tight = write_rows("tight.csv", base_rows());
  r = compare_files(tight, head);
  EXPECT_EQ(r.status, 1) << r.out;
  EXPECT_NE(table_line(r.out, "decode", "decode_step_latency_s").find("| WORSE |"), std::string::npos) << r.out;
}

TEST_F(CompareTest, CliExactFlagsOneUlpInBytes) {
  const auto base = write_rows("base.csv", base_rows());
  const auto head = write_rows("new.csv", edited(base_rows(), "memory", "mem_total_bytes", [](ResultRow& r) {
                                 r.value = r.min = r.max = std::nextafter(*r.value, 1e300);  // a spread that holds it
                               }));
  const CliRun r = compare_files(base, head, "--exact");
  EXPECT_EQ(r.status, 1) << r.out << r.err;
  const std::string line = table_line(r.out, "memory", "mem_total_bytes");
  EXPECT_NE(line.find("| CHANGED |"), std::string::npos) << r.out;
  // Both values in full, so that the table shows what changed.
  EXPECT_NE(line.find("123456789 B"), std::string::npos) << line;
  EXPECT_NE(line.find("123456789.00000001 B"), std::string::npos) << line;
  EXPECT_NE(r.out.find("result: FAIL (1 failing row: 1 CHANGED)"), std::string::npos) << r.out;
  EXPECT_EQ(compare_files(base, head).status, 0);  // far inside 5% without --exact
  expect_input_error(compare_files(base, head, "--exact --threshold 1"), {"--exact", "--threshold"});
}

TEST_F(CompareTest, CliRowsInOneFileAreListed) {
  auto b = base_rows(), h = base_rows();
  b.push_back(row("yoco-tiny", 8192, "prefill", "prefill_latency_s", 0.3, "s", "measured", 5, 0.29, 0.31));
  h.push_back(row("transformer-tiny", 4096, "prefill", "prefill_latency_s", 0.2, "s", "measured", 5, 0.19, 0.21));
  const auto base = write_rows("base.csv", b), head = write_rows("new.csv", h);
  CliRun r = compare_files(base, head);
  EXPECT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("| yoco-tiny | Test CPU @ 3.0GHz | 8192 |"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("| ONLY_BASE |"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("| transformer-tiny |"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("| ONLY_NEW |"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("; 1 ONLY_BASE, 1 ONLY_NEW"), std::string::npos) << r.out;
  r = compare_files(base, head, "--strict");
  EXPECT_EQ(r.status, 1) << r.out;
  EXPECT_NE(r.out.find("result: FAIL (2 failing rows: 1 ONLY_BASE, 1 ONLY_NEW)"), std::string::npos) << r.out;
}

TEST_F(CompareTest, CliMetricsAndPhasesFilter) {
  const auto base = write_rows("base.csv", base_rows());
  const auto head = write_rows("new.csv", edited(base_rows(), "prefill", "prefill_latency_s", scale_by(1.5)));
  CliRun r = compare_files(base, head, "--metrics '*_bytes,throughput_*'");
  EXPECT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("2 compared: 2 SAME"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("prefill_latency_s"), std::string::npos) << r.out;
  EXPECT_EQ(compare_files(base, head, "--phases prefill").status, 1);
  EXPECT_EQ(compare_files(base, head, "--phases 'decode,memory'").status, 0);
  expect_input_error(compare_files(base, head, "--metrics 'prefil_latency_s'"), {"--metrics", "prefil_latency_s"});
}

TEST_F(CompareTest, CliCsvFormatAndHideSame) {
  const auto base = write_rows("base.csv", base_rows());
  const auto head = write_rows("new.csv", edited(base_rows(), "prefill", "prefill_latency_s", scale_by(1.25)));
  CliRun r = compare_files(base, head, "--format csv");
  EXPECT_EQ(r.status, 1) << r.out << r.err;
  std::istringstream in(r.out);
  std::string header, line;
  std::getline(in, header);
  EXPECT_EQ(header,
            "model,device_name,seq_len,batch,gen_tokens,phase,metric,direction,base_value,base_unit,new_value,new_unit,"
            "change,verdict,failure,note");
  int rows = 0;
  bool found = false;
  while (std::getline(in, line)) {
    ++rows;
    if (line.rfind("yoco-tiny,Test CPU @ 3.0GHz,4096,1,0,prefill,prefill_latency_s,", 0) != 0) continue;
    found = true;
    std::vector<std::string> f;
    std::istringstream fields(line);
    for (std::string x; std::getline(fields, x, ',');) f.push_back(x);
    ASSERT_EQ(f.size(), 15u) << line;  // the empty note has no field after the last comma
    EXPECT_EQ(f[7], "lower");
    EXPECT_EQ(std::stod(f[8]), 0.1);
    EXPECT_EQ(f[9], "s");
    EXPECT_EQ(std::stod(f[10]), 0.1 * 1.25);
    EXPECT_NEAR(std::stod(f[12]), 0.25, 1e-12);  // a fraction, not percent
    EXPECT_EQ(f[13], "WORSE");
    EXPECT_EQ(f[14], "1");
  }
  EXPECT_TRUE(found) << r.out;
  EXPECT_EQ(rows, 7);
  EXPECT_NE(r.err.find("1 WORSE"), std::string::npos) << r.err;  // the summary goes to stderr
  r = compare_files(base, head, "--hide-same");
  EXPECT_EQ(r.out.find("| SAME |"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("| WORSE |"), std::string::npos) << r.out;
  expect_input_error(compare_files(base, head, "--format xml"), {"--format", "xml"});
}

TEST_F(CompareTest, CliMalformedInputsExit2NamingFileAndLine) {
  const std::string text = base_text();
  const auto good = write_rows("good.csv", base_rows());
  const size_t eol1 = text.find('\n'), eol2 = text.find('\n', eol1 + 1);
  std::string missing_col = text;
  missing_col.replace(missing_col.find(",metric,"), 8, ",");
  expect_input_error(compare_files(good, write_text("missing_col.csv", missing_col)),
                     {"missing_col.csv is not a result CSV: header (line 1) lacks column 'metric'"});
  std::string bad_value = text;
  bad_value.replace(bad_value.find(",0.002,"), 7, ",fast,");
  expect_input_error(compare_files(write_text("bad_value.csv", bad_value), good),
                     {"bad_value.csv: line 3: column 'value': 'fast' is not a number"});
  const std::string dup = text + text.substr(eol1 + 1, eol2 - eol1);
  expect_input_error(compare_files(good, write_text("dup.csv", dup)),
                     {"dup.csv: line 9: duplicate key", "as line 2"});
  expect_input_error(compare_files(good, write_text("foreign.csv", "date,open,close\n2024-01-02,1,2\n")),
                     {"foreign.csv is not a result CSV", "lacks column 'git_sha'"});
  expect_input_error(compare_files(good, path("absent.csv")), {"cannot open", "absent.csv"});
  expect_input_error(compare_files(good, write_text("empty.csv", "")), {"empty.csv is empty"});
  // A binary file is not "empty" (fccp reads a leading NUL as the end of the line) nor a CSV lacking git_sha.
  expect_input_error(compare_files(good, write_text("zeros.csv", std::string(4096, '\0'))),
                     {"zeros.csv is not a text CSV", "binary", "offset 0"});
  expect_input_error(compare_files(good, write_text("nul_row.csv", text + std::string("a\0b\n", 4))),
                     {"nul_row.csv is not a text CSV", "binary"});
  // A file cut short inside its last row (an interrupted copy): its notes, whose words are read back, were
  // read cut. Refused naming the file and the last line; the whole file reads.
  ASSERT_EQ(text.back(), '\n');
  expect_input_error(compare_files(good, write_text("cut.csv", text.substr(0, text.size() - 5))),
                     {"cut.csv: line 8: the file does not end with a line break: its last row is cut short"});
  // A spread that is reversed or does not hold the value: file, line and column.
  const auto min_above_max = edited(base_rows(), "decode", "decode_step_latency_s", [](ResultRow& r) {
    r.min = 0.00201;
    r.max = 0.00199;
  });
  expect_input_error(compare_files(good, write_rows("reversed.csv", min_above_max)),
                     {"reversed.csv: line 3: column 'min': 0.00201", "is above max 0.00199"});
  const auto below = edited(base_rows(), "prefill", "prefill_latency_s", [](ResultRow& r) { r.value = 0.05; });
  expect_input_error(compare_files(good, write_rows("below.csv", below)),
                     {"below.csv: line 2: column 'value': 0.05", "is below min 0.099"});
  const auto above = edited(base_rows(), "throughput", "throughput_tokens_per_s", [](ResultRow& r) { r.value = 2000; });
  expect_input_error(compare_files(write_rows("above.csv", above), good),
                     {"above.csv: line 4: column 'value': 2000 is above max 1010"});
  // Rows that break the schema's methods (reports/SCHEMA.md "Methods"): a method it does not list, a
  // method that carries a value without one, a point that did not run with one. compare judged them.
  const auto guessed = edited(base_rows(), "prefill", "prefill_latency_s", [](ResultRow& r) { r.method = "guessed"; });
  expect_input_error(compare_files(good, write_rows("guessed.csv", guessed)),
                     {"guessed.csv: line 2: column 'method': 'guessed' is not a method of reports/SCHEMA.md"});
  const auto no_value = edited(base_rows(), "decode", "decode_step_latency_s", [](ResultRow& r) {
    r.value.reset();
    r.min.reset();
    r.max.reset();
  });
  expect_input_error(compare_files(write_rows("no_value.csv", no_value), good),
                     {"no_value.csv: line 3: column 'value' is empty, but method 'measured'"});
  const auto failed_value =
      edited(base_rows(), "decode", "decode_step_latency_s", [](ResultRow& r) { r.method = "failed"; });
  expect_input_error(compare_files(good, write_rows("failed_value.csv", failed_value)),
                     {"failed_value.csv: line 3: column 'value'", "method 'failed' says the point did not run"});
  // The good file against itself is fine, so each failure above is the malformation's.
  EXPECT_EQ(compare_files(good, good).status, 0);
}

// The reader's schema checks hold for every result CSV committed under reports/ (and the tests' data):
// a check the committed files break would make compare and --resume refuse the repo's own results.
TEST_F(CompareTest, ReaderReadsEveryCommittedResultCsv) {
  const fs::path source = fs::path(YOCO_TEST_DATA_DIR).parent_path().parent_path();
  size_t read = 0;
  for (const char* dir : {"reports", "tests/data"}) {
    if (!fs::is_directory(source / dir)) continue;
    for (const auto& e : fs::recursive_directory_iterator(source / dir)) {
      if (!e.is_regular_file() || e.path().extension() != ".csv") continue;
      std::ifstream in(e.path());
      std::string header;
      std::getline(in, header);
      if (header.rfind("git_sha,", 0) != 0) continue;  // another kind of CSV (paper numbers, chunks, ...)
      // Not single runs, so not what the reader takes (they repeat keys): a device call's logs, and the
      // files of chunked calls appended one after another.
      const std::string p = e.path().generic_string();
      if (p.find("/logs/") != std::string::npos || e.path().filename().string().rfind("chunks", 0) == 0) continue;
      SCOPED_TRACE(e.path().string());
      EXPECT_EQ(read_error(e.path().string()), "");
      ++read;
    }
  }
  EXPECT_GE(read, 20u) << "the committed result CSVs were not found";
}

TEST_F(CompareTest, CliRejectsDisjointFilesAndBadArguments) {
  auto other = base_rows();
  for (auto& r : other) r.prov.device_name = "NVIDIA H100 80GB HBM3";
  const auto base = write_rows("base.csv", base_rows()), head = write_rows("h100.csv", other);
  expect_input_error(compare_files(base, head), {"nothing to compare", "NVIDIA H100 80GB HBM3"});
  // Two header-only files: two runs that measured nothing, which a CI gate must not pass (nor the noise floor).
  const std::string text = base_text(), header = text.substr(0, text.find('\n') + 1);
  const auto empty_a = write_text("empty_a.csv", header), empty_b = write_text("empty_b.csv", header);
  expect_input_error(compare_files(empty_a, empty_b), {"nothing to compare", "empty_a.csv", "no result rows"});
  expect_input_error(compare_files(empty_a, empty_b, "--noise-floor"), {"nothing to compare", "no result rows"});
  expect_input_error(compare(shell_quote(base)), {"missing argument"});
  expect_input_error(compare_files(base, base, "--threshold five"), {"--threshold", "five"});
  expect_input_error(compare_files(base, base, "--bogus"), {"--bogus"});
}

TEST_F(CompareTest, CliHelpExplainsVerdictsNoiseThresholdAndExitCodes) {
  const CliRun r = compare("--help");
  EXPECT_EQ(r.status, 0);
  for (const char* needle : {"usage: yoco compare BASE.csv NEW.csv", "SAME", "BETTER", "WORSE", "CHANGED", "NOT_RUN",
                             "ONLY_BASE", "ONLY_NEW", "Noise rule", "[min, max]", "'5%' = '5'", "0.05 percent",
                             "Exit status: 0", "2 bad input", "--strict", "--exact", "--metrics", "--format"})
    EXPECT_NE(r.out.find(needle), std::string::npos) << "help lacks '" << needle << "'";
}

// ------------------------------------------------------------- --noise-floor --

// Run B of the fixture: the timed rows moved a little (spread moved with them),
// the counted ones untouched, and three kernels of one decode family beside them.
std::vector<ResultRow> with_kernels(std::vector<ResultRow> rows, double f0, double f1, double f2) {
  const double t[] = {1e-3 * f0, 2e-3 * f1, 4e-3 * f2};
  for (int i = 0; i < 3; ++i)
    rows.push_back(row("yoco-tiny", 4096, "decode:kernel_" + std::to_string(i), "kernel_time_s", t[i], "s", "measured",
                       5, t[i] * 0.98, t[i] * 1.03, "family gemm; 1 launches per decode step"));
  return rows;
}

std::vector<ResultRow> run_a() { return with_kernels(base_rows(), 1.0, 1.0, 1.0); }
std::vector<ResultRow> run_b() {
  auto rows = with_kernels(base_rows(), 1.001, 0.996, 1.002);  // kernel |changes| 0.1%, 0.4%, 0.2%
  rows = edited(rows, "prefill", "prefill_latency_s", scale_by(1.012));
  rows = edited(rows, "decode", "decode_step_latency_s", scale_by(0.99));
  rows = edited(rows, "throughput", "throughput_tokens_per_s", scale_by(1.004));
  return rows;
}

const NoiseMetric* find_metric(const NoiseFloor& nf, const std::string& family, const std::string& metric) {
  for (const auto& m : nf.metrics)
    if (m.family == family && m.metric == metric) return &m;
  return nullptr;
}

TEST(CompareNoiseFloor, KindsLadderAndFamilies) {
  EXPECT_EQ(noise_kind("s", "measured", "prefill_latency_s"), NoiseKind::Timed);
  EXPECT_EQ(noise_kind("s", "analytic", "prefill_latency_s"), NoiseKind::Timed);
  for (const char* u : {"tokens/s", "fraction", "TFLOP/s", "GB/s", "x"})
    EXPECT_EQ(noise_kind(u, "measured", "m"), NoiseKind::Timed) << u;
  for (const char* u : {"B", "FLOP", "count", "B/token"}) {
    EXPECT_EQ(noise_kind(u, "exact", "m"), NoiseKind::Counted) << u;
    EXPECT_EQ(noise_kind(u, "analytic", "m"), NoiseKind::Counted) << u;
    EXPECT_EQ(noise_kind(u, "measured", "m"), NoiseKind::MeasuredCount) << u;
  }
  // Ratios of counted values are counted (they were timed, and in the threshold gate); time ratios timed.
  for (const char* m : {"memory_reduction", "kv_cache_reduction"}) {
    EXPECT_EQ(noise_kind("x", "exact", m), NoiseKind::Counted) << m;
    EXPECT_EQ(noise_kind("x", "analytic", m), NoiseKind::Counted) << m;
    EXPECT_EQ(noise_kind("x", "measured", m), NoiseKind::MeasuredCount) << m;
  }
  for (const char* m : {"prefill_speedup", "decode_speedup", "throughput_gain"})
    EXPECT_EQ(noise_kind("x", "analytic", m), NoiseKind::Timed) << m;
  EXPECT_EQ(noise_kind("ratio", "measured", "m"), NoiseKind::Other);
  EXPECT_EQ(noise_kind("", "exact", "m"), NoiseKind::Other);
  EXPECT_EQ(recommended_threshold(0.0), 0.01);
  EXPECT_EQ(recommended_threshold(0.005), 0.01);  // exactly 2 x: the step itself
  EXPECT_EQ(recommended_threshold(0.0051), 0.02);
  EXPECT_EQ(recommended_threshold(0.012), 0.03);
  EXPECT_EQ(recommended_threshold(0.026), 0.07);
  EXPECT_EQ(recommended_threshold(0.25), 0.50);
  EXPECT_FALSE(recommended_threshold(0.2501).has_value());
  EXPECT_FALSE(recommended_threshold(std::numeric_limits<double>::infinity()).has_value());
  EXPECT_EQ(phase_family("prefill.gemm"), "prefill");
  EXPECT_EQ(phase_family("decode:flash_decode_split"), "decode");
  EXPECT_EQ(phase_family("decode.kernels"), "decode");
  EXPECT_EQ(phase_family("attn_prefill:D128 v2"), "attn_prefill");
  EXPECT_EQ(phase_family("memory"), "memory");
}

TEST(CompareNoiseFloor, PerMetricChangesSpreadAndThreshold) {
  const NoiseFloor nf = noise_floor(run_a(), run_b(), {});
  EXPECT_EQ(nf.keys, 9u);      // 10 keys, one without a value (over_budget)
  EXPECT_EQ(nf.unpaired, 1u);
  EXPECT_FALSE(nf.failed());
  // Families in order of first appearance; within one, metrics likewise.
  std::vector<std::string> order;
  for (const auto& m : nf.metrics) order.push_back(m.family + "/" + m.metric);
  EXPECT_EQ(order, (std::vector<std::string>{"prefill/prefill_latency_s", "prefill/flops", "prefill/prefill_speedup",
                                             "decode/decode_step_latency_s", "decode/kernel_time_s",
                                             "throughput/throughput_tokens_per_s", "memory/mem_total_bytes"}));
  const NoiseMetric* pre = find_metric(nf, "prefill", "prefill_latency_s");
  ASSERT_NE(pre, nullptr);
  EXPECT_EQ(pre->kind, NoiseKind::Timed);
  EXPECT_EQ(pre->keys, 1u);
  EXPECT_NEAR(pre->max_change, 0.012, 1e-12);
  EXPECT_NEAR(pre->median_change, 0.012, 1e-12);
  ASSERT_TRUE(pre->max_spread.has_value());
  EXPECT_NEAR(*pre->max_spread, 0.01, 1e-9);  // [0.099, 0.101] around 0.1, in both runs
  EXPECT_TRUE(pre->gated);
  const NoiseMetric* k = find_metric(nf, "decode", "kernel_time_s");
  ASSERT_NE(k, nullptr);
  EXPECT_EQ(k->keys, 3u);
  EXPECT_NEAR(k->median_change, 0.002, 1e-12);
  EXPECT_NEAR(k->max_change, 0.004, 1e-12);
  EXPECT_NEAR(*k->max_spread, 0.03, 1e-9);  // max(+3%, -2%)
  const NoiseMetric* mem = find_metric(nf, "memory", "mem_total_bytes");
  ASSERT_NE(mem, nullptr);
  EXPECT_EQ(mem->kind, NoiseKind::Counted);
  EXPECT_EQ(mem->differing, 0u);
  EXPECT_FALSE(mem->gated);
  EXPECT_EQ(find_metric(nf, "prefill", "flops")->kind, NoiseKind::Counted);
  // 2 x 1.2% = 2.4% -> 3%; the gate lists the timed metrics in order.
  ASSERT_TRUE(nf.threshold.has_value());
  EXPECT_EQ(*nf.threshold, 0.03);
  EXPECT_NEAR(nf.largest_change, 0.012, 1e-12);
  EXPECT_EQ(nf.largest_at, "prefill/prefill_latency_s");
  EXPECT_EQ(nf.gate_metrics, (std::vector<std::string>{"prefill_latency_s", "prefill_speedup", "decode_step_latency_s",
                                                       "kernel_time_s", "throughput_tokens_per_s"}));
  EXPECT_TRUE(nf.too_noisy.empty());
  EXPECT_EQ(nf.gate_command(),
            "yoco compare BASE.csv NEW.csv --threshold 3% --metrics "
            "'prefill_latency_s,prefill_speedup,decode_step_latency_s,kernel_time_s,throughput_tokens_per_s'");
  // Filters select as compare does.
  CompareOptions only;
  only.phases = {"decode*"};
  const NoiseFloor d = noise_floor(run_a(), run_b(), only);
  EXPECT_EQ(d.keys, 4u);
  EXPECT_EQ(*d.threshold, 0.02);  // 2 x 1% (decode step) -> 2%
}

TEST(CompareNoiseFloor, CountedChangeFailsAndNoisyMetricLeavesTheGate) {
  auto b = run_b();
  b = edited(b, "memory", "mem_total_bytes", [](ResultRow& r) { r.value = std::nextafter(*r.value, 1e300); });
  b = edited(b, "decode", "decode_step_latency_s", scale_by(1.4 / 0.99));  // +40%: 2 x 40% > 50%
  const NoiseFloor nf = noise_floor(run_a(), b, {});
  EXPECT_TRUE(nf.failed());
  EXPECT_EQ(nf.counted_differing(), 1u);
  const NoiseMetric* mem = find_metric(nf, "memory", "mem_total_bytes");
  EXPECT_EQ(mem->differing, 1u);
  EXPECT_NE(mem->first_change.find("yoco-tiny N 4096"), std::string::npos) << mem->first_change;
  EXPECT_NE(mem->first_change.find("base 123456789 B, new 123456789.00000001 B"), std::string::npos)
      << mem->first_change;
  EXPECT_EQ(nf.too_noisy, (std::vector<std::string>{"decode_step_latency_s"}));
  EXPECT_FALSE(find_metric(nf, "decode", "decode_step_latency_s")->gated);
  EXPECT_EQ(*nf.threshold, 0.03);  // the others still support 3%
  EXPECT_EQ(nf.gate_command().find("decode_step_latency_s"), std::string::npos) << nf.gate_command();
  // A measured count (peak RSS) may move without failing.
  auto a2 = run_a(), b2 = run_b();
  a2.push_back(row("yoco-tiny", 4096, "memory", "mem_host_peak_rss_bytes", 5e7, "B", "measured", 1, 5e7, 5e7));
  b2.push_back(row("yoco-tiny", 4096, "memory", "mem_host_peak_rss_bytes", 5.1e7, "B", "measured", 1, 5.1e7, 5.1e7));
  const NoiseFloor nf2 = noise_floor(a2, b2, {});
  EXPECT_FALSE(nf2.failed());
  EXPECT_EQ(find_metric(nf2, "memory", "mem_host_peak_rss_bytes")->kind, NoiseKind::MeasuredCount);
  // Nothing timed: no threshold, no gate.
  CompareOptions counted;
  counted.metrics = {"mem_total_bytes", "flops"};
  const NoiseFloor c = noise_floor(run_a(), run_a(), counted);
  EXPECT_FALSE(c.threshold.has_value());
  EXPECT_EQ(c.gate_command(), "");
  EXPECT_FALSE(c.failed());
}

TEST_F(CompareTest, CliNoiseFloorPrintsTableThresholdAndGate) {
  const auto a = write_rows("run-a.csv", run_a()), b = write_rows("run-b.csv", run_b());
  CliRun r = compare_files(a, b, "--noise-floor");
  EXPECT_EQ(r.status, 0) << r.out << r.err;
  for (const char* needle :
       {"| phase | metric | unit | kind | keys | median \\|change\\| | max \\|change\\| | max spread | note |",
        "| prefill | prefill_latency_s | s | timed | 1 | 1.2% | 1.2% | 1% | gated |",
        "| decode | kernel_time_s | s | timed | 3 | 0.2% | 0.4% | 3% | gated |",
        "| memory | mem_total_bytes | B | counted | 1 | 0% | 0% | 0% | bit-identical |",
        "9 keys with a value in both runs; 1 in one run only or without a value in one",
        "noise floor: largest max |change| of the gated timed metrics 1.2% (prefill/prefill_latency_s); 2 x that = 2.4%",
        "recommended threshold: 3%",
        "gate: yoco compare BASE.csv NEW.csv --threshold 3% --metrics "
        "'prefill_latency_s,prefill_speedup,decode_step_latency_s,kernel_time_s,throughput_tokens_per_s'",
        "result: PASS"})
    EXPECT_NE(r.out.find(needle), std::string::npos) << "no '" << needle << "' in:\n" << r.out;
  // The gate it prints passes on the same two runs.
  r = compare_files(a, b, "--threshold 3% --metrics "
                          "'prefill_latency_s,prefill_speedup,decode_step_latency_s,kernel_time_s,throughput_tokens_per_s'");
  EXPECT_EQ(r.status, 0) << r.out;

  // CSV: the table on stdout, the rest on stderr.
  r = compare_files(a, b, "--noise-floor --format csv");
  EXPECT_EQ(r.status, 0) << r.out << r.err;
  std::istringstream in(r.out);
  std::string header, line;
  std::getline(in, header);
  EXPECT_EQ(header, "phase_family,metric,unit,kind,keys,median_abs_change,max_abs_change,max_spread,differing,gated");
  bool found = false;
  int rows = 0;
  while (std::getline(in, line)) {
    ++rows;
    if (line.rfind("prefill,prefill_latency_s,s,timed,1,", 0) != 0) continue;
    found = true;
    std::vector<std::string> f;
    std::istringstream fields(line);
    for (std::string x; std::getline(fields, x, ',');) f.push_back(x);
    ASSERT_EQ(f.size(), 10u) << line;
    EXPECT_NEAR(std::stod(f[6]), 0.012, 1e-12);  // a fraction, not percent
    EXPECT_EQ(f[9], "1");
  }
  EXPECT_TRUE(found) << r.out;
  EXPECT_EQ(rows, 7);
  EXPECT_NE(r.err.find("recommended threshold: 3%"), std::string::npos) << r.err;
  EXPECT_EQ(r.out.find("recommended"), std::string::npos) << r.out;
}

TEST_F(CompareTest, CliNoiseFloorCountedDifferenceExits1AndBadOptionsExit2) {
  const auto a = write_rows("run-a.csv", run_a());
  const auto b = write_rows("run-b.csv", edited(run_b(), "memory", "mem_total_bytes", [](ResultRow& r) {
                              r.value = r.min = r.max = std::nextafter(*r.value, 1e300);  // a spread that holds it
                            }));
  CliRun r = compare_files(a, b, "--noise-floor");
  EXPECT_EQ(r.status, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("error: counted metric memory/mem_total_bytes (B) differs in 1 of 1 keys, e.g. yoco-tiny N "
                       "4096 batch 1 gen 0 memory/mem_total_bytes: base 123456789 B, new 123456789.00000001 B"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("| DIFFERS in 1 of 1 keys |"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("result: FAIL (1 counted metric not bit-identical)"), std::string::npos) << r.out;
  for (const char* bad : {"--threshold 5", "--exact", "--strict", "--hide-same"})
    expect_input_error(compare_files(a, a, std::string("--noise-floor ") + bad), {"--noise-floor"});
  expect_input_error(compare_files(a, a, "--noise-floor --metrics 'no_such_metric'"), {"--metrics", "no_such_metric"});
  auto other = run_a();
  for (auto& x : other) x.prov.device_name = "NVIDIA H100 80GB HBM3";
  expect_input_error(compare_files(a, write_rows("h100.csv", other), "--noise-floor"), {"nothing to compare"});
  const CliRun h = compare("--help");
  for (const char* needle : {"--noise-floor", "1,2,3,5,7,10,15,20,25,35,50%", "bit-identical", "gpu-ci-noise.sh"})
    EXPECT_NE(h.out.find(needle), std::string::npos) << "help lacks '" << needle << "'";
}

// Two real CPU runs of the same build: the counted rows are bit-identical, and
// the recipe yields a threshold and a gate that passes on those runs.
TEST_F(CompareTest, CliNoiseFloorOnTwoRealCpuRuns) {
  const std::string bench =
      "bench --model yoco-tiny,transformer-tiny --lengths 256 --gen 16 --batch 2 --decode-sample 8 --repeats 3 "
      "--warmup 1 --device-name ci-test-cpu --out ";
  for (const char* name : {"run-a.csv", "run-b.csv"}) {
    const CliRun b = yoco(bench + shell_quote(path(name)));
    ASSERT_EQ(b.status, 0) << b.out << b.err;
  }
  const CliRun r = compare_files(path("run-a.csv"), path("run-b.csv"), "--noise-floor");
  EXPECT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("| memory | mem_kv_cache_bytes | B | counted |"), std::string::npos) << r.out;
  // The exact ratio rows are counted, never in the threshold gate (they were timed and gated).
  EXPECT_NE(r.out.find("| memory | memory_reduction | x | counted |"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("| kv_cache | kv_cache_reduction | x | counted |"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("_reduction,"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("_reduction'"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("error:"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("result: PASS"), std::string::npos) << r.out;
  // Timing on a shared 2-core machine may be too noisy for the ladder; when it is not, its gate passes.
  const size_t g = r.out.find("gate: yoco compare BASE.csv NEW.csv ");
  if (g != std::string::npos) {
    const size_t from = g + std::string("gate: yoco compare BASE.csv NEW.csv ").size();
    const std::string gate_args = r.out.substr(from, r.out.find('\n', from) - from);
    const CliRun gate = compare_files(path("run-a.csv"), path("run-b.csv"), gate_args);
    EXPECT_EQ(gate.status, 0) << gate_args << "\n" << gate.out;
  } else {
    EXPECT_NE(r.out.find("recommended threshold: none"), std::string::npos) << r.out;
  }
}

}  // namespace
