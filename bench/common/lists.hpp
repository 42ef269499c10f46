#pragma once
// Comma-separated option values: lengths with K/M suffixes, names.
#include <cstdint>
#include <string>
#include <vector>

namespace yoco::cli {

// "32K,64K,1M,5000" -> {32768, 65536, 1048576, 5000}: K = 1024, M = 1048576
// (the paper's 32K…1M are powers of two). InputError naming `option` for an
// empty item, a bad number or suffix, a value below 1 or above 2^40, a length
// given twice ("1K,1024").
std::vector<int64_t> parse_length_list(const std::string& option, const std::string& text);
// One such length ("4K", "200"), between 1 and `max`; InputError naming `option` otherwise.
int64_t parse_length(const std::string& option, std::string text, int64_t max);
// The same, where 0 is allowed too (a number of tokens to generate).
int64_t parse_count(const std::string& option, const std::string& text, int64_t max);
// "32768" -> "32K", "1048576" -> "1M", others unchanged.
std::string length_label(int64_t n);
// "a, b*" -> {"a", "b*"}: items trimmed of blanks; InputError naming `option` for an empty one.
std::vector<std::string> split_list(const std::string& option, const std::string& text);
// split_list, and an InputError naming `option` for an item given twice (a model list).
std::vector<std::string> split_unique_list(const std::string& option, const std::string& text);

}  // namespace yoco::cli
