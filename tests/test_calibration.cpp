// The calibrated cost model (bench/analytic/calibration): the fit recovers
// known efficiencies, a family without points keeps the roofline and says so,
// the committed H100 sweep is predicted within the issue's bounds, the file
// round-trips, and a bad file is an InputError naming the file and line.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "calibration_check.hpp"
#include "config.hpp"
#include "errors.hpp"
#include "result_csv.hpp"
#include "runner/launch_count.hpp"

namespace {

using namespace yoco::cost;
using yoco::InputError;
using yoco::cli::make_row;
using yoco::cli::Provenance;
using yoco::cli::ResultRow;

std::filesystem::path repo() { return std::filesystem::path(YOCO_TEST_DATA_DIR).parent_path().parent_path(); }

std::string temp(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("yoco_cal_" + std::to_string(::getpid()) + "_" + name)).string();
}

// A sweep whose CUPTI times follow the model exactly: family time =
// roofline x k + layers x c, for known k and c (gret left out).
std::vector<ResultRow> synthetic_sweep(double k_gemm, double c_norms) {
  const Provenance prov = Provenance::here("cuda", "NVIDIA H100 80GB HBM3", "");
  std::vector<ResultRow> rows{make_row(prov, "-", 0, 1, 0, "ceiling", "gemm_peak_tflops", 800.0, "TFLOP/s", "measured", 1, ""),
                              make_row(prov, "-", 0, 1, 0, "ceiling", "copy_bw_gbs", 3000.0, "GB/s", "measured", 1, "")};
  const DeviceSpec dev{"x", 800e12, 3000e9, 0, ""};
  const Storage st;
  for (const char* model : {"yoco-3b", "transformer-3b"})
    for (int64_t len : {32768, 131072, 524288}) {
      const yoco::ModelConfig cfg = yoco::preset_config(model);
      const PhaseWork w = prefill_work(cfg, st, 1, len, 32768);
      const double gemm = k_gemm * (roofline_time(w[Part::gemm], dev) + roofline_time(w[Part::lm_head], dev));
      const double norms = roofline_time(w[Part::norms], dev) * 2.0 + c_norms * static_cast<double>(cfg.n_layers);
      const double att = roofline_time(w[Part::attention], dev) * 1.5;
      rows.push_back(make_row(prov, model, len, 1, 0, "prefill.gemm", "gpu_time_s", gemm, "s", "measured", 1, ""));
      rows.push_back(make_row(prov, model, len, 1, 0, "prefill.norms", "gpu_time_s", norms, "s", "measured", 1, ""));
      rows.push_back(make_row(prov, model, len, 1, 0, cfg.is_yoco() ? "prefill.attention_decode" : "prefill.attention_prefill",
                              "gpu_time_s", att, "s", "measured", 1, ""));
      rows.push_back(
          make_row(prov, model, len, 1, 0, "prefill.kernels", "gpu_time_s", gemm + norms + att, "s", "measured", 1, ""));
      rows.push_back(make_row(prov, model, len, 1, 0, "prefill", "prefill_latency_s", (gemm + norms + att) * 1.01, "s",
                              "measured", 3, ""));
    }
  return rows;
}

TEST(Calibration, TheFitRecoversKnownEfficienciesAndAMissingFamilyKeepsTheRoofline) {
  const Calibration c = fit_calibration(synthetic_sweep(1.25, 20e-6), "synthetic");
  const FamilyFit& gemm = c.fit(true, Family::gemm, Bound::compute);
  EXPECT_EQ(gemm.points, 6);
  EXPECT_NEAR(gemm.inverse_efficiency, 1.25, 1e-9);
  EXPECT_NEAR(gemm.per_layer_s, 0.0, 1e-12);
  const FamilyFit& norms = c.fit(true, Family::norms, Bound::memory);
  EXPECT_NEAR(norms.inverse_efficiency, 2.0, 1e-9);
  EXPECT_NEAR(norms.per_layer_s, 20e-6, 1e-12);
  EXPECT_NEAR(c.prefill_gap, 0.01, 1e-12);
  EXPECT_EQ(c.fit(true, Family::gret, Bound::memory).points, 0);
  EXPECT_EQ(c.fit(false, Family::gemm, Bound::memory).points, 0);
  // yoco-3b's prefill has gRet work and no fit for it: the roofline, said so.
  const yoco::ModelConfig y = yoco::preset_config("yoco-3b");
  const DeviceSpec ceil = calibrated_ceilings(c, DeviceSpec{});
  const PhaseWork w = prefill_work(y, Storage{}, 1, 65536, 32768);
  const CalibratedPhase p = calibrated_phase(y, w, true, c, ceil);
  EXPECT_NE(p.fallback.find("gret memory: the roofline"), std::string::npos) << p.fallback;
  EXPECT_NEAR(p.family_s[static_cast<int>(Family::gret)], roofline_time(w[Part::gret], ceil), 1e-15);
  EXPECT_NEAR(p.total_s, (p.family_s[0] + p.family_s[1] + p.family_s[2] + p.family_s[3]) * 1.01, 1e-12);
}

// A two-parameter fit passes through two points exactly: its 0% residual is no band. Below
// kMinBandPoints points, and at the roofline (no points), a prediction says it has none.
TEST(Calibration, AFitOfTooFewPointsOrTheRooflineGivesNoBand) {
  Calibration c = fit_calibration(synthetic_sweep(1.25, 20e-6), "synthetic");
  const yoco::ModelConfig t = yoco::preset_config("transformer-3b");
  const DeviceSpec ceil = calibrated_ceilings(c, DeviceSpec{});
  const PhaseWork w = prefill_work(t, Storage{}, 1, 65536, 32768);
  EXPECT_EQ(calibrated_phase(t, w, true, c, ceil).unbanded, "");  // 6 points a family
  auto& gemm = c.prefill[static_cast<int>(Family::gemm)][static_cast<int>(Bound::compute)];
  gemm.points = kMinBandPoints - 1;
  EXPECT_EQ(calibrated_phase(t, w, true, c, ceil).unbanded, "gemm compute: 2 points, fewer than 3");
  gemm.points = kMinBandPoints;
  EXPECT_EQ(calibrated_phase(t, w, true, c, ceil).unbanded, "");
  // The decode step has no fit at all: every family at the roofline, said so, and so its throughput.
  const CalibratedPhase d = calibrated_decode(t, Storage{}, c, ceil, 1, 65536, RunnerLayout{});
  EXPECT_NE(d.unbanded.find("gemm memory: the roofline, no points"), std::string::npos) << d.unbanded;
  std::string why;
  calibrated_throughput(t, Storage{}, c, ceil, 65536, 16, 1, 32768, nullptr, false, RunnerLayout{}, &why);
  EXPECT_EQ(why, "decode " + d.unbanded);
  // The file says which families are too thin for a band.
  const auto rows = calibration_rows(c, Provenance::here("calibration", "calibrated on x", ""));
  const auto at = std::find_if(rows.begin(), rows.end(), [](const ResultRow& r) {
    return r.phase == "calibration:prefill.gemm.compute" && r.metric == "points";
  });
  ASSERT_NE(at, rows.end());
  EXPECT_EQ(at->notes.find("no band"), std::string::npos) << at->notes;
  gemm.points = 2;
  const auto thin = calibration_rows(c, Provenance::here("calibration", "calibrated on x", ""));
  EXPECT_NE(thin[at - rows.begin()].notes.find("2 points, fewer than 3: no band"), std::string::npos)
      << thin[at - rows.begin()].notes;
}

