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

// ------------------------------------------------------------- --noise-floor --
// BASE and NEW are two runs of the same build on the same device: instead of
// verdicts, how far the values moved between them, per metric and phase family
// (the phase up to its first '.' or ':'), and the gate threshold that noise
// supports (issue 16, the GPU CI recipe; reports/SCHEMA.md "Noise floor").

// How a metric is judged: by its unit, and for counted units by its method. The ratios of counted
// values (memory_reduction, kv_cache_reduction; unit x) are counted too, not timed.
enum class NoiseKind {
  Timed,          // s, tokens/s, fraction, TFLOP/s, GB/s, x: noisy, gated at the recommended threshold
  Counted,        // B, FLOP, count, B/token, the ratios above, not timed (exact, analytic): must be bit-identical
  MeasuredCount,  // a counted unit read from a run (measured, sampled, extrapolated), e.g. peak RSS: shown only
  Other,          // any other unit: shown only
};
NoiseKind noise_kind(const std::string& unit, const std::string& method, const std::string& metric);
const char* noise_kind_name(NoiseKind k);  // "timed", "counted", "measured count", "other"

// The recommended thresholds, as fractions (1% ... 50%).
inline constexpr double kNoiseThresholdLadder[] = {0.01, 0.02, 0.03, 0.05, 0.07, 0.10,
                                                   0.15, 0.20, 0.25, 0.35, 0.50};
// The smallest ladder step >= 2 x `max_change`; none when even 50% is below it.
std::optional<double> recommended_threshold(double max_change);

struct NoiseMetric {
  std::string family, metric, unit;
  NoiseKind kind = NoiseKind::Other;
  size_t keys = 0;       // keys in both files with a value in both
  size_t differing = 0;  // of those, keys whose values are not bit-identical
  double median_change = 0, max_change = 0;  // |(new - base) / base| over the keys (inf from a zero base)
  // max over both files' rows of max(max - value, value - min) / |value|; none when no row has min/max
  std::optional<double> max_spread;
  bool gated = false;        // Timed and 2 x max_change within the ladder: its metric is in the gate command
  std::string first_change;  // Counted and differing: the first such key with both values
};

struct NoiseFloor {
  std::vector<NoiseMetric> metrics;  // by phase family, then metric, in order of first appearance
  size_t keys = 0;                   // keys in both files with a value in both
  size_t unpaired = 0;               // keys in one file only, or without a value in one: not counted
  // Over the timing metrics that can be gated (a metric whose own 2 x max |change| exceeds the ladder's top
  // is left out of the gate: `too_noisy`, and every family of it with it):
  std::optional<double> threshold;         // the recommended --threshold; none when nothing can be gated
  double largest_change = 0;               // the largest max |change| among them
  std::string largest_at;                  // "family/metric" of that
  std::vector<std::string> gate_metrics;   // metric names, in order of first appearance
  std::vector<std::string> too_noisy;      // metric names left out
  size_t counted_differing() const;        // Counted metrics with differing > 0
  bool failed() const { return counted_differing() > 0; }
  // "yoco compare BASE.csv NEW.csv --threshold 3% --metrics 'a,b'" ("" when no threshold).
  std::string gate_command() const;
};

// The phase family: "prefill.gemm" -> "prefill", "decode:flash_decode" -> "decode".
std::string phase_family(const std::string& phase);

// Joins as compare_results does (the same --metrics/--phases filters and the
// same InputErrors: duplicate keys, no key in common); opt.threshold, exact
// and strict are not used.
NoiseFloor noise_floor(const std::vector<ResultRow>& base, const std::vector<ResultRow>& head,
                       const CompareOptions& opt);

// The --threshold syntax: "N%" or a plain "N", both meaning N percent
// (so "0.05" is 0.05%, not 5%). Returns the fraction; InputError naming
// `option` unless N is a finite number >= 0.
double parse_threshold(const std::string& option, const std::string& text);


}  // namespace yoco::cli
