#include "compare.hpp"

#include <fnmatch.h>

#include <algorithm>
#include <bit>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <map>

#include "errors.hpp"

namespace yoco::cli {

namespace {

struct DirectionRule {
  const char* glob;
  Direction direction;
};

// reports/SCHEMA.md, "Direction".
constexpr DirectionRule kDirectionRules[] = {
    {"*_latency_s", Direction::Lower},
    {"*_bytes", Direction::Lower},
    {"*_bytes_per_token", Direction::Lower},
    {"kernel_time_s", Direction::Lower},
    {"roofline_time_s", Direction::Lower},
    {"gpu_time_s", Direction::Lower},
    {"cupti_overhead_fraction", Direction::Lower},
    {"flops", Direction::Lower},
    {"bytes", Direction::Lower},
    {"*_host_enqueue_s", Direction::Lower},
    {"api_*_s", Direction::Lower},
    {"throughput_tokens_per_s", Direction::Higher},
    {"max_batch", Direction::Higher},
    {"achieved_*", Direction::Higher},
    {"fraction_*", Direction::Higher},
    {"*_reduction", Direction::Higher},
    {"*_speedup", Direction::Higher},
    {"*_gain", Direction::Higher},
    {"gemm_peak_tflops", Direction::Higher},
    {"copy_bw_gbs", Direction::Higher},
    {"gpu_busy_fraction", Direction::Higher},
    {"within_tolerance", Direction::Higher},  // yoco check --format csv: 1 within, 0 not
};

bool glob_match(const std::string& glob, const std::string& s) { return fnmatch(glob.c_str(), s.c_str(), 0) == 0; }

bool any_match(const std::vector<std::string>& globs, const std::string& s) {
  return globs.empty() || std::any_of(globs.begin(), globs.end(), [&](const auto& g) { return glob_match(g, s); });
}

void check_every_glob_used(const char* option, const std::vector<std::string>& globs,
                           const std::vector<const std::vector<ResultRow>*>& sets,
                           std::string ResultRow::*field) {
  for (const auto& g : globs) {
    bool used = false;
    for (const auto* rows : sets)
      for (const auto& r : *rows) used = used || glob_match(g, r.*field);
    if (!used) throw InputError(std::string(option) + ": '" + g + "' matches no row of either file");
  }
}

std::vector<const ResultRow*> selected(const std::vector<ResultRow>& rows, const CompareOptions& opt) {
  std::vector<const ResultRow*> out;
  for (const auto& r : rows)
    if (any_match(opt.metrics, r.metric) && any_match(opt.phases, r.phase)) out.push_back(&r);
  return out;
}

std::map<std::string, const ResultRow*> index_by_key(const std::vector<const ResultRow*>& rows, const char* side) {
  std::map<std::string, const ResultRow*> m;
  for (const auto* r : rows)
    if (!m.emplace(result_key(*r), r).second)
      throw InputError(std::string("compare: ") + side + " has two rows with key " + result_key(*r));
  return m;
}

// What the two sides hold, for the message when they share no key.
std::string key_hint(const std::vector<const ResultRow*>& b, const std::vector<const ResultRow*>& h) {
  auto first = [](const std::vector<const ResultRow*>& rows) {
    if (rows.empty()) return std::string("no rows");
    return "e.g. device_name '" + rows.front()->prov.device_name + "', model '" + rows.front()->model + "'";
  };
  return "BASE: " + first(b) + "; NEW: " + first(h);
}

bool inside(double v, const ResultRow& r) { return r.min && r.max && *r.min <= v && v <= *r.max; }

// Relative change; a zero base makes any change infinite rather than undefined.
double relative_change(double base, double head) {
  if (base == head) return 0.0;
  if (base == 0.0) return head > 0 ? std::numeric_limits<double>::infinity() : -std::numeric_limits<double>::infinity();
  return (head - base) / std::fabs(base);
}

std::string changes_of(const ResultRow& b, const ResultRow& h) {
  std::string s;
  if (b.method != h.method) s += "method " + b.method + " -> " + h.method;
  if (b.unit != h.unit) s += std::string(s.empty() ? "" : "; ") + "unit " + b.unit + " -> " + h.unit;
  return s;
}

void judge_values(RowComparison& c, double b, double h, const CompareOptions& opt) {
  c.change = relative_change(b, h);
  if (opt.exact) {
    // Bit-for-bit: the values were read back exactly from %.17g.
    const bool equal = std::bit_cast<uint64_t>(b) == std::bit_cast<uint64_t>(h);
    c.verdict = equal ? Verdict::Same : Verdict::Changed;
    c.fails = !equal;
    return;
  }
  // The slack keeps an exact "10%" from failing a 10% threshold through rounding.
  if (std::fabs(*c.change) <= opt.threshold * (1 + 1e-12)) {
    c.verdict = Verdict::Same;
    return;
  }
  // The rows' own spread over repeats: a difference the measurement cannot resolve is no verdict.
  if (inside(h, *c.base) || inside(b, *c.head)) {
    c.verdict = Verdict::Same;
    c.note = inside(h, *c.base) ? "within noise: new value in base [min, max]"
                                : "within noise: base value in new [min, max]";
    return;
  }
  const bool up_is_good = c.direction == Direction::Higher;
  c.verdict = (*c.change > 0) == up_is_good ? Verdict::Better : Verdict::Worse;
  c.fails = c.verdict == Verdict::Worse;
}

RowComparison judge(const ResultRow& b, const ResultRow& h, const CompareOptions& opt) {
  RowComparison c;
  c.base = b;
  c.head = h;
  c.direction = metric_direction(b.metric);
  if (b.unit != h.unit && b.value && h.value) {
    // 1 s and 1 ms are not a 0% change: values in two units are not compared, and the gate fails until
    // the baseline is rewritten in the new unit.
    c.verdict = Verdict::Changed;
    c.fails = true;
    c.note = "values in different units are not compared";
  } else if (b.value && h.value) {
    judge_values(c, *b.value, *h.value, opt);
  } else {
    c.verdict = Verdict::NotRun;
    // Losing a value is a regression of coverage; gaining one is not.
    c.fails = opt.strict && b.value && !h.value;
    if (!b.value) c.note = "base did not run (" + b.method + ")";
    if (!h.value) c.note += std::string(c.note.empty() ? "" : "; ") + "new did not run (" + h.method + ")";
  }
  const std::string changed = changes_of(b, h);
  if (!changed.empty()) c.note += (c.note.empty() ? "" : "; ") + changed;
  return c;
}

RowComparison one_sided(const ResultRow& r, bool in_base, const CompareOptions& opt) {
  RowComparison c;
  (in_base ? c.base : c.head) = r;
  c.direction = metric_direction(r.metric);
  c.verdict = in_base ? Verdict::OnlyBase : Verdict::OnlyNew;
  c.fails = opt.strict;
  return c;
}

}  // namespace

Direction metric_direction(const std::string& metric) {
  bool lower = false, higher = false;
  for (const auto& rule : kDirectionRules)
    if (glob_match(rule.glob, metric)) (rule.direction == Direction::Lower ? lower : higher) = true;
  // A name that matches both kinds of rule (say "achieved_bytes") is not ours to guess.
  if (lower == higher) return Direction::Unknown;
  return lower ? Direction::Lower : Direction::Higher;
}

const char* direction_name(Direction d) {
  switch (d) {
    case Direction::Lower: return "lower";
    case Direction::Higher: return "higher";
    case Direction::Unknown: return "?";
  }
  return "?";
}

const char* verdict_name(Verdict v) {
  switch (v) {
    case Verdict::Same: return "SAME";
    case Verdict::Better: return "BETTER";
    case Verdict::Worse: return "WORSE";
    case Verdict::Changed: return "CHANGED";
    case Verdict::NotRun: return "NOT_RUN";
    case Verdict::OnlyBase: return "ONLY_BASE";
    case Verdict::OnlyNew: return "ONLY_NEW";
  }
  return "?";
}

size_t Comparison::count(Verdict v) const {
  return static_cast<size_t>(std::count_if(rows.begin(), rows.end(), [v](const auto& r) { return r.verdict == v; }));
}

size_t Comparison::failures() const {
  return static_cast<size_t>(std::count_if(rows.begin(), rows.end(), [](const auto& r) { return r.fails; }));
}

std::string Comparison::summary() const {
  const size_t both = rows.size() - count(Verdict::OnlyBase) - count(Verdict::OnlyNew);
  std::string s = std::to_string(both) + " compared:";
  const char* sep = " ";
  for (Verdict v : {Verdict::Same, Verdict::Better, Verdict::Worse, Verdict::Changed, Verdict::NotRun}) {
    s += sep + std::to_string(count(v)) + " " + verdict_name(v);
    sep = ", ";
  }
  return s + "; " + std::to_string(count(Verdict::OnlyBase)) + " ONLY_BASE, " +
         std::to_string(count(Verdict::OnlyNew)) + " ONLY_NEW";
}

Comparison compare_results(const std::vector<ResultRow>& base, const std::vector<ResultRow>& head,
                           const CompareOptions& opt) {
  check_every_glob_used("--metrics", opt.metrics, {&base, &head}, &ResultRow::metric);
  check_every_glob_used("--phases", opt.phases, {&base, &head}, &ResultRow::phase);
  const auto b_rows = selected(base, opt), h_rows = selected(head, opt);
  if ((!opt.metrics.empty() || !opt.phases.empty()) && b_rows.empty() && h_rows.empty())
    throw InputError("--metrics and --phases together select no row of either file");
  const auto b_index = index_by_key(b_rows, "BASE"), h_index = index_by_key(h_rows, "NEW");
  Comparison out;
  for (const auto* b : b_rows) {
    const auto it = h_index.find(result_key(*b));
    out.rows.push_back(it == h_index.end() ? one_sided(*b, true, opt) : judge(*b, *it->second, opt));
  }
  for (const auto* h : h_rows)
    if (!b_index.count(result_key(*h))) out.rows.push_back(one_sided(*h, false, opt));
  if (!out.rows.empty() && out.count(Verdict::OnlyBase) + out.count(Verdict::OnlyNew) == out.rows.size())
    throw InputError(
        "nothing to compare: no row of BASE has the key (model, device_name, seq_len, batch, gen_tokens, phase, "
        "metric) of a row of NEW; " +
        key_hint(b_rows, h_rows));
  return out;
}

// ------------------------------------------------------------- --noise-floor --

NoiseKind noise_kind(const std::string& unit, const std::string& method, const std::string& metric) {
  static const char* const timed[] = {"s", "tokens/s", "fraction", "TFLOP/s", "GB/s", "x"};
  static const char* const counted[] = {"B", "FLOP", "count", "B/token"};
  const auto by_method = [&] {
    return method == "measured" || method == "sampled" || method == "extrapolated" ? NoiseKind::MeasuredCount
                                                                                    : NoiseKind::Counted;
  };
  // Ratios of counted values (x): memory_reduction of two mem_total_bytes, kv_cache_reduction of two
  // KV bytes per token, judged as the bytes they divide (ci-bench.sh gates memory_reduction exactly).
  if (unit == "x" && (metric == "memory_reduction" || metric == "kv_cache_reduction")) return by_method();
  for (const char* u : timed)
    if (unit == u) return NoiseKind::Timed;
  for (const char* u : counted)
    if (unit == u) return by_method();
  return NoiseKind::Other;
}

const char* noise_kind_name(NoiseKind k) {
  switch (k) {
    case NoiseKind::Timed: return "timed";
    case NoiseKind::Counted: return "counted";
    case NoiseKind::MeasuredCount: return "measured count";
    case NoiseKind::Other: return "other";
  }
  return "other";
}

std::optional<double> recommended_threshold(double max_change) {
  if (!(max_change >= 0) || std::isinf(max_change)) return std::nullopt;
  for (double t : kNoiseThresholdLadder)
    if (t * (1 + 1e-12) >= 2 * max_change) return t;
  return std::nullopt;
}

std::string phase_family(const std::string& phase) { return phase.substr(0, phase.find_first_of(".:")); }

size_t NoiseFloor::counted_differing() const {
  return static_cast<size_t>(std::count_if(metrics.begin(), metrics.end(), [](const NoiseMetric& m) {
    return m.kind == NoiseKind::Counted && m.differing > 0;
  }));
}

std::string NoiseFloor::gate_command() const {
  if (!threshold || gate_metrics.empty()) return "";
  char pct[32];
  std::snprintf(pct, sizeof pct, "%g%%", 100 * *threshold);
  std::string list;
  for (const auto& m : gate_metrics) list += (list.empty() ? "" : ",") + m;
  return "yoco compare BASE.csv NEW.csv --threshold " + std::string(pct) + " --metrics '" + list + "'";
}

namespace {

// max(max - value, value - min) / |value| of one row; none without min/max or with a zero value.
std::optional<double> relative_spread(const ResultRow& r) {
  if (!r.value || !r.min || !r.max || *r.value == 0.0) return std::nullopt;
  const double v = *r.value;
  return std::max({*r.max - v, v - *r.min, 0.0}) / std::fabs(v);
}

double median_of(std::vector<double> xs) {
  if (xs.empty()) return 0.0;
  std::sort(xs.begin(), xs.end());
  const size_t n = xs.size();
  return n % 2 ? xs[n / 2] : 0.5 * (xs[n / 2 - 1] + xs[n / 2]);
}

std::string key_text(const ResultRow& r) {
  return r.model + " N " + std::to_string(r.seq_len) + " batch " + std::to_string(r.batch) + " gen " +
         std::to_string(r.gen_tokens) + " " + r.phase + "/" + r.metric;
}

}  // namespace

NoiseFloor noise_floor(const std::vector<ResultRow>& base, const std::vector<ResultRow>& head,
                       const CompareOptions& opt) {
  CompareOptions join = opt;
  join.exact = false;
  join.strict = false;
  const Comparison cmp = compare_results(base, head, join);

  struct Group {
    NoiseMetric m;
    std::vector<double> changes;
  };
  std::vector<Group> groups;
  std::map<std::string, size_t> index;  // family|metric|unit|kind -> groups
  NoiseFloor out;
  for (const auto& c : cmp.rows) {
    if (!c.base || !c.head || !c.base->value || !c.head->value) {
      ++out.unpaired;
      continue;
    }
    const ResultRow& b = *c.base;
    const ResultRow& h = *c.head;
    const NoiseKind kind = noise_kind(b.unit, b.method, b.metric);
    const std::string family = phase_family(b.phase);
    const std::string gk = family + "|" + b.metric + "|" + b.unit + "|" + noise_kind_name(kind);
    auto [it, fresh] = index.emplace(gk, groups.size());
    if (fresh) {
      Group g;
      g.m.family = family;
      g.m.metric = b.metric;
      g.m.unit = b.unit;
      g.m.kind = kind;
      groups.push_back(std::move(g));
    }
    Group& g = groups[it->second];
    ++out.keys;
    ++g.m.keys;
    const double change = std::fabs(relative_change(*b.value, *h.value));
    g.changes.push_back(change);
    if (std::bit_cast<uint64_t>(*b.value) != std::bit_cast<uint64_t>(*h.value)) {
      if (g.m.differing++ == 0)
        g.m.first_change = key_text(b) + ": base " + format_value(b.value) + " " + b.unit + ", new " +
                           format_value(h.value) + " " + h.unit;
    }
    for (const ResultRow* r : {&b, &h})
      if (const auto sp = relative_spread(*r)) g.m.max_spread = std::max(g.m.max_spread.value_or(0.0), *sp);
  }
  // Group by family, keeping the order in which families (and, within one, metrics) first appear.
  std::vector<std::string> families;
  for (auto& g : groups) {
    g.m.median_change = median_of(g.changes);
    g.m.max_change = *std::max_element(g.changes.begin(), g.changes.end());
    if (std::find(families.begin(), families.end(), g.m.family) == families.end()) families.push_back(g.m.family);
  }
  for (const auto& f : families)
    for (const auto& g : groups)
      if (g.m.family == f) out.metrics.push_back(g.m);

  // The gate: timing metric names whose every family fits the ladder.
  std::vector<std::string> timed_names;
  for (const auto& m : out.metrics)
    if (m.kind == NoiseKind::Timed && std::find(timed_names.begin(), timed_names.end(), m.metric) == timed_names.end())
      timed_names.push_back(m.metric);
  for (const auto& name : timed_names) {
    bool fits = true;
    for (const auto& m : out.metrics)
      if (m.kind == NoiseKind::Timed && m.metric == name) fits = fits && recommended_threshold(m.max_change).has_value();
    (fits ? out.gate_metrics : out.too_noisy).push_back(name);
  }
  bool any = false;
  for (auto& m : out.metrics) {
    if (m.kind != NoiseKind::Timed ||
        std::find(out.gate_metrics.begin(), out.gate_metrics.end(), m.metric) == out.gate_metrics.end())
      continue;
    m.gated = true;
    if (!any || m.max_change > out.largest_change) {
      out.largest_change = m.max_change;
      out.largest_at = m.family + "/" + m.metric;
    }
    any = true;
  }
  if (any) out.threshold = recommended_threshold(out.largest_change);
  return out;
}

double parse_threshold(const std::string& option, const std::string& text) {
  std::string num = text;
  if (!num.empty() && num.back() == '%') num.pop_back();
  double v = 0;
  const auto [end, ec] = std::from_chars(num.data(), num.data() + num.size(), v);
  if (num.empty() || ec != std::errc() || end != num.data() + num.size() || !std::isfinite(v) || v < 0)
    throw InputError(option + ": expected a percentage such as 5% or 5 (a number >= 0), got '" + text + "'");
  return v / 100.0;
}

}  // namespace yoco::cli
