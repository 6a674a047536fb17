"""Model snapshots (DESIGN §2 "model snapshots"; seed 003): read, check, train.

A snapshot of day ds is a folder (config ``reach.path`` with ``{ds}``)
holding four files, each ``<name>.parquet`` or ``<name>.csv``:

- ``users``: user_id, bias, f_0 … f_{r−1}, user attribute columns;
- ``items``: item_id, bias, f_0 … f_{r−1}, item attribute columns;
- ``ratings``: user_id, item_id, rating (the training history the model saw);
- ``global``: one row, mu and lambda (the ridge of the user refit), and
  optionally ``iters`` and ``seed`` of the ALS fit (used when stability
  retrains the model; defaults 30 and 0).

Each file is gated by its suite (``snapshot_factors``, ``snapshot_ratings``,
``snapshot_global``) before the audit reads a number from it; a failure names
the file, row and column like every other input. :func:`train_coat_snapshot`
trains the demo's snapshot from Coat's ratings.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl

from fairmon.pipelines.checks.gate import QualityGate
from fairmon.pipelines.checks.suites import DQResult
from fairmon.pipelines.core.config import FairmonConfig
from fairmon.pipelines.ingest.adapters import read_table
from fairmon.pipelines.ingest.sources import SNAPSHOT_FILES, snapshot_files, snapshot_folder
from fairmon.transforms.contract import InputContractError
from fairmon.transforms.datasets.coat import one_hot_families
from fairmon.transforms.reach.reach_tables import Ratings
from fairmon.transforms.reach.reachability import BiasedMF, fit_biased_mf
from fairmon.transforms.reach.stability_tables import Training

FACTOR = re.compile(r"f_(\d+)")


@dataclass(frozen=True)
class Snapshot:
    """A checked snapshot: the model, users and items (id and attribute
    columns, in index order), the training history as indices, and how to
    retrain it."""

    model: BiasedMF
    users: pl.DataFrame
    items: pl.DataFrame
    history: Ratings
    training: Training
    user_attributes: list[str]
    item_attributes: list[str]


def _factor_columns(frame: pl.DataFrame) -> list[str]:
    found = sorted((int(m.group(1)), c) for c in frame.columns if (m := FACTOR.fullmatch(c)))
    return [c for _, c in found]


def _numbers(frame: pl.DataFrame, columns: list[str]) -> pl.DataFrame:
    return frame.with_columns(pl.col(c).cast(pl.Float64, strict=False) for c in columns if c in frame.columns)


def factors_check_frame(raw: pl.DataFrame, id_column: str) -> pl.DataFrame:
    """The frame the ``snapshot_factors`` suite sees: the id (text), bias,
    the attribute columns and ``finite`` = bias and every f_k parse as
    finite numbers (a NaN, an infinity or text in a factor fails the row)."""
    factors = _factor_columns(raw)
    num = _numbers(raw, ["bias", *factors])
    finite = pl.all_horizontal(pl.col(c).is_not_null() & pl.col(c).is_finite() for c in ["bias", *factors])
    out = num.with_columns(finite=finite if "bias" in raw.columns else pl.lit(False))
    return out.with_columns(pl.col(id_column).cast(pl.String)) if id_column in out.columns else out


def ratings_check_frame(raw: pl.DataFrame, user_ids: set[str], item_ids: set[str]) -> pl.DataFrame:
    """The frame the ``snapshot_ratings`` suite sees: ids as text, the rating
    as a number (null when it does not parse) and ``user_known`` /
    ``item_known`` = the id is in the users / items file."""
    out = _numbers(raw, ["rating"])
    ids = [c for c in ("user_id", "item_id") if c in out.columns]
    out = out.with_columns(pl.col(c).cast(pl.String) for c in ids)
    if "user_id" in out.columns:
        out = out.with_columns(user_known=pl.col("user_id").is_in(list(user_ids)))
    if "item_id" in out.columns:
        out = out.with_columns(item_known=pl.col("item_id").is_in(list(item_ids)))
    return out


def read_snapshot(
    cfg: FairmonConfig, ds: dt.date, gate: QualityGate, run_name: str
) -> tuple[Snapshot | None, list[DQResult]]:
    """Read day ``ds``'s snapshot, each file through its suite. Returns the
    snapshot (None when a critical expectation failed) and one
    :class:`DQResult` per file checked. Raises :class:`InputContractError`
    naming the folder when a file is missing, or the file when it cannot be read."""
    rc = cfg.reach
    files = snapshot_files(cfg, ds)
    missing = [n for n in SNAPSHOT_FILES if n not in files]
    if missing:
        raise InputContractError(
            f"model snapshot of {ds} lacks {', '.join(f'{m}.parquet|csv' for m in missing)}",
            file=str(snapshot_folder(cfg, ds)),
        )
    raw = {name: read_table(path) for name, path in files.items()}
    params = {"rating_min": rc.rating_min, "rating_max": rc.rating_max}
    results = []
    frames = {}
    for side, id_column in (("users", "user_id"), ("items", "item_id")):
        frame = factors_check_frame(raw[side], id_column)
        required = [id_column, "bias", "f_0"]
        results.append(
            gate.validate(
                "snapshot_factors", frame, {**params, "id_column": id_column, "required_columns": required},
                str(files[side]), run_name,
            )
        )  # fmt: skip
        frames[side] = frame
    known = {
        side: set(frames[side].get_column(col).drop_nulls().to_list()) if col in frames[side].columns else set()
        for side, col in (("users", "user_id"), ("items", "item_id"))
    }
    ratings = ratings_check_frame(raw["ratings"], known["users"], known["items"])
    results.append(
        gate.validate(
            "snapshot_ratings", ratings, {**params, "required_columns": ["user_id", "item_id", "rating"]},
            str(files["ratings"]), run_name,
        )
    )  # fmt: skip
    glob = _numbers(raw["global"], ["mu", "lambda", "iters", "seed"])
    results.append(
        gate.validate(
            "snapshot_global", glob, {**params, "required_columns": ["mu", "lambda"]}, str(files["global"]), run_name
        )
    )
    uf, itf = _factor_columns(raw["users"]), _factor_columns(raw["items"])
    if uf != itf:
        results.append(_rank_mismatch(files, uf, itf))
    if not all(r.success for r in results):
        return None, results
    return _assemble(cfg, raw, ratings, glob, uf), results


def _rank_mismatch(files: dict[str, Path], uf: list[str], itf: list[str]) -> DQResult:
    failure = {
        "name": "factor_columns_match",
        "severity": "critical",
        "type": "snapshot",
        "column": None,
        "unexpected_count": 1,
        "rows": [],
        "sample": [len(uf), len(itf)],
        "error": f"users have factor columns {uf[:3]}… ({len(uf)}), items {itf[:3]}… ({len(itf)}): ranks differ",
    }
    return DQResult("snapshot", "snapshot_factors", f"{files['users']} vs {files['items']}", 1, [failure])


def _attribute_columns(frame: pl.DataFrame, id_column: str, wanted: list[str] | None) -> list[str]:
    own = [c for c in frame.columns if c not in (id_column, "bias") and not FACTOR.fullmatch(c)]
    if wanted is None:
        return own
    unknown = [a for a in wanted if a not in own]
    if unknown:
        raise InputContractError(f"attribute column(s) {unknown} not in the snapshot (has {own})")
    return list(wanted)


def _assemble(cfg: FairmonConfig, raw: dict, ratings: pl.DataFrame, glob: pl.DataFrame, factors: list[str]) -> Snapshot:
    rc = cfg.reach
    users = raw["users"].with_columns(pl.col("user_id").cast(pl.String))
    items = raw["items"].with_columns(pl.col("item_id").cast(pl.String))
    ua = _attribute_columns(users, "user_id", rc.user_attributes)
    ia = _attribute_columns(items, "item_id", rc.item_attributes)
    unum, inum = _numbers(users, ["bias", *factors]), _numbers(items, ["bias", *factors])
    g = glob.row(0, named=True)
    model = BiasedMF(
        mu=float(g["mu"]),
        user_bias=unum.get_column("bias").to_numpy(),
        item_bias=inum.get_column("bias").to_numpy(),
        user_factors=unum.select(factors).to_numpy(),
        item_factors=inum.select(factors).to_numpy(),
        lam=float(g["lambda"]),
    )
    uix = {u: k for k, u in enumerate(users.get_column("user_id").to_list())}
    iix = {i: k for k, i in enumerate(items.get_column("item_id").to_list())}
    history = Ratings(
        np.array([uix[u] for u in ratings.get_column("user_id").to_list()], dtype=np.int64),
        np.array([iix[i] for i in ratings.get_column("item_id").to_list()], dtype=np.int64),
        ratings.get_column("rating").to_numpy().astype(float),
    )

    def opt(key: str, default: int) -> int:
        v = g.get(key)
        return default if v is None or v != v else int(v)

    training = Training(len(factors), float(g["lambda"]), opt("iters", 30), opt("seed", 0))
    text = [pl.col(c).cast(pl.String) for c in ua]
    return Snapshot(
        model,
        users.select("user_id", *ua).with_columns(text),
        items.select("item_id", *[pl.col(c).cast(pl.String) for c in ia]),
        history,
        training,
        ua,
        ia,
    )


def write_snapshot(
    folder: Path,
    model: BiasedMF,
    users: pl.DataFrame,
    items: pl.DataFrame,
    ratings: pl.DataFrame,
    *,
    iters: int,
    seed: int,
) -> dict[str, Path]:
    """Write a snapshot folder (DESIGN §2): ``users`` / ``items`` give the ids
    (``user_id`` / ``item_id``) and attribute columns in the model's index
    order; ``ratings`` has user_id, item_id, rating. Each file is written
    aside and renamed into place, so a reader never sees half a file.
    Returns {name: path}. Raises OSError when the folder cannot be written."""
    folder.mkdir(parents=True, exist_ok=True)
    r = model.user_factors.shape[1]

    def side(frame: pl.DataFrame, bias: np.ndarray, factors: np.ndarray) -> pl.DataFrame:
        cols = {"bias": bias, **{f"f_{k}": factors[:, k] for k in range(r)}}
        return pl.concat(
            [frame.select(frame.columns[:1]), pl.DataFrame(cols), frame.select(frame.columns[1:])], how="horizontal"
        )

    frames = {
        "users": side(users, model.user_bias, model.user_factors),
        "items": side(items, model.item_bias, model.item_factors),
        "ratings": ratings.select("user_id", "item_id", pl.col("rating").cast(pl.Float64)),
        "global": pl.DataFrame({"mu": [model.mu], "lambda": [model.lam], "iters": [iters], "seed": [seed]}),
    }
    out = {}
    for name, frame in frames.items():
        path = folder / f"{name}.parquet"
        tmp = folder / f".{name}.parquet.tmp"
        frame.write_parquet(tmp)
        tmp.replace(path)
        out[name] = path
    return out


def _read_matrix(path: Path) -> np.ndarray:
    try:
        return np.loadtxt(path, ndmin=2)
    except (OSError, ValueError) as e:
        raise InputContractError(f"cannot read Coat matrix: {e}", file=str(path)) from None


def train_coat_snapshot(
    coat_dir: Path,
    out: Path,
    *,
    ranks: tuple[int, ...] = (2, 4, 8, 16),
    lams: tuple[float, ...] = (1.0, 3.0, 10.0, 30.0),
    iters: int = 30,
    seed: int = 0,
) -> dict:
    """Train the demo's snapshot on Coat (Schnabel et al. 2016): a biased MF by
    ALS on ``train.ascii`` (self-selected ratings), rank and ridge chosen by
    RMSE on ``test.ascii`` (ratings of uniformly random items, so the choice is
    not biased by self-selection), with a fixed ``seed``. Users carry the
    Coat user features (gender, age, location, fashioninterest), items the
    item features (gender, jackettype, color, onfrontpage). Writes the
    snapshot to ``out`` (:func:`write_snapshot`) and returns {rank, lam,
    test_rmse, grid: [(rank, lam, rmse)], files}. Raises
    :class:`InputContractError` naming the file when a Coat matrix cannot be read."""
    feat = coat_dir / "user_item_features" if (coat_dir / "user_item_features").is_dir() else coat_dir
    train, test = _read_matrix(coat_dir / "train.ascii"), _read_matrix(coat_dir / "test.ascii")
    u, i = np.nonzero(train)
    tu, ti = np.nonzero(test)
    n_users, n_items = train.shape
    grid = []
    best = None
    for rank in ranks:
        for lam in lams:
            m = fit_biased_mf(
                u, i, train[u, i], n_users=n_users, n_items=n_items, rank=rank, lam=lam, iters=iters, seed=seed
            )
            rmse = float(np.sqrt(np.mean((m.predict()[tu, ti] - test[tu, ti]) ** 2)))
            grid.append((rank, lam, rmse))
            if best is None or rmse < best[2]:
                best = (rank, lam, rmse, m)
    rank, lam, rmse, model = best
    names = {
        "users": (feat / "user_features.ascii", feat / "user_features_map.txt", "user_id", "u"),
        "items": (feat / "item_features.ascii", feat / "item_features_map.txt", "item_id", "i"),
    }
    sides = {}
    for side, (matrix, mapping, id_column, prefix) in names.items():
        fams = one_hot_families(
            _read_matrix(matrix).astype(np.int64),
            [x.strip() for x in mapping.read_text().splitlines() if x.strip()],
        )
        n = n_users if side == "users" else n_items
        sides[side] = pl.DataFrame({id_column: [f"{prefix}{k}" for k in range(n)], **fams})
    ratings = pl.DataFrame({"user_id": [f"u{x}" for x in u], "item_id": [f"i{x}" for x in i], "rating": train[u, i]})
    files = write_snapshot(out, model, sides["users"], sides["items"], ratings, iters=iters, seed=seed)
    return {"rank": rank, "lam": lam, "test_rmse": rmse, "grid": grid, "files": {k: str(v) for k, v in files.items()}}


COAT_REACH_CONFIG = """# fairmon config: reachability and stability of a biased MF trained on Coat (seed 003)
warehouse = "warehouse"
duckdb = "fairmon.duckdb"

