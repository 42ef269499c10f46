// The host's CUDA API calls of a profiled region (host_api_time.hpp). Plain C++.
#include "host_api_time.hpp"

#include <algorithm>
#include <cctype>
#include <map>
#include <stdexcept>
#include <utility>

namespace yoco::cli {

std::string api_short_name(std::string_view name) {
  // "_v" followed by digits only, at the end.
  const size_t v = name.rfind("_v");
  if (v != std::string_view::npos && v + 2 < name.size() &&
      std::all_of(name.begin() + static_cast<std::ptrdiff_t>(v) + 2, name.end(),
                  [](char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; }))
    return std::string(name.substr(0, v));
  return std::string(name);
}

bool api_waits_for_device(std::string_view raw) {
  const std::string name = api_short_name(raw);
  if (name.find("Synchronize") != std::string::npos) return true;
  // A copy without Async in its name returns once the copy is done.
  const bool copy = name.rfind("cudaMemcpy", 0) == 0 || name.rfind("cuMemcpy", 0) == 0;
  return copy && name.find("Async") == std::string::npos;
}

HostApiBreakdown aggregate_host_api(const std::vector<ActivityRecord>& records, int64_t units) {
  if (units < 1) throw std::invalid_argument("aggregate_host_api: units must be >= 1");
  HostApiBreakdown b;
  b.units = units;
  // The runtime calls of each thread, by start, to find the driver calls made inside them.
  std::map<uint32_t, std::vector<std::pair<uint64_t, uint64_t>>> runtime_of_thread;
  for (const ActivityRecord& r : records)
    if (r.kind == ActivityKind::runtime_api && r.timed()) runtime_of_thread[r.thread_id].push_back({r.start_ns, r.end_ns});
  for (auto& [thread, spans] : runtime_of_thread) std::sort(spans.begin(), spans.end());
  // Runtime calls of one thread do not overlap, so the one that starts last at or before a driver
  // call's start is the only one that can hold it.
  auto nested = [&](const ActivityRecord& d) {
    const auto it = runtime_of_thread.find(d.thread_id);
    if (it == runtime_of_thread.end() || !d.timed()) return false;
    const auto& spans = it->second;
    auto after = std::upper_bound(spans.begin(), spans.end(), std::make_pair(d.start_ns, UINT64_MAX));
    if (after == spans.begin()) return false;
    --after;
    return after->first <= d.start_ns && d.end_ns <= after->second;
  };
  struct Acc {
    ActivityKind kind = ActivityKind::runtime_api;
    uint64_t ns = 0;
    int64_t calls = 0;
  };
  std::map<std::string, Acc> by_name;
  uint64_t enqueue_ns = 0, wait_ns = 0;
  int64_t calls = 0;
  for (const ActivityRecord& r : records) {
    if (!is_api_call(r.kind)) continue;
    ++b.records;
    if (!r.timed()) ++b.untimed;
    if (r.kind == ActivityKind::driver_api && nested(r)) {
      ++b.nested_driver_calls;
      continue;
    }
    const std::string name = api_short_name(r.name);
    Acc& a = by_name[name];
    a.kind = r.kind;
    a.ns += r.duration_ns();
    a.calls += 1;
    (api_waits_for_device(name) ? wait_ns : enqueue_ns) += r.duration_ns();
    ++calls;
  }
  const double u = static_cast<double>(units);
  for (const auto& [name, a] : by_name) {
    ApiTime t;
    t.name = name;
    t.kind = a.kind;
    t.waits = api_waits_for_device(name);
    t.seconds_per_unit = static_cast<double>(a.ns) * 1e-9 / u;
    t.calls_per_unit = static_cast<double>(a.calls) / u;
    t.calls = a.calls;
    b.apis.push_back(std::move(t));
  }
  std::stable_sort(b.apis.begin(), b.apis.end(),
                   [](const ApiTime& x, const ApiTime& y) { return x.seconds_per_unit > y.seconds_per_unit; });
  b.enqueue_seconds_per_unit = static_cast<double>(enqueue_ns) * 1e-9 / u;
  b.wait_seconds_per_unit = static_cast<double>(wait_ns) * 1e-9 / u;
  b.calls_per_unit = static_cast<double>(calls) / u;
  return b;
}

}  // namespace yoco::cli
