#pragma once
// Which prefill attention kernel launch_flash_prefill runs, and which one a
// CUPTI kernel name was: host-only, so that the calibrated cost model
// (bench/analytic) prices the version the runners run and the version each
// measured point ran, from the same definition as the dispatcher
// (flash_prefill.cu).
#include <cstdint>
#include <string_view>

namespace yoco::cuda {

// The versions: 1 (mma.sync, any head dim and architecture), 2 (wgmma
// ping-pong, Hopper, head dim 128), 3 (v2's maths fed by a TMA producer warp).
inline constexpr int kFlashPrefillVersions = 3;

// The wgmma version launch_flash_prefill runs on compute capability 9.0: 3. On the H100
// (reports/results/nvidia-h100/logs/run-11, -12) v3 passed every test and the sanitizers and
// ran causal hd 128, 24/8 heads at 588 / 634 / 586 / 612 TFLOP/s at 4K / 16K / 64K / 128K
// against v2's 459 / 473 / 489 / 475 and cuDNN's 497 / 620 / 609 / 567 in the same call
// (cuda/attention/NOTES-flash_prefill.md). 2 selects v2 again.
inline constexpr int kHopperPrefillVersion = 3;
// The head dim the wgmma versions serve (flash_prefill_v2_supported).
inline constexpr int64_t kWgmmaPrefillHeadDim = 128;

// The version a prefill of this head dim runs: the wgmma version on compute
// capability 9.0 where it serves the head dim, else v1.
constexpr int flash_prefill_version(int64_t head_dim, bool sm90) {
  return sm90 && head_dim == kWgmmaPrefillHeadDim ? kHopperPrefillVersion : 1;
}

// The words a measured row's notes carry for the version its prefill
// attention ran, the version's number right after them (bench/harness
// cuda_backend.cpp writes them, bench/analytic runner_layout.cpp reads them).
inline constexpr const char* kAttentionPrefillNote = "attention prefill v";

// The version a kernel ran, by its short name (kernel_family.hpp:
// kernel_short_name) as CUPTI records it; 0 for any other kernel (a peer's
// flash_fwd, cuDNN's fmha). Before f8e3484 (2026-11-26) v1 and v2 were
// flash_prefill_kernel and flash_prefill_sm90_kernel: the committed H100
// sweep (ef61249) names them so.
constexpr int flash_prefill_version_of_kernel(std::string_view name) {
  if (name == "flash_prefill_kernel") return 1;
  if (name == "flash_prefill_sm90_kernel") return 2;
  constexpr std::string_view head = "flash_prefill_v", tail = "_kernel";
  if (name.size() != head.size() + 1 + tail.size() || name.substr(0, head.size()) != head ||
      name.substr(head.size() + 1) != tail)
    return 0;
  const int v = name[head.size()] - '0';
  return v >= 1 && v <= kFlashPrefillVersions ? v : 0;
}

}  // namespace yoco::cuda
