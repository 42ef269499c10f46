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


def filter_stdin(argv):
    """`result_rows.py keep COLUMN=VALUE|COLUMN^=PREFIX [--header]`: the rows of a result CSV on stdin whose
    column equals VALUE (or starts with PREFIX) to stdout; the header line only with --header (to append)."""
    args = [a for a in argv if a != "--header"]
    if len(args) != 1 or ("=" not in args[0]):
        print("result_rows.py keep: expected COLUMN=VALUE or COLUMN^=PREFIX [--header]", file=sys.stderr)
        return 2
    prefix = "^=" in args[0]
    col, val = args[0].split("^=" if prefix else "=", 1)
    r = csv.DictReader(sys.stdin)
    if col not in (r.fieldnames or []):
        print(f"result_rows.py keep: no column '{col}' in the input", file=sys.stderr)
        return 2
    w = csv.DictWriter(sys.stdout, r.fieldnames, lineterminator="\n")
    if "--header" in argv:
        w.writeheader()
    for row in r:
        if (row[col].startswith(val) if prefix else row[col] == val):
            w.writerow(row)
    return 0


if __name__ == "__main__":
    if len(sys.argv) >= 2 and sys.argv[1] == "keep":
        sys.exit(filter_stdin(sys.argv[2:]))
    print("usage: result_rows.py keep COLUMN=VALUE|COLUMN^=PREFIX [--header]", file=sys.stderr)
    sys.exit(2)
