"""Benchmark: the demo's Coat reachability project in CPU seconds (issue 55 item 4; seed 003, DESIGN §4.8).

1. Writes the project `fairmon demo` runs as its part 6 (``write_coat_reach_project``: the biased MF
   of ``fairmon train-snapshot`` on Coat, 290 users × 300 items, K = 10, β = 1 and the β grid
   1, 2, 4, 10, stability budgets 1, 5, 10 × 5 retrainings + 3 noise seeds) under
   ``$TMPDIR/fairmon-bench/reach-speed`` and runs its day with ``python -m fairmon run --no-prefect``
   in a new process: CPU seconds (user + sys of that process and every process it waited for),
   wall seconds and the load average before and after.
2. In this process, on the same snapshot: ``reach_problems`` as the reach stage calls it (CPU),
   and the same problems by the solver of git revision ``--reference`` (default: the commit
   before the speed-up), loaded from ``git show`` and run with one BLAS thread, as
   ``reach_problems`` at that revision ran them (its CPU beside). Prints the largest absolute
   difference of every column and the count of top-1 answers that differ (1e-9 is the bar).
3. The calibration (``python -c "import duckdb"`` in a new process, CPU seconds) and, last, the
   ratio judged: the project's CPU seconds / 30 (target ≤ 1).

    .venv/bin/python bench/reach_speed.py [--reference REV] [--no-reference]
"""

from __future__ import annotations

import argparse
import datetime as dt
import importlib.util
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import polars as pl

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from common import calibration, children_cpu  # noqa: E402

from fairmon.pipelines.ingest.snapshots import write_coat_reach_project  # noqa: E402
from fairmon.resources import data_dir  # noqa: E402
from fairmon.transforms.blas import one_blas_thread  # noqa: E402
from fairmon.transforms.reach.reach_tables import Ratings, action_and_targets, reach_problems  # noqa: E402
from fairmon.transforms.reach.reachability import BiasedMF  # noqa: E402

DS = dt.date(2016, 6, 19)
BETA, BETAS, BUDGET, LOW, HIGH = 1.0, (1.0, 2.0, 4.0, 10.0), 10, 1.0, 5.0
REFERENCE = "82244e3"  # the last commit before the reachability speed-up


def self_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def run_project(folder: Path) -> tuple[float, float, tuple[float, float]]:
    """(CPU s, wall s, (load before, load after)) of ``fairmon run`` of the project's day."""
    load0 = os.getloadavg()[0]
    cpu0, t0 = children_cpu(), time.perf_counter()
    cmd = [sys.executable, "-m", "fairmon", "run", "-c", str(folder / "fairmon.toml"), "--date", str(DS)]
    subprocess.run([*cmd, "--no-prefect"], check=True, capture_output=True, cwd=folder)
    return children_cpu() - cpu0, time.perf_counter() - t0, (load0, os.getloadavg()[0])


def snapshot(folder: Path) -> tuple[BiasedMF, Ratings]:
    """The snapshot's model and history from its files (the layout of DESIGN §2), in index order."""
    part = {n: pl.read_parquet(folder / "snapshots" / str(DS) / f"{n}.parquet") for n in ("users", "items")}
    rat = pl.read_parquet(folder / "snapshots" / str(DS) / "ratings.parquet")
    glob = pl.read_parquet(folder / "snapshots" / str(DS) / "global.parquet").row(0, named=True)
    factors = sorted((c for c in part["users"].columns if c.startswith("f_")), key=lambda c: int(c[2:]))
    model = BiasedMF(
        float(glob["mu"]),
        part["users"]["bias"].to_numpy(),
        part["items"]["bias"].to_numpy(),
        part["users"].select(factors).to_numpy(),
        part["items"].select(factors).to_numpy(),
        float(glob["lambda"]),
    )
    index = {s: {k: i for i, k in enumerate(part[s][f"{s[:-1]}_id"].to_list())} for s in ("users", "items")}
    u = np.array([index["users"][x] for x in rat["user_id"].to_list()], dtype=np.int64)
    i = np.array([index["items"][x] for x in rat["item_id"].to_list()], dtype=np.int64)
    return model, Ratings(u, i, rat["rating"].to_numpy().astype(float))


