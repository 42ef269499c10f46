#!/usr/bin/env bash
# The prefill on R devices holding the sequence sharded (dist/: YOCO
# chunk-parallel, the Transformer context-parallel), by the analytic model
# (bench/analytic/multi_device.hpp) on the H100 datasheet over NVLink, into
# reports/model/multi-device.csv: yoco-3b and transformer-3b to 4M tokens,
# the 65B shapes, and the paper's introduction claim (a 7B Transformer on four
# H100s: 450K tokens in about 110 s, 1M in about 380 s) for a Llama-2-7B shape
# with full multi-head KV and with grouped-query KV (8 heads), since the paper
# does not say which. Then `/usr/bin/python3 reports/report.py` draws it.
#
#   scripts/multi-device-projection.sh [--yoco PATH] [--link nvlink|pcie|GBS]
set -euo pipefail
cd "$(dirname "$0")/.."
YOCO="" LINK=nvlink
while [ $# -gt 0 ]; do
  case "$1" in
    --yoco) YOCO="$2"; shift 2 ;;
    --link) LINK="$2"; shift 2 ;;
    -h|--help) sed -n '2,11p' "$0"; exit 0 ;;
    *) echo "multi-device-projection.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
. scripts/find-yoco.sh
find_yoco "$YOCO"
OUT=reports/model/multi-device.csv
# Beside the target, so that the rename is atomic (a temporary in /tmp was copied across file systems).
tmp=$(mktemp "$OUT.XXXXXX")
trap 'rm -f "$tmp" "$tmp".*' EXIT
keep() { /usr/bin/python3 scripts/result_rows.py keep device^=analytic-x "$@"; }
"$YOCO" model --model yoco-3b,transformer-3b --lengths 32K,128K,512K,1M,2M,4M --devices 1,2,4,8 --link "$LINK" \
  --format csv | keep --header >"$tmp"
"$YOCO" model --model yoco-65b,transformer-65b --lengths 128K,512K,1M --devices 1,2,4,8 --link "$LINK" \
  --format csv | keep >>"$tmp"
"$YOCO" model --model reports/paper/transformer-7b.json,reports/paper/transformer-7b-gqa.json --lengths 450K,1M \
  --devices 1,4,8 --link "$LINK" --format csv | keep >>"$tmp"
chmod 644 "$tmp"  # mktemp makes it 0600
mv "$tmp" "$OUT"
echo "multi-device-projection.sh: wrote $OUT ($(($(wc -l <"$OUT") - 1)) rows)"
