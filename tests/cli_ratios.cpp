// test_cli: `yoco ratios`, pairing the points of results files.
#include <filesystem>
#include <sstream>
#include <string>

#include "cli_fixture.hpp"

namespace yoco_test {
namespace {

// yoco ratios pairs points measured apart (transformer-3b's 1M prefill ran in a call of its own) by
// the sweep's one rule: the ratio is the two files' values divided, the keys of both files kept.
TEST_F(Cli, RatiosPairPointsFromTwoFiles) {
  const std::string y = path("y.csv"), t = path("t.csv"), out = path("ratios.csv");
  ASSERT_EQ(yoco("model --model yoco-tiny --lengths 1K --out " + y).status, 0);
  ASSERT_EQ(yoco("model --model transformer-tiny --lengths 1K --out " + t).status, 0);
  const CliRun r = yoco("ratios " + y + " " + t + " --out " + out);
  ASSERT_EQ(r.status, 0) << r.all();
  EXPECT_NE(r.out.find("prefill_speedup"), std::string::npos) << r.out;
  auto value = [](const std::string& csv, const std::string& model, const std::string& metric) {
    std::istringstream in(csv);
    std::string line;
    while (std::getline(in, line))
      if (line.find("," + model + ",1024,") != std::string::npos && line.find("," + metric + ",") != std::string::npos) {
        const size_t at = line.find("," + metric + ",") + metric.size() + 2;
        return std::stod(line.substr(at, line.find(',', at) - at));
      }
    return -1.0;
  };
  const std::string all = slurp(out);
  const double ty = value(slurp(y), "yoco-tiny", "prefill_latency_s");
  const double tt = value(slurp(t), "transformer-tiny", "prefill_latency_s");
  ASSERT_GT(ty, 0);
  ASSERT_GT(tt, 0);
  EXPECT_DOUBLE_EQ(value(all, "yoco-tiny vs transformer-tiny", "prefill_speedup"), tt / ty);
  EXPECT_GT(value(all, "yoco-tiny", "prefill_latency_s"), 0) << "the inputs are kept";
  // The written file reads back, and its ratios are not computed twice.
  expect_one_line_error(yoco("ratios " + out), {"no new ratio", "every ratio their points give"},
                        "ratios already there");
  expect_one_line_error(yoco("ratios " + y + " " + y), {"give each point once", y}, "one point in two files");
  expect_one_line_error(yoco("ratios " + y), {"no new ratio", "yoco-tiny"}, "no Transformer to pair");
  expect_one_line_error(yoco("ratios"), {"missing argument FILE.csv"}, "no file");
}

// A roofline on a run's measured ceilings is that run's: two runs' rooflines on ceilings that differ
// (the CPU's GEMM rate 0.068 in one run, 0.106 in the next) made a ratio that is neither's. The later
// file's analytic rows are kept but not paired, and that is said; its measured rows still pair.
TEST_F(Cli, RatiosDoNotPairRooflinesOfTwoSetsOfCeilings) {
  const std::string header =
      "git_sha,timestamp,host,device,device_name,driver,model,seq_len,batch,gen_tokens,phase,metric,value,unit,"
      "method,repeats,min,max,notes\n";
  auto file = [&](const std::string& name, const std::string& model, double gemm, double analytic, double measured) {
    const std::string f = path(name);
    const std::string run = "abc,2026-11-28T00:00:00Z,h,cpu,";
    spit(f, header + run + "X,,-,0,1,0,ceiling,gemm_peak_tflops," + std::to_string(gemm) + ",TFLOP/s,measured,3,,,\n" + run +
                "X,,-,0,1,0,ceiling,copy_bw_gbs,100,GB/s,measured,3,,,\n" + run + "roofline of X (measured ceilings),," +
                model + ",1024,1,0,prefill,prefill_latency_s," + std::to_string(analytic) + ",s,analytic,0,,,\n" + run + "X,," +
                model + ",1024,1,0,prefill,prefill_latency_s," + std::to_string(measured) + ",s,measured,3,,,\n");
    return f;
  };
  const std::string y = file("y.csv", "yoco-tiny", 1.0, 0.5, 0.6);
  const std::string t_other = file("t_other.csv", "transformer-tiny", 1.5, 1.0, 1.5);
  const std::string t_same = file("t_same.csv", "transformer-tiny", 1.005, 1.0, 1.5);
  const CliRun other = yoco("ratios " + y + " " + t_other + " --format csv");
  ASSERT_EQ(other.status, 0) << other.all();
  EXPECT_NE(other.err.find(t_other + "'s analytic rows are not paired"), std::string::npos) << other.err;
  EXPECT_NE(other.err.find("gemm_peak_tflops"), std::string::npos) << other.err;
  EXPECT_NE(other.out.find(",X,,yoco-tiny vs transformer-tiny,1024,1,0,prefill,prefill_speedup,2.5,"),
            std::string::npos) << other.out;
  EXPECT_EQ(other.out.find("roofline of X (measured ceilings),,yoco-tiny vs"), std::string::npos) << other.out;
  EXPECT_NE(other.out.find("roofline of X (measured ceilings),,transformer-tiny,"), std::string::npos)
      << "the unpaired rows are kept";
  // Ceilings within 1% of each other: one roofline, paired.
  const CliRun same = yoco("ratios " + y + " " + t_same + " --format csv");
  ASSERT_EQ(same.status, 0) << same.all();
  EXPECT_EQ(same.err.find("not paired"), std::string::npos) << same.err;
  EXPECT_NE(same.out.find("roofline of X (measured ceilings),,yoco-tiny vs transformer-tiny,1024,1,0,prefill,"
                          "prefill_speedup,2,"),
            std::string::npos) << same.out;
}

// ratios Y T --out Y merged T into Y: the measured file replaced by the merge, as the other commands
// refuse. Either input, by any path, is refused and left as it was.
TEST_F(Cli, RatiosRefuseAnOutputOverAnInput) {
  const std::string y = path("y.csv"), t = path("t.csv");
  ASSERT_EQ(yoco("model --model yoco-tiny --lengths 1K --out " + y).status, 0);
  ASSERT_EQ(yoco("model --model transformer-tiny --lengths 1K --out " + t).status, 0);
  const std::string ybytes = slurp(y), tbytes = slurp(t);
  const std::string dot_t = (fs::path(t).parent_path() / "." / "t.csv").string();  // the same file, another path
  expect_one_line_error(yoco("ratios " + y + " " + t + " --out " + y), {"--out", y, "replace the input"},
                        "ratios over its first input");
  expect_one_line_error(yoco("ratios " + y + " " + t + " --out " + dot_t), {"--out", t, "replace the input"},
                        "ratios over its second input, by another path");
  EXPECT_EQ(slurp(y), ybytes);
  EXPECT_EQ(slurp(t), tbytes);
}

// Throughput pairs each model at its own batch, so a model's throughput at one length from two runs
// at other batches (two --throughput-batch) both paired with the Transformer's one: two ratio rows
// of one key (batch 0), written with exit 0 to a file that no command could read back.
TEST_F(Cli, RatiosRefuseTwoThroughputPointsOfOneModelAtOneLength) {
  auto throughput_only = [&](const std::string& model, int batch) {
    const std::string all = path(model + std::to_string(batch) + "_all.csv");
    const std::string f = path(model + std::to_string(batch) + ".csv");
    EXPECT_EQ(yoco("model --model " + model + " --lengths 1K --gen 64 --throughput-batch " + std::to_string(batch) +
                   " --out " + all).status, 0);
    std::istringstream in(slurp(all));
    std::string line, kept;
    for (bool header = true; std::getline(in, line); header = false)
      if (header || line.find(",throughput,throughput_tokens_per_s,") != std::string::npos) kept += line + "\n";
    spit(f, kept);
    return f;
  };
  const std::string y1 = throughput_only("yoco-tiny", 1), y2 = throughput_only("yoco-tiny", 2);
  const std::string t = throughput_only("transformer-tiny", 4), out = path("ratios.csv");
  expect_one_line_error(yoco("ratios " + y1 + " " + y2 + " " + t + " --out " + out),
                        {"throughput", "yoco-tiny", y1, y2}, "two throughput batches of one model");
  EXPECT_FALSE(fs::exists(out));
  EXPECT_EQ(yoco("ratios " + y1 + " " + t + " --out " + out).status, 0) << "one point a model pairs";
  EXPECT_EQ(yoco("compare " + out + " " + out).status, 0) << "and reads back";
}

}  // namespace
}  // namespace yoco_test
