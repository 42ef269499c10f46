#pragma once
// One row of a result CSV (reports/SCHEMA.md, DESIGN.md §5): the single
// definition of the columns, shared by the writers (bench, model) and the
// reader (compare). Values are doubles; "no value" (a point that did not run)
// is std::nullopt and is written as an empty field.
#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

namespace yoco::cli {

// The header, in order.
const std::vector<std::string>& result_columns();

// Where and when a set of rows was produced: the same for every row of a run.
struct Provenance {
  std::string git_sha, timestamp, host, device, device_name, driver;
  // git revision of the source tree (YOCO_GIT_SHA overrides), UTC now, host
  // name; device fields left for the caller.
  static Provenance here(const std::string& device, const std::string& device_name, const std::string& driver);
};

struct ResultRow {
  Provenance prov;
  std::string model;
  int64_t seq_len = 0, batch = 1, gen_tokens = 0;
  std::string phase, metric;
  std::optional<double> value;
  std::string unit, method;
  int64_t repeats = 0;
  std::optional<double> min, max;
  std::string notes;
};

// A row of `prov` with min = max = value (one value, or an exact one); callers
// set min/max afterwards for timings with a spread.
ResultRow make_row(const Provenance& prov, const std::string& model, int64_t seq_len, int64_t batch,
                   int64_t gen_tokens, const std::string& phase, const std::string& metric,
                   std::optional<double> value, const std::string& unit, const std::string& method, int64_t repeats,
                   const std::string& notes);

// The comparison key of reports/SCHEMA.md: model, device_name, seq_len, batch,
// gen_tokens, phase, metric (joined with '|', for maps and messages).
std::string result_key(const ResultRow& r);

// "measured" < "sampled" < "extrapolated" < "analytic" (weaker = larger); others rank last.
int method_rank(const std::string& method);

// CSV (RFC 4180 quoting where a field needs it), with the header.
void write_results_csv(std::ostream& os, const std::vector<ResultRow>& rows);
// One field, quoted if it contains ',', '"', CR or LF.
std::string csv_field(const std::string& s);
// %.17g, or "" for nullopt / NaN.
std::string format_value(std::optional<double> v);
// A JSON array of objects with the same keys as the CSV columns (null for no value).
void write_results_json(std::ostream& os, const std::vector<ResultRow>& rows);

// Writes `rows` to `path` as CSV (creating parent directories); InputError if it cannot.
void save_results_csv(const std::string& path, const std::vector<ResultRow>& rows);

}  // namespace yoco::cli
