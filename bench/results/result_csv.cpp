#include "result_csv.hpp"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>  // csv.h uses std::numeric_limits without including <limits>
#include <map>
#include <utility>

// Result files are small: a reader thread buys nothing.
#define CSV_IO_NO_THREAD
// fccp copies file names with strncpy into fixed buffers, which GCC flags
// when it inlines them here; the truncation is fccp's documented behaviour.
// (clang, the sanitize preset's compiler, has no such warning.)
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstringop-truncation"
#endif
#include <csv.h>
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

#include "errors.hpp"

namespace yoco::cli {

namespace {

constexpr unsigned kColumns = 19;
// Fields are read as text and converted here, not by fccp: its float parser
// is not correctly rounded (a %.17g value would not read back bit-for-bit,
// which `compare --exact` relies on), and it reads "" as 0 and "1,5" as 1.5.
using Reader = io::CSVReader<kColumns, io::trim_chars<' ', '\t'>, io::double_quote_escape<',', '"'>,
                             io::throw_on_overflow, io::empty_line_comment>;
using Fields = std::array<std::string, kColumns>;

template <size_t... I>
void read_header(Reader& r, io::ignore_column policy, std::index_sequence<I...>) {
  const auto& c = result_columns();
  r.read_header(policy, c[I]...);
}

template <size_t... I>
bool read_row(Reader& r, Fields& f, std::index_sequence<I...>) {
  return r.read_row(f[I]...);
}

constexpr auto kAll = std::make_index_sequence<kColumns>{};

std::string at_line(const std::string& path, long line) {
  return line > 0 ? path + ": line " + std::to_string(line) : path;
}

// fccp's exceptions carry a file name truncated to 255 characters and, for
// header errors, no line: rebuild the message from our own path and line.
[[noreturn]] void throw_input_error(const std::string& path, long line) {
  try {
    throw;
  } catch (const io::error::can_not_open_file& e) {
    throw InputError("cannot open " + path + (e.errno_value ? std::string(": ") + std::strerror(e.errno_value) : ""));
  } catch (const io::error::header_missing&) {
    throw InputError(path + " is empty: expected a result CSV (header git_sha,timestamp,...,notes; reports/SCHEMA.md)");
  } catch (const io::error::extra_column_in_header& e) {
    throw InputError(path + " is not a result CSV: header (line " + std::to_string(line) + ") has column '" +
                     std::string(e.column_name) + "', which is not one of the " + std::to_string(kColumns) +
                     " columns of reports/SCHEMA.md");
  } catch (const io::error::duplicated_column_in_header& e) {
    throw InputError(at_line(path, line) + ": header names column '" + std::string(e.column_name) + "' twice");
  } catch (const io::error::too_few_columns&) {
    throw InputError(at_line(path, line) + ": too few fields (a result row has " + std::to_string(kColumns) + ")");
  } catch (const io::error::too_many_columns&) {
    throw InputError(at_line(path, line) + ": too many fields (a result row has " + std::to_string(kColumns) +
                     "; quote a field that contains ',')");
  } catch (const io::error::escaped_string_not_closed&) {
    throw InputError(at_line(path, line) + ": a quoted field is not closed on this line");
  } catch (const io::error::line_length_limit_exceeded&) {
    throw InputError(at_line(path, line) + ": line longer than 16 MiB");
  } catch (const io::error::base& e) {
    throw InputError(at_line(path, line) + ": " + e.what());
  }
}

// Where a field came from, for messages.
struct Where {
  const std::string& path;
  long line;
  std::string column(size_t i) const {
    return at_line(path, line) + ": column '" + result_columns()[i] + "'";
  }
};

std::optional<double> parse_number(const Where& w, size_t col, const std::string& s) {
  if (s.empty()) return std::nullopt;
  double v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec == std::errc::result_out_of_range)
    throw InputError(w.column(col) + ": '" + s + "' is out of range of a double");
  if (ec != std::errc() || end != s.data() + s.size())
    throw InputError(w.column(col) + ": '" + s + "' is not a number");
  // The writers never produce NaN or infinities (no value is written as ""),
  // and a relative change against one would be meaningless.
  if (!std::isfinite(v)) throw InputError(w.column(col) + ": '" + s + "' is not a finite number");
  return v;
}

int64_t parse_count(const Where& w, size_t col, const std::string& s) {
  int64_t v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty()) throw InputError(w.column(col) + " is empty (expected an integer)");
  if (ec != std::errc() || end != s.data() + s.size() || v < 0)
    throw InputError(w.column(col) + ": '" + s + "' is not a non-negative integer");
  return v;
}

const std::string& required_text(const Where& w, size_t col, const std::string& s) {
  if (s.empty()) throw InputError(w.column(col) + " is empty");
  return s;
}

// [min, max] is the spread of the repeats (or a band) around value: reversed,
// or not holding the value, it is a corrupt row, and compare's noise rule and
// the plots' error bars would read it as given.
void check_range(const Where& w, const ResultRow& r, const Fields& f) {
  if (r.min && r.max && *r.min > *r.max)
    throw InputError(w.column(16) + ": " + f[16] + " is above max " + f[17]);
  if (r.value && r.min && *r.value < *r.min)
    throw InputError(w.column(12) + ": " + f[12] + " is below min " + f[16]);
  if (r.value && r.max && *r.value > *r.max)
    throw InputError(w.column(12) + ": " + f[12] + " is above max " + f[17]);
}

// reports/SCHEMA.md "Methods": those that carry a value, and those of a point that did not run (value
// empty). A method outside both, or a value that contradicts its method, is a row no writer of ours
// makes: compare would judge a 'guessed' value, or call a 'measured' row without one NOT_RUN.
constexpr const char* kValueMethods[] = {"measured", "sampled",    "extrapolated", "analytic",
                                         "calibrated", "exact",    "paper"};
