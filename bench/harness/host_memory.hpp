#pragma once
// Refuses work that cannot fit in this machine's memory before allocating
// anything, so that an absurd config or length is a clear input error (exit 2)
// rather than an out-of-memory kill. The estimates are computed in double, so
// they cannot overflow whatever the config says; they are rough upper bounds
// of what the CPU reference allocates, not a cost model.
#include <cstdint>
#include <string>

#include "config.hpp"

namespace yoco::cli {

// Physical memory of this machine in bytes (0 if unknown: then nothing is refused).
double host_memory_bytes();

// InputError "not enough memory for <what>: about X needed, this machine has Y" when
// `bytes` exceeds the physical memory.
void require_host_memory(double bytes, const std::string& what);

// Parameters of `cfg` (as param_layout counts them), in double.
double weights_elements_estimate(const ModelConfig& cfg);

// Temporaries of a full forward over `batch` sequences of `n` tokens (logits
// of every position included), elements of `elem` bytes. `gret_block`: the
// side of a YOCO gRet mixer's square temporaries, n for the parallel paradigm
// (the default, < 0), the chunk for chunkwise, 0 for recurrent.
double forward_bytes_estimate(const ModelConfig& cfg, int elem, double batch, double n, double gret_block = -1);

// Caches sized for prompt + gen, the prefill's temporaries and the kept logits;
// with `check`, the full forward over prompt + gen as well.
double generation_bytes_estimate(const ModelConfig& cfg, int elem, double batch, double prompt, double gen,
                                 double prefill_chunk, bool check);

}  // namespace yoco::cli
