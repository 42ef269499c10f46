#!/usr/bin/env bash
# Installs the Debian packages the suite needs, only those missing.
# Needs root or sudo when something is missing; does nothing otherwise.
# `--clang` (or its old name `--fuzz`) adds clang and its sanitizer and
# libFuzzer runtimes, for the sanitize preset (scripts/test.sh sanitize) and
# scripts/fuzz.sh: the plain build and tests never need them. Then the Python packages
# Debian lacks, pinned, into .venv (made with --system-site-packages, so that
# it sees Debian's numpy, scipy and matplotlib): ruptures, the change-point
# detection of the performance history (reports/history.py). PostgreSQL is
# there for the history's server store: its tests start a server of their own.
# OpenMPI for dist/ (the sequence sharded across ranks): its tests run real
# ranks under mpirun. xz-utils packs the one-file carry to a GPU machine
# (scripts/carry-gpu-build.sh) and its test.
set -euo pipefail
source "$(dirname "$0")/lib/script-help.sh"
script_help_if_asked "$@"

PACKAGES=(build-essential cmake libeigen3-dev libgtest-dev libgmock-dev libbenchmark-dev libfccp-dev
          nlohmann-json3-dev python3 python3-matplotlib python3-numpy python3-scipy python3-venv
          postgresql python3-psycopg2 openmpi-bin libopenmpi-dev xz-utils)
PYPI_PINS=(ruptures==1.1.9)
CLANG_PACKAGES=(clang)
clang=0
case "${1:-}" in
  "") ;;
  --clang|--fuzz) clang=1; PACKAGES+=("${CLANG_PACKAGES[@]}") ;;
  *) echo "usage: scripts/install-deps.sh [--clang]  (unknown option '$1')" >&2; exit 2 ;;
esac

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "[deps] all Debian packages present"
else
  echo "[deps] installing: ${missing[*]}"
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null || { echo "[deps] error: need root or sudo to install ${missing[*]}" >&2; exit 1; }
    SUDO="sudo"
  fi
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
# ASan, UBSan and libFuzzer's runtimes are in libclang-rt-N-dev, only a
# Recommends of Debian's clang (installs here use --no-install-recommends).
if [ "$clang" = 1 ] && [ ! -f "$(clang++ -print-file-name=libclang_rt.asan-x86_64.a)" ]; then
  rt="libclang-rt-$(clang++ -dumpversion | cut -d. -f1)-dev"
  echo "[deps] installing $rt (clang's sanitizer and libFuzzer runtimes)"
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO=sudo
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "$rt"
fi

# The PyPI pins, into the checkout's .venv (git-ignored), only when missing.
cd "$(dirname "$0")/.."
if [ ! -x .venv/bin/python3 ]; then
  /usr/bin/python3 -m venv --system-site-packages .venv
fi
if ! .venv/bin/python3 -c "import ruptures" 2>/dev/null; then
  echo "[deps] installing into .venv: ${PYPI_PINS[*]}"
  .venv/bin/python3 -m pip install -q --no-deps --disable-pip-version-check "${PYPI_PINS[@]}"
fi
