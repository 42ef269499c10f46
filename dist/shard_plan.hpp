#pragma once
// Which positions of a prompt each rank holds: contiguous, in rank order,
// every rank at least one token, uneven lengths allowed.
#include <cstdint>
#include <string>
#include <vector>

#include "errors.hpp"

namespace yoco::dist {

struct ShardPlan {
  std::vector<int64_t> bounds;  // ranks + 1 positions: rank r holds [bounds[r], bounds[r + 1])

  int ranks() const { return static_cast<int>(bounds.size()) - 1; }
  int64_t begin(int r) const { return bounds[r]; }
  int64_t end(int r) const { return bounds[r + 1]; }
  int64_t length(int r) const { return bounds[r + 1] - bounds[r]; }

  // n tokens as evenly as possible: the first n % ranks ranks one more.
  static ShardPlan even(int64_t n, int ranks) {
    if (ranks < 1) throw InputError("a shard plan needs at least one rank");
    if (n < ranks)
      throw InputError("a prompt of " + std::to_string(n) + " tokens cannot be split over " + std::to_string(ranks) +
                       " ranks (every rank holds at least one token)");
    ShardPlan p;
    p.bounds.push_back(0);
    for (int r = 0; r < ranks; ++r) p.bounds.push_back(p.bounds.back() + n / ranks + (r < n % ranks ? 1 : 0));
    return p;
  }
  // The command line's plan of a prompt of n tokens over `ranks` ranks with
  // `per_rank` parts each (YOCO 1; the Transformer's context parallelism 2,
  // chunks r and 2R-1-r), as even as possible; InputError in the user's words
  // when a part would be empty.
  static ShardPlan for_prompt(int64_t n, int ranks, int per_rank) {
    const int parts = ranks * per_rank;
    if (n < parts)
      throw InputError("a prompt of " + std::to_string(n) + " tokens cannot be split over " + std::to_string(ranks) +
                       (ranks == 1 ? " rank (" : " ranks (") +
                       (per_rank == 1 ? "each rank holds at least one token" : "each rank holds two chunks of at least one") +
                       (ranks > 1 ? "): give a longer prompt or fewer ranks" : "): give a longer prompt"));
    return even(n, parts);
  }
  // Given lengths, one per rank, each >= 1.
  static ShardPlan of_lengths(const std::vector<int64_t>& lengths) {
    if (lengths.empty()) throw InputError("a shard plan needs at least one rank");
    ShardPlan p;
    p.bounds.push_back(0);
    for (int64_t l : lengths) {
      if (l < 1) throw InputError("every rank holds at least one token (got a length of " + std::to_string(l) + ")");
      p.bounds.push_back(p.bounds.back() + l);
    }
    return p;
  }
};

}  // namespace yoco::dist