// A family's time is no shorter than either resource at its fitted rate:
// work the raw rooflines call memory-bound, but whose FLOPs at the kernels'
// sustained compute rate take longer, is priced by the compute fit.
TEST(Calibration, AFamilyNearTheBalanceIsPricedByTheSlowerResourceAtItsFittedRate) {
  Calibration c = fit_calibration(synthetic_sweep(1.0, 0), "synthetic");
  const DeviceSpec ceil = calibrated_ceilings(c, DeviceSpec{});
  auto& compute = c.prefill[static_cast<int>(Family::attention)][static_cast<int>(Bound::compute)];
  auto& memory = c.prefill[static_cast<int>(Family::attention)][static_cast<int>(Bound::memory)];
  compute = FamilyFit{2.0, 0.0, 4, 0.0};
  memory = FamilyFit{1.0, 0.0, 4, 0.0};
  const yoco::ModelConfig t = yoco::preset_config("transformer-small");
  PhaseWork w;
  w[Part::attention].bytes = 1e9;                                 // 1 GB: memory roofline 1e9 / 3e12
  w[Part::attention].flops = 0.75 * 1e9 / 3000e9 * 800e12;        // compute roofline 3/4 of it
  const double mem_s = 1e9 / 3000e9;
  const auto a = static_cast<int>(Family::attention);
  EXPECT_NEAR(calibrated_phase(t, w, true, c, ceil).family_s[a], 1.5 * mem_s, 1e-12);  // compute at half the peak
  compute.points = 0;  // without a compute fit the raw roofline's bound stands
  EXPECT_NEAR(calibrated_phase(t, w, true, c, ceil).family_s[a], mem_s, 1e-12);
}

// The runners' kernels as the calibrated model sees them: the flash kernel's
// query tiles always; the FFN's up half fused only where the layout says so
// (YOCO_FFN_FUSED=1, a row's notes) and the shape is the fused kernel's; a
// fused yoco-3b prefill at 512K predicted shorter, by the fused bytes' time.
TEST(Calibration, TheFusedFfnUpHalfIsPricedWhereTheRunnerUsedIt) {
  const yoco::ModelConfig y = yoco::preset_config("yoco-3b");
  RunnerLayout plain = current_runner_layout(), fused = plain;
  EXPECT_FALSE(plain.ffn_up_fused);  // off by default until measured
  fused.ffn_up_fused = true;
  EXPECT_EQ(runner_kernels(y, plain).ffn_up_fused_from_rows, 0);
  EXPECT_EQ(runner_kernels(y, fused).ffn_up_fused_from_rows, 1024);
  EXPECT_EQ(runner_kernels(y, fused).attention_tile_rows, 128);
  // yoco-tiny's shape is not the fused kernel's: the pair, fused or not.
  const yoco::ModelConfig tiny = yoco::preset_config("yoco-tiny");
  ASSERT_TRUE(tiny.hidden_dim % 128 != 0 || tiny.dim % 64 != 0) << "the premise: a shape the kernel refuses";
  EXPECT_EQ(runner_kernels(tiny, fused).ffn_up_fused_from_rows, 0);
  EXPECT_TRUE(runner_layout_of_notes(std::string("median of 3; ") + ffn_up_fused_note()).ffn_up_fused);
  EXPECT_FALSE(runner_layout_of_notes("median of 3; global K/V batched").ffn_up_fused);
  const std::string sweep = (repo() / "reports/results/nvidia-h100/sweep.csv").string();
  const Calibration c = fit_calibration(yoco::cli::read_results_csv(sweep), sweep);
  const DeviceSpec ceil = calibrated_ceilings(c, DeviceSpec{});
  const int64_t n = 512 * 1024;
  const double t_plain = calibrated_prefill(y, Storage{}, c, ceil, 1, n, 32768, plain).total_s;
  const double t_fused = calibrated_prefill(y, Storage{}, c, ceil, 1, n, 32768, fused).total_s;
  EXPECT_LT(t_fused, t_plain);
  // At most the saved bytes at the copy ceiling, times the norms' and GEMMs' fitted inverse efficiencies.
  const double saved_bytes = 4.0 * y.n_self_layers() * n * y.hidden_dim * 2;
  EXPECT_LT(t_plain - t_fused, 3.0 * saved_bytes / ceil.bandwidth);
  EXPECT_GT(t_plain - t_fused, 0.5 * saved_bytes / ceil.bandwidth);
}

TEST(Calibration, ProjectionsScaleTheDatasheetByTheMeasuredRatios) {
  const Calibration c = fit_calibration(synthetic_sweep(1.0, 0), "synthetic");
  const DeviceSpec own = calibrated_ceilings(c, device_spec("h100"));
  EXPECT_DOUBLE_EQ(own.peak_flops, 800e12);
  EXPECT_DOUBLE_EQ(own.bandwidth, 3000e9);
  const DeviceSpec h200 = calibrated_ceilings(c, device_spec("h200"));
  EXPECT_NEAR(h200.bandwidth, 4.8e12 * 3000e9 / 3.35e12, 1.0);
  EXPECT_NEAR(h200.peak_flops, 800e12, 1.0);  // same tensor cores
  EXPECT_NE(h200.source.find("scaled"), std::string::npos);
}

// The committed H100 sweep, predicted by the calibration fitted on it: the
// issue's bound (±15% for the 3B presets, every metric). A change to the cost
// model or the fit that breaks it fails here.
TEST(Calibration, TheCommittedH100SweepIsPredictedWithin15Percent) {
  const std::string sweep = (repo() / "reports/results/nvidia-h100/sweep.csv").string();
  const auto rows = yoco::cli::read_results_csv(sweep);
  const Calibration c = fit_calibration(rows, sweep);
  const auto checks = check_calibration(rows, c);
  std::map<std::string, int> per_metric;
  for (const auto& k : checks) {
    ++per_metric[k.metric];
    const double bound = k.model.find("-3b") != std::string::npos ? 0.15 : 0.30;
    EXPECT_LE(std::abs(k.ratio() - 1), bound)
        << k.model << " " << k.seq_len << " " << k.metric << ": predicted " << k.predicted << ", measured " << k.measured;
  }
  // Every kind of point is there: 11 prefills (the Transformer's 1M is out of
  // memory), 11 decode steps, 10 throughputs, 11 memory totals.
  EXPECT_EQ(per_metric["prefill_latency_s"], 11);
  EXPECT_EQ(per_metric["decode_step_latency_s"], 11);
  EXPECT_EQ(per_metric["throughput_tokens_per_s"], 10);
  EXPECT_EQ(per_metric["mem_total_bytes"], 11);
}

