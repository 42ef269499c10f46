#pragma once
// Where a command's result rows go: --out FILE.csv (always CSV) and stdout in
// --format table (the command's own human-readable table), csv or json.
#include <functional>
#include <string>
#include <vector>

#include "args.hpp"
#include "result_row.hpp"

namespace yoco::cli {

enum class OutputFormat { table, csv, json };
OutputFormat parse_output_format(const ParsedArgs& a);  // --format, default table

// Before long work: `path`'s folder is created if missing and a file can be
// written there (InputError naming the path otherwise), so that an unwritable
// output is said at once, not after the measurements.
void prepare_output_path(const std::string& path);

// InputError when `out` (the path given to `option`) is the file `input`
// already names (the same file by any path: a link, ./x): writing it would
// replace the input the command reads. `what` says what the input is.
void refuse_output_over_input(const std::string& option, const std::string& out, const std::string& input,
                              const std::string& what);

// Writes --out if given (and says so on stderr), then prints the rows to
// stdout in `format`; for table, calls `print_table`.
void emit_rows(const ParsedArgs& a, OutputFormat format, const std::vector<ResultRow>& rows,
               const std::function<void()>& print_table);

}  // namespace yoco::cli