[reach]
path = "snapshots/{{ds}}"          # users, items, ratings, global files per day
rating_min = 1
rating_max = 5
beta = {beta}                     # softmax inverse temperature of the selection rule
budget = {budget}                    # K: the user re-rates the K unseen items predicted highest
stability_budgets = {budgets}
perturbations = {perturbations}              # R retrainings per B
noise_seeds = {noise_seeds}               # retrainings of the same data with other seeds: the noise floor
"""


def write_coat_reach_project(
    out: Path,
    ds: dt.date,
    coat_dir: Path,
    *,
    seed: int = 0,
    beta: float = 1.0,
    budget: int = 10,
    budgets: tuple[int, ...] = (1, 5, 10),
    perturbations: int = 5,
    noise_seeds: int = 3,
) -> dict:
    """A ready-to-run reach project in ``out``: the Coat snapshot of day ``ds``
    (:func:`train_coat_snapshot`) under ``snapshots/<ds>/`` and a
    ``fairmon.toml`` with ``[reach]``. Returns the training summary plus
    ``config`` (its path)."""
    out.mkdir(parents=True, exist_ok=True)
    summary = train_coat_snapshot(coat_dir, out / "snapshots" / ds.isoformat(), seed=seed)
    config = out / "fairmon.toml"
    config.write_text(
        COAT_REACH_CONFIG.format(
            beta=beta,
            budget=budget,
            budgets=list(budgets),
            perturbations=perturbations,
            noise_seeds=noise_seeds,
        )
    )
    return {**summary, "config": str(config)}