// A second card's run checked against the H100 calibration (issue 35: the
// H200 sweep is the cost model's out-of-sample test): by default on the
// projection the model made before the run (the H200 datasheet scaled by the
// H100's measured / datasheet ratios, as `yoco model --device-spec h200`),
// or on the run's own measured ceilings, or on a named datasheet. The "H200
// run" here is the committed H100 sweep relabelled, its ceilings changed.
TEST(Calibration, ASecondCardIsCheckedOnItsProjectionOrItsOwnCeilings) {
  const std::string sweep = (repo() / "reports/results/nvidia-h100/sweep.csv").string();
  const auto h100_rows = yoco::cli::read_results_csv(sweep);
  const Calibration c = fit_calibration(h100_rows, sweep);
  std::vector<ResultRow> h200_rows = h100_rows;
  for (auto& r : h200_rows) {
    if (r.prov.device != "cuda") continue;
    r.prov.device_name = "NVIDIA H200";
    if (r.phase == "ceiling" && r.metric == "copy_bw_gbs") r.value = 4300.0;
    if (r.phase == "ceiling" && r.metric == "gemm_peak_tflops") r.value = 790.0;
  }
  // The H100's own rows: its own ceilings, whatever the mode but run.
  const CheckCeilings own = check_ceilings(h100_rows, c, "auto", sweep);
  EXPECT_DOUBLE_EQ(own.ceil.bandwidth, c.bandwidth);
  EXPECT_EQ(check_ceilings(h100_rows, c, "h100", sweep).ceil.bandwidth, c.bandwidth);
  // The H200's: the projection.
  const CheckCeilings proj = check_ceilings(h200_rows, c, "auto", "h200.csv");
  EXPECT_DOUBLE_EQ(proj.ceil.bandwidth, calibrated_ceilings(c, device_spec("h200")).bandwidth);
  EXPECT_NEAR(proj.ceil.bandwidth, c.bandwidth * 4.8 / 3.35, 1e3);
  EXPECT_NE(proj.how.find("H200"), std::string::npos) << proj.how;
  EXPECT_NE(proj.how.find("scaled"), std::string::npos) << proj.how;
  EXPECT_EQ(proj.ceil.sm_count, 132);
  const CheckCeilings run = check_ceilings(h200_rows, c, "run", "h200.csv");
  EXPECT_DOUBLE_EQ(run.ceil.bandwidth, 4300e9);
  EXPECT_DOUBLE_EQ(run.ceil.peak_flops, 790e12);
  EXPECT_NE(run.how.find("measured"), std::string::npos) << run.how;
  // A memory-bound point is predicted faster on the projected H200; check_calibration's
  // default is the auto ceilings.
  const auto on_h100 = check_calibration(h200_rows, c, own.ceil), on_h200 = check_calibration(h200_rows, c);
  ASSERT_EQ(on_h100.size(), on_h200.size());
  int decode = 0;
  for (size_t i = 0; i < on_h100.size(); ++i)
    if (on_h100[i].metric == "decode_step_latency_s" && on_h100[i].model == "yoco-3b") {
      ++decode;
      EXPECT_LT(on_h200[i].predicted, on_h100[i].predicted * 0.9) << on_h100[i].seq_len;
      EXPECT_GT(on_h200[i].predicted, on_h100[i].predicted * 3.35 / 4.8 * 0.95) << on_h100[i].seq_len;
    }
  EXPECT_GT(decode, 0);
  // What a mode needs, and names it.
  std::vector<ResultRow> no_ceilings;
  for (const auto& r : h200_rows)
    if (r.phase != "ceiling") no_ceilings.push_back(r);
  try {
    check_ceilings(no_ceilings, c, "run", "h200.csv");
    ADD_FAILURE() << "no error for run without ceilings";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("h200.csv"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("--ceilings run"), std::string::npos) << e.what();
  }
  EXPECT_DOUBLE_EQ(check_ceilings(no_ceilings, c, "auto", "h200.csv").ceil.bandwidth, proj.ceil.bandwidth)
      << "the card's name comes from any GPU row when the ceilings are missing";
  EXPECT_THROW(check_ceilings(h200_rows, c, "a100", "h200.csv"), InputError);
  // A card with no datasheet here: its own ceilings, never the H100's under its name; without them, an error.
  std::vector<ResultRow> a100_rows = h200_rows, a100_bare;
  for (auto& r : a100_rows)
    if (r.prov.device == "cuda") r.prov.device_name = "NVIDIA A100-SXM4-80GB";
  const CheckCeilings a100 = check_ceilings(a100_rows, c, "auto", "a100.csv");
  EXPECT_DOUBLE_EQ(a100.ceil.bandwidth, 4300e9);
  EXPECT_NE(a100.how.find("no datasheet"), std::string::npos) << a100.how;
  for (const auto& r : a100_rows)
    if (r.phase != "ceiling") a100_bare.push_back(r);
  try {
    check_ceilings(a100_bare, c, "auto", "a100.csv");
    ADD_FAILURE() << "no error for a card without a datasheet or ceilings";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("A100-SXM4-80GB' has no datasheet"), std::string::npos) << e.what();
  }
  EXPECT_EQ(datasheet_name_of("NVIDIA H200"), "h200");
  EXPECT_EQ(datasheet_name_of("NVIDIA H100 80GB HBM3"), "h100");
  EXPECT_EQ(datasheet_name_of("NVIDIA B200"), "b200");
  EXPECT_EQ(datasheet_name_of("NVIDIA A100-SXM4-80GB"), "");
}

// The calibration fitted on the committed H100 sweep, checked on a run of the
// small presets (out of sample: not in the fit).
std::vector<CalibrationCheck> small_preset_checks(const std::string& run) {
  const std::string sweep = (repo() / "reports/results/nvidia-h100/sweep.csv").string();
  const std::string small = (repo() / "reports/results/nvidia-h100/logs" / run / "models_small.csv").string();
  Calibration c = fit_calibration(yoco::cli::read_results_csv(sweep), sweep);
  // As scripts/calibrate.sh fits it: transformer-small's head dim 64 runs flash prefill v1, priced by
  // the H100 kernel benchmark's v1 / v2 times (prefill_versions.hpp).
  const std::string kernels = (repo() / "reports/results/nvidia-h100/kernels.csv").string();
  add_kernel_bench(c, yoco::cli::read_results_csv(kernels), kernels);
  return check_calibration(yoco::cli::read_results_csv(small), c);
}

