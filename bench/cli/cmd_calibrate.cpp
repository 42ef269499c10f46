// yoco calibrate: fits the calibrated cost model (bench/analytic/calibration)
// to a sweep's measurements and prints every measured point beside its
// prediction, with the worst error per metric.
#include <algorithm>
#include <cmath>
#include <iostream>
#include <map>
#include <sstream>

#include "args.hpp"
#include "atomic_file.hpp"
#include "calibration_check.hpp"
#include "commands.hpp"
#include "errors.hpp"
#include "format.hpp"
#include "lists.hpp"
#include "result_csv.hpp"
#include "result_output.hpp"

namespace yoco::cli {

namespace {

CommandSpec calibrate_spec() {
  CommandSpec s;
  s.path = "yoco calibrate";
  s.usage =
      "yoco calibrate SWEEP.csv [--out CALIBRATION.csv] [--kernels KERNELS.csv] [--format table|csv]\n"
      "       yoco calibrate SWEEP.csv --calibration FILE [--ceilings auto|run|h100|h200|b200] [--format table|csv]";
  s.summary =
      "Fits the calibrated cost model to a sweep run with --cupti: per phase and kernel family (gemm with the\n"
      "LM head, attention, gret, norms and other element-wise kernels) the inverse efficiency against the\n"
      "run's own ceilings and a fixed cost per layer, and the host gaps; memory is the runners' own formula.\n"
      "Then predicts every measured point of the sweep (prefill, decode step, throughput, memory) and prints\n"
      "predicted / measured with the worst error per metric.";
  s.options = {
      {"--out", "FILE.csv", "write the calibration (result rows, reports/SCHEMA.md; yoco model --calibration reads it);\n"
                            "only when fitting, not with --calibration"},
      {"--kernels", "FILE.csv",
       "the same card's kernel benchmark (bench_cuda_kernels' rows, kernels.csv): each flash prefill version's time over the\n"
       "version the sweep ran (attn_prefill rows of the same shapes), so that a point that ran another version\n"
       "(the runners now, another card's run) is priced at it; without it every version is priced as the sweep's"},
      {"--calibration", "FILE", "check this calibration against SWEEP instead of fitting one (out-of-sample)"},
      {"--ceilings", "MODE",
       "the rates the check divides by: auto (default: the calibration's own on its kind of card; on another card\n"
       "its datasheet scaled by the calibration's measured / datasheet ratios, the projection), run (SWEEP's own\n"
       "measured ceilings), or a datasheet, h100, h200, b200 (scaled)"},
      {"--format", "table|csv", "stdout: the check table (default) or the check as rows (method calibrated)"},
  };
  s.min_positional = 1;
  s.max_positional = 1;
  s.notes =
      "The model: family time = roofline x inverse_efficiency + layers x per_layer_s; a phase is the families'\n"
      "sum x (1 + gap). The fits table lists every family and bound: one without CUPTI points is not fitted\n"
      "and keeps the roofline (or its other bound's fit); one fitted on fewer than 3 points (a two-parameter\n"
      "fit passes through them exactly) has no band. Check rows priced by either are marked * and said under\n"
      "the table, and yoco model --calibration gives them no band. Exit 2 on a file without ceilings or CUPTI\n"
      "rows, naming the file.\n"
      "Examples (from the repository root): fit on the H100 sweep, then check it out of sample on the H200:\n"
      "  yoco calibrate reports/results/nvidia-h100/sweep.csv --kernels reports/results/nvidia-h100/kernels.csv --out cal.csv\n"
      "  yoco calibrate reports/results/nvidia-h200/long-points.csv --calibration reports/model/calibration-nvidia-h100.csv";
  return s;
}

// Rows are written or printed only when finite: a sweep value that overflows
// when scaled (1e300 TFLOP/s is inf FLOP/s) gave 'inf' rows, exit 0, in a file
// that every reader of result CSVs then refuses.
void require_finite(const std::vector<ResultRow>& rows, const std::string& source) {
  for (const auto& r : rows)
    for (const auto& v : {r.value, r.min, r.max})
      if (v && !std::isfinite(*v))
        throw InputError(source + ": gives " + r.phase + " " + r.metric + " = " + strf("%g", *v) +
                         ", not a finite number (a value out of range in the file?)");
}

}  // namespace

int cmd_calibrate(const Args& args) {
  const CommandSpec spec = calibrate_spec();
  if (print_help_if_asked(spec, args)) return 0;
  const ParsedArgs a = parse_args(spec, args);
  const std::string format = a.get_or("--format", "table");
  if (format != "table" && format != "csv") throw InputError("--format: expected table or csv, got '" + format + "'");
  const std::string sweep = a.positional()[0];
  if (a.has("--ceilings") && !a.has("--calibration"))
    throw InputError("--ceilings: only with --calibration (a fit is checked on its own ceilings)");
  if (const auto k = a.get("--kernels"); k && k->empty()) throw InputError("--kernels: needs a file (the kernel benchmark's CSV)");
  if (a.has("--kernels") && a.has("--calibration"))
    throw InputError("--kernels: only when fitting (a calibration read with --calibration keeps its own ratios)");
  // A check writes no calibration: --out rewrote the one read (or copied it) with a new commit and date,
  // unsaid, as if refitted.
  if (a.has("--out") && a.has("--calibration"))
    throw InputError("--out: only when fitting (a check with --calibration writes nothing; --format csv prints the "
                     "check's rows)");
  if (const auto out = a.get("--out")) {
    refuse_output_over_input("--out", *out, sweep, "the sweep");
    if (const auto kernels = a.get("--kernels")) refuse_output_over_input("--out", *out, *kernels, "the kernel benchmark");
    check_output_path(*out);
  }
  const std::vector<ResultRow> rows = read_results_csv(sweep);
  cost::Calibration cal =
      a.has("--calibration") ? cost::read_calibration(*a.get("--calibration")) : cost::fit_calibration(rows, sweep);
  if (const auto kernels = a.get("--kernels")) cost::add_kernel_bench(cal, read_results_csv(*kernels), *kernels);
  // The check before --out is written: a bad --ceilings, or a sweep the check
  // cannot use, exits 2 without leaving a calibration behind.
  const cost::CheckCeilings on = cost::check_ceilings(rows, cal, a.get_or("--ceilings", "auto"), sweep);
  const auto checks = cost::check_calibration(rows, cal, on.ceil, sweep);
  // A check of nothing printed an empty table, exit 0 (an analytic model.csv, a kernel benchmark).
  if (checks.empty() && a.has("--calibration"))
    throw InputError(sweep + ": no measured points to check (measured prefill_latency_s, decode_step_latency_s, "
                             "throughput_tokens_per_s or mem_total_bytes rows of a preset; a sweep's CSV)");
  const Provenance prov = Provenance::here("calibration", "calibrated on " + cal.device_name, "");
  const std::vector<ResultRow> cal_rows = cost::calibration_rows(cal, prov);
  require_finite(cal_rows, cal.source);
  if (const auto out = a.get("--out")) {
    cost::require_readable(cal_rows, cal.source);  // else yoco model --calibration would refuse the file
    std::ostringstream csv;
    write_results_csv(csv, cal_rows);
    write_file_atomically(*out, csv.str());
  }
  if (format == "csv") {
    std::vector<ResultRow> out;
    const Provenance p = Provenance::here("calibrated", "calibrated model of " + cal.device_name, "");
    for (const auto& k : checks) {
      ResultRow r = make_row(p, k.model, k.seq_len, k.batch, k.gen_tokens, k.phase, k.metric, k.predicted,
                             k.metric == "mem_total_bytes" ? "B" : k.metric == "throughput_tokens_per_s" ? "tokens/s" : "s",
                             "calibrated", 0, "measured " + strf("%.6g", k.measured) + "; predicted / measured " +
                                               strf("%.4f", k.ratio()) + "; ceilings: " + on.how);
      out.push_back(r);
    }
    require_finite(out, cal.source);
    write_results_csv(std::cout, out);
    return 0;
  }
  std::cout << "yoco calibrate: " << (a.has("--calibration") ? "calibration " + cal.source : "fitted on " + sweep)
            << " (" << cal.device_name << "), ceilings " << strf("%.1f", cal.peak_flops / 1e12) << " TFLOP/s, "
            << strf("%.0f", cal.bandwidth / 1e9) << " GB/s\nchecked on: " << on.how << " ("
            << strf("%.1f", on.ceil.peak_flops / 1e12) << " TFLOP/s, " << strf("%.0f", on.ceil.bandwidth / 1e9)
            << " GB/s)\n\n";
  TextTable fits({"phase", "family", "bound", "inverse efficiency", "per layer", "points", "worst residual"});
  for (const bool pre : {true, false})
    for (int f = 0; f < cost::kFamilies; ++f)
      for (int b = 0; b < 2; ++b) {
        // Every family and bound, fitted or not: one without points is priced at the roofline (or by its
        // other bound's fit), one of fewer than kMinBandPoints has a fit but no band.
        const auto& fit = cal.fit(pre, static_cast<cost::Family>(f), static_cast<cost::Bound>(b));
        const bool fitted = fit.points > 0;
        fits.add_row({pre ? "prefill" : "decode", cost::family_name(static_cast<cost::Family>(f)),
                      cost::bound_name(static_cast<cost::Bound>(b)),
                      fitted ? strf("%.3f", fit.inverse_efficiency) : "not fitted",
                      fitted ? strf("%.2f us", fit.per_layer_s * 1e6) : "-", std::to_string(fit.points),
                      !fitted          ? "-"
                      : fit.banded() ? strf("%.1f%%", 100 * fit.worst_residual)
                                       : strf("unknown (< %d points)", cost::kMinBandPoints)});
      }
  std::cout << fits.str()
            << "not fitted: no point's family was bound there; its work is priced by the other bound's fit, or at\n"
               "the roofline where neither bound has points (yoco model --calibration then gives no band)\n"
            << "host gaps: prefill " << strf("%.1f%%", 100 * cal.prefill_gap) << ", decode "
            << strf("%.1f%%", 100 * cal.decode_gap) << "; memory: the runners' own formula\n";
  if (const int fit = cal.attention_prefill_fit_version) {
    std::cout << "prefill attention: fitted on flash prefill v" << fit;
    for (int v = 1; v <= cost::kPrefillVersionSlots; ++v)
      if (v != fit)
        std::cout << (cal.attention_prefill_ratio_shapes[v - 1]
                          ? strf("; v%d at %.3f of its time (%d shapes)", v, cal.attention_prefill_time_ratio[v - 1],
                                 cal.attention_prefill_ratio_shapes[v - 1])
                          : strf("; v%d priced as v%d (no --kernels ratio)", v, fit));
    std::cout << (cal.kernel_bench.empty() ? "" : "; kernel benchmark " + cal.kernel_bench) << "\n";
  }
  std::cout << "\n";
  TextTable t({"model", "N", "batch", "metric", "measured", "predicted", "pred / meas"});
  std::map<std::string, double> worst;
  std::map<std::string, int> unbanded;  // why a prediction has no band -> how many
  for (const auto& k : checks) {
    t.add_row({k.model, length_label(k.seq_len), std::to_string(k.batch), k.metric, strf("%.4g", k.measured),
               strf("%.4g", k.predicted), strf("%.3f", k.ratio()) + (k.unbanded.empty() ? "" : " *")});
    worst[k.metric] = std::max(worst[k.metric], std::abs(k.ratio() - 1));
    if (!k.unbanded.empty()) ++unbanded[k.unbanded];
  }
  std::cout << t.str();
  for (const auto& [why, n] : unbanded)
    std::cout << "* " << n << (n == 1 ? " point" : " points") << " priced without a band: " << why << "\n";
  std::cout << "\nworst |predicted / measured - 1| per metric:";
  for (const auto& [m, w] : worst) std::cout << "  " << m << " " << strf("%.1f%%", 100 * w);
  std::cout << "\n";
  return 0;
}

}  // namespace yoco::cli
