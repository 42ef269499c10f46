// The GPU suite's verdicts on kernels never run before (scripts/gpu-suite.sh):
// when a kernel's smoke test fails or hangs, the suite exports a variable
// (YOCO_GRET_SKIP_V6, YOCO_GRET_SKIP_V7, YOCO_PREFILL_SKIP_V3,
// YOCO_FFN_SKIP_FUSED, YOCO_FFN_SKIP_PAIRS) and no benchmark may launch that
// kernel again in the call: one that hung would hang the bench step. Set means
// set, non-empty and not "0". A row of the kernel left out is a `skipped` row
// that says why, never a row left out; a row that only needs some chunk kernel
// (the beside-GEMM pair) takes a tested one instead and says so in its name.
#pragma once

#include <cstdlib>
#include <cstring>

namespace yoco::cuda_bench {

inline bool skipped_by_suite(const char* var) {
  const char* e = std::getenv(var);
  return e != nullptr && *e != '\0' && std::strcmp(e, "0") != 0;
}

}  // namespace yoco::cuda_bench