// The small presets' run (run-09) is not in the fit: out of sample. Memory is
// the runners' own formula (cuda/runner/generation_bytes.hpp), every buffer of
// a 4K prefill step and the cuBLAS workspace counted; the decode step and the
// throughput (a batch of 1024 prefilled 32 tokens of each sequence a step,
// host-bound for YOCO: a K/V GEMM and RoPE per sequence a step) within the
// issue's 30%. Their 4K prefill at batch 1 is not asserted: yoco-small's is
// predicted 39% short (run-17 re-measured it without the allocations inside
// the timed prefill and it is still short: the test below).
TEST(Calibration, TheSmallPresetsAreWithin30PercentOutOfSampleButTheirPrefill) {
  std::map<std::string, int> per_metric;
  for (const auto& k : small_preset_checks("run-09-models-small-oom-profile")) {
    ++per_metric[k.metric];
    if (k.metric == "prefill_latency_s") continue;
    const double bound = k.metric == "mem_total_bytes" ? 0.01 : 0.30;
    EXPECT_LE(std::abs(k.ratio() - 1), bound)
        << k.model << " " << k.metric << ": predicted " << k.predicted << ", measured " << k.measured;
  }
  EXPECT_EQ(per_metric["mem_total_bytes"], 3);  // yoco-small, yoco-swa-small, transformer-small at 4K
  EXPECT_EQ(per_metric["decode_step_latency_s"], 3);
  EXPECT_EQ(per_metric["throughput_tokens_per_s"], 3);
}

// The small presets again (run-17: 4K and 16K, the runners keeping a
// generation's buffers across prefills of one shape, CUPTI): memory, the
// decode step and the throughput carry down (transformer-small's at 16K, a
// batch of 1024 prefilled 32 rows of each sequence a step, once the attention
// is counted in the kernel's 128-row query tiles); the YOCO prefills at batch
// 1 but yoco-small's at 4K are still predicted 45-55% short (their host calls
// cost more than a decode step's).
// The known misses are asserted as misses, so that a fix shows here.
TEST(Calibration, TheSmallPresetsOfRun17AreWithin30PercentButThreeKnownMisses) {
  std::map<std::string, int> per_metric;
  for (const auto& k : small_preset_checks("run-17-bench-models-split-rope")) {
    ++per_metric[k.metric];
    const double err = std::abs(k.ratio() - 1);
    const std::string what = k.model + " " + std::to_string(k.seq_len) + " " + k.metric + ": predicted " +
                             std::to_string(k.predicted) + ", measured " + std::to_string(k.measured);
    const std::set<std::tuple<std::string, int64_t, std::string>> known_misses = {
        {"yoco-small", 16384, "prefill_latency_s"},
        {"yoco-swa-small", 4096, "prefill_latency_s"},
        {"yoco-swa-small", 16384, "prefill_latency_s"}};
    if (known_misses.count({k.model, k.seq_len, k.metric}))
      EXPECT_GT(err, 0.30) << what << " (a known miss no longer missed: tighten the test)";
    else
      EXPECT_LE(err, k.metric == "mem_total_bytes" ? 0.01 : 0.30) << what;
  }
  EXPECT_EQ(per_metric["mem_total_bytes"], 6);  // three presets at 4K and 16K
  EXPECT_EQ(per_metric["decode_step_latency_s"], 6);
  EXPECT_EQ(per_metric["throughput_tokens_per_s"], 6);
  EXPECT_EQ(per_metric["prefill_latency_s"], 6);
}

// The runners' host calls (cuda/runner/launch_count.hpp) against the CUPTI
// launch counts of the committed sweep's decode steps: every kernel CUPTI
// recorded but cuBLAS's own split-K reductions (the host does not launch
// them) is a call, up to the few kernels the profile merged into "(rest)".
TEST(Calibration, TheRunnersDecodeCallsAreTheCuptiLaunchCounts) {
  const auto rows = yoco::cli::read_results_csv((repo() / "reports/results/nvidia-h100/sweep.csv").string());
  const std::regex launches(R"((\d+) launches per decode step)"), rest(R"(, (\d+) launches per decode step)");
  std::map<std::pair<std::string, int64_t>, std::pair<double, double>> named_and_rest;
  for (const auto& r : rows) {
    if (r.phase.rfind("decode:", 0) != 0 || r.metric != "kernel_time_s") continue;
    std::smatch m;
    ASSERT_TRUE(std::regex_search(r.notes, m, launches)) << r.phase << ": " << r.notes;
    const double n = std::stod(m[1]);
    auto& [named, merged] = named_and_rest[{r.model, r.seq_len}];
    if (r.phase == "decode:(rest)") merged += n;
    else if (r.phase.find("splitKreduce") == std::string::npos) named += n;
  }
  ASSERT_EQ(named_and_rest.size(), 11u);  // yoco-3b at 32K-1M, transformer-3b at 32K-512K
  for (const auto& [point, counts] : named_and_rest) {
    const yoco::ModelConfig cfg = yoco::preset_config(point.first);
    const double calls = yoco::cuda::runner_launches(cfg, 1, 1).decode_step;
    EXPECT_GE(calls, counts.first) << point.first << " " << point.second;
    EXPECT_LE(calls, counts.first + counts.second) << point.first << " " << point.second;
  }
}

