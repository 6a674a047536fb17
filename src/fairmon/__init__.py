"""fairmon: daily fairness monitoring of recommender and moderation systems
from their own logs, with honest error bars.

A library first (DESIGN §1): the estimators on pandas, Polars or PyArrow
frames (through Narwhals; the result is of the caller's kind)::

    import fairmon
    fairmon.group_counts(rows, group="gender", label="liked")   # n, n_pos per traffic × arm × group
    fairmon.reo(rows, group="gender", label="liked")            # REO, SE, CI, verdict (seed 001)
    fairmon.reo_groups(...), fairmon.reo_ab(..., control="ctl") # per-group U, ΔU; A/B differences
    fairmon.threshold_prevalence(scores, score="s", outcome="y", group="g", t=0.5, d=0.1)  # seed 002
    fairmon.sdt(labels, label="label", gold_label="gold", labeler="labeler_id", group="g")
    fairmon.envy_audit(rows, user="user_id", donor="policy_user_id", reward="y", ...)     # seed 004
    fairmon.read_table("fairmon.toml", "reo", "2026-03-01", "2026-03-31")  # published outputs
    fairmon.run_day("fairmon.toml", "2026-03-01")  # a day computed and published in process, as `fairmon run`
    fairmon.plot_reo(daily_reo)                    # REO over days with intervals and the line (Matplotlib)

The REO functions cluster rows as ``fairmon run`` does by default: by
``request_id`` when the rows have that column, else the rows are independent
(``cluster=``; each result's ``cluster_by`` says which). Each function's
docstring gives its input shapes, units, errors and source equation. The
names load on first use: ``import fairmon`` itself imports neither the
estimators nor Prefect or Great Expectations. The estimators need
only the core install (``pip install fairmon``); ``read_table`` and
``run_day`` need the ``pipeline`` extra and say so when it is missing
(:mod:`fairmon.extras`; docs "Getting started").

The installed distribution exposes this one namespace: ``fairmon.api`` (the
functions above), ``fairmon.transforms`` (pure estimators),
``fairmon.pipelines`` (flows, runner, ingest, storage, CLI and report), and
the package data ``fairmon.sql``, ``fairmon.expectations`` and
``fairmon.data`` (read through :mod:`importlib.resources`, see
:mod:`fairmon.resources`). In the repository those folders sit at the root
(DESIGN §1); ``pyproject.toml`` maps them here.
"""

import importlib as _importlib
import importlib.metadata as _metadata
import os as _os

# OpenBLAS (NumPy's and SciPy's own) starts its worker threads when it loads, and each spins for
# 2^28 cycles after loading and after every job before it sleeps: CPU spent by every fairmon command
# waiting for work its estimators never hand them (they run on one BLAS thread, fairmon.transforms.blas).
# 2^4 cycles makes an idle thread sleep at once; the thread count and every result are unchanged.
# It takes effect for the libraries loaded after this (NumPy when fairmon is imported first) and
# for child processes; a value the caller set is kept (what it saves: bench/README.md "startup.py").
_os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "4")

try:
    __version__ = _metadata.version("fairmon")
except _metadata.PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0+unknown"

#: Public name -> module of fairmon.api that defines it (imported on first use).
_EXPORTS = {
    "group_counts": "fairmon.api.counting",
    "reo": "fairmon.api.equal_opportunity",
    "reo_groups": "fairmon.api.equal_opportunity",
    "reo_ab": "fairmon.api.equal_opportunity",
    "threshold_prevalence": "fairmon.api.moderation",
    "threshold_prevalence_diff": "fairmon.api.moderation",
    "sdt": "fairmon.api.moderation",
    "envy_users": "fairmon.api.envy_frames",
    "envy_audit": "fairmon.api.envy_frames",
    "read_table": "fairmon.api.published",
    "run_day": "fairmon.api.day_runs",
    "plot_reo": "fairmon.api.plots",
}

__all__ = ["__version__", *_EXPORTS]


def __getattr__(name: str):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'fairmon' has no attribute {name!r}")
    value = getattr(_importlib.import_module(module), name)
    globals()[name] = value  # later look-ups skip this hook
    return value


def __dir__() -> list[str]:
    return sorted({*(n for n in globals() if not n.startswith("_") or n == "__version__"), *_EXPORTS})
