#pragma once
// main() of a GoogleTest binary whose every process is an MPI rank (ctest
// starts it under mpirun): the communicator the tests share, progress printed
// by rank 0 only (every rank's failures still print), and the worst result of
// any rank as every rank's exit status.
#include <gtest/gtest.h>
#include <mpi.h>

#include <memory>

#include "mpi_communicator.hpp"

namespace yoco::dist {

// `timeout_s`: the communicator's collective timeout; `shared` is set to the
// communicator for the tests' use while they run.
inline int run_tests_on_ranks(int argc, char** argv, double timeout_s, MpiCommunicator*& shared) {
  ::testing::InitGoogleTest(&argc, argv);
  auto comm = std::make_unique<MpiCommunicator>(timeout_s);
  shared = comm.get();
  if (comm->rank() != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
  }
  const int rc = RUN_ALL_TESTS();
  int any = rc, worst = 0;
  MPI_Allreduce(&any, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  shared = nullptr;
  comm.reset();
  return worst;
}

}  // namespace yoco::dist
