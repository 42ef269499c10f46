#include "result_row.hpp"

#include <unistd.h>

#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <nlohmann/json.hpp>

#include "atomic_file.hpp"
#include "errors.hpp"

#ifndef YOCO_SOURCE_DIR
#define YOCO_SOURCE_DIR "."
#endif

namespace yoco::cli {

const std::vector<std::string>& result_columns() {
  static const std::vector<std::string> cols = {
      "git_sha", "timestamp", "host",   "device", "device_name", "driver", "model",   "seq_len", "batch", "gen_tokens",
      "phase",   "metric",    "value",  "unit",   "method",      "repeats", "min",    "max",     "notes"};
  return cols;
}

namespace {

// Output of a shell command, trailing newline stripped; "" on failure.
std::string command_output(const std::string& cmd) {
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return out;
  std::array<char, 256> buf{};
  while (fgets(buf.data(), buf.size(), p)) out += buf.data();
  if (pclose(p) != 0) return "";
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
  return out;
}

std::string git_revision() {
  if (const char* env = std::getenv("YOCO_GIT_SHA"); env && *env) return env;
  const std::string dir = YOCO_SOURCE_DIR;
  const std::string sha = command_output("git -C '" + dir + "' rev-parse --short=12 HEAD 2>/dev/null");
  if (sha.empty()) return "unknown";
  const std::string dirty = command_output("git -C '" + dir + "' status --porcelain --untracked-files=no 2>/dev/null");
  return dirty.empty() ? sha : sha + "-dirty";
}

std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string host_name() {
  char buf[256] = {};
  if (gethostname(buf, sizeof buf - 1) != 0) return "unknown";
  return buf;
}

}  // namespace

Provenance Provenance::here(const std::string& device, const std::string& device_name, const std::string& driver) {
  static const std::string sha = git_revision();  // one git call per process
  return {sha, utc_now(), host_name(), device, device_name, driver};
}

ResultRow make_row(const Provenance& prov, const std::string& model, int64_t seq_len, int64_t batch,
                   int64_t gen_tokens, const std::string& phase, const std::string& metric,
                   std::optional<double> value, const std::string& unit, const std::string& method, int64_t repeats,
                   const std::string& notes) {
  ResultRow r;
  r.prov = prov;
  r.model = model;
  r.seq_len = seq_len;
  r.batch = batch;
  r.gen_tokens = gen_tokens;
  r.phase = phase;
  r.metric = metric;
  r.value = value;
  r.unit = unit;
  r.method = method;
  r.repeats = repeats;
  r.min = r.max = value;
  r.notes = notes;
  return r;
}

std::string result_key(const ResultRow& r) {
  return r.model + "|" + r.prov.device_name + "|" + std::to_string(r.seq_len) + "|" + std::to_string(r.batch) + "|" +
         std::to_string(r.gen_tokens) + "|" + r.phase + "|" + r.metric;
}

int method_rank(const std::string& method) {
  static const char* order[] = {"exact", "measured", "sampled", "extrapolated", "analytic"};
  for (int i = 0; i < 5; ++i)
    if (method == order[i]) return i;
  return 5;
}

namespace {

// Readers take one record per line (fast-cpp-csv-parser does), so free text
// such as an exception message must not carry line breaks.
std::string one_line(std::string s) {
  for (char& c : s)
    if (c == '\n' || c == '\r') c = ' ';
  return s;
}

}  // namespace

std::string csv_field(const std::string& s) {
  // The reader trims spaces and tabs around an unquoted field: one that starts
  // or ends with them is quoted, so that it reads back as written.
  const bool edge_space = !s.empty() && (s.front() == ' ' || s.front() == '\t' || s.back() == ' ' || s.back() == '\t');
  if (!edge_space && s.find_first_of(",\"\r\n") == std::string::npos) return s;
  std::string q = "\"";
  for (char c : s) {
    if (c == '"') q += '"';
    q += c;
  }
  return q + "\"";
}

std::string format_value(std::optional<double> v) {
  if (!v || std::isnan(*v)) return "";
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", *v);
  return buf;
}

void write_results_csv(std::ostream& os, const std::vector<ResultRow>& rows) {
  const auto& cols = result_columns();
  for (size_t i = 0; i < cols.size(); ++i) os << (i ? "," : "") << cols[i];
  os << "\n";
  for (const auto& r : rows) {
    const std::vector<std::string> f = {r.prov.git_sha,
                                        r.prov.timestamp,
                                        r.prov.host,
                                        r.prov.device,
                                        r.prov.device_name,
                                        r.prov.driver,
                                        r.model,
                                        std::to_string(r.seq_len),
                                        std::to_string(r.batch),
                                        std::to_string(r.gen_tokens),
                                        r.phase,
                                        r.metric,
                                        format_value(r.value),
                                        r.unit,
                                        r.method,
                                        std::to_string(r.repeats),
                                        format_value(r.min),
                                        format_value(r.max),
                                        one_line(r.notes)};
    for (size_t i = 0; i < f.size(); ++i) os << (i ? "," : "") << csv_field(f[i]);
    os << "\n";
  }
}

void write_results_json(std::ostream& os, const std::vector<ResultRow>& rows) {
  nlohmann::ordered_json arr = nlohmann::ordered_json::array();
  auto num = [](std::optional<double> v) -> nlohmann::ordered_json {
    if (!v || std::isnan(*v)) return nullptr;
    return *v;
  };
  for (const auto& r : rows) {
    nlohmann::ordered_json o;
    o["git_sha"] = r.prov.git_sha;
    o["timestamp"] = r.prov.timestamp;
    o["host"] = r.prov.host;
    o["device"] = r.prov.device;
    o["device_name"] = r.prov.device_name;
    o["driver"] = r.prov.driver;
    o["model"] = r.model;
    o["seq_len"] = r.seq_len;
    o["batch"] = r.batch;
    o["gen_tokens"] = r.gen_tokens;
    o["phase"] = r.phase;
    o["metric"] = r.metric;
    o["value"] = num(r.value);
    o["unit"] = r.unit;
    o["method"] = r.method;
    o["repeats"] = r.repeats;
    o["min"] = num(r.min);
    o["max"] = num(r.max);
    o["notes"] = r.notes;
    arr.push_back(std::move(o));
  }
  // A file name (a --model config, a check's input) or a --device-name need not
  // be UTF-8, which JSON strings must be: such bytes become U+FFFD rather than
  // nlohmann's type_error 316 (exit 1 after the whole run).
  os << arr.dump(1, ' ', false, nlohmann::ordered_json::error_handler_t::replace) << "\n";
}

void save_results_csv(const std::string& path, const std::vector<ResultRow>& rows) {
  const std::filesystem::path p(path);
  std::error_code ec;
  if (p.has_parent_path()) std::filesystem::create_directories(p.parent_path(), ec);
  std::ostringstream csv;
  write_results_csv(csv, rows);
  write_file_atomically(path, csv.str());  // a failed write leaves any earlier file intact
}

}  // namespace yoco::cli
