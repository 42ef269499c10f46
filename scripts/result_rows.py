"""Result CSVs (reports/SCHEMA.md) for the headline scripts: standard library
only, so that they run on the lent GPU machine as they are."""
import csv
import sys


def load(paths, tool):
    """Every row of every file, as dicts; exit 2 naming the file when one cannot be read."""
    rows = []
    for p in paths:
        try:
            with open(p, newline="") as f:
                rows.extend(csv.DictReader(f))
        except OSError as e:
            print(f"{tool}: cannot read {p}: {e}", file=sys.stderr)
            sys.exit(2)
    return rows


def num(v):
    """The value as a float, None when empty or not a number."""
    try:
        return float(v)
    except (TypeError, ValueError):
        return None
