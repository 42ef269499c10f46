#pragma once
// yoco under mpirun with --device cuda (issue 33): a DistRunner over the CUDA
// YOCO runner with the sequence sharded over the ranks (cuda/runner/
// shard_link.hpp, dist/cuda_shard_link.hpp), one GPU a rank where the machine
// has enough (rank r on device r mod count), else ranks sharing a device
// through the MPI backend's host-staged buffers. YOCO only: the Transformer's
// context-parallel baseline runs on the CPU reference.
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

}  // namespace yoco

#endif  // YOCO_HAVE_DIST_CUDA
