#include "mpi_job.hpp"

#include <cstdlib>
#include <iostream>
#include <memory>
#include <string>

#include "errors.hpp"

#if defined(YOCO_HAVE_DIST)
#include "mpi_communicator.hpp"
#endif

namespace yoco::cli {

namespace {

bool launched_by_mpirun() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"})
    if (std::getenv(v)) return true;
  return false;
}

#if defined(YOCO_HAVE_DIST)
std::unique_ptr<dist::MpiCommunicator>& job() {
  static std::unique_ptr<dist::MpiCommunicator> c;
  return c;
}
#endif

std::string& prefix() {
  static std::string p;
  return p;
}

}  // namespace

void start_mpi_job() {
  if (!launched_by_mpirun()) return;
#if defined(YOCO_HAVE_DIST)
  job() = std::make_unique<dist::MpiCommunicator>();
  if (job()->size() > 1)
    prefix() = "rank " + std::to_string(job()->rank()) + " of " + std::to_string(job()->size()) + ": ";
  if (job()->rank() != 0) std::cout.setstate(std::ios::badbit);  // rank 0 prints for the job
#else
  throw InputError("launched by mpirun, but this yoco was built without MPI (install OpenMPI: scripts/install-deps.sh, "
                   "then rebuild); run it without mpirun for one process");
#endif
}

dist::Communicator* mpi_job() {
#if defined(YOCO_HAVE_DIST)
  return job().get();
#else
  return nullptr;
#endif
}

bool primary_process() {
  const dist::Communicator* c = mpi_job();
#if defined(YOCO_HAVE_DIST)
  return c == nullptr || job()->rank() == 0;
#else
  (void)c;
  return true;
#endif
}

const char* rank_prefix() { return prefix().c_str(); }

int end_job_after_error(int code) {
#if defined(YOCO_HAVE_DIST)
  if (job() && job()->size() > 1) {
    // Not MPI_Abort (it can hang OpenMPI 4.1's mpirun, dist/mpi_communicator.cpp):
    // a rank that exits non-zero without finalising makes mpirun end the job.
    std::cout.flush();
    std::cerr.flush();
    std::_Exit(code);
  }
#endif
  return code;
}

}  // namespace yoco::cli
