"""One BLAS thread while the estimators run: the same numbers on every run,
and less CPU.

Why: OpenBLAS (NumPy's and SciPy's) splits a matrix product or an
eigendecomposition over its threads, and the split follows the thread count
and the threads' timing; partial sums are then added in another order, so the
last bits of a result can differ between two runs on the same inputs (seen:
``reach_beta`` in its last digit; the near-parity REO interval, DESIGN §4.1,
through the eigenvectors of its Gram matrix). A published number must be a
function of the inputs, so the estimators run with one BLAS thread, which
fixes the order of every sum. It is also cheaper: the products here are small
(a 256 × 4,096 factor at most), and on a busy two-core machine OpenBLAS's
idle threads spin waiting for work (the interval's spectrum at K = 4,096:
bench/README.md).

The limit is process-wide (OpenBLAS has one thread setting), so it is counted:
the first caller to enter sets it and the last to leave restores the previous
setting, whatever threads the days of a backfill run in. Libraries are looked
up on each first entry (SciPy's own OpenBLAS may load after NumPy's). Seen
with NumPy's OpenBLAS 0.3.31: raising the thread count again from a thread
other than the one that lowered it has no effect, so when a backfill's worker
thread is the last to leave, the process keeps one BLAS thread (what its
estimators want anyway); a caller of the Python API on one thread gets its
setting back.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import wraps
from typing import Any, TypeVar

_LOCK = threading.Lock()
_STATE: dict[str, Any] = {"depth": 0, "limiter": None}

F = TypeVar("F", bound=Callable[..., Any])


@contextmanager
def one_blas_thread() -> Iterator[None]:
    """Run the block with every loaded BLAS library (threadpoolctl's
    ``user_api="blas"``) limited to one thread; nested and concurrent blocks
    share one limit, restored when the last block ends. Raises nothing of its
    own (a process without a BLAS library runs the block as it is)."""
    from threadpoolctl import threadpool_limits

    with _LOCK:
        if _STATE["depth"] == 0:
            _STATE["limiter"] = threadpool_limits(limits=1, user_api="blas")
        _STATE["depth"] += 1
    try:
        yield
    finally:
        with _LOCK:
            _STATE["depth"] -= 1
            if _STATE["depth"] == 0:
                _STATE.pop("limiter").restore_original_limits()
                _STATE["limiter"] = None


def single_blas_thread(fn: F) -> F:
    """``fn`` run inside :func:`one_blas_thread` (a decorator for the entry
    points that compute published numbers)."""

    @wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with one_blas_thread():
            return fn(*args, **kwargs)

    return wrapper  # type: ignore[return-value]
