"""The docs' "Input formats" page: its example rows pass the input contract they document."""

from __future__ import annotations

import datetime as dt
import io
import re
from pathlib import Path

import polars as pl

from fairmon.transforms.contract import normalize_impressions, normalize_labels, normalize_scores

README = (Path(__file__).resolve().parents[1] / "docs" / "guide" / "inputs.md").read_text()


def _example(heading: str) -> pl.DataFrame:
    section = README[README.index(heading) :]
    block = re.search(r"```csv\n(.*?)```", section, re.S).group(1)
    return pl.read_csv(io.StringIO(block), infer_schema=False)


def test_readme_example_rows_pass_the_contract():
    contract = normalize_impressions(
        _example('## `format = "contract"`'), file="c", signals=["click"], attributes=["creator_group"]
    )
    assert contract.get_column("y").to_list() == [True, False]
    tiktok = normalize_impressions(
        _example('## `format = "tiktok"`'),
        file="t",
        signals=["like_video", "share", "follow", "finish", "download", "long_view"],
        attributes=["young_adult"],
        ds=dt.date(2026, 1, 1),
        traffic="default",
    )
    assert tiktok.get_column("y").to_list() == [True]
    coat = _example('## `format = "coat"`')
    assert normalize_impressions(
        coat, file="x", signals=["liked"], attributes=["gender"], ds=dt.date(2016, 6, 19)
    ).height
    scores = normalize_scores(_example("## `[scores]`"), file="s", attributes=["region"])
    assert scores.get_column("outcome").null_count() == 1
    labels = normalize_labels(_example("## `[labels]`"), file="l", attributes=["producer_group"])
    assert labels.get_column("gold_label").to_list() == [False]
