"""transforms/repeats.py: whether a frame repeats a row, against Polars' own row comparison."""

import numpy as np
import polars as pl

from fairmon.transforms.repeats import has_repeated_rows


def test_repeated_rows_are_found_exactly_as_polars_compares_rows():
    rng = np.random.default_rng(11)
    for trial in range(80):
        n = int(rng.integers(0, 400))
        frame = pl.DataFrame(
            {
                "s": pl.Series(
                    [None if v == "" else v for v in rng.choice(["a", "b", "", "ccc"], n).tolist()], dtype=pl.String
                ),
                "k": rng.integers(0, 3 if trial % 2 else 10**6, n).astype(np.int32),
                "y": rng.random(n) < 0.5,
            }
        )
        assert has_repeated_rows(frame) == bool(frame.is_duplicated().any()), trial
    one = pl.DataFrame({"a": [1, 2, 3], "b": ["x", "y", "x"]})
    assert not has_repeated_rows(one) and has_repeated_rows(pl.concat([one, one.slice(1, 1)]))
    assert not has_repeated_rows(pl.DataFrame({"a": [None, 1]})) and has_repeated_rows(
        pl.DataFrame({"a": [None, None]})
    )