def reference_solver(rev: str):
    """The module ``transforms/reach/reachability.py`` of git revision ``rev``."""
    source = subprocess.run(
        ["git", "show", f"{rev}:transforms/reach/reachability.py"], cwd=ROOT, check=True, capture_output=True,
        text=True,
    ).stdout  # fmt: skip
    path = Path(tempfile.mkdtemp()) / "reference_reachability.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("reference_reachability", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses look their module up
    spec.loader.exec_module(mod)
    return mod


def reference_problems(mod, model: BiasedMF, hist: Ratings) -> dict[str, np.ndarray]:
    """The columns ``reach_problems`` computed at the reference revision, by its own solver: ρ and
    ρ* at β, top-1 from the ρ* maximisers, then ρ and ρ* at the other β, each from the last β's."""
    pred = model.predict()
    cols: dict[str, list] = {}
    for u in range(pred.shape[0]):
        h, hr = hist.of_user(u)
        acts, targ = action_and_targets(pred[u], h, BUDGET)
        if not targ.size:
            continue
        B, c = mod.affine_scores(model, h, hr, acts, targ)
        a0 = np.clip(pred[u, acts], LOW, HIGH)
        base = mod.softmax_probabilities(B, c, a0, BETA)
        rho, x = mod.max_reachability(B, c, BETA, LOW, HIGH)
        cols.setdefault("rho_base", []).append(base)
        cols.setdefault("rho_max", []).append(np.maximum(rho, base))
        cols.setdefault("top1", []).append(mod.top1_reachable(B, c, LOW, HIGH, start=(BETA, x)))
        for b in sorted(set(BETAS) - {BETA}):
            base_b = mod.softmax_probabilities(B, c, a0, b)
            rho_b, x = mod.max_reachability(B, c, b, LOW, HIGH, x0=x)
            cols.setdefault(f"rho_base@{b:g}", []).append(base_b)
            cols.setdefault(f"rho_max@{b:g}", []).append(np.maximum(rho_b, base_b))
    return {k: np.concatenate(v) for k, v in cols.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reference", default=REFERENCE, help="git revision whose solver the results are compared with")
    ap.add_argument("--no-reference", action="store_true", help="skip the comparison (it runs the old solver)")
    args = ap.parse_args()
    folder = Path(tempfile.gettempdir()) / "fairmon-bench" / "reach-speed"
    shutil.rmtree(folder, ignore_errors=True)
    write_coat_reach_project(folder, DS, data_dir("coat"))
    cpu, wall, (load0, load1) = run_project(folder)
    print(f"Coat reach project, `fairmon run --no-prefect` of {DS}: {cpu:.1f} CPU-s ({wall:.1f} s wall), "
          f"load average {load0:.1f} before, {load1:.1f} after")  # fmt: skip
    model, hist = snapshot(folder)
    t = self_cpu()
    new = reach_problems(model, hist, beta=BETA, budget=BUDGET, r_min=LOW, r_max=HIGH, betas=BETAS)
    print(f"reach_problems ({new.height:,} problems, β grid {BETAS}): {self_cpu() - t:.1f} CPU-s")
    if not args.no_reference:
        mod = reference_solver(args.reference)
        t = self_cpu()
        with one_blas_thread():
            old = reference_problems(mod, model, hist)
        print(f"the same problems by the solver at {args.reference} (one BLAS thread): {self_cpu() - t:.1f} CPU-s")
        worst = 0.0
        for name, values in old.items():
            got = new[name].to_numpy()
            if name == "top1":
                print(f"  top1: {int((got != values).sum())} answers differ")
                continue
            gap = float(np.abs(got - values).max())
            worst = max(worst, gap)
            print(f"  {name}: largest |difference| {gap:.1e}")
        print(f"largest |difference| of any ρ column: {worst:.1e} (bar: 1e-9)")
    print(f"calibration: python -c 'import duckdb' {calibration():.3f} CPU-s")
    print(f"Coat reach project CPU-s / 30: {cpu / 30:.2f}")


if __name__ == "__main__":
    main()
