#!/usr/bin/env bash
# Writes the ptxas resource report of every kernel (KERNELS.md §6): for each
# cuda/**/*.cu, each kernel's demangled name, stack frame, spill stores and
# loads, registers, barriers and static shared memory, as nvcc -O3 for sm_90a
# reports them. Kernels sort by name inside a file, so two reports diff
# cleanly (a moved kernel must compile to the same resources).
#   scripts/ptxas-report.sh [OUT]     default reports/ptxas/sm_90a.txt; - for stdout
# Needs nvcc from /usr/local/cuda and c++filt (binutils); no GPU.
set -euo pipefail
source "$(dirname "$0")/lib/script-help.sh"
script_help_if_asked "$@"
cd "$(dirname "$0")/.."
[ $# -le 1 ] || { echo "ptxas-report: one OUT at most, got $# arguments (see --help)" >&2; exit 2; }
out="${1:-reports/ptxas/sm_90a.txt}"
case "$out" in -?*) echo "ptxas-report: unknown option '$out' (see --help)" >&2; exit 2 ;; esac
cuda=/usr/local/cuda/bin
[ -x "$cuda/nvcc" ] || { echo "ptxas-report: no nvcc at $cuda/nvcc" >&2; exit 2; }
nvver=$("$cuda/nvcc" --version | grep -o 'release [0-9.]*' | cut -d' ' -f2)
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
{
  echo "# ptxas resource report, sm_90a (nvcc $nvver, -O3), one block per kernel file, kernels by name"
  echo "# regenerate: scripts/ptxas-report.sh (nvcc -std=c++20 -O3 -gencode=arch=compute_90a,code=sm_90a"
  echo "# --expt-relaxed-constexpr -Xptxas -v -Icuda -Ireference -I/usr/include/eigen3 on each cuda/**/*.cu)."
  echo "# Hot kernels: 0 spills, 0 stack; the exceptions are noted in the family's NOTES."
  for f in $(find cuda -name '*.cu' | sort); do
    echo
    echo "=== $f"
    "$cuda/nvcc" -std=c++20 -O3 -gencode=arch=compute_90a,code=sm_90a --expt-relaxed-constexpr -Xptxas -v \
      -Icuda -Ireference -I/usr/include/eigen3 -c "$f" -o /dev/null 2>&1 |
      awk -v filt="$(command -v c++filt)" '
        /Compiling entry function/ { match($0, /'\''[^'\'']*'\''/); fn = substr($0, RSTART + 1, RLENGTH - 2); next }
        /Function properties for/ { next }
        /bytes stack frame/ && fn != "" { sub(/^[ \t]+/, ""); frame[fn] = $0; next }
        /ptxas info *: Used/ && fn != "" { sub(/.*: Used/, "Used"); used[fn] = $0; names[fn] = 1; fn = ""; next }
        END {
          for (n in names) {
            cmd = filt " " n; cmd | getline d; close(cmd)
            printf "%s\t%s\t%s\n", d, frame[n], used[n]
          }
        }' | sort | awk -F'\t' '{ printf "  %s\n    %s\n    %s\n", $1, $2, $3 }'
  done
} >"$tmp"
if [ "$out" = - ]; then cat "$tmp"; else mkdir -p -- "$(dirname -- "$out")"; cp "$tmp" "$out"; echo "wrote $out"; fi
