#include "sweep_table.hpp"

#include <iostream>
#include <map>

#include "format.hpp"
#include "lists.hpp"

namespace yoco::cli {

void print_sweep_table(const std::vector<ResultRow>& rows) {
  // One line per measured point: the headline metrics side by side.
  struct Line {
    std::map<std::string, std::string> cell;
  };
  std::map<std::pair<std::string, int64_t>, Line> lines;
  std::vector<std::pair<std::string, int64_t>> order;
  // A value not from a full run says how it was obtained.
  auto how = [](const ResultRow& r) { return r.method == "measured" || r.method == "exact" ? "" : " (" + r.method + ")"; };
  auto seconds = [&](const ResultRow& r) {
    if (!r.value) return r.method;
    const std::string range = r.min && r.max && r.repeats > 1 ? strf(" [%.3g-%.3g]", *r.min, *r.max) : "";
    return strf("%.4g", *r.value) + range + how(r);
  };
  std::string ceilings;
  for (const auto& r : rows) {
    if (r.phase == "ceiling") ceilings += "  " + r.metric + " " + strf("%.4g", *r.value) + " " + r.unit;
    if (r.prov.device == "analytic" || r.unit == "x" || r.phase == "ceiling") continue;
    const auto key = std::make_pair(r.model, r.seq_len);
    if (!lines.count(key)) order.push_back(key);
    auto& c = lines[key].cell;
    if (r.metric == "prefill_latency_s") c["prefill s"] = seconds(r);
    if (r.phase == "decode" && r.metric == "decode_step_latency_s")
      c["decode ms"] = r.value ? strf("%.3f", 1e3 * *r.value) + how(r) : r.method;
    if (r.metric == "throughput_tokens_per_s")
      c["tokens/s"] = r.value ? strf("%.1f (b=%lld, %s)", *r.value, static_cast<long long>(r.batch), r.method.c_str())
                              : r.method;
    if (r.metric == "mem_total_bytes") c["memory"] = r.value ? human_bytes(*r.value) : r.method;
    if (r.metric == "mem_host_peak_rss_bytes") c["peak RSS"] = r.value ? human_bytes(*r.value) : r.method;
    if (r.metric == "mem_device_peak_bytes") c["device peak"] = r.value ? human_bytes(*r.value) : r.method;
  }
  std::cout << "ceilings of this machine (measured):" << ceilings << "\n\n";
  // The columns some point has: peak RSS on the CPU, the device peak on a GPU.
  std::vector<std::string> cols;
  for (const char* c : {"memory", "peak RSS", "device peak", "prefill s", "decode ms", "tokens/s"}) {
    bool any = false;
    for (auto& [k, l] : lines) any = any || l.cell.count(c) > 0;
    if (any) cols.push_back(c);
  }
  std::vector<std::string> head = {"model", "N"};
  head.insert(head.end(), cols.begin(), cols.end());
  TextTable t(head);
  for (const auto& k : order) {
    std::vector<std::string> row = {k.first, length_label(k.second)};
    for (const auto& c : cols) row.push_back(lines[k].cell.count(c) ? lines[k].cell[c] : "-");
    t.add_row(row);
  }
  std::cout << t.str() << "\n";
  TextTable q({"pair", "N", "ratio", "value", "method", "device"});
  bool any = false;
  for (const auto& r : rows)
    if (r.unit == "x" && r.value && r.metric != "kv_cache_reduction") {
      q.add_row({r.model, length_label(r.seq_len), r.metric, strf("%.2f", *r.value), r.method,
                 r.prov.device == "analytic" ? "analytic" : r.prov.device});
      any = true;
    }
  if (any) std::cout << "YOCO vs Transformer (x; higher = YOCO better)\n" << q.str();
}


}  // namespace yoco::cli
