"""Shared fixtures. Prefect's temporary API starts once per test process (only
for the tests that request ``prefect_harness``): once per pytest-xdist worker
under ``make test``."""

import hashlib
import os

os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
os.environ.setdefault("GX_ANALYTICS_ENABLED", "False")
# The width of piped output is the CLI's default (130) unless a test sets COLUMNS: pytest-xdist's workers set
# COLUMNS=80 and LINES=24, a shell may export its own, and a test of the CLI's output must not depend on either.
os.environ.pop("COLUMNS", None)
os.environ.pop("LINES", None)

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
BUNDLED_COAT = REPO / "data" / "coat"

#: Ids whose bucket every engine must agree on: ASCII, non-ASCII, empty, long, digits, null.
BUCKET_IDS = ["r1", "req-2026-01-05-000017", "é", "ユーザー☃", "", "x" * 500, "0042", " a ", None]


def reference_bucket(cluster_id: str | None, buckets: int) -> int:
    """sql/impressions_bucket.sql's hash bucket in Python: the first 8 hex digits of the SHA-1 of the id's
    UTF-8 bytes as an unsigned integer, modulo the buckets; a null id in DuckDB's former null bucket."""
    return _sha1_prefix(cluster_id) % buckets


def reference_key(cluster_id: str | None, buckets: int, n_ids: int, exact: int) -> int:
    """sql/impressions_bucket.sql (formula 5) in Python for an id of a file of ``n_ids`` distinct ids:
    the per-cluster key −1 − h mod span (span = buckets·⌊(2³¹ − 1)/buckets⌋) when ``n_ids`` ≤ ``exact``
    (cluster_exact_max), else the hash bucket (:func:`reference_bucket`)."""
    if n_ids > exact:
        return reference_bucket(cluster_id, buckets)
    return -1 - _sha1_prefix(cluster_id) % (buckets * ((2**31 - 1) // buckets))


def _sha1_prefix(cluster_id: str | None) -> int:
    return 6893924396578271964 if cluster_id is None else int(hashlib.sha1(cluster_id.encode()).hexdigest()[:8], 16)


def declared_example(table, ds):
    """Rows of ``table`` (a registry ``Table``) made from its declaration alone, so that a new table needs no
    hand-written fixture: two rows whose key columns differ (one row for a table keyed by ``ds`` alone), every
    column of its declared dtype, ds = ``ds``, numbers inside the column's declared bounds."""
    import datetime as dt

    import polars as pl

    n = 1 if tuple(table.key) == ("ds",) else 2
    cols = {}
    for c in table.columns:
        keyed = c.name in table.key
        low = c.bounds.min_value if c.bounds is not None and c.bounds.min_value is not None else 0
        if c.dtype == pl.Date:
            values = [ds - dt.timedelta(days=i if keyed and c.name != "ds" else 0) for i in range(n)]
        elif c.dtype == pl.Boolean:
            values = [i == 1 for i in range(n)] if keyed else [True] * n
        elif c.dtype == pl.String:
            values = [f"{c.name}{i}" if keyed else "x" for i in range(n)]
        elif c.dtype == pl.Int64:
            values = [int(low) + 1 + (i if keyed else 0) for i in range(n)]
        else:
            values = [low + (i + 1 if keyed else 1) / 4 for i in range(n)]
        cols[c.name] = pl.Series(c.name, values, dtype=c.dtype)
    return pl.DataFrame(cols)


def declared_examples(ds) -> dict:
    """{table: :func:`declared_example`} for every table of the registry."""
    from fairmon.transforms.registry import TABLES

    return {name: declared_example(t, ds) for name, t in TABLES.items()}


def pytest_collection_modifyitems(config, items):
    """Every test that needs Prefect's API (the ``prefect_harness`` fixture,
    directly or through another fixture) runs flows end to end or starts
    ``fairmon`` subprocesses: mark it ``slow`` so ``make test-fast``
    (``-m "not slow"``) skips it."""
    for item in items:
        if "prefect_harness" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.slow)


@pytest.fixture(scope="session")
def prefect_harness():
    from prefect.testing.utilities import prefect_test_harness

    with prefect_test_harness(server_startup_timeout=120):
        yield


@pytest.fixture(scope="session")
def coat_dir() -> Path:
    """The Coat data as the repository bundles it (``data/coat``)."""
    return BUNDLED_COAT


def browser_required() -> bool:
    """True where the browser tests must run: ``FAIRMON_REQUIRE_BROWSER`` when set
    (``.ci/run`` exports 1, or 0 where it can have no browser), else ``CI``; a
    value requires unless it is ``0``, ``false`` or ``no``."""
    explicit = os.environ.get("FAIRMON_REQUIRE_BROWSER", "").strip().lower()
    value = explicit or os.environ.get("CI", "").strip().lower()
    return value not in ("", "0", "false", "no")


def _find_chromium() -> str:
    import shutil

    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium:
        return chromium
    if browser_required():
        pytest.fail(
            "chromium is not installed and a browser test is required here (FAIRMON_REQUIRE_BROWSER or CI is set): "
            "install Debian's chromium (`apt-get install chromium`; .ci/run does when root)"
        )
    pytest.skip("chromium is not installed (set FAIRMON_REQUIRE_BROWSER=1 to make this a failure instead)")


@pytest.fixture(scope="session")
def find_chromium():
    """A browser test calls ``find_chromium()`` in its body: Chromium's path, or
    the test FAILS when none is installed and a browser is required
    (``browser_required``), else it skips with that reason (shown by ``-rs``)."""
    return _find_chromium
