#include "lists.hpp"

#include <algorithm>

#include "args.hpp"
#include "errors.hpp"

namespace yoco::cli {

std::vector<std::string> split_list(const std::string& option, const std::string& text) {
  std::vector<std::string> out;
  size_t start = 0;
  while (true) {
    const size_t comma = text.find(',', start);
    std::string item = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    item.erase(0, item.find_first_not_of(" \t"));
    item.erase(item.find_last_not_of(" \t") + 1);
    if (item.empty()) throw InputError(option + ": empty item in '" + text + "'");
    out.push_back(item);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

int64_t parse_length(const std::string& option, std::string text, int64_t max) {
  // Messages quote the length as given and the bound as a length: the number
  // without its suffix against max / scale read "--prompt-len 2M: must be <= 1,
  // got 2" and "--lengths 1KK: expected an integer, got '1K'".
  const std::string given = text;
  int64_t scale = 1;
  const char last = text.empty() ? '\0' : text.back();
  if (last == 'K' || last == 'k') scale = 1024;
  else if (last == 'M' || last == 'm') scale = 1024 * 1024;
  if (scale != 1) text.pop_back();
  const bool negative = !text.empty() && text[0] == '-';
  const std::string digits = negative ? text.substr(1) : text;
  if (digits.empty() || digits.find_first_not_of("0123456789") != std::string::npos)
    throw InputError(option + ": expected a length (an integer, K = 1024, M = 1048576), got '" + given + "'");
  // Past 18 significant digits is past every bound (and int64): no parse needed to say so.
  const size_t lead = std::min(digits.find_first_not_of('0'), digits.size());
  const bool huge = digits.size() - lead > 18;
  const int64_t v = huge ? 0 : std::stoll(digits);
  if (negative || (!huge && v < 1)) throw InputError(option + ": must be >= 1, got " + given);
  if (huge || v > max / scale) {
    const std::string bound = length_label(max);
    throw InputError(option + ": must be <= " + bound + (bound == std::to_string(max) ? "" : " (" + std::to_string(max) + ")") +
                     ", got " + given);
  }
  return v * scale;
}

int64_t parse_count(const std::string& option, const std::string& text, int64_t max) {
  if (!text.empty() && text.find_first_not_of('0') == std::string::npos) return 0;
  try {
    return parse_length(option, text, max);
  } catch (const InputError&) {
    throw InputError(option + ": expected a count (an integer >= 0, K = 1024, M = 1048576) at most " +
                     length_label(max) + ", got '" + text + "'");
  }
}

std::vector<int64_t> parse_length_list(const std::string& option, const std::string& text) {
  constexpr int64_t kMax = int64_t{1} << 40;
  std::vector<int64_t> out;
  for (const std::string& item : split_list(option, text)) {
    const int64_t n = parse_length(option, item, kMax);
    // Rejected rather than merged: a repeated length is most likely a typo for
    // another one, and measuring it twice would write duplicate rows, which
    // `yoco compare` refuses as a malformed file.
    for (int64_t seen : out)
      if (seen == n)
        throw InputError(option + ": length " + length_label(n) + " appears twice in '" + text +
                         "' (each point is measured once)");
    out.push_back(n);
  }
  return out;
}

std::vector<std::string> split_unique_list(const std::string& option, const std::string& text) {
  auto out = split_list(option, text);
  for (size_t i = 0; i < out.size(); ++i)
    for (size_t j = 0; j < i; ++j)
      if (out[i] == out[j])
        throw InputError(option + ": '" + out[i] + "' appears twice in '" + text + "' (each point is measured once)");
  return out;
}

std::string length_label(int64_t n) {
  if (n >= 1048576 && n % 1048576 == 0) return std::to_string(n / 1048576) + "M";
  if (n >= 1024 && n % 1024 == 0) return std::to_string(n / 1024) + "K";
  return std::to_string(n);
}

}  // namespace yoco::cli
