#pragma once
// yoco under mpirun (issue 33): `mpirun -np R yoco forward|generate|bench ...`
// runs the CPU reference with the sequence sharded over the R ranks (dist/).
// Every rank runs the same command on the same input; rank 0 alone prints and
// writes files. A rank is recognised by its launcher's environment
// (OMPI_COMM_WORLD_SIZE, PMI_SIZE or PMIX_RANK), so a plain `yoco` never
// starts MPI.
namespace yoco::dist {
class Communicator;
}

namespace yoco::cli {

// Called first in main: under a launcher, initialises MPI and mutes stdout on
// every rank but 0. InputError when launched by mpirun and this yoco was
// built without MPI (scripts/install-deps.sh installs OpenMPI).
void start_mpi_job();
// The job's communicator; null when not launched by mpirun.
dist::Communicator* mpi_job();
// Rank 0 of the job, or a process outside any job: the one that prints and writes files.
bool primary_process();
// "rank R of N: " under a job of more than one rank, else "".
const char* rank_prefix();
// After an error under a job of more than one rank: ends every rank at once
// (this rank exits with `code` unfinalised and mpirun ends the others), since a rank that left alone would leave the others
// waiting in a collective until its timeout. Returns `code` otherwise.
int end_job_after_error(int code);

}  // namespace yoco::cli
