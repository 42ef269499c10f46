// The calibrated model prices the flash prefill version each point ran
// (bench/analytic/prefill_versions.hpp): the committed H100 sweep ran v2, its
// kernel benchmark times v1 and v3 beside v2, the runners run v3 now, and the
// H200's committed run (v3) is predicted at v3. Tests on the committed CSVs
// fail if a later change to the model breaks the out-of-sample check.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "attention/prefill_version.hpp"
#include "calibrated_model.hpp"
#include "calibration_check.hpp"
#include "config.hpp"
#include "errors.hpp"
#include "prefill_versions.hpp"
#include "result_csv.hpp"

namespace {

using namespace yoco::cost;
using yoco::InputError;
using yoco::cli::make_row;
using yoco::cli::Provenance;
using yoco::cli::ResultRow;
using yoco::cost::calibration_detail::PrefillVersions;

std::filesystem::path repo() { return std::filesystem::path(YOCO_TEST_DATA_DIR).parent_path().parent_path(); }
std::string at(const std::string& rel) { return (repo() / rel).string(); }
std::vector<ResultRow> rows_of(const std::string& rel) { return yoco::cli::read_results_csv(at(rel)); }

// The calibration scripts/calibrate.sh writes: the committed H100 sweep with its kernel benchmark.
Calibration committed_calibration() {
  Calibration c = fit_calibration(rows_of("reports/results/nvidia-h100/sweep.csv"), "sweep.csv");
  add_kernel_bench(c, rows_of("reports/results/nvidia-h100/kernels.csv"), "kernels.csv");
  return c;
}

template <class F>
void expect_input_error(F&& f, const std::string& needle) {
  try {
    f();
    ADD_FAILURE() << "no InputError (expected one with '" << needle << "')";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(PrefillVersions, KernelNamesAndTheDispatchersChoice) {
  using yoco::cuda::flash_prefill_version;
  using yoco::cuda::flash_prefill_version_of_kernel;
  EXPECT_EQ(flash_prefill_version_of_kernel("flash_prefill_v1_kernel"), 1);
  EXPECT_EQ(flash_prefill_version_of_kernel("flash_prefill_v3_kernel"), 3);
  EXPECT_EQ(flash_prefill_version_of_kernel("flash_prefill_sm90_kernel"), 2) << "v2's name at ef61249";
  EXPECT_EQ(flash_prefill_version_of_kernel("flash_prefill_kernel"), 1) << "v1's name at ef61249";
  EXPECT_EQ(flash_prefill_version_of_kernel("flash_prefill_v4_kernel"), 0);
  EXPECT_EQ(flash_prefill_version_of_kernel("flash_prefill_v33_kernel"), 0);
  EXPECT_EQ(flash_prefill_version_of_kernel("flash_fwd_kernel"), 0) << "a peer's kernel";
  EXPECT_EQ(flash_prefill_version(128, true), yoco::cuda::kHopperPrefillVersion);
  EXPECT_EQ(flash_prefill_version(64, true), 1);
  EXPECT_EQ(flash_prefill_version(128, false), 1);
  EXPECT_EQ(runner_layout_of_notes("median of 3; prefill chunk 32768; attention prefill v3").attention_prefill_version, 3);
  EXPECT_EQ(runner_layout_of_notes("attention prefill v9").attention_prefill_version, 0);
  EXPECT_EQ(runner_layout_of_notes("prefill chunk 32768").attention_prefill_version, 0);
}

// Notes first, then the point's CUPTI kernel rows (the kernel with the most
// time), then the same model's other points at the same commit where they agree.
TEST(PrefillVersions, APointsNotesOrCuptiRowsSayWhichVersionItRan) {
  Provenance a = Provenance::here("cuda", "NVIDIA H100 80GB HBM3", ""), b = a;
  a.git_sha = "aaaa", b.git_sha = "bbbb";
  auto kernel = [](const Provenance& p, const char* model, int64_t len, const char* name, double s) {
    return make_row(p, model, len, 1, 0, std::string("prefill:") + name, "kernel_time_s", s, "s", "measured", 1, "");
  };
  auto prefill = [](const Provenance& p, const char* model, int64_t len, const std::string& notes) {
    return make_row(p, model, len, 1, 0, "prefill", "prefill_latency_s", 1.0, "s", "measured", 3, notes);
  };
  const std::vector<ResultRow> rows = {
      kernel(a, "transformer-3b", 32768, "flash_prefill_v2_kernel", 0.2),
      kernel(a, "transformer-3b", 32768, "flash_prefill_v1_kernel", 0.1),
      kernel(a, "transformer-3b", 32768, "nvjet_sm90_tst_192x192", 9.0),
      prefill(a, "transformer-3b", 65536, "prefill chunk 32768; attention prefill v3"),
      kernel(a, "transformer-3b", 65536, "flash_prefill_v2_kernel", 1.0),
      kernel(a, "transformer-small", 4096, "flash_prefill_v1_kernel", 0.01),
      kernel(a, "transformer-small", 16384, "flash_prefill_v1_kernel", 0.02),
  };
  const PrefillVersions v(rows);
  EXPECT_EQ(v.of(prefill(a, "transformer-3b", 32768, "")), 2) << "the flash kernel with the most time";
  EXPECT_EQ(v.of(prefill(a, "transformer-3b", 65536, "")), 3) << "the notes' words before the kernel rows";
  EXPECT_EQ(v.of(prefill(a, "transformer-3b", 131072, "")), 0) << "its other points disagree (v2, v3)";
  EXPECT_EQ(v.of(prefill(a, "transformer-small", 65536, "")), 1) << "its other points at the commit agree";
  EXPECT_EQ(v.of(prefill(b, "transformer-small", 4096, "")), 0) << "another commit: nothing says";
  EXPECT_EQ(v.of(prefill(a, "yoco-3b", 32768, "")), 0);
  // A row's own words first: a throughput row's point (its batch) has no prefill row of its own.
  ResultRow tp = make_row(a, "transformer-small", 4096, 1024, 1024, "throughput", "throughput_tokens_per_s", 1e5,
                          "tokens/s", "sampled", 1, "prefill sampled; attention prefill v3");
  EXPECT_EQ(v.of(tp), 3);
  tp.notes = "prefill sampled";
  EXPECT_EQ(v.of(tp), 1) << "else what the model's points at the commit agree on";
}

// Models whose prefill runs no flash prefill (YOCO with gRet) are priced at no version at all; YOCO with
// SWA at its self-decoder's head dim.
TEST(PrefillVersions, OnlyModelsWithAFlashPrefillArePricedByVersion) {
  using yoco::cost::calibration_detail::prefill_version_scale;
  using yoco::cost::calibration_detail::runner_prefill_version;
  EXPECT_EQ(runner_prefill_version(yoco::preset_config("yoco-3b")), 0);
  EXPECT_EQ(runner_prefill_version(yoco::preset_config("transformer-3b")), yoco::cuda::kHopperPrefillVersion);
  EXPECT_EQ(runner_prefill_version(yoco::preset_config("transformer-small")), 1) << "head dim 64";
  const Calibration c = committed_calibration();
  std::string note = "stale";
  EXPECT_DOUBLE_EQ(prefill_version_scale(c, yoco::preset_config("yoco-3b"), 0, &note), 1.0);
  EXPECT_EQ(note, "");
  EXPECT_DOUBLE_EQ(prefill_version_scale(c, yoco::preset_config("transformer-3b"), 2, &note), 1.0);
  EXPECT_DOUBLE_EQ(prefill_version_scale(c, yoco::preset_config("transformer-3b"), 0, &note),
                   c.attention_prefill_time_ratio[2]);
  EXPECT_DOUBLE_EQ(prefill_version_scale(c, yoco::preset_config("transformer-small"), 0, &note),
                   c.attention_prefill_time_ratio[0]);
  Calibration unmeasured = c;
  unmeasured.attention_prefill_time_ratio[2] = 0;
  EXPECT_DOUBLE_EQ(prefill_version_scale(unmeasured, yoco::preset_config("transformer-3b"), 3, &note), 1.0);
  EXPECT_NE(note.find("priced as the fit's v2"), std::string::npos) << note;
}

// The committed sweep (ef61249) ran v2: its CUPTI rows name flash_prefill_sm90_kernel. Its card's
// kernel benchmark (fbb7a50) times v3 at 0.74-0.82 of v2 and v1 at 1.4 times it.
TEST(PrefillVersions, TheCommittedH100FitIsV2AndTheRunnersV3IsPricedByItsKernelBenchmark) {
  const Calibration c = committed_calibration();
  EXPECT_EQ(c.attention_prefill_fit_version, 2);
  EXPECT_DOUBLE_EQ(c.attention_prefill_time_ratio[1], 1.0);
  EXPECT_EQ(c.attention_prefill_ratio_shapes[2], 8) << "6 causal lengths, a chunk at q0 96K, a window of 1024";
  EXPECT_GT(c.attention_prefill_time_ratio[2], 0.73);
  EXPECT_LT(c.attention_prefill_time_ratio[2], 0.82);
  EXPECT_EQ(c.attention_prefill_ratio_shapes[0], 4);
  EXPECT_GT(c.attention_prefill_time_ratio[0], 1.3);
  EXPECT_LT(c.attention_prefill_time_ratio[0], 1.5);

  // The compute-bound part of the prefill attention scales; its fixed cost a layer does not.
  const yoco::ModelConfig t = yoco::preset_config("transformer-3b");
  const DeviceSpec ceil = calibrated_ceilings(c, DeviceSpec{});
  RunnerLayout v2 = current_runner_layout(), v3 = v2, now = v2;
  v2.attention_prefill_version = 2;
  v3.attention_prefill_version = 3;
  const Storage st;
  const auto p2 = calibrated_prefill(t, st, c, ceil, 1, 131072, 32768, v2);
  const auto p3 = calibrated_prefill(t, st, c, ceil, 1, 131072, 32768, v3);
  const auto pn = calibrated_prefill(t, st, c, ceil, 1, 131072, 32768, now);
  const int a = static_cast<int>(Family::attention);
  const double fixed = c.fit(true, Family::attention, Bound::compute).per_layer_s * static_cast<double>(t.n_layers);
  EXPECT_NEAR(p3.family_s[a] - fixed, (p2.family_s[a] - fixed) * c.attention_prefill_time_ratio[2], 1e-9);
  EXPECT_DOUBLE_EQ(pn.family_s[a], p3.family_s[a]) << "the runners run v3 at head dim 128 now";
  EXPECT_DOUBLE_EQ(p3.family_s[0], p2.family_s[0]) << "the GEMMs do not change";
  EXPECT_EQ(p2.kernels, "");
  EXPECT_NE(p3.kernels.find("attention prefill v3 at 0.7"), std::string::npos) << p3.kernels;
  // YOCO's gRet prefill runs no flash prefill: no version, no note.
  const yoco::ModelConfig y = yoco::preset_config("yoco-3b");
  EXPECT_EQ(calibrated_prefill(y, st, c, ceil, 1, 131072, 32768, now).kernels, "");
  // The in-sample check keeps its bound: each point is priced at the v2 it ran.
  for (const auto& k : check_calibration(rows_of("reports/results/nvidia-h100/sweep.csv"), c))
    EXPECT_LE(std::abs(k.ratio() - 1), 0.15) << k.model << " " << k.seq_len << " " << k.metric;
}

// Issue 35's out-of-sample test: every committed H200 point (its runs at cb63047, whose dispatcher ran
// v3 and whose run-07 CUPTI names flash_prefill_v3_kernel) predicted by the H100 calibration within
// the 20%. Priced at the fit's v2, the Transformer's 1M prefill was 26% long.
TEST(PrefillVersions, TheH200RunIsPredictedAtTheVersionItRanWithin20Percent) {
  std::vector<ResultRow> run;
  for (const char* f : {"beyond.csv", "beyond-decode.csv", "long-points.csv"})
    for (auto& r : rows_of(std::string("reports/results/nvidia-h200/") + f)) run.push_back(std::move(r));
  const Calibration c = committed_calibration();
  int transformer = 0;
  for (const auto& k : check_calibration(run, c)) {
    EXPECT_LE(std::abs(k.ratio() - 1), 0.20) << k.model << " " << k.seq_len << " " << k.metric;
    if (k.model == "transformer-3b" && k.metric == "prefill_latency_s") {
      ++transformer;
      Calibration as_fitted = c;
      as_fitted.attention_prefill_fit_version = 0;  // what the calibration said before it held versions
      for (const auto& old : check_calibration(run, as_fitted)) {
        if (old.model == k.model && old.metric == k.metric && old.seq_len == k.seq_len) {
          EXPECT_GT(old.ratio(), 1.2) << "v2's rate for a v3 run";
        }
      }
    }
  }
  EXPECT_EQ(transformer, 1);
}

TEST(PrefillVersions, TheFitAndTheKernelBenchmarkRefuseWhatTheyCannotPair) {
  const auto sweep = rows_of("reports/results/nvidia-h100/sweep.csv");
  auto kernels = rows_of("reports/results/nvidia-h100/kernels.csv");
  Calibration c = fit_calibration(sweep, "sweep.csv");
  // Another card's kernel benchmark.
  auto h200 = rows_of("reports/results/nvidia-h200/kernels.csv");
  expect_input_error([&] { add_kernel_bench(c, h200, "h200-kernels.csv"); },
                     "--kernels h200-kernels.csv: a row of ceiling ran on 'NVIDIA H200'");
  // A file with no attn_prefill rows: said so, not "another card".
  expect_input_error([&] { add_kernel_bench(c, {}, "empty.csv"); }, "--kernels empty.csv: no measured attn_prefill rows");
  // A benchmark without v2 beside another version.
  std::vector<ResultRow> v3_only;
  for (const auto& r : kernels)
    if (r.phase.find(" v2") == std::string::npos) v3_only.push_back(r);
  expect_input_error([&] { add_kernel_bench(c, v3_only, "k.csv"); }, "k.csv: no attn_prefill shape has v2");
  // A fit that names no version (no flash kernel rows).
  Calibration none = c;
  none.attention_prefill_fit_version = 0;
  expect_input_error([&] { add_kernel_bench(none, kernels, "k.csv"); }, "--kernels k.csv: the sweep sweep.csv names no");
  // Points of two versions in one fit.
  std::vector<ResultRow> mixed = sweep;
  for (auto& r : mixed)
    if (r.model == "transformer-3b" && r.seq_len == 131072 && r.phase == "prefill:flash_prefill_sm90_kernel")
      r.phase = "prefill:flash_prefill_v3_kernel";
  expect_input_error([&] { fit_calibration(mixed, "mixed.csv"); }, "mixed.csv: its points' prefill attention ran");
  // A what-if on the attention prices every version at its efficiency.
  Calibration w = committed_calibration();
  apply_what_if(w, "attention.compute=0.781");
  EXPECT_EQ(w.attention_prefill_fit_version, 0);
  Calibration g = committed_calibration();
  apply_what_if(g, "gemm=ceiling");
  EXPECT_EQ(g.attention_prefill_fit_version, 2);
  // attention_prefill=vN: every point at vN's time, whatever it ran; said without a version note where
  // that is the fit's own.
  const yoco::ModelConfig t = yoco::preset_config("transformer-3b");
  const Calibration base = committed_calibration();
  const DeviceSpec ceil = calibrated_ceilings(base, DeviceSpec{});
  RunnerLayout ran_v2 = current_runner_layout(), now = ran_v2;
  ran_v2.attention_prefill_version = 2;
  Calibration as_v2 = base;
  EXPECT_EQ(apply_what_if(as_v2, "attention_prefill=v2"), "attention prefill at v2's time (the fit's own)");
  const auto p_now = calibrated_prefill(t, Storage{}, as_v2, ceil, 1, 131072, 32768, now);
  EXPECT_DOUBLE_EQ(p_now.total_s, calibrated_prefill(t, Storage{}, base, ceil, 1, 131072, 32768, ran_v2).total_s);
  EXPECT_EQ(p_now.kernels, "");
  Calibration as_v3 = base;
  apply_what_if(as_v3, "attention_prefill=v3");
  EXPECT_DOUBLE_EQ(calibrated_prefill(t, Storage{}, as_v3, ceil, 1, 131072, 32768, ran_v2).total_s,
                   calibrated_prefill(t, Storage{}, base, ceil, 1, 131072, 32768, now).total_s);
  Calibration bad = base;
  expect_input_error([&] { apply_what_if(bad, "attention_prefill=v7"); }, "--what-if: attention_prefill takes");
  bad.attention_prefill_time_ratio[0] = 0;
  expect_input_error([&] { apply_what_if(bad, "attention_prefill=v1"); },
                     "--what-if attention_prefill=v1: the calibration has no time for v1 beside its fit's v2");
}

// The versions in the calibration file: written and read back; a file from before them reads as
// fitted then (no version priced apart); a bad value names the file and line.
TEST(PrefillVersions, TheFileHoldsTheVersionsAndAnOlderFileReadsWithout) {
  const Calibration c = committed_calibration();
  std::ostringstream csv;
  yoco::cli::write_results_csv(csv, calibration_rows(c, Provenance::here("calibration", "calibrated on x", "")));
  const std::string f = (std::filesystem::temp_directory_path() /
                         ("yoco_pv_" + std::to_string(::getpid()) + ".csv")).string();
  auto write = [&](const std::string& text) {
    std::ofstream out(f);
    out << text;
  };
  write(csv.str());
  const Calibration back = read_calibration(f);
  EXPECT_EQ(back.attention_prefill_fit_version, 2);
  EXPECT_EQ(c.kernel_bench, "kernels.csv (fbb7a501926e 2026-11-26)") << "the benchmark's file and run";
  EXPECT_EQ(back.kernel_bench, c.kernel_bench) << "read back, so that a rewrite still names it";
  for (int v = 0; v < kPrefillVersionSlots; ++v) {
    EXPECT_DOUBLE_EQ(back.attention_prefill_time_ratio[v], c.attention_prefill_time_ratio[v]);
    EXPECT_EQ(back.attention_prefill_ratio_shapes[v], c.attention_prefill_ratio_shapes[v]);
  }
  std::istringstream in(csv.str());
  std::string older, bad, line;
  int n = 0, bad_line = 0;
  while (std::getline(in, line)) {
    ++n;
    if (line.find("calibration:attention_prefill") == std::string::npos) older += line + "\n";
    // value, unit, method, repeats, min, max: min and max too, so that the row stays one the reader takes.
    const std::string was = ",fit_version,2,count,calibrated,0,2,2,";
    if (const size_t p = line.find(was); p != std::string::npos) {
      line.replace(p, was.size(), ",fit_version,7,count,calibrated,0,7,7,");
      bad_line = n;
    }
    bad += line + "\n";
  }
  write(older);
  EXPECT_EQ(read_calibration(f).attention_prefill_fit_version, 0);
  write(bad);
  expect_input_error([&] { read_calibration(f); }, f + ":" + std::to_string(bad_line) + ": fit_version is 7");
  // Values each row allows but the group does not: a ratio that would price v3 at nothing, the fit's own
  // version off 1, and a group cut short.
  auto with = [&](const std::string& from, const std::string& to) {
    std::string text = csv.str();
    const size_t p = text.find(from);
    EXPECT_NE(p, std::string::npos) << from;
    if (p != std::string::npos) text.replace(p, from.size(), to);
    write(text);
  };
  auto line_of = [&](const std::string& metric) {
    std::istringstream lines(csv.str());
    int k = 0;
    for (std::string l; std::getline(lines, l);)
      if (++k > 1 && l.find("calibration:attention_prefill," + metric + ",") != std::string::npos) return k;
    return 0;
  };
  std::ostringstream v3_text;
  v3_text.precision(17);
  v3_text << c.attention_prefill_time_ratio[2];
  const std::string was = ",v3_time_ratio," + v3_text.str() + ",x,calibrated,0," + v3_text.str() + "," +
                          v3_text.str() + ",";
  with(was, ",v3_time_ratio,1e-300,x,calibrated,0,1e-300,1e-300,");
  expect_input_error([&] { read_calibration(f); },
                     f + ":" + std::to_string(line_of("v3_time_ratio")) +
                         ": calibration:attention_prefill v3_time_ratio is 1e-300 with 8 shapes");
  with(",v2_time_ratio,1,x,calibrated,0,1,1,", ",v2_time_ratio,0.5,x,calibrated,0,0.5,0.5,");
  expect_input_error([&] { read_calibration(f); }, "v2_time_ratio is 0.5 with 0 shapes: it must be 1");
  std::string cut;
  {
    std::istringstream lines(csv.str());
    for (std::string l; std::getline(lines, l);)
      if (l.find("calibration:attention_prefill,v1_shapes,") == std::string::npos) cut += l + "\n";
  }
  write(cut);
  expect_input_error([&] { read_calibration(f); }, "no row calibration:attention_prefill v1_shapes");
  std::filesystem::remove(f);
}

}  // namespace