// The host floor: a prefill whose calls take longer to enqueue than its
// kernels run takes the calls' time; a large one keeps the kernels'.
TEST(Calibration, APrefillIsBoundBelowByTheHostsCalls) {
  Calibration c = fit_calibration(synthetic_sweep(1.0, 0), "synthetic");
  EXPECT_EQ(c.host_points, 0);  // no eager steps in the synthetic sweep: no floor
  const DeviceSpec ceil = calibrated_ceilings(c, DeviceSpec{});
  const yoco::ModelConfig small = yoco::preset_config("transformer-small");
  const CalibratedPhase none = calibrated_prefill(small, Storage{}, c, ceil, 1, 1024, 32768);
  EXPECT_EQ(none.host_s, 0.0);
  c.host_call_s = 10e-6;
  const CalibratedPhase p = calibrated_prefill(small, Storage{}, c, ceil, 1, 1024, 32768);
  const auto n = yoco::cuda::transformer_runner_launches(small);
  EXPECT_DOUBLE_EQ(p.host_s, 10e-6 * (n.prefill_step + n.prefill_once));  // 1024 tokens: one step
  EXPECT_DOUBLE_EQ(p.total_s, std::max(none.total_s, p.host_s));
  EXPECT_GT(p.host_s, none.total_s) << "transformer-small's 1K prefill is host-bound at 10 us a call";
  // A batch of 1024 a step of 32 tokens each: 120 steps, and in each YOCO's global K/V as one GEMM for the
  // batch (the runners' default) or, as they did before run-17, a K/V GEMM and RoPE per sequence.
  const yoco::ModelConfig y = yoco::preset_config("yoco-small");
  EXPECT_GE(yoco::cuda::yoco_runner_launches(y, 1024, 1, false).prefill_step, 2 * 1024);
  EXPECT_LT(yoco::cuda::yoco_runner_launches(y, 1024, 1, true).prefill_step, 100);
  for (bool batched : {false, true}) {
    RunnerLayout layout;
    layout.batched_global_kv = batched;
    const CalibratedPhase b = calibrated_prefill(y, Storage{}, c, ceil, 1024, 3840, 32768, layout);
    // The chunk launch at head dim 64 is kernel 2's, which leaves the norm + gate to a kernel of its own: 1 + 1
    // launches, or 3 + 1 with segments.
    bool matched = false;
    for (double chunk_launches : {2.0, 4.0}) {
      const auto ny = yoco::cuda::yoco_runner_launches(y, 1024, chunk_launches, batched);
      matched = matched || std::abs(b.host_s - 10e-6 * (120 * ny.prefill_step + ny.prefill_once)) < 1e-12;
    }
    EXPECT_TRUE(matched) << b.host_s << (batched ? " batched" : " per sequence");
  }
  EXPECT_DOUBLE_EQ(calibrated_prefill(y, Storage{}, c, ceil, 1024, 3840, 32768).host_s,
                   calibrated_prefill(y, Storage{}, c, ceil, 1024, 3840, 32768, current_runner_layout()).host_s)
      << "without the choice: the runners' default";
  const yoco::ModelConfig big = yoco::preset_config("yoco-3b");
  const CalibratedPhase l = calibrated_prefill(big, Storage{}, c, ceil, 1, 1 << 20, 32768);
  EXPECT_LT(l.host_s, 0.02 * l.total_s);  // 32 steps of 32K tokens: the kernels bound it
  // The fused FFN up half: one launch a layer fewer in a step that fuses, and in B rows that do.
  const yoco::cuda::FfnFused step_only{true, false}, both{true, true};
  const auto plain_y = yoco::cuda::yoco_runner_launches(big, 1, 2), fused_y = yoco::cuda::yoco_runner_launches(big, 1, 2, true, step_only);
  EXPECT_DOUBLE_EQ(plain_y.prefill_step - fused_y.prefill_step, big.n_self_layers());
  EXPECT_DOUBLE_EQ(plain_y.decode_step, fused_y.decode_step);
  const auto fused_b = yoco::cuda::yoco_runner_launches(big, 1, 2, true, both);
  EXPECT_DOUBLE_EQ(plain_y.decode_step - fused_b.decode_step, big.n_layers);
  EXPECT_DOUBLE_EQ(plain_y.prefill_once - fused_b.prefill_once, big.n_cross_layers());
  const yoco::ModelConfig t3 = yoco::preset_config("transformer-3b");
  EXPECT_DOUBLE_EQ(yoco::cuda::transformer_runner_launches(t3).prefill_step -
                       yoco::cuda::transformer_runner_launches(t3, step_only).prefill_step,
                   t3.n_layers);
}

// A measured row is priced as the runner that made it was laid out: its
// notes name each choice made since the choice became the default.
TEST(Calibration, ARowsNotesSayHowItsRunnerWasLaidOut) {
  const RunnerLayout old = runner_layout_of_notes("median of 3 after 1 warm-up; prefill chunk 32768");
  EXPECT_FALSE(old.batched_global_kv);
  EXPECT_FALSE(old.delta_in_normed);
  const RunnerLayout now = runner_layout_of_notes(
      "the device arena's buffers ...; YOCO's prefill delta in the normed rows; global K/V batched");
  EXPECT_TRUE(now.batched_global_kv);
  EXPECT_TRUE(now.delta_in_normed);
  EXPECT_FALSE(runner_layout_of_notes("...; global K/V per sequence").batched_global_kv);
  const RunnerLayout cur = current_runner_layout();
  EXPECT_TRUE(cur.batched_global_kv && cur.delta_in_normed) << "the runners' defaults (launch_count.hpp)";
  EXPECT_EQ(cur.ffn_rows, 0);
}

// The residual stored once a layer (YOCO_RESIDUAL_PER_LAYER) as the model prices it: one activation
// element a layer fewer through the norms, exactly, for YOCO's prefill steps (its FFN whole and
// unfused), the Transformer's prefill and decode; nothing where YOCO's runner keeps the old path (FFN
// row blocks or fused), nor in YOCO's decode step. Read from a row's notes and written back.
TEST(Calibration, TheResidualStoredOnceALayerIsPricedWhereTheRunnerTakesIt) {
  const yoco::ModelConfig y = yoco::preset_config("yoco-3b"), t = yoco::preset_config("transformer-3b");
  RunnerLayout plain = current_runner_layout(), once = plain;
  EXPECT_FALSE(plain.residual_per_layer);  // off by default until measured
  once.residual_per_layer = true;
  const Storage st;
  const int64_t n = 65536, chunk = 32768;
  auto norms = [&](const PhaseWork& w) { return w[Part::norms].bytes; };
  const double y_saved = norms(prefill_work(y, st, 1, n, chunk, runner_kernels(y, plain))) -
                         norms(prefill_work(y, st, 1, n, chunk, runner_kernels(y, once)));
  EXPECT_DOUBLE_EQ(y_saved, 2.0 * y.n_self_layers() * n * y.dim);
  const double t_saved = norms(prefill_work(t, st, 1, n, chunk, runner_kernels(t, plain))) -
                         norms(prefill_work(t, st, 1, n, chunk, runner_kernels(t, once)));
  EXPECT_DOUBLE_EQ(t_saved, 2.0 * t.n_layers * n * t.dim);
  EXPECT_DOUBLE_EQ(norms(decode_work(t, st, 4, n, runner_kernels(t, plain))) -
                       norms(decode_work(t, st, 4, n, runner_kernels(t, once))),
                   2.0 * t.n_layers * 4 * t.dim);
  EXPECT_DOUBLE_EQ(norms(decode_work(y, st, 4, n, runner_kernels(y, once))),
                   norms(decode_work(y, st, 4, n, runner_kernels(y, plain))));
  RunnerLayout blocks = once;
  blocks.ffn_rows = 4096;
  EXPECT_FALSE(runner_kernels(y, blocks).residual_per_layer);
  EXPECT_DOUBLE_EQ(norms(prefill_work(y, st, 1, n, chunk, runner_kernels(y, blocks))),
                   norms(prefill_work(y, st, 1, n, chunk, runner_kernels(y, plain))));
  RunnerLayout fused = once;
  fused.ffn_up_fused = true;
  EXPECT_FALSE(runner_kernels(y, fused).residual_per_layer);
  EXPECT_TRUE(runner_kernels(t, fused).residual_per_layer);  // the Transformer's W2 output goes elsewhere
  // Notes: read, and written back as a departure from the default.
  EXPECT_TRUE(runner_layout_of_notes(std::string("median of 2; ") + yoco::cuda::kResidualPerLayerNote)
                  .residual_per_layer);
  EXPECT_FALSE(runner_layout_of_notes("median of 2; prefill chunk 32768").residual_per_layer);
  EXPECT_TRUE(runner_layout_of_notes(runner_layout_note(once)).residual_per_layer);
  EXPECT_EQ(runner_layout_note(plain), "");
}

