# Sourced by the scripts that run `yoco`: sets YOCO to the given binary (its
# first argument, may be empty) or the first built one, else exits 2 naming
# the calling script.
find_yoco() {
  YOCO="$1"
  if [ -z "$YOCO" ]; then
    for y in build/cpu/bin/yoco build/cuda/bin/yoco; do [ -x "$y" ] && { YOCO="$y"; break; }; done
  fi
  [ -n "$YOCO" ] && [ -x "$YOCO" ] ||
    { echo "$(basename "$0"): no yoco binary (build a preset, or pass --yoco)" >&2; exit 2; }
}