constexpr const char* kNotRunMethods[] = {"over_budget", "out_of_memory", "failed", "skipped"};

void check_method(const Where& w, const ResultRow& r) {
  const auto in = [&](const auto& list) {
    return std::any_of(std::begin(list), std::end(list), [&](const char* m) { return r.method == m; });
  };
  if (in(kValueMethods)) {
    if (!r.value)
      throw InputError(w.column(12) + " is empty, but method '" + r.method +
                       "' says it was obtained (an empty value is for over_budget, out_of_memory, failed, skipped; "
                       "reports/SCHEMA.md)");
    return;
  }
  if (in(kNotRunMethods)) {
    if (r.value)
      throw InputError(w.column(12) + ": " + format_value(r.value) + ", but method '" + r.method +
                       "' says the point did not run (its value is empty; reports/SCHEMA.md)");
    return;
  }
  std::string all;
  for (const char* m : kValueMethods) all += std::string(all.empty() ? "" : ", ") + m;
  for (const char* m : kNotRunMethods) all += std::string(", ") + m;
  throw InputError(w.column(14) + ": '" + r.method + "' is not a method of reports/SCHEMA.md (" + all + ")");
}

ResultRow to_row(const Where& w, const Fields& f) {
  ResultRow r;
  r.prov = {f[0], f[1], f[2], f[3], f[4], f[5]};
  r.model = required_text(w, 6, f[6]);
  r.seq_len = parse_count(w, 7, f[7]);
  r.batch = parse_count(w, 8, f[8]);
  r.gen_tokens = parse_count(w, 9, f[9]);
  r.phase = required_text(w, 10, f[10]);
  r.metric = required_text(w, 11, f[11]);
  r.value = parse_number(w, 12, f[12]);
  r.unit = f[13];
  r.method = f[14];
  r.repeats = parse_count(w, 15, f[15]);
  r.min = parse_number(w, 16, f[16]);
  r.max = parse_number(w, 17, f[17]);
  r.notes = f[18];
  check_range(w, r, f);
  check_method(w, r);
  return r;
}

// Missing columns first, so that a foreign CSV is called that rather than
// blamed for its first unknown column.
void check_no_missing_column(const std::string& path) {
  Reader probe(path);
  try {
    read_header(probe, io::ignore_missing_column | io::ignore_extra_column, kAll);
  } catch (const io::error::base&) {
    throw_input_error(path, probe.get_file_line());
  }
  for (const auto& c : result_columns())
    if (!probe.has_column(c))
      throw InputError(path + " is not a result CSV: header (line " + std::to_string(probe.get_file_line()) +
                       ") lacks column '" + c + "' (reports/SCHEMA.md)");
}

// A NUL byte in the first 64 KiB: a binary file (safetensors, an image, a
// compressed CSV). fccp reads a leading NUL as the end of the line, so a file
// of zeros was reported as empty and others as lacking 'git_sha'.
void refuse_binary(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return;  // the reader says why it cannot open it
  std::array<char, 65536> head{};
  in.read(head.data(), head.size());
  const auto n = static_cast<size_t>(in.gcount());
  const auto nul = std::find(head.begin(), head.begin() + static_cast<std::ptrdiff_t>(n), '\0');
  if (nul != head.begin() + static_cast<std::ptrdiff_t>(n))
    throw InputError(path + " is not a text CSV: it holds binary data (a NUL byte at offset " +
                     std::to_string(nul - head.begin()) + "); expected a result CSV (reports/SCHEMA.md)");
}

// A regular file whose last byte is not a line break was cut short inside its last row (a copy or
// transfer interrupted): fccp reads what is there, so a cut inside the notes (the last column, whose
// words are read back: "prefill chunk 16384" cut to "prefill chunk 163") passed as a whole row.
void refuse_cut_short(const std::string& path, long last_line) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return;
  const auto size = std::filesystem::file_size(path, ec);
  if (ec || size == 0) return;
  std::ifstream in(path, std::ios::binary);
  char last = '\n';
  if (!in.seekg(static_cast<std::streamoff>(size) - 1) || !in.get(last)) return;
  if (last != '\n')
    throw InputError(at_line(path, last_line) +
                     ": the file does not end with a line break: its last row is cut short (reports/SCHEMA.md)");
}

}  // namespace

std::vector<ResultRow> read_results_csv(const std::string& path) {
  if (result_columns().size() != kColumns) throw std::logic_error("read_results_csv: column count changed");
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) throw InputError("cannot read " + path + ": it is a directory");
  refuse_binary(path);
  std::vector<ResultRow> rows;
  std::map<std::string, long> first_line;  // result_key -> line
  try {
    check_no_missing_column(path);
    Reader reader(path);
    try {
      read_header(reader, io::ignore_no_column, kAll);
      Fields f;
      while (read_row(reader, f, kAll)) {
        const long line = reader.get_file_line();
        ResultRow r = to_row(Where{path, line}, f);
        const auto [it, fresh] = first_line.emplace(result_key(r), line);
        if (!fresh)
          throw InputError(at_line(path, line) +
                           ": duplicate key: same model, device_name, seq_len, batch, gen_tokens, phase and metric "
                           "as line " +
                           std::to_string(it->second) + " (" + it->first + ")");
        rows.push_back(std::move(r));
      }
    } catch (const io::error::base&) {
      throw_input_error(path, reader.get_file_line());
    }
    refuse_cut_short(path, reader.get_file_line());
  } catch (const io::error::base&) {  // opening the file
    throw_input_error(path, 0);
  }
  return rows;
}

}  // namespace yoco::cli