// Issue 34's trade-off: a row says its prefill chunk and its FFN row block,
// the words the notes carry round-trip, and the check prices the memory of a
// row by them (the working set is one step's, the FFN's buffers one block's).
TEST(Calibration, ARowsChunkAndFfnRowBlockPriceItsMemory) {
  EXPECT_EQ(prefill_chunk_of_notes("median of 2 after 1 warm-up; prefill chunk 16384; FFN in row blocks of 4096"),
            16384);
  EXPECT_EQ(prefill_chunk_of_notes("calibration x; prefill chunk 8192 tokens"), 8192);
  EXPECT_EQ(prefill_chunk_of_notes("median of 3 after 1 warm-up"), yoco::kDefaultPrefillChunk);
  EXPECT_EQ(prefill_chunk_of_notes("prefill chunk 0"), yoco::kDefaultPrefillChunk);
  EXPECT_EQ(prefill_chunk_of_notes("prefill chunk x"), yoco::kDefaultPrefillChunk);
  EXPECT_EQ(runner_layout_of_notes("prefill chunk 16384; FFN in row blocks of 4096").ffn_rows, 4096);
  EXPECT_EQ(runner_layout_of_notes("prefill chunk 16384").ffn_rows, 0);
  RunnerLayout lay;
  EXPECT_EQ(runner_layout_note(lay), "");
  lay.ffn_rows = 8192;
  lay.ffn_up_fused = true;
  const RunnerLayout back = runner_layout_of_notes("prefill chunk 32768 tokens" + runner_layout_note(lay));
  EXPECT_EQ(back.ffn_rows, 8192);
  EXPECT_TRUE(back.ffn_up_fused);
  lay.shared_sublayers = false;  // a buffer each: said, and read back as such
  EXPECT_NE(runner_layout_note(lay).find(yoco::cuda::kApartSublayerNote), std::string::npos);
  EXPECT_FALSE(runner_layout_of_notes(runner_layout_note(lay)).shared_sublayers);
  EXPECT_TRUE(runner_layout_of_notes(std::string("x; ") + yoco::cuda::kSharedSublayerNote).shared_sublayers);

  const std::string sweep = (repo() / "reports/results/nvidia-h100/sweep.csv").string();
  const Calibration c = fit_calibration(yoco::cli::read_results_csv(sweep), sweep);
  const DeviceSpec ceil = calibrated_ceilings(c, DeviceSpec{});
  const yoco::ModelConfig y = yoco::preset_config("yoco-3b");
  const int64_t n = 1 << 20;
  // As the rows below ran: a buffer for each sublayer (their notes do not say they shared one).
  RunnerLayout whole = current_runner_layout();
  whole.shared_sublayers = false;
  RunnerLayout blocks = whole;
  blocks.ffn_rows = 8192;
  const double m_whole = calibrated_memory(y, c, ceil, 1, n, 0, 32768, whole);
  const double m_blocks = calibrated_memory(y, c, ceil, 1, n, 0, 32768, blocks);
  // The FFN's W1|W3 output and hidden (6F bytes a row) hold 8192 rows instead of 32768.
  EXPECT_NEAR(m_whole - m_blocks, (32768.0 - 8192.0) * 6 * static_cast<double>(y.hidden_dim), 1.0);
  EXPECT_LT(calibrated_memory(y, c, ceil, 1, n, 0, 16384, whole), m_whole);
  // The Transformer's runner has no row blocks: its memory does not move.
  const yoco::ModelConfig t = yoco::preset_config("transformer-3b");
  EXPECT_EQ(calibrated_memory(t, c, ceil, 1, 65536, 0, 32768, blocks),
            calibrated_memory(t, c, ceil, 1, 65536, 0, 32768, whole));

  // The check prices a measured memory row by the chunk and block its notes name.
  const Provenance prov = Provenance::here("cuda", "NVIDIA H100 80GB HBM3", "");
  const std::vector<ResultRow> rows{
      make_row(prov, "yoco-3b", n, 1, 0, "memory", "mem_total_bytes", 12.3e9, "B", "measured", 1,
               "the device arena's buffers; YOCO's prefill delta in the normed rows; prefill chunk 32768"),
      make_row(prov, "yoco-3b", n, 1, 0, "memory", "mem_total_bytes", 12.3e9, "B", "measured", 1,
               "the device arena's buffers; YOCO's prefill delta in the normed rows; FFN in row blocks of 8192; "
               "prefill chunk 32768"),
      make_row(prov, "yoco-3b", n, 1, 0, "memory", "mem_total_bytes", 12.3e9, "B", "measured", 1,
               "the device arena's buffers; YOCO's prefill delta in the normed rows; prefill chunk 16384"),
      make_row(prov, "yoco-3b", n, 1, 0, "memory", "mem_total_bytes", 12.3e9, "B", "measured", 1,
               std::string("the device arena's buffers; YOCO's prefill delta in the normed rows; ") +
                   yoco::cuda::kSharedSublayerNote + "; prefill chunk 32768")};
  const std::vector<CalibrationCheck> k = check_calibration(rows, c);
  ASSERT_EQ(k.size(), 4u);
  EXPECT_DOUBLE_EQ(k[0].predicted, m_whole);
  EXPECT_DOUBLE_EQ(k[1].predicted, m_blocks);
  EXPECT_DOUBLE_EQ(k[2].predicted, calibrated_memory(y, c, ceil, 1, n, 0, 16384, whole));
  // One buffer for the sublayers: the mixer's pieces (30,912 bytes a row at yoco-3b) inside the FFN's.
  RunnerLayout shared = whole;
  shared.shared_sublayers = true;
  EXPECT_DOUBLE_EQ(k[3].predicted, calibrated_memory(y, c, ceil, 1, n, 0, 32768, shared));
  EXPECT_NEAR(m_whole - k[3].predicted, 32768.0 * 30912, 1.0);
  EXPECT_TRUE(current_runner_layout().shared_sublayers) << "the runner's layout by default";
}

