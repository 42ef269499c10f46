#pragma once
// main() of a GoogleTest binary whose every process is an MPI rank (ctest
// starts it under mpirun): the communicator the tests share, progress printed
// by rank 0 only (the other ranks print their failed assertions, each line
// prefixed with the rank, to stderr), and the worst result of any rank as
// every rank's exit status.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdio>
#include <memory>
#include <sstream>
#include <string>

#include "mpi_communicator.hpp"

namespace yoco::dist {

// A rank other than 0: gtest's printer is off (the progress would print R
// times), so this prints what a failure says -- file, line, test, message --
// with every line prefixed "[rank N] ", in one write.
class RankFailurePrinter : public ::testing::EmptyTestEventListener {
 public:
  explicit RankFailurePrinter(int rank) : prefix_("[rank " + std::to_string(rank) + "] ") {}
  // (The test's name is kept here: gtest holds its lock while it reports a result, so
  // UnitTest::current_test_info() would deadlock in OnTestPartResult.)
  void OnTestStart(const ::testing::TestInfo& t) override {
    test_ = std::string(t.test_suite_name()) + "." + t.name();
  }
  void OnTestEnd(const ::testing::TestInfo&) override { test_.clear(); }
  void OnTestPartResult(const ::testing::TestPartResult& r) override {
    if (!r.failed()) return;
    std::ostringstream head;
    head << (r.file_name() ? r.file_name() : "unknown file") << ":" << r.line_number() << ": Failure";
    if (!test_.empty()) head << " in " << test_;
    std::string out = prefix_ + head.str() + "\n";
    std::istringstream message(r.message());
    for (std::string line; std::getline(message, line);) out += prefix_ + line + "\n";
    std::fwrite(out.data(), 1, out.size(), stderr);
    std::fflush(stderr);
  }

 private:
  std::string prefix_, test_;
};

// `timeout_s`: the communicator's collective timeout; `shared` is set to the
// communicator for the tests' use while they run.
inline int run_tests_on_ranks(int argc, char** argv, double timeout_s, MpiCommunicator*& shared) {
  ::testing::InitGoogleTest(&argc, argv);
  auto comm = std::make_unique<MpiCommunicator>(timeout_s);
  shared = comm.get();
  if (comm->rank() != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new RankFailurePrinter(comm->rank()));  // gtest owns it
  }
  const int rc = RUN_ALL_TESTS();
  int any = rc, worst = 0;
  MPI_Allreduce(&any, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  shared = nullptr;
  comm.reset();
  return worst;
}

}  // namespace yoco::dist
