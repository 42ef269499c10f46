#pragma once
// The human-readable view of a sweep's rows: one line per point with the
// headline metrics, then the YOCO-vs-Transformer ratios.
#include <vector>

#include "result_row.hpp"

namespace yoco::cli {

void print_sweep_table(const std::vector<ResultRow>& rows);

}  // namespace yoco::cli
