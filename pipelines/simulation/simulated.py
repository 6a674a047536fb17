"""Write simulated TikTok-format impressions, their truth and a ready config.

Layout under ``out``::

    default/<ds>.<fmt>                 default traffic, one file per day (all arms)
    random/random_<start>_<end>.<fmt>  pooled random traffic with its declared range
    post_recall/<ds>.<fmt>             forced-inserted post-recall traffic, when simulated
    truth_reo.csv, truth_groups.csv    true REO and true U, ΔU per day and arm
    truth_stages.csv                   true recall/ranking/system U, ΔU, REO (with post-recall)
    fairmon.toml                       a config that runs fairmon on these files
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import polars as pl

from fairmon.transforms.simulators.impressions import (
    TIKTOK_ATTRIBUTE,
    TIKTOK_SIGNALS,
    SimulationSpec,
    simulate_day,
    simulate_post_recall_day,
    simulate_random_pool,
    stage_truth_table,
    truth_tables,
)


def _write(frame: pl.DataFrame, path: Path, fmt: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    if fmt == "csv":
        frame.write_csv(tmp)
    else:
        frame.write_parquet(tmp)
    tmp.replace(path)


#: The simulator writes the published TikTok layout: each random file pools
#: ``random_pool_days`` days and is the only random traffic of those days, and
#: the window equals the pool length. Under ``contained`` only a pool's last day
#: would contain it (12 of 14 days without random traffic), so the simulator
#: writes ``overlap``, as for the published data set: a day uses the pools
#: meeting its window, and ``reo.look_ahead`` marks the days whose pool reaches
#: past them. (The simulated random traffic is stationary, so its truth is the
#: same either way.)
SIMULATION_POOL_POLICY = "overlap"


def config_toml(
    out: Path,
    fmt: str,
    random_window_days: int,
    control: str | None = None,
    pool_policy: str = SIMULATION_POOL_POLICY,
    post_recall: bool = False,
) -> str:
    """TOML text of a config reading the simulated files under ``out``; with
    ``control``, A/B tests of every other arm against it (all four methods).
    ``pool_policy``: see :data:`SIMULATION_POOL_POLICY`; ``post_recall``:
    read the post_recall/<ds> files as the post-recall stage (seed 001 App. I.4)."""
    if pool_policy not in ("contained", "overlap"):
        raise ValueError(f"pool_policy must be contained or overlap, got {pool_policy!r}")
    signals = ", ".join(f'"{s}"' for s in TIKTOK_SIGNALS)
    ab = (
        f'\n[ab]\ncontrol = "{control}"\nmethods = ["delta", "delta_paper", "partition", "bootstrap"]\n'
        if control
        else ""
    )
    stages = (
        f"# forced-inserted post-recall rows (seed 001 App. I.4): the reo_stage table\n"
        f'stage_paths = {{ post_recall = "post_recall/{{ds}}.{fmt}" }}\n'
        if post_recall
        else ""
    )
    return f"""# fairmon config for simulated TikTok-format data (written by `fairmon simulate`)
warehouse = "warehouse"
duckdb = "fairmon.duckdb"

[impressions]
format = "tiktok"
path = "default/{{ds}}.{fmt}"
random_path = "random/random_{{start}}_{{end}}.{fmt}"
signals = [{signals}]
label_rule = "any"
attributes = ["{TIKTOK_ATTRIBUTE}"]
random_window_days = {random_window_days}
# the random files pool several days each (the published TikTok layout): "overlap" uses every
# pool meeting a day's window (reo.look_ahead marks pools reaching past the day); "contained"
# only pools inside the window
pool_policy = "{pool_policy}"
{stages}
[estimation]
confidence_level = 0.95
ci_method = "delta"
{ab}"""


def write_simulation(
    spec: SimulationSpec,
    out: Path,
    fmt: str = "csv",
    progress=None,
    pool_policy: str = SIMULATION_POOL_POLICY,
) -> dict[str, Path]:
    """Write a simulation to ``out`` (see module docstring). ``progress(i, n)``
    is called after each file when given; ``pool_policy`` goes into the
    config (:data:`SIMULATION_POOL_POLICY`). Returns the main paths written.
    Raises ValueError on an unknown format or pool policy."""
    if fmt not in ("csv", "parquet"):
        raise ValueError(f"format must be csv or parquet, got {fmt!r}")
    if pool_policy not in ("contained", "overlap"):
        raise ValueError(f"pool_policy must be contained or overlap, got {pool_policy!r}")
    (out / "default").mkdir(parents=True, exist_ok=True)
    (out / "random").mkdir(parents=True, exist_ok=True)
    pools = spec.pools()
    staged = bool(spec.post_recall_rows_per_day)
    if staged:
        (out / "post_recall").mkdir(parents=True, exist_ok=True)
    n = spec.days * (1 + staged) + len(pools)
    done = 0
    for d in range(spec.days):
        ds = spec.start + dt.timedelta(days=d)
        _write(simulate_day(spec, d), out / "default" / f"{ds.isoformat()}.{fmt}", fmt)
        if staged:
            _write(simulate_post_recall_day(spec, d), out / "post_recall" / f"{ds.isoformat()}.{fmt}", fmt)
        done += 1 + staged
        if progress:
            progress(done, n)
    for a, b in pools:
        _write(simulate_random_pool(spec, a, b), out / "random" / f"random_{a.isoformat()}_{b.isoformat()}.{fmt}", fmt)
        done += 1
        if progress:
            progress(done, n)
    groups, reo = truth_tables(spec)
    groups.write_csv(out / "truth_groups.csv")
    reo.write_csv(out / "truth_reo.csv")
    paths = {"truth_reo": out / "truth_reo.csv", "truth_groups": out / "truth_groups.csv"}
    if staged:
        stage_truth_table(spec).write_csv(out / "truth_stages.csv")
        paths["truth_stages"] = out / "truth_stages.csv"
    cfg = out / "fairmon.toml"
    control = "control" if "control" in spec.arms and len(spec.arms) > 1 else None
    cfg.write_text(config_toml(out, fmt, spec.random_pool_days, control, pool_policy, post_recall=staged))
    return {"config": cfg, **paths}


LABELS_CONFIG = """# fairmon config for simulated labeling logs (written by `fairmon simulate-labels`)
warehouse = "warehouse"
duckdb = "fairmon.duckdb"

