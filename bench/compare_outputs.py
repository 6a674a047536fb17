"""Not a benchmark: compares the output tables of two runs (e.g. `fairmon demo` before and after a
refactor), partition by partition, ignoring `run_id`, the run folder and the bundled data's location.

    python bench/compare_outputs.py OLD_DEMO_DIR NEW_DEMO_DIR

Prints each differing partition, then, last, the number of partitions that differ (0 = identical)."""

import re
import sys
from pathlib import Path

import polars as pl

DATA = re.compile(r"/[^\s'\"]*?/data/(coat|compas)")


def load(root: Path):
    out = {}
    for part in sorted(root.glob("*/warehouse/*/ds=*/part-0.parquet")):
        df = pl.read_parquet(part)
        df = df.drop([c for c in df.columns if c == "run_id"])
        df = df.with_columns(
            [
                pl.col(c).str.replace_all(str(root), "<ROOT>", literal=True).str.replace_all(DATA.pattern, "<DATA>/$1")
                for c, t in df.schema.items()
                if t == pl.String
            ]
        )
        out[str(part.relative_to(root))] = df
    return out


a, b = load(Path(sys.argv[1]).resolve()), load(Path(sys.argv[2]).resolve())
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
    if x.height != y.height or not x.select(common).equals(y.select(common), null_equal=True):
        print("values differ:", k)
        bad += 1
print(f"{len(a)} partitions compared, {bad} differ")
sys.exit(1 if bad else 0)
