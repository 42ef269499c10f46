#pragma once
// Text formatting for the command's output: printf-style strings, decimal
// byte units (DESIGN.md §5: GB = 1e9 B) and a plain aligned table.
#include <cstdint>
#include <string>
#include <vector>

namespace yoco::cli {

// printf into a std::string.
std::string strf(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

// "1.23 MB", "512 B" (decimal units).
std::string human_bytes(double bytes);
// "12345 B (12.3 kB)".
std::string bytes_with_human(int64_t bytes);

// A table of left-aligned columns separated by two spaces, with a header rule.
class TextTable {
 public:
  explicit TextTable(std::vector<std::string> header) : header_(std::move(header)) {}
  void add_row(std::vector<std::string> row) { rows_.push_back(std::move(row)); }
  std::string str() const;

 private:
  std::vector<std::string> header_;
  std::vector<std::vector<std::string>> rows_;
};

}  // namespace yoco::cli
