#pragma once
// main() of a GoogleTest binary whose every process is an MPI rank (ctest
// starts it under mpirun): the communicator the tests share, progress printed
// by rank 0 only (the other ranks print their failed assertions, each line
// prefixed with the rank, to stderr), and the worst result of any rank as
// every rank's exit status: 1 when any rank failed, kAllSkippedExitCode when
// every rank ran tests and skipped every one of them (nothing failed), else 0.
// ctest's SKIP_RETURN_CODE reads that code, so a failure is never a skip.
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

// The exit status of a run where every test to run skipped and none failed, on every rank (automake's
// "skipped"); mpirun passes a rank's non-zero status on. A binary whose tests never skip (test_dist_yoco)
// fails under ctest if it comes back.
inline constexpr int kAllSkippedExitCode = 77;

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
  const ::testing::UnitTest& u = *::testing::UnitTest::GetInstance();
  const int failed = rc != 0 || u.failed_test_count() > 0 || u.ad_hoc_test_result().Failed();
  const int all_skipped = !failed && u.test_to_run_count() > 0 && u.skipped_test_count() == u.test_to_run_count();
  int any_failed = 0, every_rank_skipped = 0;
  MPI_Allreduce(&failed, &any_failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Allreduce(&all_skipped, &every_rank_skipped, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  shared = nullptr;
  comm.reset();
  return any_failed ? 1 : every_rank_skipped ? kAllSkippedExitCode : 0;
}

}  // namespace yoco::dist
