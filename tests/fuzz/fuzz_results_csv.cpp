// libFuzzer target: the result CSV reader (bench/results/result_csv.hpp), then
// `yoco compare`'s judgement of the parsed file against itself
// (bench/results/compare.hpp). InputError is the expected outcome of bad
// input; any other exception, a crash or a sanitizer report is a finding. A
// file compared with itself must have every key in both and no failure, with
// or without --exact / --strict; rows written back must read back as the same
// rows, every column of every row, numbers bit for bit.
#include <cstdint>
#include <cstring>
#include <exception>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "compare.hpp"
#include "errors.hpp"
#include "fuzz_common.hpp"
#include "result_csv.hpp"

namespace {

// What the writer promises for notes: written on one line, CR and LF as spaces
// (write_results_csv; the readers are line-based).
std::string one_line(std::string s) {
  for (char& c : s)
    if (c == '\n' || c == '\r') c = ' ';
  return s;
}

// A value written as %.17g reads back correctly rounded, so bit for bit (-0
// stays -0); no value stays no value. The reader refuses NaN and infinities.
bool same_number(const std::optional<double>& a, const std::optional<double>& b) {
  if (a.has_value() != b.has_value()) return false;
  if (!a) return true;
  uint64_t x = 0, y = 0;  // (std::bit_cast: not in clang 14's libstdc++ here)
  std::memcpy(&x, &*a, sizeof x);
  std::memcpy(&y, &*b, sizeof y);
  return x == y;
}

// The first column in which the row read back differs from the row written,
// or "" if none.
std::string first_difference(const yoco::cli::ResultRow& w, const yoco::cli::ResultRow& r) {
  if (w.prov.git_sha != r.prov.git_sha) return "git_sha";
  if (w.prov.timestamp != r.prov.timestamp) return "timestamp";
  if (w.prov.host != r.prov.host) return "host";
  if (w.prov.device != r.prov.device) return "device";
  if (w.prov.device_name != r.prov.device_name) return "device_name";
  if (w.prov.driver != r.prov.driver) return "driver";
  if (w.model != r.model) return "model";
  if (w.seq_len != r.seq_len) return "seq_len";
  if (w.batch != r.batch) return "batch";
  if (w.gen_tokens != r.gen_tokens) return "gen_tokens";
  if (w.phase != r.phase) return "phase";
  if (w.metric != r.metric) return "metric";
  if (!same_number(w.value, r.value)) return "value";
  if (w.unit != r.unit) return "unit";
  if (w.method != r.method) return "method";
  if (w.repeats != r.repeats) return "repeats";
  if (!same_number(w.min, r.min)) return "min";
  if (!same_number(w.max, r.max)) return "max";
  if (one_line(w.notes) != r.notes) return "notes";
  return "";
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string& path = yoco::fuzz::scratch_path(".csv");
  yoco::fuzz::write_file(path, data, size);
  std::vector<yoco::cli::ResultRow> rows;
  if (!yoco::fuzz::accepts("read_results_csv", [&] { rows = yoco::cli::read_results_csv(path); })) return 0;
  for (int mode = 0; mode < 3; ++mode) {
    yoco::cli::CompareOptions opt;
    opt.exact = mode == 1;
    opt.strict = mode == 2;
    try {
      const auto cmp = yoco::cli::compare_results(rows, rows, opt);
      if (cmp.rows.size() != rows.size()) yoco::fuzz::finding("self-compare lost or added keys");
      if (cmp.failed()) yoco::fuzz::finding("a file compared with itself fails: " + cmp.summary());
      if (cmp.count(yoco::cli::Verdict::OnlyBase) || cmp.count(yoco::cli::Verdict::OnlyNew))
        yoco::fuzz::finding("self-compare has one-sided keys: " + cmp.summary());
      (void)cmp.summary();
    } catch (const yoco::InputError& e) {
      // Only the documented case: no rows at all is fine; an accepted file
      // never repeats a key, so nothing else may be refused.
      if (!rows.empty()) yoco::fuzz::finding(std::string("self-compare refused an accepted file: ") + e.what());
    } catch (const std::exception& e) {
      yoco::fuzz::finding(std::string("non-InputError exception from compare_results: ") + e.what());
    }
  }
  // What the writer makes of the accepted rows must read back as those rows,
  // in order, every column equal (compare --exact and the plots rely on it).
  std::ostringstream out;
  yoco::cli::write_results_csv(out, rows);
  const std::string text = out.str();
  yoco::fuzz::write_file(path, reinterpret_cast<const uint8_t*>(text.data()), text.size());
  std::vector<yoco::cli::ResultRow> again;
  try {
    again = yoco::cli::read_results_csv(path);
  } catch (const std::exception& e) {
    yoco::fuzz::finding(std::string("accepted rows, written back, do not read back: ") + e.what());
  }
  if (again.size() != rows.size()) yoco::fuzz::finding("rows written back read back as a different count");
  for (size_t i = 0; i < rows.size(); ++i) {
    const std::string column = first_difference(rows[i], again[i]);
    if (!column.empty())
      yoco::fuzz::finding("row " + std::to_string(i + 1) + " written back reads back with another " + column +
                          " (" + yoco::cli::result_key(rows[i]) + ")");
  }
  return 0;
}
