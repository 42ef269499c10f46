#pragma once
// What mpirun changes for a command's input (README, "Beyond one GPU"): every
// rank runs the command, so what only one rank could use, or what the sharded
// runners do not take, is refused before any work, on every rank alike, with
// one line naming the option (exit 2). Outside mpirun each check passes.
#include <cstdint>
#include <string>
#include <vector>

#include "args.hpp"
#include "config.hpp"

namespace yoco::cli {

// A prompt of n tokens split over the ranks (YOCO: one shard a rank; the
// Transformer: two chunks a rank): InputError "<option>: ..." when a part
// would be empty.
void check_prompt_splits(const ModelConfig& cfg, int64_t n, const std::string& option);

// --prefill-chunk: the CPU's sharded runners prefill each rank's shard in one
// step (the shards are the chunks), so the option would be ignored while the
// output named it. (The GPU's sharded runners prefill a rank's shard in chunks.)
void refuse_prefill_chunk_under_mpirun(const ParsedArgs& a, bool cuda);

// --tokens-file that is not a regular file (stdin, a pipe): mpirun gives stdin
// to rank 0 only, so the ranks would read different prompts.
void refuse_unshared_tokens_file(const ParsedArgs& a);

// The ranks run the same command on what must be one prompt (n tokens, `ids`
// when given, else the rule's): a node-local file that differs between nodes,
// or an MPMD launch with other options on some ranks, gave a wrong answer with
// exit 0. InputError "<option>: ..." naming the first rank that differs.
void check_ranks_read_one_prompt(const std::vector<int64_t>& ids, int64_t n, const std::string& option);

// The ranks the CPU's runners are sharded over, whose prefill is each rank's
// shard in one step (sweep.hpp: prefill_note): the job's size under mpirun
// on the CPU, else 0 (one process, or the GPU's sharded runners, which chunk).
int sharded_ranks(bool cuda);

}  // namespace yoco::cli
