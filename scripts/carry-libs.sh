#!/usr/bin/env bash
# Copies the shared libraries that binaries built here need and the lent GPU
# machine's image lacks into .carry/lib (ignored by git; carried with a device
# call, and scripts/gpu-suite.sh puts it on the loader's path): OpenMPI's
# runtime (libmpi, libopen-pal, libopen-rte, hwloc, libevent), which yoco,
# bench_cuda_kernels and test_cupti_collector link when this machine has MPI.
# Loading them is all those binaries need there; MPI itself starts only under
# mpirun, which that image does not have.
#
#   scripts/carry-libs.sh [BINARY...]   (default build/cuda/bin/yoco)
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -gt 0 ] || set -- build/cuda/bin/yoco
mkdir -p .carry/lib
for bin in "$@"; do
  [ -x "$bin" ] || { echo "carry-libs.sh: no binary '$bin' (build the cuda preset first)" >&2; exit 2; }
  ldd "$bin" | awk '$3 ~ /^\// {print $3}' |
    grep -E '/lib(mpi|mpi_cxx|open-pal|open-rte|hwloc|event_core|event_pthreads)[^/]*\.so' |
    while read -r lib; do cp -L "$lib" .carry/lib/; done
done
du -sh .carry/lib
