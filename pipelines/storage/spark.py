"""The Spark engine's session (DESIGN §1 "Engines"; config ``engine = "spark"``).

One Spark session per process, built from ``[spark]`` on first use and
stopped at exit: ``master`` (``local[*]``, ``spark://…``, ``yarn``) starts a
classic session (a JVM on this machine is the driver), ``remote`` connects
to a Spark Connect server. PySpark is the extra ``fairmon[spark]``; nothing
here imports it until a config asks for Spark.

What runs on the cluster is the count stage's scans over raw rows (profiles,
duplicate ids; :mod:`fairmon.pipelines.ingest.engines`); what comes back to
this process is their results as Arrow: a few thousand rows a file.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import tempfile
import threading
from pathlib import Path

import polars as pl

from fairmon.pipelines.core.config import SparkConfig

# Process-wide by nature: a JVM-backed Spark session is expensive (seconds) and
# Spark allows one active classic session per process; every run of the process shares it.
_lock = threading.RLock()
_state: dict = {}  # "key": the [spark] settings of the open session, "session": it

#: Settings fairmon sets unless [spark] conf names them: no web UI for a batch job's
#: local driver, UTC session time (dates never shift), quiet logs.
DEFAULT_CONF = {
    "spark.ui.enabled": "false",
    "spark.sql.session.timeZone": "UTC",
    "spark.log.level": "ERROR",
    "spark.ui.showConsoleProgress": "false",
}


class SparkUnavailableError(RuntimeError):
    """``engine = "spark"`` but PySpark (or Java, for a local master) is missing, or the cluster cannot be reached."""


def session_lock() -> threading.RLock:
    """The lock a caller holds while it uses the session's temporary views
    (their names are per session, so two threads must take turns)."""
    return _lock


def spark_session(cfg: SparkConfig):
    """The process's Spark session for ``cfg``, started on first use (4–10 s
    for a local master) and reused while the settings stay the same; a
    different ``[spark]`` stops the old session first.

    Raises :class:`SparkUnavailableError` with what to install or check when
    PySpark is not installed or the session cannot start.
    """
    key = (cfg.master, cfg.remote, cfg.app_name, tuple(sorted(cfg.conf.items())))
    with _lock:
        if _state.get("key") == key:
            return _state["session"]
        stop_session()
        try:
            from pyspark.sql import SparkSession
        except ImportError:
            raise SparkUnavailableError(
                "engine = 'spark' needs PySpark: pip install 'fairmon[spark]' (and Java 17 for a local master)"
            ) from None
        builder = SparkSession.builder.appName(cfg.app_name)
        if cfg.remote is not None:
            builder = builder.remote(cfg.remote)
        else:
            builder = builder.master(cfg.master or "local[*]")
        defaults = dict(DEFAULT_CONF)
        if cfg.remote is None and (cfg.master or "local[*]").startswith("local"):
            # one machine: 8 shuffle partitions a core, not Spark's 200 (bench/spark.py: the duplicate-id
            # aggregation of 21 M rows on 2 cores took 31 s with 4, 18 s with 16, 19 s with 64)
            defaults["spark.sql.shuffle.partitions"] = str(8 * (os.cpu_count() or 2))
            # Spark would create ./spark-warehouse in whatever folder fairmon runs from; fairmon keeps no tables there
            defaults["spark.sql.warehouse.dir"] = str(Path(tempfile.gettempdir()) / "fairmon-spark-warehouse")
        for k, v in {**defaults, **cfg.conf}.items():
            if cfg.remote is not None and k in ("spark.ui.enabled", "spark.ui.showConsoleProgress"):
                continue  # the server's own settings
            builder = builder.config(k, v)
        os.environ.setdefault("PYSPARK_PYTHON", "python3")
        try:
            spark = builder.getOrCreate()
        except Exception as e:  # Py4J / gRPC / missing Java: say where
            where = cfg.remote or cfg.master or "local[*]"
            raise SparkUnavailableError(f"cannot start a Spark session on {where}: {e}") from None
        if cfg.remote is None:
            spark.sparkContext.setLogLevel({**DEFAULT_CONF, **cfg.conf}["spark.log.level"])
        _state.update(key=key, session=spark)
        return spark


def stop_session() -> None:
    """Stop the process's Spark session, if one is open (also at exit)."""
    with _lock:
        spark = _state.pop("session", None)
        _state.pop("key", None)
        if spark is not None:
            with contextlib.suppress(Exception):  # a session whose JVM or server is gone already
                spark.stop()


atexit.register(stop_session)


def to_polars(df) -> pl.DataFrame:
    """A (small) Spark DataFrame's rows on this machine, via Arrow, as Polars."""
    return pl.from_arrow(df.toArrow())


def spark_error_types() -> tuple[type[BaseException], ...]:
    """The exception types a Spark query raises for bad input (unreadable
    file, unknown column or table), for callers that turn them into an
    input error naming the file. Raises ImportError without PySpark."""
    from py4j.protocol import Py4JJavaError
    from pyspark.errors import PySparkException

    return (PySparkException, Py4JJavaError)
