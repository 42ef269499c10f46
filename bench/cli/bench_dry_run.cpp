#include "bench_dry_run.hpp"

#include <cmath>
#include <filesystem>
#include <iostream>

#include "format.hpp"
#include "lists.hpp"

namespace yoco::cli {

namespace {

std::string joined(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& i : items) out += (out.empty() ? "" : ", ") + i;
  return out;
}

}  // namespace

int print_bench_dry_run(const SweepSettings& s, const BenchDryRun& d) {
  std::vector<std::string> lengths, metrics(s.metrics.begin(), s.metrics.end());
  for (int64_t n : s.lengths) lengths.push_back(length_label(n));
  const size_t points = s.models.size() * s.lengths.size();
  std::cout << "yoco bench --dry-run: " << d.what << " checked; nothing runs and no device is touched\n"
            << "  device " << d.device << "; models " << joined(s.models) << "; lengths " << joined(lengths) << " ("
            << points << (points == 1 ? " point" : " points") << ")\n"
            << "  metrics " << joined(metrics) << "; " << s.repeats << (s.repeats == 1 ? " repeat" : " repeats")
            << " after " << s.warmup << " warm-up; " << s.decode_sample << " decode steps timed; prefill chunk "
            << s.prefill_chunk << "; batch " << (s.batch > 0 ? std::to_string(s.batch) : "auto (max " +
                                                                                     std::to_string(s.max_batch) + ")")
            << (s.metrics.count("throughput") ? "; throughput generates " + std::to_string(s.gen) : std::string())
            << "\n"
            << strf("  budget %.0f s a point for its timed runs: at most %.0f min of them", s.budget_s,
                    std::ceil(static_cast<double>(points) * s.budget_s / 60.0))
            << (s.cupti ? "; CUPTI breakdown on" : "") << (s.extrapolate ? "" : "; no extrapolation") << "\n";
  if (d.out) {
    std::error_code ec;
    const bool exists = std::filesystem::exists(*d.out, ec);
    std::cout << "  results " << *d.out
              << (d.resume ? (exists ? " (--resume: its completed points kept)" : " (--resume: not there yet, so from the start)")
                           : (exists ? " (exists: rewritten)" : " (new)"))
              << "\n";
  }
  if (d.device == "cuda")
    std::cout << "  runner switches: " << (d.switches.empty() ? "none set (the defaults)" : joined(d.switches)) << "\n";
  return 0;
}

}  // namespace yoco::cli