[labels]
path = "labels/{{ds}}.csv"
attributes = ["{group}"]
window_days = {window}
min_pos = 10
min_neg = 10
"""


def write_labeling_simulation(spec, out: Path, window_days: int | None = None) -> dict[str, Path]:
    """Write simulated labeling logs (labels/<ds>.csv), the true per-labeler
    values (truth_labelers.csv) and a config to ``out``."""
    from fairmon.transforms.simulators.labelers import GROUP_COLUMN, labeling_truth, simulate_labels_day

    (out / "labels").mkdir(parents=True, exist_ok=True)
    for d in range(spec.days):
        ds = spec.start + dt.timedelta(days=d)
        _write(simulate_labels_day(spec, d), out / "labels" / f"{ds.isoformat()}.csv", "csv")
    labeling_truth(spec).write_csv(out / "truth_labelers.csv")
    cfg = out / "fairmon.toml"
    cfg.write_text(LABELS_CONFIG.format(group=GROUP_COLUMN, window=window_days or spec.days))
    return {"config": cfg, "truth": out / "truth_labelers.csv"}


ENVY_CONFIG = """# fairmon config for a simulated envy-freeness audit (written by `fairmon simulate-envy`)
warehouse = "warehouse"
duckdb = "fairmon.duckdb"

[impressions]
format = "contract"
path = "logs/{{ds}}.parquet"
signals = ["like"]
attributes = ["user_group"]
# random traffic is in each day's file (traffic = 'random'), so a window of one day
random_window_days = 1

[estimation]
user_attributes = ["user_group"]

# seed 004: AUDIT logged {m_tilde} target users with {k} donors each (`fairmon envy-plan`)
[envy]
epsilon = {epsilon}
delta = {delta}
lambda = {lam}
gamma = {gamma}
start = {start}
"""


def _expected_group_cells(system, targets, donors, mu) -> list[dict]:
    """The expected value of each (group, donor group) cell of ``group_envy``
    under this design (seed 004 App. B, eq. 6), for the truth file: U_cross
    averages equally the targets with donors in both the donor group and
    their own, each target's mean over its donors in the donor group (each
    target-donor pair gets the same pulls); U_same (Def. B.1's U(g, g))
    likewise over the same targets' same-group swap pairs, and a group
    without same-group swap pairs has no baseline and no cells. U_own
    (the own-policy diagnostic) is the mean own utility of g's users (default
    traffic reaches nearly every user). ``mu`` (targets, donors) holds the
    swap utilities."""
    import numpy as np

    U = system.utility
    cells = []
    groups = sorted(set(system.group))
    for g in groups:
        own_g = float(np.diag(U)[system.group == g].mean())
        same = (system.group[targets] == g)[:, None] & (system.group[donors] == g)
        for h in groups:
            sel = (system.group[targets] == g)[:, None] & (system.group[donors] == h)
            if sel.any() and same.any():  # Def. B.1's baseline U(g, g): the same-group swap pairs
                both = sel.any(axis=1) & same.any(axis=1)  # group_envy pairs the two cells within users
                u_cross, u_same = (_users_average(mu, cell, both) for cell in (sel, same))
                cells.append({"group": g, "donor_group": h, "U_cross": u_cross, "U_same": u_same, "U_own": own_g})
    return cells


def _users_average(mu, cell, users) -> float:
    """Eq. 6's average over the targets ``users`` (targets,) bool, each with a pair in ``cell``
    (targets × donors, bool), of each target's mean utility ``mu`` over its donors there."""
    return float(((mu * cell).sum(axis=1)[users] / cell.sum(axis=1)[users]).mean())


