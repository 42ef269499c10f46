#pragma once
// What of the runners' own choices a calibrated prediction follows (calibrated_model.hpp), and how
// a measured row says which it was made with: the runners' defaults (cuda/runner/launch_count.hpp)
// change, and a row made before a change did not follow it.
#include <cstdint>
#include <string>

#include "config.hpp"
#include "cost_model.hpp"

namespace yoco::cost {

struct RunnerLayout {
  bool batched_global_kv = true;  // YOCO's global K/V for the whole batch at batch > 1
  bool delta_in_normed = true;    // YOCO's prefill delta in the normed rows' buffer
  bool ffn_up_fused = false;      // the FFN's up half as one kernel (YOCO_FFN_FUSED=1), where it serves
  int64_t ffn_rows = 0;           // YOCO's prefill FFN in row blocks of this many (YOCO_FFN_ROWS); 0: whole steps
  bool shared_sublayers = true;   // YOCO's prefill sublayers in one buffer (kSharedSublayerBuffers)
  bool residual_per_layer = false;  // a layer's residual stored once (YOCO_RESIDUAL_PER_LAYER)
  // The flash prefill version the point's prefill attention ran ("attention prefill vN" in its notes,
  // or its CUPTI kernel names: calibration_parts.hpp); 0: the version the runners run now.
  int attention_prefill_version = 0;
};
// The words a row's notes carry when its runner fused the FFN's up half.
const char* ffn_up_fused_note();
// How the runners' kernels do the work of `cfg` laid out as `layout`: the
// prefill attention in the flash kernel's query tiles, the FFN's up half fused
// from the selector's rows on where the layout has it and the shape is served.
KernelView runner_kernels(const ModelConfig& cfg, const RunnerLayout& layout);
// The runners' layout now (the defaults of launch_count.hpp).
RunnerLayout current_runner_layout();
// The layout a measured row was made with, from its notes ("global K/V
// batched"; "delta in the normed rows"; "FFN up half fused"; "one buffer for
// the prefill's sublayers"; "residual stored once a layer"; "attention prefill
// vN"); rows from before a choice lack its words.
RunnerLayout runner_layout_of_notes(const std::string& notes);
// The words a row's notes carry for `layout`'s departures from the runners'
// defaults that a prediction must follow (the FFN fused, its row blocks, the
// residual stored once a layer), each after "; "; "" when there are none.
std::string runner_layout_note(const RunnerLayout& layout);
// The prefill chunk a row's notes name ("prefill chunk N"); rows that name
// none ran the runners' default, 32,768 tokens.
int64_t prefill_chunk_of_notes(const std::string& notes);

}  // namespace yoco::cost
