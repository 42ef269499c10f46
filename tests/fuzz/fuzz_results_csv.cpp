// libFuzzer target: the result CSV reader (bench/results/result_csv.hpp), then
// `yoco compare`'s judgement of the parsed file against itself
// (bench/results/compare.hpp). InputError is the expected outcome of bad
// input; any other exception, a crash or a sanitizer report is a finding. A
// file compared with itself must have every key in both and no failure, with
// or without --exact / --strict; rows written back must read back.
#include <exception>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "compare.hpp"
#include "errors.hpp"
#include "fuzz_common.hpp"
#include "result_csv.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string& path = yoco::fuzz::scratch_path(".csv");
  yoco::fuzz::write_file(path, data, size);
  std::vector<yoco::cli::ResultRow> rows;
  try {
    rows = yoco::cli::read_results_csv(path);
  } catch (const yoco::InputError&) {
    return 0;  // expected for malformed input
  } catch (const std::exception& e) {
    yoco::fuzz::finding(std::string("non-InputError exception from read_results_csv: ") + e.what());
  } catch (...) {
    yoco::fuzz::finding("non-std exception from read_results_csv");
  }
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
  // What the writer makes of the accepted rows must be readable again.
  std::ostringstream out;
  yoco::cli::write_results_csv(out, rows);
  const std::string text = out.str();
  yoco::fuzz::write_file(path, reinterpret_cast<const uint8_t*>(text.data()), text.size());
  try {
    const auto again = yoco::cli::read_results_csv(path);
    if (again.size() != rows.size()) yoco::fuzz::finding("rows written back read back as a different count");
  } catch (const std::exception& e) {
    yoco::fuzz::finding(std::string("accepted rows, written back, do not read back: ") + e.what());
  }
  return 0;
}