// The prefills' own host time, where a sweep has it (prefill_host_enqueue_s),
// prices a prefill's calls; without it the decode steps' cost a call does. Only
// prefills of one step count: one of several returns about a step before the
// device is done (each step's token upload waits for the step before).
TEST(Calibration, APrefillsHostTimePricesItsCalls) {
  std::vector<ResultRow> rows = synthetic_sweep(1.0, 0);
  const Provenance prov = Provenance::here("cuda", "NVIDIA H100 80GB HBM3", "");
  const yoco::ModelConfig y = yoco::preset_config("yoco-3b");
  const Calibration without = fit_calibration(rows, "synthetic");
  EXPECT_EQ(without.prefill_host_points, 0);
  for (int64_t len : {32768, 131072, 524288})  // 1, 4 and 16 steps of the default chunk
    rows.push_back(make_row(prov, "yoco-3b", len, 1, 0, "prefill", "prefill_host_enqueue_s", len * 1e-7, "s",
                            "measured", 3, ""));
  const Calibration c = fit_calibration(rows, "synthetic");
  EXPECT_EQ(c.prefill_host_points, 1) << "the one-step prefill alone";
  EXPECT_GT(c.prefill_host_call_s, 0.0);
  const DeviceSpec ceil = calibrated_ceilings(c, DeviceSpec{});
  const CalibratedPhase p = calibrated_prefill(y, Storage{}, c, ceil, 1, 32768, 32768);
  // One prefill step at 32K: its host time is the measured one back.
  EXPECT_NEAR(p.host_s, 32768 * 1e-7, 1e-12);
  Calibration decode_only = c;
  decode_only.prefill_host_call_s = 0;
  decode_only.host_call_s = 7e-6;
  const CalibratedPhase q = calibrated_prefill(y, Storage{}, decode_only, ceil, 1, 32768, 32768);
  EXPECT_NEAR(q.host_s / p.host_s, 7e-6 / c.prefill_host_call_s, 1e-9) << "the same calls at the other cost";
  // A sweep run in chunks of 16384 made its 32K prefill in two steps: the fit reads the chunk from the prefill
  // rows' notes, and no point is left to price a call.
  for (auto& r : rows)
    if (r.phase == "prefill" && r.metric == "prefill_latency_s") r.notes = "median of 3; prefill chunk 16384";
  const Calibration half = fit_calibration(rows, "synthetic");
  EXPECT_EQ(half.prefill_host_points, 0);
  EXPECT_DOUBLE_EQ(half.prefill_host_call_s, 0.0);
}

TEST(Calibration, TheFileRoundTrips) {
  const std::string sweep = (repo() / "reports/results/nvidia-h100/sweep.csv").string();
  const Calibration c = fit_calibration(yoco::cli::read_results_csv(sweep), sweep);
  const std::string f = temp("rt.csv");
  {
    std::ofstream out(f);
    yoco::cli::write_results_csv(out, calibration_rows(c, Provenance::here("calibration", "calibrated on " + c.device_name, "")));
  }
  const Calibration back = read_calibration(f);
  EXPECT_EQ(back.device_name, c.device_name);
  EXPECT_EQ(back.fitted_at, c.fitted_at);
  EXPECT_EQ(back.source, f);
  EXPECT_EQ(back.fitted_on, sweep) << "the sweep of the fit, not the file it was read from";
  EXPECT_DOUBLE_EQ(back.peak_flops, c.peak_flops);
  for (const bool pre : {true, false})
    for (int fam = 0; fam < kFamilies; ++fam)
      for (const Bound b : {Bound::compute, Bound::memory}) {
        EXPECT_DOUBLE_EQ(back.fit(pre, static_cast<Family>(fam), b).inverse_efficiency,
                         c.fit(pre, static_cast<Family>(fam), b).inverse_efficiency);
        EXPECT_DOUBLE_EQ(back.fit(pre, static_cast<Family>(fam), b).per_layer_s,
                         c.fit(pre, static_cast<Family>(fam), b).per_layer_s);
      }
  EXPECT_EQ(back.sm_count, c.sm_count);
  EXPECT_EQ(back.sm_count, 132);  // the H100 datasheet's
  EXPECT_DOUBLE_EQ(back.host_call_s, c.host_call_s);
  EXPECT_GT(c.host_call_s, 1e-6);  // the sweep's eager decode steps: microseconds a call
  EXPECT_EQ(back.host_points, 11);
  EXPECT_EQ(back.prefill_host_points, 0) << "the committed sweep has no prefill host times";
  EXPECT_DOUBLE_EQ(back.prefill_host_call_s, 0.0);
  std::filesystem::remove(f);
}

// The lines of c's calibration file: the good file the bad ones are edited from.
std::vector<std::string> calibration_file_lines(const Calibration& c) {
  std::ostringstream good;
  yoco::cli::write_results_csv(good, calibration_rows(c, Provenance::here("calibration", "calibrated on x", "")));
  std::vector<std::string> lines;
  std::istringstream in(good.str());
  for (std::string s; std::getline(in, s);) lines.push_back(s);
  return lines;
}

