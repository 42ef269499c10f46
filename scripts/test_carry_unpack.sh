#!/usr/bin/env bash
# scripts/carry-unpack.sh on small bundles made here: a good one unpacks the
# same with tar and with Python's tarfile (the lent image may lack xz), links
# kept; a cut, damaged, manifest-less or missing bundle is refused with exit 2
# and one line, before a device call would spend minutes on binaries that do
# not load. Runs anywhere (no GPU, no build).
set -u
cd "$(dirname "$0")/.."
fail=0
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# A bundle as carry-gpu-build.sh lays it out: bin/, lib/, openmpi/ (with the
# mpirun link), MANIFEST.sha256 over every file.
make_bundle() {  # DIR OUT [CORRUPT]: pack DIR's layout into OUT
  local src="$1" out="$2"
  (cd "$src" && find . -type f ! -name MANIFEST.sha256 -printf '%P\n' | LC_ALL=C sort | xargs -d '\n' sha256sum >MANIFEST.sha256)
  [ -z "${3:-}" ] || echo "tampered" >>"$src/bin/test_fake"  # after the manifest: its hash no longer matches
  tar -C "$src" -cf - . | xz -1 >"$out"
}
mkdir -p "$work/src/bin" "$work/src/lib" "$work/src/openmpi/bin"
printf '#!/bin/sh\necho fake test\n' >"$work/src/bin/test_fake" && chmod +x "$work/src/bin/test_fake"
head -c 100000 /dev/urandom >"$work/src/lib/libfake.so.1"
printf 'orterun\n' >"$work/src/openmpi/bin/orterun" && ln -s orterun "$work/src/openmpi/bin/mpirun"
make_bundle "$work/src" "$work/good.tar.xz"

for unpacker in tar python; do
  dest="$work/dest-$unpacker"
  mkdir -p "$dest/bin" && echo stale >"$dest/bin/test_old"  # a previous call's binaries go
  echo keep >"$dest/bundle.tar.xz.keep"                   # the rest of DEST stays
  if out=$(YOCO_CARRY_UNPACKER=$unpacker scripts/carry-unpack.sh "$work/good.tar.xz" "$dest" 2>&1) &&
     [ -x "$dest/bin/test_fake" ] && [ "$("$dest/bin/test_fake")" = "fake test" ] &&
     cmp -s "$dest/lib/libfake.so.1" "$work/src/lib/libfake.so.1" &&
     [ "$(readlink "$dest/openmpi/bin/mpirun")" = orterun ] && [ ! -e "$dest/bin/test_old" ] &&
     [ -e "$dest/bundle.tar.xz.keep" ] && [ -z "$(ls -A "$dest" | grep '^\.unpack')" ]; then
    echo "ok: $unpacker unpacks the bundle whole: $out"
  else
    echo "FAIL: $unpacker: '$out'"; fail=1
  fi
done

# Interrupted while the new folders go in (a TERM, then the mv failing): the previous carry is
# back whole, nothing of the new one or of the stage is left.
real_mv=$(command -v mv)
mkdir -p "$work/shim"
printf '#!/usr/bin/env bash\ncase "$1" in */.unpack.*/bin) kill -TERM $PPID; exit 1 ;; esac\nexec %s "$@"\n' \
  "$real_mv" >"$work/shim/mv"
chmod +x "$work/shim/mv"
dest="$work/dest-cut"
mkdir -p "$dest/bin" "$dest/lib" && echo old >"$dest/bin/test_old" && echo old >"$dest/lib/libold.so" &&
  echo old >"$dest/MANIFEST.sha256"
out=$(PATH="$work/shim:$PATH" scripts/carry-unpack.sh "$work/good.tar.xz" "$dest" 2>&1); rc=$?
if [ "$rc" -ne 0 ] && [ -e "$dest/bin/test_old" ] && [ ! -e "$dest/bin/test_fake" ] && [ -e "$dest/lib/libold.so" ] &&
   [ ! -e "$dest/lib/libfake.so.1" ] && [ ! -e "$dest/openmpi" ] && [ "$(cat "$dest/MANIFEST.sha256")" = old ] &&
   [ -z "$(ls -A "$dest" | grep '^\.unpack')" ]; then
  echo "ok: an unpack cut while swapping (rc $rc) leaves the previous carry whole"
else
  echo "FAIL: an unpack cut while swapping: rc $rc, '$out'; $dest holds: $(cd "$dest" && find . | sort | tr '\n' ' ')"
  fail=1
fi

expect_refusal() {  # words, bundle, [unpacker]
  local words="$1" bundle="$2" err rc
  err=$(YOCO_CARRY_UNPACKER=${3:-} scripts/carry-unpack.sh "$bundle" "$work/refused" 2>&1 >/dev/null); rc=$?
  if [ "$rc" -ne 2 ] || [[ "$err" != *"$words"* ]] || [ "$(printf '%s\n' "$err" | wc -l)" -ne 1 ]; then
    echo "FAIL: carry-unpack.sh $bundle -> rc $rc, '$err' (want rc 2 and one line with '$words')"; fail=1
  else
    echo "ok: $(basename "$bundle") ${3:-} -> $err"
  fi
}
head -c 20000 "$work/good.tar.xz" >"$work/cut.tar.xz"
expect_refusal "does not unpack" "$work/cut.tar.xz" tar
expect_refusal "does not unpack" "$work/cut.tar.xz" python
cp -a "$work/src" "$work/src2" && make_bundle "$work/src2" "$work/damaged.tar.xz" corrupt
expect_refusal "is damaged" "$work/damaged.tar.xz"
mkdir -p "$work/plain/bin" && echo x >"$work/plain/bin/x" && tar -C "$work/plain" -cJf "$work/plain.tar.xz" .
expect_refusal "has no MANIFEST.sha256" "$work/plain.tar.xz"
expect_refusal "no bundle" "$work/nowhere.tar.xz"
# A bundle inside a folder the unpack replaces would be deleted with it: refused, and still there.
mkdir -p "$work/refused/bin" && cp "$work/good.tar.xz" "$work/refused/bin/inside.tar.xz"
expect_refusal "which the unpack replaces" "$work/refused/bin/inside.tar.xz"
[ -f "$work/refused/bin/inside.tar.xz" ] || { echo "FAIL: the bundle inside DEST/bin is gone"; fail=1; }
exit $fail
