#pragma once
// yoco under mpirun with --device cuda (issue 33): a DistRunner over the CUDA
// YOCO runner with the sequence sharded over the ranks (cuda/runner/
// shard_link.hpp, dist/cuda_shard_link.hpp), one GPU a rank where the machine
// has enough (rank r on device r mod count), else ranks sharing a device
// through the MPI backend's host-staged buffers. YOCO chunk-parallel; the
// Transformer context-parallel with each layer's keys and values gathered
// (the CPU reference passes them around a ring).
//
// Built with the cuda preset and MPI (YOCO_HAVE_DIST_CUDA).
#if defined(YOCO_HAVE_DIST_CUDA)

#include <memory>

#include "dist_runner.hpp"
#include "runner/cuda_model.hpp"

namespace yoco {

// InputError for a Transformer or a shape the CUDA runners do not serve;
// cuda::DeviceOutOfMemory when the weights do not fit.
std::unique_ptr<DistRunner> create_dist_cuda_runner(const ModelConfig& cfg, const cuda::CudaWeightSource& source,
                                                    dist::Communicator& comm);

// Puts this rank on its GPU (rank r on device r mod count) before anything
// touches the device; returns how many ranks share a GPU at the most.
// InputError when the rank sees no device.
int use_rank_device(dist::Communicator& comm);

}  // namespace yoco

#endif  // YOCO_HAVE_DIST_CUDA