TEST(Calibration, BadFilesNameTheFileAndLine) {
  const std::string sweep = (repo() / "reports/results/nvidia-h100/sweep.csv").string();
  const Calibration c = fit_calibration(yoco::cli::read_results_csv(sweep), sweep);
  const std::vector<std::string> lines = calibration_file_lines(c);
  auto with_line = [&](size_t at, const std::string& from, const std::string& to) {
    std::vector<std::string> l = lines;
    const size_t p = l[at].find(from);
    EXPECT_NE(p, std::string::npos) << l[at];
    l[at].replace(p, from.size(), to);
    const std::string f = temp("bad.csv");
    std::ofstream out(f);
    for (const auto& s : l) out << s << "\n";
    return f;
  };
  auto expect_error = [](const std::string& f, const std::string& needle) {
    try {
      read_calibration(f);
      ADD_FAILURE() << "no error for " << needle;
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  // Line 6 is the fifth row: a family's inverse_efficiency.
  expect_error(with_line(5, "inverse_efficiency", "efficiency"), temp("bad.csv") + ":6: unknown metric 'efficiency'");
  expect_error(with_line(5, "calibration:prefill.gemm", "calibration:prefill.gemmm"), ":6: unknown phase");
  expect_error(with_line(1, "gemm_peak_tflops", "peak"), ":2: unknown metric 'peak'");
  // Values that parse but cannot be meant: a ceiling that is inf once scaled
  // to FLOP/s, a residual whose band goes below 0, counts that are not whole.
  auto with_value = [&](const std::string& phase, const std::string& metric, const std::string& v) {
    for (size_t at = 1; at < lines.size(); ++at) {
      const std::string key = "," + phase + "," + metric + ",";
      const size_t p = lines[at].find(key);
      if (p == std::string::npos) continue;
      // value, unit, method, repeats, min, max: min and max too, so that the
      // row stays one the result CSV reader takes ([min, max] holds value).
      std::vector<std::string> f;
      size_t from = p + key.size();
      for (int i = 0; i < 6; ++i, from = lines[at].find(',', from) + 1)
        f.push_back(lines[at].substr(from, lines[at].find(',', from) - from));
      const std::string was = key + f[0] + "," + f[1] + "," + f[2] + "," + f[3] + "," + f[4] + "," + f[5] + ",";
      return std::make_pair(with_line(at, was, key + v + "," + f[1] + "," + f[2] + "," + f[3] + "," + v + "," + v + ","),
                            ":" + std::to_string(at + 1) + ": " + metric + " is ");
    }
    ADD_FAILURE() << "no row " << phase << " " << metric;
    return std::make_pair(std::string(), std::string());
  };
  for (const auto& [phase, metric, v] : std::vector<std::tuple<std::string, std::string, std::string>>{
           {"calibration:ceilings", "gemm_peak_tflops", "1e300"},
           {"calibration:ceilings", "datasheet_gbs", "1e300"},
           {"calibration:prefill.gemm.compute", "worst_residual", "1e300"},
           {"calibration:prefill.gemm.compute", "worst_residual", "1.5"},
           {"calibration:prefill.gemm.compute", "points", "2.5"},
           {"calibration:host", "points", "3.5"},
           {"calibration:host", "prefill_points", "0.5"},
           {"calibration:ceilings", "sm_count", "131.5"},
           {"calibration:prefill.gemm.compute", "inverse_efficiency", "1e300"},
           {"calibration:memory", "other_bytes", "1e300"},
           // A latency a million times the kernels' priced a 6 s prefill at 6.25e6 s, exit 0.
           {"calibration:prefill", "gap_fraction", "1e6"},
           {"calibration:decode", "gap_fraction", "101"},
           // Positive but so small that a roofline over it is inf: inf rows, exit 0.
           {"calibration:ceilings", "gemm_peak_tflops", "1e-320"},
           {"calibration:ceilings", "copy_bw_gbs", "1e-300"},
           {"calibration:ceilings", "datasheet_tflops", "1e-320"},
           {"calibration:ceilings", "datasheet_gbs", "1e-320"}}) {
    const auto [f, at] = with_value(phase, metric, v);
    expect_error(f, at);
  }
  // A file cut short (or a row deleted) read as the defaults for what was missing: another model, exit 0.
  for (const size_t keep : {size_t{10}, lines.size() - 1}) {
    const std::string cut = temp("cut.csv");
    {
      std::ofstream out(cut);
      for (size_t i = 0; i < keep; ++i) out << lines[i] << "\n";
    }
    expect_error(cut, cut + ": no row calibration:");
  }
  // The fit never writes what the reader refuses: a fit off by 150% on a point is not written.
  Calibration wide = c;
  wide.prefill[0][0].worst_residual = 1.5;
  EXPECT_NO_THROW(require_readable(calibration_rows(c, Provenance::here("calibration", "x", "")), "sweep.csv"));
  try {
    require_readable(calibration_rows(wide, Provenance::here("calibration", "x", "")), "sweep.csv");
    ADD_FAILURE() << "a residual of 1.5 passed";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("sweep.csv: the calibration's calibration:prefill.gemm.compute worst_residual"),
              std::string::npos) << e.what();
  }
  // A file with no ceilings at all.
  const std::string f = temp("noceil.csv");
  {
    std::ofstream out(f);
    out << lines[0] << "\n" << lines[5] << "\n";
  }
  expect_error(f, "needs calibration:ceilings");
  // And a sweep without CUPTI rows cannot be fitted.
  std::vector<ResultRow> bare;
  for (const auto& r : yoco::cli::read_results_csv(sweep))
    if (r.metric != "gpu_time_s") bare.push_back(r);
  EXPECT_THROW(fit_calibration(bare, "bare.csv"), InputError);
}

// One calibration a file, in its units and method: two blocks (a second fit appended, or another card's)
// were read as one, the header crediting the first device and the values the last block's; a per-layer
// time in ms or a row of another method was read as the fit's.
TEST(Calibration, AFileOfTwoBlocksOrOtherUnitsOrMethodsIsRefused) {
  const std::string sweep = (repo() / "reports/results/nvidia-h100/sweep.csv").string();
  const std::vector<std::string> lines =
      calibration_file_lines(fit_calibration(yoco::cli::read_results_csv(sweep), sweep));
  const std::string f = temp("blocks.csv");
  auto write = [&](const std::vector<std::string>& l) {
    std::ofstream out(f);
    for (const auto& s : l) out << s << "\n";
  };
  auto expect_error = [&](const std::string& needle) {
    try {
      read_calibration(f);
      ADD_FAILURE() << "no error for " << needle;
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  write(lines);
  EXPECT_NO_THROW(read_calibration(f));
  const std::string first_row = f + ":" + std::to_string(lines.size() + 1) + ": ";
  std::vector<std::string> twice = lines;
  twice.insert(twice.end(), lines.begin() + 1, lines.end());
  write(twice);
  // The same block twice: the result CSV reader's duplicate key, at the second block's first row.
  expect_error(f + ": line " + std::to_string(lines.size() + 1) + ": duplicate key");
  for (size_t i = lines.size(); i < twice.size(); ++i) {
    const size_t p = twice[i].find("calibrated on x");
    twice[i].replace(p, 15, "calibrated on y");
  }
  write(twice);
  expect_error(first_row + "device_name 'calibrated on y', but " + f + ":2 has 'calibrated on x'");
  auto with = [&](const std::string& key, const std::string& from, const std::string& to) {
    std::vector<std::string> l = lines;
    for (size_t i = 1; i < l.size(); ++i)
      if (l[i].find(key) != std::string::npos) {
        const size_t p = l[i].find(from, l[i].find(key) + key.size());
        EXPECT_NE(p, std::string::npos) << l[i];
        l[i].replace(p, from.size(), to);
        write(l);
        return f + ":" + std::to_string(i + 1) + ": ";
      }
    ADD_FAILURE() << "no row " << key;
    return std::string();
  };
  const std::string layer = with("calibration:prefill.gemm.compute,per_layer_s,", ",s,", ",ms,");
  expect_error(layer + "per_layer_s in 'ms': yoco calibrate writes it in 's'");
  const std::string call = with("calibration:host,call_s,", ",calibrated,", ",measured,");
  expect_error(call + "method 'measured': a calibration row's is 'calibrated'");
  std::filesystem::remove(f);
}

}  // namespace
