#!/usr/bin/env bash
# Copies what binaries built here need and the lent GPU machine's image lacks
# into .carry/ (ignored by git; carried with a device call, and
# scripts/gpu-suite.sh puts it on the loader's path):
#  - .carry/lib: OpenMPI's runtime (libmpi, libopen-pal, libopen-rte, hwloc,
#    libevent, PMIx, munge), which yoco, bench_cuda_kernels,
#    test_cupti_collector and test_dist_cuda link when this machine has MPI;
#  - with --mpirun, .carry/openmpi: a relocatable copy of OpenMPI's launcher
#    (orterun as mpirun, orted, the MCA components, the help texts), so that
#    the GPU suite can start ranks there (its `dist` step: ranks sharing the
#    one GPU); about 3 MB, and 5 MB of libraries in .carry/lib. gpu-suite.sh sets OPAL_PREFIX to it; components whose own
#    libraries are absent there (InfiniBand, UCX, OFI, PSM) fail to load
#    quietly and the shared-memory transport serves the ranks of one machine.
#
#   scripts/carry-libs.sh [--mpirun] [BINARY...]   (default build/cuda/bin/yoco)
set -euo pipefail
cd "$(dirname "$0")/.."
mpirun_tree=""
if [ "${1:-}" = "--mpirun" ]; then mpirun_tree=1; shift; fi
[ $# -gt 0 ] || set -- build/cuda/bin/yoco
mkdir -p .carry/lib
# The libraries worth carrying: OpenMPI's and what they load beyond glibc.
# (libmca_common_*: the MCA components' shared helpers.)
wanted='/lib(mpi|mpi_cxx|open-pal|open-rte|mca_common_[a-z]+|hwloc|event_core|event_pthreads|pmix|munge|udev|z)[^/]*\.so'
copy_deps() {
  { ldd "$1" 2>/dev/null || true; } | awk '$3 ~ /^\// {print $3}' | { grep -E "$wanted" || true; } |
    while read -r lib; do [ -e ".carry/lib/$(basename "$lib")" ] || cp -L "$lib" .carry/lib/; done
}
for bin in "$@"; do
  [ -x "$bin" ] || { echo "carry-libs.sh: no binary '$bin' (build the cuda preset first)" >&2; exit 2; }
  copy_deps "$bin"
done
if [ -n "$mpirun_tree" ]; then
  command -v orterun >/dev/null || { echo "carry-libs.sh: --mpirun needs OpenMPI's orterun here" >&2; exit 2; }
  # The layout OpenMPI computes from OPAL_PREFIX (ompi_info --path all): bindir,
  # libdir and pkglibdir under the prefix, pkgdatadir share/openmpi.
  libdir=$(ompi_info --path libdir --parsable 2>/dev/null | sed -n 's/^path:libdir://p')
  pkglibdir=$(ompi_info --path pkglibdir --parsable 2>/dev/null | sed -n 's/^path:pkglibdir://p')
  pkgdatadir=$(ompi_info --path pkgdatadir --parsable 2>/dev/null | sed -n 's/^path:pkgdatadir://p')
  prefix=$(ompi_info --path prefix --parsable 2>/dev/null | sed -n 's/^path:prefix://p')
  [ -n "$libdir" ] && [ -n "$pkglibdir" ] && [ -n "$prefix" ] ||
    { echo "carry-libs.sh: ompi_info did not give OpenMPI's paths" >&2; exit 2; }
  t=.carry/openmpi
  rm -rf "$t"
  mkdir -p "$t/bin" "$t${pkglibdir#"$prefix"}" "$t${pkgdatadir#"$prefix"}"
  cp -L "$(command -v orterun)" "$t/bin/orterun"
  ln -s orterun "$t/bin/mpirun"
  cp -L "$(command -v orted)" "$t/bin/orted"
  # The MCA components, less those for fabrics the lent machine lacks
  # (InfiniBand, UCX, OFI, PSM, usNIC: their libraries are absent there) and
  # for MPI-IO, which nothing here uses: they could not load, or would not be
  # asked to, and the carry limit is tight.
  for so in "$pkglibdir"/*.so; do
    case "$(basename "$so")" in
      *openib* | *ucx* | *ofi* | *psm* | *usnic* | *verbs* | *romio* | mca_fs_* | mca_fbtl_* | mca_fcoll_* | \
        mca_sharedfp_* | mca_io_*) ;;
      *) cp -L "$so" "$t${pkglibdir#"$prefix"}/" ;;
    esac
  done
  cp -rL "$pkgdatadir"/. "$t${pkgdatadir#"$prefix"}/"
  # PMIx (external to this OpenMPI) loads its own plugins: gpu-suite.sh points
  # PMIX_MCA_mca_base_component_path at this copy.
  pmix_plugins=$(dirname "$(readlink -f "$(ldd "$pkglibdir"/mca_pmix_*.so | awk '/libpmix/ {print $3; exit}')")")/pmix
  mkdir -p "$t/pmix"
  [ -d "$pmix_plugins" ] && cp -L "$pmix_plugins"/*.so "$t/pmix/"
  for f in "$t/bin/orterun" "$t/bin/orted" "$t${pkglibdir#"$prefix"}"/*.so "$t"/pmix/*.so; do copy_deps "$f"; done
  du -sh "$t"
fi
du -sh .carry/lib
