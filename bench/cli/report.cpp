#include "report.hpp"

#include "format.hpp"

namespace yoco::cli {

void print_memory(std::ostream& os, const MemoryBreakdown& m, const std::string& indent) {
  auto line = [&](const char* name, int64_t b) { os << indent << strf("%-12s", name) << bytes_with_human(b) << "\n"; };
  line("weights", m.weights);
  line("kv_cache", m.kv_cache);
  line("state", m.state);
  line("activations", m.activations);
  line("total", m.total());
}

std::string check_summary(const DecodeCheck& c) {
  return strf("max |diff| %.3g, max RMS ratio %.3g (tolerance %.0e): %s", c.max_abs_diff, c.max_rms_ratio, c.tolerance,
              c.pass ? "PASS" : "FAIL");
}

}  // namespace yoco::cli
