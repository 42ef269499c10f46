// yoco ratios: the YOCO-vs-Transformer ratio rows of result CSVs measured apart. A sweep writes
// its ratios itself; a point too long for one call (transformer-3b's full 1M prefill, five minutes
// on its own) is measured in a call of its own, and this pairs it with its YOCO twin by the one
// rule the sweep uses (bench/analytic/analytic_rows.hpp: ratio_rows).
#include <algorithm>
#include <cmath>
#include <iostream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "analytic_rows.hpp"
#include "args.hpp"
#include "commands.hpp"
#include "config.hpp"
#include "errors.hpp"
#include "format.hpp"
#include "lists.hpp"
#include "result_csv.hpp"
#include "result_output.hpp"
#include "result_row.hpp"

namespace yoco::cli {

namespace {

CommandSpec ratios_spec() {
  CommandSpec s;
  s.path = "yoco ratios";
  s.usage = "yoco ratios FILE.csv... [--out FILE.csv] [--format table|csv|json]";
  s.summary =
      "Reads result CSVs (reports/SCHEMA.md) and adds the ratio rows the sweep would have written had its\n"
      "models run together: memory_reduction, kv_cache_reduction, prefill_speedup, decode_speedup and\n"
      "throughput_gain of each YOCO preset over the Transformer preset of its size, at every point where\n"
      "both have a value on the same device.";
  s.options = {
      {"--out", "FILE", "write the input rows and the ratio rows to FILE (CSV, atomically)"},
      {"--format", "table|csv|json", "stdout: the ratio rows as a table (default), or every row as CSV/JSON"},
  };
  s.min_positional = 1;
  s.max_positional = 64;
  s.notes =
      "A ratio row takes the weaker method of its two rows (measured < sampled < extrapolated < analytic),\n"
      "the YOCO row's provenance, and min/max from the two rows' ranges where both have them. Rows whose\n"
      "model is not a preset (a ratio row, a kernel benchmark's phase) are kept and not paired; a ratio\n"
      "already in the input is kept, not computed again. A row of no preset whose key an earlier file\n"
      "has (each run's own ceilings) is left out, and the count said on stderr. A roofline on a run's\n"
      "measured ceilings is that run's: the analytic rows of a file whose ceilings differ from the first\n"
      "file's by more than 1% are kept but not paired (a ratio of two rooflines on two sets of ceilings\n"
      "is neither's), and said on stderr.\n"
      "\n"
      "Exit status: 0 rows written; 2 bad input: an unreadable or malformed CSV (the message names the file\n"
      "and line), one model's point in two files (both named), --out naming an input file, or no point where a\n"
      "YOCO preset and its Transformer both have a value.";
  return s;
}

}  // namespace

int cmd_ratios(const Args& args) {
  const CommandSpec spec = ratios_spec();
  if (print_help_if_asked(spec, args)) return 0;
  const ParsedArgs a = parse_args(spec, args);
  const OutputFormat format = parse_output_format(a);
  if (const auto out = a.get("--out")) {
    // The rows are all read before --out is written, so the merge would succeed and quietly replace a
    // measured file with the merge, and the same command run again would find the other file's points twice.
    for (const std::string& path : a.positional()) refuse_output_over_input("--out", *out, path, "an input file");
    prepare_output_path(*out);
  }

  const std::vector<std::string> presets = preset_names();
  const std::set<std::string> known(presets.begin(), presets.end());
  std::vector<ResultRow> rows;
  std::map<std::string, std::string> file_of_key;
  // Throughput pairs each model at its own batch (no batch in the match): a
  // model's throughput at one point from runs at two batches paired twice,
  // two ratio rows of one key, a file no command reads back.
  std::map<std::string, std::pair<int64_t, std::string>> throughput_of_point;
  size_t dropped = 0;
  // Each device's measured ceilings as the first file that has them gives them: a later file's roofline
  // rows on other ceilings are not paired (`unpaired`, indices into rows).
  std::map<std::string, std::pair<std::map<std::string, double>, std::string>> first_ceilings;
  std::set<size_t> unpaired;
  for (const std::string& path : a.positional()) {
    std::vector<ResultRow> file_rows = read_results_csv(path);
    std::set<std::string> other_rooflines;  // device names of this file's rooflines on ceilings of their own
    std::map<std::string, std::map<std::string, double>> ceilings;
    for (const ResultRow& r : file_rows)
      if (r.phase == "ceiling" && r.value) ceilings[r.prov.device_name][r.metric] = *r.value;
    for (const auto& [device, c] : ceilings) {
      const auto [it, fresh] = first_ceilings.emplace(device, std::pair(c, path));
      if (fresh) continue;
      for (const auto& [metric, v] : c)
        if (const auto m = it->second.first.find(metric);
            m != it->second.first.end() && std::abs(v - m->second) > 0.01 * std::abs(m->second)) {
          other_rooflines.insert("roofline of " + device + " (measured ceilings)");
          std::cerr << "yoco ratios: " << path << "'s analytic rows are not paired: its " << metric << " on "
                    << device << " is " << strf("%.4g", v) << ", " << it->second.second << "'s "
                    << strf("%.4g", m->second) << " (a roofline ratio needs one set of ceilings)\n";
          break;
        }
    }
    for (ResultRow& r : file_rows) {
      const std::string k = result_key(r);
      if (known.count(r.model) && r.phase == "throughput" && r.metric == "throughput_tokens_per_s" && r.value) {
        const std::string point = r.model + "|" + r.prov.device_name + "|" + std::to_string(r.seq_len) + "|" +
                                  std::to_string(r.gen_tokens);
        if (const auto [it, fresh] = throughput_of_point.emplace(point, std::pair(r.batch, path));
            !fresh && it->second.first != r.batch)
          throw InputError("yoco ratios: " + r.model + "'s throughput at " + length_label(r.seq_len) + " on " +
                           r.prov.device_name + " is at batch " + std::to_string(it->second.first) + " in " +
                           it->second.second + " and at batch " + std::to_string(r.batch) + " in " + path +
                           ": give one throughput point a model and length");
      }
      if (const auto [it, fresh] = file_of_key.emplace(k, path); !fresh) {
        // Each run measures its own ceilings (model "-"): the first file's are kept. A model's
        // point twice would make its ratio ambiguous.
        if (!known.count(r.model)) {
          ++dropped;
          continue;
        }
        throw InputError("yoco ratios: " + path + ": the key " + k + " is in " + it->second +
                         " too: give each point once");
      }
      if (r.method == "analytic" && other_rooflines.count(r.prov.device_name)) unpaired.insert(rows.size());
      rows.push_back(std::move(r));
    }
  }
  if (dropped)
    std::cerr << "yoco ratios: " << dropped << " row" << (dropped == 1 ? "" : "s")
              << " of no preset (ceilings) also in an earlier file: the earlier file's kept\n";
  std::vector<std::string> models;
  std::vector<ModelConfig> configs;
  for (const ResultRow& r : rows)
    if (known.count(r.model) && std::find(models.begin(), models.end(), r.model) == models.end()) {
      models.push_back(r.model);
      configs.push_back(preset_config(r.model));
    }
  std::vector<ResultRow> fresh, pairable;
  for (size_t i = 0; i < rows.size(); ++i)
    if (!unpaired.count(i)) pairable.push_back(rows[i]);
  const std::vector<ResultRow> ratios = ratio_rows(pairable, pair_models(models, configs));
  for (const ResultRow& q : ratios)
    if (!file_of_key.count(result_key(q))) fresh.push_back(q);
  if (fresh.empty() && !ratios.empty())
    throw InputError("yoco ratios: no new ratio: the files hold every ratio their points give (" +
                     std::to_string(ratios.size()) + ") already");
  if (fresh.empty()) {
    std::string names;
    for (const auto& m : models) names += (names.empty() ? "" : ", ") + m;
    throw InputError("yoco ratios: no new ratio: no point where a YOCO preset and the Transformer of its size both "
                     "have a value on one device (models: " +
                     (names.empty() ? std::string("none that is a preset") : names) + ")");
  }
  std::vector<ResultRow> all = rows;
  all.insert(all.end(), fresh.begin(), fresh.end());
  emit_rows(a, format, all, [&] {
    TextTable t({"pair", "N", "device", "ratio", "value", "method"});
    for (const ResultRow& q : fresh)
      t.add_row({q.model, length_label(q.seq_len), q.prov.device_name, q.metric, strf("%.3g", *q.value), q.method});
    std::cout << t.str();
  });
  return 0;
}

}  // namespace yoco::cli
