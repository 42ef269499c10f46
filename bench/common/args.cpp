#include "args.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <iostream>
#include <sstream>

#include "errors.hpp"

namespace yoco::cli {

namespace {

const OptionSpec* find_option(const CommandSpec& spec, const std::string& name) {
  for (const auto& o : spec.options)
    if (o.name == name) return &o;
  return nullptr;
}

std::string quoted(const std::string& s) { return "'" + s + "'"; }

// The positional arguments' names as the synopsis spells them ("BASE.csv
// NEW.csv"): the words after the command up to the first option or bracket,
// so that the error can name what is missing without pasting the (multi-line)
// usage.
std::vector<std::string> positional_names(const CommandSpec& spec) {
  std::istringstream words(spec.usage.compare(0, spec.path.size(), spec.path) == 0 ? spec.usage.substr(spec.path.size())
                                                                                   : std::string());
  std::vector<std::string> names;
  for (std::string w; words >> w && w[0] != '[' && w[0] != '-' && w[0] != '|';) names.push_back(w);
  return names;
}

std::string missing_positional(const CommandSpec& spec, int given) {
  const auto names = positional_names(spec);
  std::string what;
  if (static_cast<int>(names.size()) >= spec.min_positional)
    for (int i = given; i < spec.min_positional; ++i) what += (what.empty() ? " " : " and ") + names[i];
  else
    what = "s: " + std::to_string(spec.min_positional) + " needed, " + std::to_string(given) + " given";
  return spec.path + ": missing argument" + what + " (see " + spec.path + " --help)";
}

}  // namespace

int64_t parse_int(const std::string& option, const std::string& text, int64_t min, int64_t max) {
  int64_t v = 0;
  const char* b = text.data();
  const char* e = b + text.size();
  const auto [ptr, ec] = std::from_chars(b, e, v);
  if (text.empty() || ec == std::errc::invalid_argument || ptr != e)
    throw InputError(option + ": expected an integer, got " + quoted(text));
  if (ec == std::errc::result_out_of_range) throw InputError(option + ": " + text + " is out of range");
  if (v < min) throw InputError(option + ": must be >= " + std::to_string(min) + ", got " + text);
  if (v > max) throw InputError(option + ": must be <= " + std::to_string(max) + ", got " + text);
  return v;
}

uint64_t parse_u64(const std::string& option, const std::string& text) {
  uint64_t v = 0;
  const char* b = text.data();
  const char* e = b + text.size();
  const auto [ptr, ec] = std::from_chars(b, e, v);
  if (text.empty() || ec == std::errc::invalid_argument || ptr != e)
    throw InputError(option + ": expected a non-negative integer, got " + quoted(text));
  if (ec == std::errc::result_out_of_range) throw InputError(option + ": " + text + " does not fit in 64 bits");
  return v;
}

std::optional<double> parse_decimal(const std::string& text) {
  double v = 0;
  const char* b = text.data();
  const char* e = b + text.size();
  const auto [ptr, ec] = std::from_chars(b, e, v, std::chars_format::general);
  if (text.empty() || ec != std::errc() || ptr != e || !std::isfinite(v)) return std::nullopt;
  return v;
}

std::optional<std::string> ParsedArgs::get(const std::string& name) const {
  const auto it = values_.find(name);
  if (it == values_.end()) return std::nullopt;
  return it->second;
}

std::string ParsedArgs::get_or(const std::string& name, const std::string& fallback) const {
  const auto v = get(name);
  return v ? *v : fallback;
}

std::string ParsedArgs::require(const std::string& name) const {
  const auto v = get(name);
  if (!v) throw InputError(command_ + ": missing required option " + name + " (see " + command_ + " --help)");
  return *v;
}

int64_t ParsedArgs::get_int(const std::string& name, int64_t fallback, int64_t min, int64_t max) const {
  const auto v = get(name);
  return v ? parse_int(name, *v, min, max) : fallback;
}

int64_t ParsedArgs::require_int(const std::string& name, int64_t min, int64_t max) const {
  return parse_int(name, require(name), min, max);
}

uint64_t ParsedArgs::get_u64(const std::string& name, uint64_t fallback) const {
  const auto v = get(name);
  return v ? parse_u64(name, *v) : fallback;
}

void ParsedArgs::exclusive(const std::vector<std::string>& names, bool required) const {
  std::vector<std::string> present;
  for (const auto& n : names)
    if (has(n)) present.push_back(n);
  std::string list;
  for (size_t i = 0; i < names.size(); ++i) list += (i ? (i + 1 == names.size() ? " or " : ", ") : "") + names[i];
  if (present.size() > 1) throw InputError(command_ + ": give only one of " + list);
  if (required && present.empty()) throw InputError(command_ + ": give one of " + list + " (see " + command_ + " --help)");
}

ParsedArgs parse_args(const CommandSpec& spec, const std::vector<std::string>& args) {
  ParsedArgs out;
  out.command_ = spec.path;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a.size() > 2 && a.compare(0, 2, "--") == 0) {
      std::string name = a;
      std::optional<std::string> value;
      if (const auto eq = a.find('='); eq != std::string::npos) {
        name = a.substr(0, eq);
        value = a.substr(eq + 1);
      }
      const OptionSpec* o = find_option(spec, name);
      if (!o) throw InputError(spec.path + ": unknown option " + name + " (see " + spec.path + " --help)");
      if (out.values_.count(name)) throw InputError(spec.path + ": option " + name + " given more than once");
      if (o->value_name.empty()) {
        if (value) throw InputError(spec.path + ": option " + name + " takes no value");
        out.values_[name] = "";
        continue;
      }
      if (!value) {
        // A following "--x" is another option, not a value; "-1" is a value
        // (so that a negative count gets a message about its range).
        if (i + 1 >= args.size() || (args[i + 1].size() > 2 && args[i + 1].compare(0, 2, "--") == 0))
          throw InputError(spec.path + ": option " + name + " needs a value (" + o->value_name + ")");
        value = args[++i];
      }
      out.values_[name] = *value;
    } else if (a.size() > 1 && a[0] == '-' && a != "-") {
      throw InputError(spec.path + ": unknown option " + a + " (see " + spec.path + " --help)");
    } else {
      out.positional_.push_back(a);
    }
  }
  const int np = static_cast<int>(out.positional_.size());
  if (np > spec.max_positional)
    throw InputError(spec.path + ": unexpected argument '" + out.positional_[spec.max_positional] + "' (see " +
                     spec.path + " --help)");
  if (np < spec.min_positional) throw InputError(missing_positional(spec, np));
  return out;
}

