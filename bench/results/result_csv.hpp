#pragma once
// Reading result CSVs (reports/SCHEMA.md) back into ResultRow: the inverse of
// write_results_csv, strict enough to serve as the input check of a CI gate.
#include <string>
#include <vector>

#include "result_row.hpp"

namespace yoco::cli {

// The rows of `path`, in file order. The header must name each column of
// result_columns() once, in any order, and no other; blank lines are
// skipped; a record must fit on one line (fccp is line-based). Numbers are
// parsed exactly (correctly rounded, so a %.17g value reads back
// bit-for-bit); an empty value/min/max is "no value". InputError naming the
// file, and the line where there is one, for: a missing, unreadable or empty
// file, or a binary one (a NUL byte in its first 64 KiB); a header that is not
// ours; a row with too few or too many fields, an unclosed quote, a
// non-numeric or non-finite number, min above max or a value outside [min,
// max], a negative or non-integer seq_len/batch/gen_tokens/repeats, an empty
// model/phase/metric; a method not in reports/SCHEMA.md's table, an empty value under a method that
// carries one (measured, sampled, extrapolated, analytic, calibrated, exact, paper) or a value under
// one of a point that did not run (over_budget, out_of_memory, failed, skipped); two rows with the
// same result_key (both lines named).
std::vector<ResultRow> read_results_csv(const std::string& path);

}  // namespace yoco::cli
