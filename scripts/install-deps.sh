#!/usr/bin/env bash
# Installs the Debian packages the suite needs, only those missing.
# Needs root or sudo when something is missing; does nothing otherwise.
# `--fuzz` adds the optional list FUZZ_PACKAGES (clang, for scripts/fuzz.sh
# only: the normal build and tests never need it). Then the Python packages
# Debian lacks, pinned, into .venv (made with --system-site-packages, so that
# it sees Debian's numpy, scipy and matplotlib): ruptures, the change-point
# detection of the performance history (reports/history.py). PostgreSQL is
# there for the history's server store: its tests start a server of their own.
# OpenMPI for dist/ (the sequence sharded across ranks): its tests run real
# ranks under mpirun. xz-utils packs the one-file carry to a GPU machine
# (scripts/carry-gpu-build.sh) and its test.
set -euo pipefail

PACKAGES=(build-essential cmake libeigen3-dev libgtest-dev libgmock-dev libbenchmark-dev libfccp-dev
          nlohmann-json3-dev python3 python3-matplotlib python3-numpy python3-scipy python3-venv
          postgresql python3-psycopg2 openmpi-bin libopenmpi-dev xz-utils)
PYPI_PINS=(ruptures==1.1.9)
FUZZ_PACKAGES=(clang)
if [ "${1:-}" = --fuzz ]; then
  PACKAGES+=("${FUZZ_PACKAGES[@]}")
fi

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

# The PyPI pins, into the checkout's .venv (git-ignored), only when missing.
cd "$(dirname "$0")/.."
if [ ! -x .venv/bin/python3 ]; then
  /usr/bin/python3 -m venv --system-site-packages .venv
fi
if ! .venv/bin/python3 -c "import ruptures" 2>/dev/null; then
  echo "[deps] installing into .venv: ${PYPI_PINS[*]}"
  .venv/bin/python3 -m pip install -q --no-deps --disable-pip-version-check "${PYPI_PINS[@]}"
fi
