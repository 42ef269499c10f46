#include "mpi_inputs.hpp"

#include <filesystem>
#include <system_error>

#include "errors.hpp"
#include "mpi_job.hpp"

#if defined(YOCO_HAVE_DIST)
#include "communicator.hpp"
#include "dist_runner.hpp"
#include "shard_plan.hpp"
#endif

namespace yoco::cli {

void check_prompt_splits(const ModelConfig& cfg, int64_t n, const std::string& option) {
#if defined(YOCO_HAVE_DIST)
  if (const dist::Communicator* comm = mpi_job()) {
    try {
      dist::ShardPlan::for_prompt(n, comm->size(), DistRunner::parts_per_rank(cfg));
    } catch (const InputError& e) {
      throw InputError(option + ": " + e.what());
    }
  }
#else
  (void)cfg;
  (void)n;
  (void)option;
#endif
}

void refuse_prefill_chunk_under_mpirun(const ParsedArgs& a, bool cuda) {
  if (!cuda && mpi_job() && a.has("--prefill-chunk"))
    throw InputError("--prefill-chunk under mpirun: each rank prefills its shard in one step on the CPU (the shards "
                     "are the chunks); leave it out");
}

void refuse_unshared_tokens_file(const ParsedArgs& a) {
  if (!mpi_job()) return;
  const auto f = a.get("--tokens-file");
  std::error_code ec;
  if (f && !std::filesystem::is_regular_file(*f, ec))
    throw InputError("--tokens-file " + *f + " under mpirun: not a regular file, and stdin or a pipe reaches rank 0 "
                     "only; give a file every rank can read, or --tokens");
}

int sharded_ranks(bool cuda) {
#if defined(YOCO_HAVE_DIST)
  if (const dist::Communicator* comm = mpi_job(); comm && !cuda) return comm->size();
#endif
  (void)cuda;
  return 0;
}

}  // namespace yoco::cli
