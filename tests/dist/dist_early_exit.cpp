// A rank that leaves early: rank 1 finalises and returns before the
// collective every other rank enters. The others must end with a message
// naming their rank and the collective within the timeout, never hang
// (ctest checks the message and that the job ends).
#include <mpi.h>

#include <cstdio>

#include "mpi_communicator.hpp"

int main() {
  yoco::dist::MpiCommunicator comm(3.0);
  if (comm.size() > 1 && comm.rank() == 1) {
    std::fprintf(stderr, "rank 1: leaving before the collective\n");
    return 0;  // the communicator's destructor finalises MPI
  }
  double mine = comm.rank(), all[64];
  comm.allgather(&mine, sizeof(double), all, "early_exit_probe");
  std::printf("rank %d: the collective completed (it should not have)\n", comm.rank());
  return 0;
}
