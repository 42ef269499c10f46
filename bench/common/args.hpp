#pragma once
// A tiny command-line option parser: `--name VALUE`, `--name=VALUE`, flags and
// positional arguments, described by a table so that the help text and the
// parser cannot disagree. Every mistake (unknown option, missing value,
// repeated option, bad number) is an InputError naming the option: exit 2.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace yoco::cli {

struct OptionSpec {
  std::string name;        // "--model"
  std::string value_name;  // "PRESET|FILE.json"; empty for a flag
  std::string help;        // one line; mention the default here
};

struct CommandSpec {
  std::string path;     // "yoco forward": used in messages
  std::string usage;    // the synopsis after "usage: "
  std::string summary;  // one or two sentences
  std::vector<OptionSpec> options;
  int min_positional = 0, max_positional = 0;
  std::string notes;  // free text printed after the options
};

class ParsedArgs {
 public:
  bool has(const std::string& name) const { return values_.count(name) != 0; }
  std::optional<std::string> get(const std::string& name) const;
  std::string get_or(const std::string& name, const std::string& fallback) const;
  // InputError "<cmd>: missing required option --name" when absent.
  std::string require(const std::string& name) const;
  // Integer option in [min, max]; `fallback` when absent.
  int64_t get_int(const std::string& name, int64_t fallback, int64_t min, int64_t max) const;
  int64_t require_int(const std::string& name, int64_t min, int64_t max) const;
  uint64_t get_u64(const std::string& name, uint64_t fallback) const;
  const std::vector<std::string>& positional() const { return positional_; }
  // InputError unless at most one of `names` is present (exactly one if `required`).
  void exclusive(const std::vector<std::string>& names, bool required) const;

 private:
  friend ParsedArgs parse_args(const CommandSpec&, const std::vector<std::string>&);
  std::string command_;
  std::map<std::string, std::string> values_;  // flags map to ""
  std::vector<std::string> positional_;
};

ParsedArgs parse_args(const CommandSpec& spec, const std::vector<std::string>& args);

// True when any argument is --help or -h (help wins over every other mistake).
bool wants_help(const std::vector<std::string>& args);
std::string help_text(const CommandSpec& spec);
// Prints the command's help to stdout when asked for; true if it did.
bool print_help_if_asked(const CommandSpec& spec, const std::vector<std::string>& args);

// Strict number parsing of a whole string: InputError "<option>: ..." otherwise.
int64_t parse_int(const std::string& option, const std::string& text, int64_t min, int64_t max);
uint64_t parse_u64(const std::string& option, const std::string& text);
// A finite decimal number, the whole string ("0.25", "1e-3", "-2"); nullopt for
// anything else: hex ("0x10"), spaces, a sign '+', "inf", "nan". The callers
// say what they expected. (std::stod took " 1" and "0x10" as 1 and 16.)
std::optional<double> parse_decimal(const std::string& text);

}  // namespace yoco::cli
