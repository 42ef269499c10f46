#include "tokens.hpp"

#include <cctype>
#include <charconv>
#include <filesystem>
#include <fstream>

#include "counter_rng.hpp"
#include "errors.hpp"

namespace yoco::cli {

namespace {

bool is_space(char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; }

// An item as shown in a message: at most 40 bytes, control bytes as \xNN (a
// NUL or an escape sequence from the file would cut or garble the line).
std::string shorten(const std::string& s) {
  const std::string cut = s.size() <= 40 ? s : s.substr(0, 37) + "...";
  std::string out;
  for (const char c : cut) {
    const auto u = static_cast<unsigned char>(c);
    if (u >= 0x20 && u != 0x7f) {
      out += c;
      continue;
    }
    const char* hex = "0123456789abcdef";
    out += std::string("\\x") + hex[u >> 4] + hex[u & 15];
  }
  return out;
}

}  // namespace

std::vector<int64_t> parse_token_list(const std::string& text, const std::string& source) {
  std::vector<int64_t> ids;
  size_t i = 0, line = 1;
  bool after_comma = false;  // a comma was seen since the last item
  auto where = [&](size_t at_line) { return source + ":" + std::to_string(at_line) + ": "; };
  while (true) {
    while (i < text.size() && is_space(text[i])) line += text[i++] == '\n';
    if (i == text.size()) {
      if (after_comma) throw InputError(where(line) + "empty item after the last comma");
      break;
    }
    if (text[i] == ',') {
      if (after_comma || ids.empty())
        throw InputError(where(line) + "empty item " + std::to_string(ids.size() + 1) + " (two commas, or a leading comma)");
      after_comma = true;
      ++i;
      continue;
    }
    const size_t start = i;
    while (i < text.size() && !is_space(text[i]) && text[i] != ',') ++i;
    const std::string item = text.substr(start, i - start);
    const std::string label = "item " + std::to_string(ids.size() + 1) + " '" + shorten(item) + "'";
    int64_t v = 0;
    const auto [ptr, ec] = std::from_chars(item.data(), item.data() + item.size(), v);
    if (ec == std::errc::invalid_argument || ptr != item.data() + item.size() || v < 0)
      throw InputError(where(line) + label + " is not a token id (a non-negative integer)");
    if (ec == std::errc::result_out_of_range) throw InputError(where(line) + label + " is too large for a token id");
    ids.push_back(v);
    after_comma = false;
  }
  if (ids.empty()) throw InputError(source + ": no token ids given");
  return ids;
}

std::vector<int64_t> read_token_file(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) throw InputError(path + ": is a directory, not a token file");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(path + ": cannot open token file");
  // Read in blocks with a cap, so that a device like /dev/zero cannot eat all memory.
  constexpr size_t kMaxBytes = size_t{1} << 30;
  std::string text;
  char buf[1 << 16];
  while (in.read(buf, sizeof buf) || in.gcount() > 0) {
    text.append(buf, static_cast<size_t>(in.gcount()));
    if (text.size() > kMaxBytes) throw InputError(path + ": token file larger than 1 GiB");
  }
  if (in.bad()) throw InputError(path + ": read failed");
  // A UTF-8 byte order mark (Windows editors write one) is not part of the first id.
  if (text.rfind("\xEF\xBB\xBF", 0) == 0) text.erase(0, 3);
  return parse_token_list(text, path);
}

void check_token_range(const std::vector<int64_t>& ids, int64_t vocab, const std::string& source,
                       const std::string& model) {
  for (size_t i = 0; i < ids.size(); ++i)
    if (ids[i] < 0 || ids[i] >= vocab)
      throw InputError(source + ": token " + std::to_string(i + 1) + " has id " + std::to_string(ids[i]) +
                       ", outside the vocabulary [0, " + std::to_string(vocab) + ") of " + model);
}

std::vector<int64_t> synthetic_prompt(uint64_t seed, int64_t sequence, int64_t length, int64_t vocab) {
  std::vector<int64_t> ids(static_cast<size_t>(length));
  const uint64_t base = seed * 1000003ull + static_cast<uint64_t>(sequence) * 7919ull;
  for (int64_t i = 0; i < length; ++i)
    ids[i] = static_cast<int64_t>(splitmix64(base + static_cast<uint64_t>(i)) % static_cast<uint64_t>(vocab));
  return ids;
}

}  // namespace yoco::cli
