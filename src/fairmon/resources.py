"""The package data fairmon reads at run time, located through
:mod:`importlib.resources` so it works from a wheel, an editable install or a
zip alike: SQL statements (``fairmon.sql``), Great Expectations suites
(``fairmon.expectations``) and the bundled demo data (``fairmon.data``)."""

from __future__ import annotations

from importlib.resources import as_file, files
from importlib.resources.abc import Traversable
from pathlib import Path


def sql_file(name: str) -> Traversable:
    """``sql/<name>.sql`` (``name`` may hold a subfolder, ``a/b``)."""
    node = files("fairmon.sql")
    for part in f"{name}.sql".split("/"):
        node = node / part
    return node


def suite_file(suite: str) -> Traversable:
    """``expectations/<suite>.json``."""
    return files("fairmon.expectations") / f"{suite}.json"


def suites() -> list[str]:
    """Names of every bundled expectation suite."""
    return sorted(p.name[: -len(".json")] for p in files("fairmon.expectations").iterdir() if p.name.endswith(".json"))


def data_dir(name: str) -> Path:
    """A bundled data set's folder (``coat`` or ``compas``) as a file-system
    path. Raises FileNotFoundError when the package carries no such folder."""
    node = files("fairmon.data") / name
    if not node.is_dir():
        raise FileNotFoundError(f"fairmon ships no data set {name!r}")
    with as_file(node) as path:  # a real folder for wheels and editable installs alike
        return Path(path)
