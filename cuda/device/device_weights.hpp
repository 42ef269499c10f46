#pragma once
// A model's parameters on the device in bf16 (DESIGN.md §3), in the layout
// reference/param_layout says -- the one definition of names, shapes and init
// rules -- and in the arena's `weights` category. Tensors one GEMM reads
// together sit back to back in one buffer (a fused group): a [out, in] weight
// concatenated along `out` is the fused weight, so [Wq; Wk; Wv; Wg] is the
// fused QKVG projection and [W1; W3] the fused FFN input, with no copy.
//
// Two sources, the same values as the CPU reference before rounding:
//  - the seed: each element generated on the device by the counter-based rule
//    (reference/counter_rng.hpp) in fp32, then rounded to bf16 (round to
//    nearest even), so a device tensor equals bf16(Weights<float>::init(...));
//  - a safetensors file (F32 / BF16 / F16 / F64), checked against the layout
//    exactly as the CPU loader checks it (reference/weights.hpp
//    check_weights_file: same InputError messages), read on the host one
//    tensor at a time, rounded to bf16, uploaded.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "config.hpp"
#include "counter_rng.hpp"
#include "device/device_arena.hpp"

namespace yoco::cuda {

struct CudaWeightSource {
  std::string path;   // empty: generate from `seed`
  uint64_t seed = 0;
  std::string describe() const;  // "seed 0" | "file W.safetensors"
};

class DeviceWeights {
 public:
  // groups: tensor names stored contiguously, in the order given (each name at
  // most once, every name in param_layout(cfg)); every other tensor gets a
  // buffer of its own. InputError for a name not in the layout or a bad file;
  // DeviceOutOfMemory when a buffer does not fit. Synchronises `stream`.
  static DeviceWeights create(DeviceArena& arena, const ModelConfig& cfg, const CudaWeightSource& source,
                              const std::vector<std::vector<std::string>>& groups, cudaStream_t stream);

  DeviceWeights() = default;
  DeviceWeights(DeviceWeights&&) noexcept = default;
  DeviceWeights& operator=(DeviceWeights&&) noexcept = default;

  // First element of tensor `name` (inside its group's buffer if it has one).
  // std::logic_error for a name not in the layout (a runner bug, not user input).
  const __nv_bfloat16* operator[](const std::string& name) const;
  int64_t numel(const std::string& name) const;
  int64_t bytes() const;  // all buffers
  size_t tensor_count() const { return where_.size(); }

 private:
  struct Place {
    size_t buffer = 0;
    int64_t offset = 0, numel = 0;  // elements
  };
  std::vector<DeviceBuffer> buffers_;
  std::map<std::string, Place> where_;
};

// Launches the counter-based init of tensor elements [0, n) straight into bf16:
// dst[i] = bf16(counter_init_value(key, i, rule)). (cuda/device/counter_init.cu)
cudaError_t launch_counter_init_bf16(__nv_bfloat16* dst, int64_t n, uint64_t key, InitRule rule,
                                     cudaStream_t stream);

}  // namespace yoco::cuda