bool wants_help(const std::vector<std::string>& args) {
  return std::any_of(args.begin(), args.end(), [](const std::string& a) { return a == "--help" || a == "-h"; });
}

std::string help_text(const CommandSpec& spec) {
  std::ostringstream s;
  s << "usage: " << spec.usage << "\n\n" << spec.summary << "\n";
  if (!spec.options.empty()) {
    s << "\noptions:\n";
    size_t width = 0;
    std::vector<std::string> heads;
    for (const auto& o : spec.options) {
      heads.push_back(o.value_name.empty() ? o.name : o.name + " " + o.value_name);
      width = std::max(width, heads.back().size());
    }
    heads.push_back("-h, --help");
    for (size_t i = 0; i < heads.size(); ++i) {
      std::string help = i < spec.options.size() ? spec.options[i].help : "print this help and exit";
      // A help of several lines continues under its first, in the help column.
      for (size_t at = help.find('\n'); at != std::string::npos; at = help.find('\n', at + 1))
        help.insert(at + 1, std::string(width + 4, ' '));
      s << "  " << heads[i] << std::string(width + 2 - std::min(width, heads[i].size()), ' ') << help << "\n";
    }
  }
  if (!spec.notes.empty()) s << "\n" << spec.notes << "\n";
  return s.str();
}

}  // namespace yoco::cli

namespace yoco::cli {
bool print_help_if_asked(const CommandSpec& spec, const std::vector<std::string>& args) {
  if (!wants_help(args)) return false;
  std::cout << help_text(spec);
  return true;
}
}  // namespace yoco::cli
