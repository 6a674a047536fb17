"""fairmon: daily fairness monitoring of recommender and moderation systems
from their own logs, with honest error bars.

The installed distribution exposes this one namespace:
``fairmon.transforms`` (pure estimators), ``fairmon.pipelines`` (flows,
runner, ingest, storage, CLI and report), and the package data
``fairmon.sql``, ``fairmon.expectations`` and ``fairmon.data`` (read through
:mod:`importlib.resources`, see :mod:`fairmon.resources`). In the repository
those folders sit at the root (DESIGN §1); ``pyproject.toml`` maps them here.
"""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("fairmon")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0+unknown"

__all__ = ["__version__"]
