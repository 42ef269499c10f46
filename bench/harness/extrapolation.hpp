#pragma once
// Extrapolated latency (DESIGN.md §5, method `extrapolated`): where a full run
// of a point does not fit the time budget or the device, the same point is run
// on the model cut to one and to two "layer units" -- a unit is one layer of
// each kind: a self-decoder plus a cross-decoder layer for YOCO, one layer for
// the Transformer -- at the full length, and the full model's time is
//   t(U) = t(1) + (U - 1) * (t(2) - t(1)),   U = the model's units.
// t(2) - t(1) is one unit's time; t(1) - (t(2) - t(1)) is what runs once
// whatever the depth (embedding, final norm, LM head, launch overheads), so
// nothing is assumed about it. Exact for a model whose layers of a kind cost
// the same, which holds here: the layers of a kind have the same shapes and
// read caches of the same length.
#include <cstdint>
#include <optional>
#include <string>

#include "config.hpp"
#include "stats.hpp"

namespace yoco::cli {

// Layer units of `cfg`: YOCO n_layers / 2 (validate() keeps it even), the Transformer n_layers.
int64_t layer_units(const ModelConfig& cfg);

// `cfg` cut to `units` layer units (1 <= units <= layer_units(cfg)), every other field kept.
ModelConfig with_layer_units(const ModelConfig& cfg, int64_t units);

// t(U) from the probes' timings: median from the medians, min and max from the
// probes' mins and maxes (the same formula, so a noisier probe widens them).
// nullopt when the two probes do not separate (t(2) - t(1) not above the
// probes' spread over their repeats, nor above 1% of t(1): one unit's time is
// lost in the noise, so the slope says nothing); the caller reports why.
std::optional<Summary> extrapolate_units(const Summary& one, const Summary& two, int64_t units);

// "extrapolated from 1 and 2 layer units (a self + a cross layer) at the full
// length: 1.23 s and 2.34 s (medians of 3), t(1) + 12 x (t(2) - t(1))".
std::string extrapolation_note(const ModelConfig& cfg, const Summary& one, const Summary& two, int64_t units,
                               const std::string& what);

}  // namespace yoco::cli
