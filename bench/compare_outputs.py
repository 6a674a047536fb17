"""Not a benchmark: compares the output tables of two runs (e.g. `fairmon demo` before and after a
refactor), partition by partition, ignoring `run_id`, when an alert was first seen (`first_seen_at`, a
wall-clock time), the run folder and the bundled data's location.

    python bench/compare_outputs.py OLD_DEMO_DIR NEW_DEMO_DIR [--rtol 1e-12]

Prints each differing partition with, for each column that differs, how many rows differ and, for a float
column, the largest relative difference; then, last, the number of partitions that differ (0 = identical).
``--rtol R``: a partition whose float columns differ by at most R relatively (NaN where NaN, every other
column equal) counts as the same, and is listed as "within rtol" (e.g. the last bits of an interval)."""

import argparse
import re
from pathlib import Path

import numpy as np
import polars as pl

#: Columns that say when or by which run a row was written, not what it computes.
WALL_CLOCK = ("run_id", "first_seen_at")
DATA = re.compile(r"/[^\s'\"]*?/data/(coat|compas)")


def load(root: Path):
    out = {}
    for part in sorted(root.glob("*/warehouse/*/ds=*/part-0.parquet")):
        df = pl.read_parquet(part)
        df = df.drop([c for c in df.columns if c in WALL_CLOCK])
        df = df.with_columns(
            [
                pl.col(c).str.replace_all(str(root), "<ROOT>", literal=True).str.replace_all(DATA.pattern, "<DATA>/$1")
                for c, t in df.schema.items()
                if t == pl.String
            ]
        )
        out[str(part.relative_to(root))] = df
    return out


def column_diffs(x: pl.DataFrame, y: pl.DataFrame, columns: list[str]) -> list[tuple[str, int, float]]:
    """(column, rows that differ, largest relative difference or NaN for a non-float column) of two
    frames of equal height, for each column that differs."""
    out = []
    for c in columns:
        a, b = x.get_column(c), y.get_column(c)
        if a.dtype.is_float() and b.dtype.is_float():
            u, v = a.to_numpy().astype(float), b.to_numpy().astype(float)
            same = (u == v) | (np.isnan(u) & np.isnan(v))
            if not same.all():
                with np.errstate(divide="ignore", invalid="ignore"):
                    rel = np.abs(u - v) / np.maximum(np.abs(u), np.abs(v))
                out.append((c, int((~same).sum()), float(np.nanmax(np.where(same, 0.0, rel)))))
        elif not a.equals(b, null_equal=True):
            out.append((c, int(a.ne_missing(b).sum()), float("nan")))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("old", type=Path)
    ap.add_argument("new", type=Path)
    ap.add_argument("--rtol", type=float, default=0.0, help="float columns this close relatively count as equal")
    args = ap.parse_args()
    a, b = load(args.old.resolve()), load(args.new.resolve())
    bad = 0
    for k in sorted(set(a) | set(b)):
        if k not in a or k not in b:
            print("only in one:", k)
            bad += 1
            continue
        x, y = a[k], b[k]
        common = [c for c in x.columns if c in y.columns]
        if set(x.columns) != set(y.columns):
            old_only, new_only = sorted(set(x.columns) - set(y.columns)), sorted(set(y.columns) - set(x.columns))
            print(f"columns differ: {k}: only old {old_only}, only new {new_only}")
        if x.height != y.height:
            print(f"values differ: {k} ({x.height} rows against {y.height})")
            bad += 1
            continue
        if x.select(common).equals(y.select(common), null_equal=True):
            continue
        diffs = column_diffs(x, y, common)
        text = ", ".join(f"{c} {n} rows" + ("" if np.isnan(r) else f" (rel {r:.1e})") for c, n, r in diffs)
        if args.rtol > 0 and all(not np.isnan(r) and r <= args.rtol for _, _, r in diffs):
            print(f"within rtol: {k}: {text}")
        else:
            print(f"values differ: {k}: {text}")
            bad += 1
    print(f"{len(a)} partitions compared, {bad} differ")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
