#include "extrapolation.hpp"

#include <algorithm>
#include <stdexcept>

#include "format.hpp"

namespace yoco::cli {

int64_t layer_units(const ModelConfig& cfg) { return cfg.is_yoco() ? cfg.n_layers / 2 : cfg.n_layers; }

ModelConfig with_layer_units(const ModelConfig& cfg, int64_t units) {
  if (units < 1 || units > layer_units(cfg))
    throw std::logic_error("with_layer_units: " + std::to_string(units) + " units of a model with " +
                           std::to_string(layer_units(cfg)));
  ModelConfig c = cfg;
  c.n_layers = cfg.is_yoco() ? 2 * units : units;
  return c;
}

std::optional<Summary> extrapolate_units(const Summary& one, const Summary& two, int64_t units) {
  // One unit's time must stand out of the noise: above the probes' spread
  // over their repeats and above 1% of the 1-unit time.
  const double slope = two.median - one.median;
  const double noise = std::max({one.max - one.min, two.max - two.min, 0.01 * one.median});
  if (!(slope > noise)) return std::nullopt;
  const double k = static_cast<double>(units - 1);
  auto at = [&](double t1, double t2) { return t1 + k * (t2 - t1); };
  Summary s;
  s.median = at(one.median, two.median);
  // The extremes: the widest of the formula over the probes' extremes.
  const double a = at(one.min, two.min), b = at(one.max, two.max), c = at(one.max, two.min), d = at(one.min, two.max);
  s.min = std::max(0.0, std::min({a, b, c, d}));
  s.max = std::max({a, b, c, d});
  s.count = std::min(one.count, two.count);
  return s;
}

std::string extrapolation_note(const ModelConfig& cfg, const Summary& one, const Summary& two, int64_t units,
                               const std::string& what) {
  return "extrapolated from the model cut to 1 and 2 layer units (" +
         std::string(cfg.is_yoco() ? "a unit = a self-decoder + a cross-decoder layer" : "a unit = one layer") +
         ") at the full length: " + what + " " + strf("%.6g", one.median) + " s and " + strf("%.6g", two.median) +
         " s (medians of " + std::to_string(one.count) + " and " + std::to_string(two.count) + "), t(1) + " +
         std::to_string(units - 1) + " x (t(2) - t(1)) for " + std::to_string(units) +
         " units; min/max: the same formula over the probes' extremes";
}

}  // namespace yoco::cli