def write_envy_simulation(
    out: Path,
    *,
    scenario: str,
    days: int = 14,
    start: dt.date = dt.date(2026, 1, 1),
    seed: int = 0,
    epsilon: float = 0.1,
    delta: float = 0.05,
    lam: float = 0.2,
    gamma: float = 0.3,
    pulls_own: int = 1000,
    pulls_per_donor: int = 500,
    default_rows: int = 20_000,
    random_rows: int = 20_000,
    progress=None,
) -> dict[str, Path]:
    """Write simulated logs of an envy-freeness audit (transforms/simulators/envy_world.py) to ``out``.

    ``logs/<ds>.parquet``: each day, AUDIT's M̃ targets (drawn once, seed 004
    Alg. 2) with ``pulls_own`` own-policy rows and ``pulls_per_donor`` swap
    rows per donor, plus ``default_rows`` default and ``random_rows`` random
    rows of users drawn uniformly. ``truth_envy.json``: the scenario, the
    verdict AUDIT should reach (``not_envy_free`` when a target gains more
    than ε from one of its donors, else ``envy_free``), ``correct_verdicts``
    (those that would not be wrong: ``not_envy_free`` when any target gains
    at all, ``envy_free`` when at most a λ share of all users is
    (ε, γ)-envious), that share, each target's true decision,
    and per (group, donor group) the expected value of the group-envy cells
    under this design: U_cross, U_same (Def. B.1's U(g, g), seed 004 App. B)
    and U_own (the own-policy diagnostic). ``fairmon.toml``: a config with ``[envy]``.
    ``progress(i, n)`` is called after each day. Returns the paths written.
    Raises ValueError for an unknown scenario.
    """
    import json

    import numpy as np

    from fairmon.transforms.envy.certify import audit_sizes
    from fairmon.transforms.simulators.envy_world import EnvySpec, audit_design, build_system, simulate_envy_day

    system = build_system(EnvySpec(scenario, seed=seed))
    rng = np.random.default_rng(seed + 1)
    targets, donors = audit_design(system, delta=delta, lam=lam, gamma=gamma, rng=rng)
    (out / "logs").mkdir(parents=True, exist_ok=True)
    for d in range(days):
        ds = start + dt.timedelta(days=d)
        frame = simulate_envy_day(
            system,
            ds=ds,
            targets=targets,
            donors=donors,
            pulls_own=pulls_own,
            pulls_per_donor=pulls_per_donor,
            rng=rng,
            default_rows=default_rows,
            random_rows=random_rows,
        )
        _write(frame, out / "logs" / f"{ds.isoformat()}.parquet", "parquet")
        if progress:
            progress(d + 1, days)
    U = system.utility
    mu = U[targets[:, None], donors]  # (targets, donors): each target's utility under each donor's policy
    own = np.diag(U)[targets]
    envy_t = (mu > own[:, None]).any(axis=1)
    free_t = (mu <= own[:, None] + epsilon).all(axis=1)
    cells = _expected_group_cells(system, targets, donors, mu)
    share = system.envious_share(epsilon, gamma)
    correct = (["not_envy_free"] if envy_t.any() else []) + (["envy_free"] if share <= lam else [])
    truth = {
        "scenario": scenario,
        # what AUDIT should reach: envy beyond ε is found in time, else the certificate
        "verdict": "not_envy_free" if (mu > own[:, None] + epsilon).any() else "envy_free",
        # verdicts that are not wrong: envy exists among the targets (however small), or at most a
        # λ share of all users is (ε, γ)-envious (seed 004 Def. 3.2, Th. 2)
        "correct_verdicts": correct,
        "envious_share": share,
        "M_tilde_K": list(audit_sizes(delta, lam, gamma)),
        # per target: whether some donor's policy serves it better at all, and whether all are within ε
        "targets": {
            f"u{m}": {"envious": bool(e), "eps_free": bool(f)} for m, e, f in zip(targets, envy_t, free_t, strict=True)
        },
        "group_cells": cells,
        # seed 004 §5.1 among the targets, Δ^m over their donors (what envy_summary estimates)
        "average_envy": float(np.maximum(mu.max(axis=1) - own, 0).mean()),
        "share_envious": float((mu.max(axis=1) - own > epsilon).mean()),
    }
    (out / "truth_envy.json").write_text(json.dumps(truth, indent=2) + "\n")
    cfg = out / "fairmon.toml"
    m_tilde, k = donors.shape
    cfg.write_text(
        ENVY_CONFIG.format(
            epsilon=epsilon, delta=delta, lam=lam, gamma=gamma, start=start.isoformat(), m_tilde=m_tilde, k=k
        )
    )
    return {"config": cfg, "truth": out / "truth_envy.json", "logs": out / "logs"}
