#pragma once
// Median, minimum and maximum of repeated timings (DESIGN.md §5 keeps all three).
#include <algorithm>
#include <vector>

namespace yoco::cli {

struct Summary {
  double median = 0, min = 0, max = 0;
  int count = 0;
};

// The median of an even count is the mean of the two middle values.
inline Summary summarize(std::vector<double> v) {
  Summary s;
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  s.median = n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
  s.min = v.front();
  s.max = v.back();
  s.count = static_cast<int>(n);
  return s;
}

}  // namespace yoco::cli
