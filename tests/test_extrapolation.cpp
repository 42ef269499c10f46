// The extrapolated latency's arithmetic (bench/harness/extrapolation.hpp): the
// layer units of each model kind, the cut configs, and t(U) from two probes.
#include <gtest/gtest.h>

#include <stdexcept>

#include "extrapolation.hpp"

namespace yoco::cli {
namespace {

Summary timed(double median, double min, double max, int count = 3) { return {median, min, max, count}; }

TEST(Extrapolation, UnitsAreOneLayerOfEachKind) {
  const ModelConfig yoco = preset_config("yoco-3b"), tf = preset_config("transformer-3b");
  EXPECT_EQ(layer_units(yoco), 13) << "13 self + 13 cross layers";
  EXPECT_EQ(layer_units(tf), 26);
  const ModelConfig y2 = with_layer_units(yoco, 2);
  EXPECT_EQ(y2.n_layers, 4);
  EXPECT_EQ(y2.n_self_layers(), 2);
  EXPECT_EQ(y2.n_cross_layers(), 2);
  EXPECT_EQ(y2.dim, yoco.dim);
  EXPECT_EQ(y2.vocab_size, yoco.vocab_size);
  EXPECT_NO_THROW(y2.validate());
  EXPECT_EQ(with_layer_units(tf, 1).n_layers, 1);
  EXPECT_NO_THROW(with_layer_units(tf, 1).validate());
  EXPECT_THROW(with_layer_units(tf, 0), std::logic_error);
  EXPECT_THROW(with_layer_units(yoco, 14), std::logic_error);
}

TEST(Extrapolation, AffineInDepthIsExact) {
  // base 0.3 s + 0.2 s per unit: t(1) = 0.5, t(2) = 0.7, t(13) = 2.9.
  const auto t = extrapolate_units(timed(0.5, 0.49, 0.51), timed(0.7, 0.69, 0.71), 13);
  ASSERT_TRUE(t.has_value());
  EXPECT_NEAR(t->median, 2.9, 1e-12);
  // Extremes: the widest of the formula over the probes' extremes.
  EXPECT_NEAR(t->min, 0.51 + 12 * (0.69 - 0.51), 1e-12);
  EXPECT_NEAR(t->max, 0.49 + 12 * (0.71 - 0.49), 1e-12);
  EXPECT_LE(t->min, t->median);
  EXPECT_GE(t->max, t->median);
  EXPECT_EQ(t->count, 3);
}

TEST(Extrapolation, ProbesWithinTheirNoiseDoNotExtrapolate) {
  EXPECT_FALSE(extrapolate_units(timed(1.0, 1.0, 1.0), timed(1.0, 1.0, 1.0), 26)) << "equal";
  EXPECT_FALSE(extrapolate_units(timed(1.0, 1.0, 1.0), timed(0.9, 0.9, 0.9), 26)) << "deeper is faster";
  EXPECT_FALSE(extrapolate_units(timed(1.0, 0.9, 1.1), timed(1.1, 1.05, 1.15), 26)) << "slope 0.1 within a spread of 0.2";
  EXPECT_FALSE(extrapolate_units(timed(1.0, 1.0, 1.0), timed(1.005, 1.005, 1.005), 26)) << "under 1% of t(1)";
  EXPECT_TRUE(extrapolate_units(timed(1.0, 0.99, 1.01), timed(2.0, 1.99, 2.01), 26));
}

TEST(Extrapolation, NoteSaysHow) {
  const std::string n =
      extrapolation_note(preset_config("yoco-3b"), timed(0.5, 0.5, 0.5), timed(0.7, 0.7, 0.7), 13, "prefill");
  EXPECT_NE(n.find("a self-decoder + a cross-decoder layer"), std::string::npos) << n;
  EXPECT_NE(n.find("prefill 0.5 s and 0.7 s"), std::string::npos) << n;
  EXPECT_NE(n.find("t(1) + 12 x (t(2) - t(1)) for 13 units"), std::string::npos) << n;
}

}  // namespace
}  // namespace yoco::cli
