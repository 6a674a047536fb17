"""Whether a frame repeats a row, cheaply (pure Polars and NumPy).

The staging step asks it of every file's normalised rows (rows equal on
every key are summed, :func:`fairmon.transforms.contract.normalize_impressions`);
rows per cluster bucket almost never repeat, and comparing hundreds of
thousands of multi-column rows cost more than the rest of their
normalisation (bench/README.md).
"""

from __future__ import annotations

import polars as pl


def has_repeated_rows(frame: pl.DataFrame) -> bool:
    """``frame.is_duplicated().any()``: whether two rows of ``frame`` (any
    columns, any length) are equal. Distinct 64-bit row hashes (found by one
    sort of them) prove there is no repeat; only when two hashes are equal
    are the rows themselves compared, so the answer is exact. Raises nothing."""
    import numpy as np  # here: the input contract imports this module, and the pre-flight needs no NumPy

    hashes = np.sort(frame.hash_rows().to_numpy())
    return bool((hashes[1:] == hashes[:-1]).any()) and bool(frame.is_duplicated().any())
