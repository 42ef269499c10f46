#include "mpi_inputs.hpp"

#include <filesystem>
#include <string_view>
#include <system_error>

#include "counter_rng.hpp"
#include "errors.hpp"
#include "mpi_job.hpp"

#if defined(YOCO_HAVE_DIST)
#include "communicator.hpp"
#include "dist_backend.hpp"
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
  // A file that is not there is said by the reader, as without mpirun.
  if (f && std::filesystem::exists(*f, ec) && !std::filesystem::is_regular_file(*f, ec))
    throw InputError("--tokens-file " + *f + " under mpirun: not a regular file, and stdin or a pipe reaches rank 0 "
                     "only; give a file every rank can read, or --tokens");
}

void check_ranks_read_one_prompt(const std::vector<int64_t>& ids, int64_t n, const std::string& option) {
#if defined(YOCO_HAVE_DIST)
  dist::Communicator* comm = mpi_job();
  if (!comm || comm->size() < 2) return;
  // FNV-1a (the reference's) over the count and the ids' bytes: 8 bytes a rank, not the prompt.
  std::vector<int64_t> words{n};
  words.insert(words.end(), ids.begin(), ids.end());
  const uint64_t h = fnv1a64(std::string_view(reinterpret_cast<const char*>(words.data()), words.size() * sizeof(int64_t)));
  std::vector<uint64_t> all(static_cast<size_t>(comm->size()));
  comm->allgather(&h, sizeof h, all.data(), std::string(kHarnessLabel) + "inputs");  // not the model's
  for (size_t r = 1; r < all.size(); ++r)
    if (all[r] != all[0])
      throw InputError(option + ": the ranks read different prompts (rank " + std::to_string(r) +
                       "'s differs from rank 0's: a file that differs between nodes, or other options on some "
                       "ranks); give every rank the same prompt");
#else
  (void)ids;
  (void)n;
  (void)option;
#endif
}

int sharded_ranks(bool cuda) {
#if defined(YOCO_HAVE_DIST)
  if (const dist::Communicator* comm = mpi_job(); comm && !cuda) return comm->size();
#endif
  (void)cuda;
  return 0;
}

}  // namespace yoco::cli
