#pragma once
// `yoco compare`'s judgement: join two sets of result rows on result_key and
// give each pair a verdict (reports/SCHEMA.md "Direction"). No I/O here, so
// that the policy can be tested on rows built in memory.
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "lists.hpp"  // split_list

#include "result_row.hpp"

namespace yoco::cli {

// Which way is better for a metric. Unknown metrics are judged as
// lower-is-better (a new time- or byte-like metric that grows then fails the
// gate instead of passing silently) and shown with direction "?".
enum class Direction { Lower, Higher, Unknown };
Direction metric_direction(const std::string& metric);
const char* direction_name(Direction d);  // "lower", "higher", "?"

enum class Verdict {
  Same,      // within the threshold, or within the rows' own [min, max] noise
  Better,    // beyond both, in the good direction
  Worse,     // beyond both, in the bad direction: a failure
  Changed,   // --exact: any difference at all: a failure
  NotRun,    // in both files, but without a value in at least one
  OnlyBase,  // key only in BASE
  OnlyNew,   // key only in NEW
};
const char* verdict_name(Verdict v);  // "SAME", "BETTER", ..., "ONLY_NEW"

struct CompareOptions {
  double threshold = 0.05;  // relative change, as a fraction (0.05 = 5%)
  bool exact = false;       // any bit of difference is CHANGED; threshold and noise ignored
  bool strict = false;      // ONLY_BASE, ONLY_NEW and lost values (base ran, new did not) fail
  // fnmatch globs; a row is compared when its metric (phase) matches any one.
  // Empty: all. A glob that matches no row of either file is an InputError
  // (a typo would otherwise make the gate pass vacuously), and so are
  // filters that together select nothing.
  std::vector<std::string> metrics, phases;
};

struct RowComparison {
  std::optional<ResultRow> base, head;  // head: the row of NEW.csv
  Direction direction = Direction::Unknown;
  Verdict verdict = Verdict::Same;
  std::optional<double> change;  // (new - base) / |base| when both have a value; +-inf when base is 0
  bool fails = false;            // counts towards exit status 1
  std::string note;              // why SAME despite the threshold, what did not run, method/unit changes

  const ResultRow& key_row() const { return base ? *base : *head; }
};

struct Comparison {
  std::vector<RowComparison> rows;  // BASE order, then rows only in NEW in NEW order
  size_t count(Verdict v) const;
  size_t failures() const;
  bool failed() const { return failures() > 0; }
  // "N compared: a SAME, b BETTER, c WORSE, d CHANGED, e NOT_RUN; f ONLY_BASE, g ONLY_NEW"
  // (N = keys present in both files).
  std::string summary() const;
};

// InputError if either side repeats a key (read_results_csv never returns such
// rows), and if the files have rows but no key in common: then every row is
// ONLY_BASE or ONLY_NEW and the gate would pass vacuously; the usual cause is
// a different device_name (runs from different machines) or model set.
Comparison compare_results(const std::vector<ResultRow>& base, const std::vector<ResultRow>& head,
                           const CompareOptions& opt);

// The --threshold syntax: "N%" or a plain "N", both meaning N percent
// (so "0.05" is 0.05%, not 5%). Returns the fraction; InputError naming
// `option` unless N is a finite number >= 0.
double parse_threshold(const std::string& option, const std::string& text);


}  // namespace yoco::cli
