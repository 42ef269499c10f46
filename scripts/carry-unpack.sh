#!/usr/bin/env bash
# Unpacks the one-file carry that scripts/carry-gpu-build.sh makes
# (.carry/bundle.tar.xz: every GPU test binary and tool in bin/, the OpenMPI
# libraries in lib/, the relocatable launcher in openmpi/, and MANIFEST.sha256)
# into DEST (default .carry), then checks every file against the manifest, so
# that a carry cut short in transfer fails here, in a second, with one line,
# and not as a test binary that will not load minutes into a device call.
#
# Why one compressed file: every binary links every kernel, so the binaries
# share most of their bytes; xz's 64 MiB window stores those bytes once (89 MiB
# of stripped binaries came to 5.5 MiB at 08a7aa5), where the plain folders
# needed two calls of about 50 MiB each under the 64 MiB a call may carry.
#
#   scripts/carry-unpack.sh BUNDLE [DEST]
#
# Unpacks with tar and xz when the machine has xz, else with Python's tarfile
# (the lent image's python3; YOCO_CARRY_UNPACKER=python forces it, as the test
# does). Replaces DEST/bin, DEST/lib and DEST/openmpi whole; leaves the rest
# of DEST alone; the old ones are moved aside, not deleted, until every new one
# is in place (an interrupted or failed swap puts them back). Exit 0 unpacked
# and checked, 2 a missing, unreadable or damaged bundle (one line naming it).
set -uo pipefail
die() { echo "carry-unpack.sh: $*" >&2; exit 2; }
[ $# -ge 1 ] && [ $# -le 2 ] || die "usage: scripts/carry-unpack.sh BUNDLE [DEST]"
bundle="$1"
dest="${2:-.carry}"
[ -f "$bundle" ] || die "no bundle '$bundle' (make it with scripts/carry-gpu-build.sh, and carry it)"
[ -r "$bundle" ] || die "'$bundle' is not readable"
# The swap below replaces DEST/bin, lib and openmpi: a bundle inside them would go with them.
case "$(readlink -m -- "$bundle")/" in
  "$(readlink -m -- "$dest")"/bin/* | "$(readlink -m -- "$dest")"/lib/* | "$(readlink -m -- "$dest")"/openmpi/*)
    die "'$bundle' is inside $dest/bin, lib or openmpi, which the unpack replaces: move it out first" ;;
esac
stage="$dest/.unpack.$$"
parts=(bin lib openmpi MANIFEST.sha256)
swapped=""
# Until every new part is in place, an exit (a failed mv, a signal) takes the new ones out and puts
# the old ones back from the stage: the previous carry is never lost half-way.
undo_swap() {
  [ -z "$swapped" ] || return 0
  local d
  for d in "${parts[@]}"; do
    if [ -e "$stage/new.$d" ] || [ -L "$stage/new.$d" ]; then rm -rf "${dest:?}/$d"; fi
    if [ -e "$stage/old.$d" ] || [ -L "$stage/old.$d" ]; then rm -rf "${dest:?}/$d" && mv "$stage/old.$d" "$dest/$d"; fi
  done
}
trap 'undo_swap; rm -rf "$stage"' EXIT
trap 'exit 129' HUP
trap 'exit 130' INT
trap 'exit 143' TERM
rm -rf "$stage" && mkdir -p "$stage" || die "cannot create '$stage'"

unpacker="${YOCO_CARRY_UNPACKER:-}"
if [ -z "$unpacker" ]; then
  if command -v xz >/dev/null; then unpacker=tar; else unpacker=python; fi
fi
case "$unpacker" in
  tar) err=$(tar -xJf "$bundle" -C "$stage" 2>&1) ;;
  python)
    err=$(python3 - "$bundle" "$stage" 2>&1 <<'PY'
import sys, tarfile
with tarfile.open(sys.argv[1], "r:xz") as t:
    if hasattr(tarfile, "tar_filter"):  # Python >= 3.11.4: no absolute paths, no links out of the stage
        t.extractall(sys.argv[2], filter="tar")
    else:
        for m in t.getmembers():
            if m.name.startswith("/") or ".." in m.name.split("/"):
                sys.exit("member outside the bundle: " + m.name)
        t.extractall(sys.argv[2])
PY
    ) ;;
  *) die "YOCO_CARRY_UNPACKER='$unpacker': tar or python" ;;
esac
[ $? -eq 0 ] || die "'$bundle' does not unpack ($unpacker): $(printf '%s' "$err" | tail -n 1)"
[ -f "$stage/MANIFEST.sha256" ] || die "'$bundle' has no MANIFEST.sha256: not a bundle of scripts/carry-gpu-build.sh"
bad=$(cd "$stage" && sha256sum --quiet -c MANIFEST.sha256 2>&1 | head -n 1)
[ -z "$bad" ] || die "'$bundle' is damaged: $bad"
# The old parts aside into the stage (same file system: renames), then the new ones in; a marker
# new.PART says which new one is in DEST, for undo_swap.
for d in "${parts[@]}"; do
  if [ -e "$dest/$d" ] || [ -L "$dest/$d" ]; then mv "$dest/$d" "$stage/old.$d" || die "cannot move $dest/$d aside"; fi
done
for d in "${parts[@]}"; do
  [ -e "$stage/$d" ] || continue
  : >"$stage/new.$d" && mv "$stage/$d" "$dest/$d" || die "cannot move the new $d into $dest"
done
swapped=1
n=$(grep -c . "$dest/MANIFEST.sha256")
echo "carry-unpack.sh: $n files from $bundle into $dest/ (bin, lib, openmpi), checked against its manifest"
