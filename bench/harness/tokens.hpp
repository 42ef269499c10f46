#pragma once
// Token ids from the command line: `--tokens 1,2,3`, `--tokens-file FILE`
// (integers separated by commas and/or whitespace), and the deterministic
// synthetic prompts of `--prompt-len N`.
#include <cstdint>
#include <string>
#include <vector>

namespace yoco::cli {

// Parses "1, 2 3\n4". `source` names the text in messages ("--tokens" or the
// file name); a bad item is reported with its 1-based index and line:
//   "ids.txt:3: item 7 'x12' is not a token id (a non-negative integer)".
// An empty item (",,") and an empty list are errors too.
std::vector<int64_t> parse_token_list(const std::string& text, const std::string& source);
std::vector<int64_t> read_token_file(const std::string& path);

// InputError "<source>: token i has id X, outside the vocabulary [0, V) of MODEL".
void check_token_range(const std::vector<int64_t>& ids, int64_t vocab, const std::string& source,
                       const std::string& model);

// Token i of sequence b: splitmix64(seed * 1000003 + b * 7919 + i) % vocab
// (uint64 arithmetic, wrapping): the same prompt on every machine.
std::vector<int64_t> synthetic_prompt(uint64_t seed, int64_t sequence, int64_t length, int64_t vocab);

}  // namespace yoco::cli
