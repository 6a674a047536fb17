"""fairmon configuration, the settings sections: ``[estimation]``, ``[ab]``,
``[quality]``, ``[audit]``, ``[schedule]``, ``[gx]``, ``[alerts]``, ``[envy]``, ``[reach]``
and ``[spark]`` (DESIGN §4; each section's rules beside its fields).

Why a module of its own: these sections say how to estimate and publish,
not what to read (:mod:`fairmon.pipelines.core.config_inputs`);
:mod:`fairmon.pipelines.core.config` assembles the whole file and
re-exports every name here.
"""

from __future__ import annotations

import datetime as dt
import unicodedata
from typing import Literal

from pydantic import ConfigDict, Field, field_validator, model_validator

from fairmon.pipelines.core.config_inputs import ConfigError, Strict, check_identifiers, check_template


class ProjectConfig(Strict):
    """``[project]``: which project the config belongs to. A warehouse records
    the project that first ran on it (``fairmon-project.json``,
    :mod:`fairmon.pipelines.storage.ownership`); another config may run on it
    only when it declares the same ``name``. The name also keeps the
    project's Prefect records (artifact keys, deployment name, run tags)
    apart from other projects' on the same Prefect server."""

    name: str | None = Field(
        default=None,
        min_length=1,
        max_length=100,
        pattern=r"^[^\x00-\x1f\x7f]+$",
        description="the project's name (default: the name of the config file's folder); a second config "
        "runs on the same warehouse only when it declares the owner's name here",
    )


class EstimationConfig(Strict):
    """Estimator settings (DESIGN §4.1)."""

    confidence_level: float = Field(default=0.95, gt=0.5, lt=1.0)
    ci_method: Literal["delta", "delta_paper", "bootstrap_percentile", "bootstrap_normal", "bootstrap_bca"] = "delta"
    bootstrap_resamples: int = Field(default=1000, ge=50, description="B for the bootstrap ci_methods")
    seed: int = Field(default=0, description="seed of every resampling (fixed per day, so re-runs agree)")
    reo_threshold: float = Field(
        default=1 / 9,
        gt=0,
        description="REO line of the verdict for attributes with K > 2 groups (K = 2 uses 1/9, the 80 % rule)",
    )
    rsp: bool = Field(default=False, description="also write the rsp table (seed 001 App. H.1: exposure parity)")
    rsp_pool: str | None = Field(
        default=None,
        description="CSV or Parquet pool table of the candidate items (item attribute columns, optionally "
        "n_items: the items a row stands for, and item_id), a path or a template with {ds}: rsp takes the "
        "pool shares of the attributes it describes from it, known rather than estimated from random traffic "
        "(seed 001 App. H.1); needs rsp = true",
    )
    user_attributes: list[str] = Field(
        default_factory=list,
        description="attributes of users, not items: the user_precision table (seed 001 App. H.2) for each; "
        "they are left out of rsp",
    )
    stage_traffic: str = Field(
        default="post_recall",
        description="traffic stage of forced-inserted post-recall rows: when present, the reo_stage table "
        "(seed 001 App. I.4)",
    )
    min_expected_positives: float = Field(
        default=30,
        ge=0,
        description="a group with fewer positives in default or random traffic is a small group: "
        "its day's verdict is inconclusive at best",
    )
    cluster_by: Literal["auto", "request_id", "user_id", "none"] = Field(
        default="auto",
        description="rows sharing this id are one cluster for the cluster-robust (sandwich) variance; auto = "
        "request_id where the impressions files have it, else none (independent rows)",
    )
    cluster_buckets: int = Field(
        default=128,
        ge=16,
        le=65536,
        description="a day of more than cluster_exact_max clusters has its ids hashed into this many buckets "
        "in the count stage (the robust variance then has buckets - 1 degrees of freedom)",
    )
    cluster_exact_max: int = Field(
        default=4096,
        ge=0,
        le=16384,
        description="a day of at most this many clusters sums each cluster alone: the exact per-cluster "
        "sandwich (keys are 31-bit hashes: at 16,384 clusters two merge on about 6 % of days); more clusters "
        "fall back to cluster_buckets hash buckets",
    )

    @model_validator(mode="after")
    def _rsp_pool(self) -> EstimationConfig:
        if self.rsp_pool is not None:
            check_template(self.rsp_pool, {"ds"}, "rsp_pool")
            if not self.rsp:
                raise ValueError("rsp_pool is the pool table of the rsp table: set rsp = true too")
        return self


#: The default ``[estimation] cluster_exact_max``, which the API uses too.
CLUSTER_EXACT = EstimationConfig.model_fields["cluster_exact_max"].default


class ABConfig(Strict):
    """A/B fairness tests between experiment arms (seed 001 App. D-G)."""

    control: str | None = Field(default=None, description="compare every other arm of the day with this arm")
    pairs: list[tuple[str, str]] = Field(default_factory=list, description="explicit [control, treatment] pairs")
    methods: list[Literal["delta", "delta_paper", "partition", "bootstrap"]] = Field(
        default_factory=lambda: ["delta"], min_length=1, description="first = the headline method"
    )
    partition_folds: int = Field(default=10, ge=2, description="M of Algorithm 3")
    bootstrap_resamples: int = Field(default=1000, ge=100, description="B of Algorithm 4 (≥ 1000 recommended)")


#: Checks fairmon makes in Python rather than from a suite file, whose severity ``[quality.severity]`` may set.
PYTHON_CHECKS = ("rows_unique_across_files", "swap_donor_group_resolved", "ids_unique_across_files")


def known_expectations() -> frozenset[str]:
    """Every expectation name ``[quality.severity]`` may name: those of the
    bundled suites (``expectations/*.json``, the part before ``[``), those the
    output-table declarations generate (key_unique, ``<column>_not_null``,
    bounds) and :data:`PYTHON_CHECKS`."""
    import json

    from fairmon.resources import suite_file, suites
    from fairmon.transforms.registry import TABLES, generated_checks

    names = set(PYTHON_CHECKS)
    for suite in suites():
        names.update(e["name"].split("[")[0] for e in json.loads(suite_file(suite).read_text()).get("expectations", []))
    for t in TABLES.values():
        names.update(e["name"] for e in generated_checks(t))
    return frozenset(names)


class QualityConfig(Strict):
    """Data-quality gate settings (expectations/*.json)."""

    positive_rate_min: float = Field(default=0.0, ge=0.0, le=1.0, description="lowest plausible n_pos/n per group")
    positive_rate_max: float = Field(default=1.0, ge=0.0, le=1.0, description="highest plausible n_pos/n per group")
    sufficiency_epsilon: float = Field(default=0.1, gt=0.0, description="relative error ε for seed 001 Thm E.1")
    sufficiency_delta: float = Field(default=0.05, gt=0.0, lt=1.0, description="failure probability δ for Thm E.1")
    severity: dict[str, Literal["critical", "warning"]] = Field(
        default_factory=dict, description="override an expectation's severity by name, e.g. random_traffic_sufficient"
    )

    @field_validator("severity")
    @classmethod
    def _known_names(cls, v: dict[str, str]) -> dict[str, str]:
        if not v:
            return v
        known = known_expectations()
        unknown = sorted(k for k in v if k.split("[")[0] not in known)
        if unknown:
            raise ValueError(
                f"unknown expectation name(s) {unknown}: an override would be ignored; "
                f"known names: {', '.join(sorted(known))}"
            )
        return v

    @model_validator(mode="after")
    def _bounds(self) -> QualityConfig:
        if self.positive_rate_max < self.positive_rate_min:
            raise ValueError("positive_rate_max is below positive_rate_min")
        return self


class AuditConfig(Strict):
    """Differentially private audit releases of score logs (seed 000 §5)."""

    total_epsilon: float = Field(default=1.0, gt=0, description="privacy budget per data set, over all releases")
    qualified_outcome: bool = Field(
        default=False,
        description="an individual is qualified when outcome equals this (COMPAS: two_year_recid = 0 -> false)",
    )
    alpha: float = Field(default=0.2, gt=0, lt=1)
    delta: float = Field(default=0.05, gt=0, lt=1)
    # The score set Y is declared, never derived from the data (DESIGN §4.6): exactly one of these.
    score_values: list[float] | None = Field(
        default=None, min_length=2, description="discrete scores, e.g. [1, 2, ..., 10]: one bin per value"
    )
    bins: list[float] | None = Field(
        default=None, description="[lo, hi, n]: n equal-width bins from lo to hi (outer bins open-ended)"
    )
    edges: list[float] | None = Field(
        default=None, min_length=3, description="explicit increasing bin edges (outer bins open-ended)"
    )
    public_group_sizes: dict[str, dict[str, int]] = Field(
        default_factory=dict,
        description="per attribute, the declared public number of qualified individuals per group "
        "(seed 000's setting); attributes not listed get noisy group sizes at half the release's epsilon",
    )
    groups: dict[str, list[str]] = Field(
        default_factory=dict,
        description="per attribute without public sizes, the declared group names of the release",
    )

    @field_validator("bins", mode="before")
    @classmethod
    def _bins_declared(cls, v: object) -> object:
        if isinstance(v, int | float) and not isinstance(v, bool):
            raise ValueError(
                "bins is now the declared [lo, hi, n] (edges were derived from the data, which leaks their "
                "min, max and distinct values); or declare score_values = [...] or edges = [...]"
            )
        return v

    @model_validator(mode="after")
    def _score_set(self) -> AuditConfig:
        given = [k for k in ("score_values", "bins", "edges") if getattr(self, k) is not None]
        if len(given) > 1:
            raise ValueError(f"declare one of score_values, bins, edges (got {', '.join(given)})")
        if self.bins is not None:
            if len(self.bins) != 3 or not self.bins[1] > self.bins[0] or self.bins[2] != int(self.bins[2]):
                raise ValueError("bins must be [lo, hi, n] with hi > lo and an integer n >= 1")
            if self.bins[2] < 1:
                raise ValueError("bins must be [lo, hi, n] with hi > lo and an integer n >= 1")
        for k in ("score_values", "edges"):
            v = getattr(self, k)
            if v is not None and any(b <= a for a, b in zip(v, v[1:], strict=False)):
                raise ValueError(f"{k} must be strictly increasing")
        for attr, sizes in self.public_group_sizes.items():
            if not sizes or any(n < 1 for n in sizes.values()):
                raise ValueError(f"public_group_sizes.{attr}: give at least one group, each with n >= 1")
        for attr, names in self.groups.items():
            if not names or len(set(names)) != len(names):
                raise ValueError(f"groups.{attr}: give unique group names")
        for key, attr, names in [
            *(("groups", a, n) for a, n in self.groups.items()),
            *(("public_group_sizes", a, list(n)) for a, n in self.public_group_sizes.items()),
        ]:
            for name in names:
                if not name.strip() or any(unicodedata.category(c) in ("Cc", "Cf", "Zl", "Zp") for c in name):
                    raise ValueError(
                        f"{key}.{attr}: group name {name!r} is empty or holds a control character "
                        "(newline, tab): group names are printable text on one line"
                    )
        return self

    def score_bins(self) -> tuple[list[float], list[str]]:
        """The declared bin edges (outer bins open-ended in use) and a label per
        bin. Raises :class:`ConfigError` naming the keys when none is declared."""
        if self.score_values is not None:
            v = self.score_values
            mids = [(a + b) / 2 for a, b in zip(v, v[1:], strict=False)]
            return [v[0] - 0.5, *mids, v[-1] + 0.5], [f"{x:g}" for x in v]
        if self.bins is not None:
            lo, hi, n = self.bins[0], self.bins[1], int(self.bins[2])
            e = [lo + (hi - lo) * i / n for i in range(n + 1)]
        elif self.edges is not None:
            e = list(self.edges)
        else:
            raise ConfigError(
                "audit.score_values / audit.bins / audit.edges: audit-export needs the score set declared "
                "in advance (e.g. score_values = [1, 2, ..., 10] or bins = [0.0, 1.0, 20]); "
                "edges are never derived from the data"
            )
        return e, [f"[{a:g}, {b:g})" for a, b in zip(e, e[1:], strict=False)]

    def release_groups(self, attribute: str) -> tuple[list[str], list[int] | None]:
        """The declared groups of ``attribute`` and their public sizes (None: sizes
        are released with noise). Raises :class:`ConfigError` naming the keys when
        the attribute's groups are not declared."""
        if attribute in self.public_group_sizes:
            sizes = self.public_group_sizes[attribute]
            return list(sizes), list(sizes.values())
        if attribute in self.groups:
            return list(self.groups[attribute]), None
        raise ConfigError(
            f"audit.public_group_sizes.{attribute} / audit.groups.{attribute}: declare the groups of "
            f"{attribute!r} (with public sizes, or names only for noisy sizes); they are never taken from the data"
        )


class ScheduleConfig(Strict):
    """When the daily job runs (``fairmon serve``)."""

    cron: str = Field(default="0 6 * * *", description="cron expression of the daily run")
    timezone: str = "UTC"
    lag_days: int = Field(default=1, ge=0, description="the run computes the day this many days before today")
    name: str = "fairmon-daily"

    @field_validator("timezone")
    @classmethod
    def _known_timezone(cls, value: str) -> str:
        """An IANA time zone the system knows (``zoneinfo``), refused when the config is read by any command.
        The cron expression is checked by Prefect's own parser when ``serve`` or ``schedule show`` builds the
        schedule: importing Prefect to check it here would cost every command a second."""
        import zoneinfo

        try:
            zoneinfo.ZoneInfo(value)
        except (zoneinfo.ZoneInfoNotFoundError, ValueError):
            raise ValueError(f"unknown time zone {value!r} (an IANA name such as 'UTC' or 'Europe/Paris')") from None
        return value


class GxConfig(Strict):
    """Great Expectations' own files (validation results, Data Docs pages)."""

    keep_days: int = Field(
        default=30,
        ge=1,
        description="validation results and their Data Docs pages older than this many days are deleted after "
        "each run (dq_results keeps every day's outcome in the warehouse)",
    )


class AlertsConfig(Strict):
    """``[alerts]``: the monitoring layer over the published days (DESIGN §4.9,
    :mod:`fairmon.transforms.alerts.horizon`): over any ``horizon_days``
    consecutive days a system whose true REO stays at or below the line
    raises an ``exceeds`` alert with probability at most ``alpha``."""

    enabled: bool = Field(default=True, description="compute the alerts table after every run")
    alpha: float = Field(
        default=0.05, gt=0, lt=1, description="false-alarm probability over any horizon_days consecutive days"
    )
    horizon_days: int = Field(default=90, ge=1, le=36500, description="the horizon of the guarantee, in days")
    budget_low_share: float = Field(
        default=0.8, gt=0, le=1, description="a budget_low alert when a population has spent this share of ε"
    )
    notify: list[str] = Field(
        default_factory=list,
        description="Apprise notification URLs (mailto://, slack://, json://, ...); each new alert is sent "
        "once; a URL is never printed or stored (it may hold a token)",
    )

    @model_validator(mode="after")
    def _level(self) -> AlertsConfig:
        if self.alpha / self.horizon_days >= 0.5:
            raise ValueError("alerts.alpha / alerts.horizon_days must be below 1/2")
        return self

    @field_validator("notify")
    @classmethod
    def _urls(cls, v: list[str]) -> list[str]:
        for i, url in enumerate(v):
            if "://" not in url or not url.split("://", 1)[0].replace("+", "").isalnum():
                raise ValueError(f"alerts.notify[{i}] is not a notification URL (scheme://...)")
        return v


class EnvyConfig(Strict):
    """Envy-freeness audit from swap traffic (seed 004; DESIGN §4.7). Needs
    contract-format impressions with ``user_id`` and, on ``traffic = 'swap'``
    rows, ``policy_user_id`` (the donor whose policy served the row) or
    ``policy_group``."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    epsilon: float = Field(default=0.05, gt=0, le=1, description="ε: envy below this is tolerated (reward scale)")
    delta: float = Field(
        default=0.05, gt=0, lt=0.5, description="δ: failure probability of the whole audit, below 1/2 (seed 004 Th. 2)"
    )
    lam: float = Field(
        default=0.1, gt=0, lt=1, alias="lambda", description="λ: share of users allowed to be (ε, γ)-envious"
    )
    gamma: float = Field(default=0.1, gt=0, lt=1, description="γ: share of other users a user may envy")
    start: dt.date = Field(
        description="first day of the audit: the bounds accumulate every day from here (anytime-valid, "
        "seed 004 Lemma 4); days before it get no envy tables",
    )
    attributes: list[str] | None = Field(
        default=None, description="user attributes for group envy (default: every impressions attribute)"
    )
    group_attribute: str | None = Field(
        default=None,
        description="the attribute a policy_group column names groups of (default: the first attribute); rows "
        "with a policy_user_id take the donor's group from the donor's own rows",
    )
    user_table: str | None = Field(
        default=None,
        description="CSV or Parquet file of user attributes (user_id and attribute columns): a swap row's donor "
        "group comes from here first, then from the donor's own rows anywhere in the window, then policy_group; "
        "a row none resolves fails swap_donor_group_resolved",
    )

    @field_validator("attributes")
    @classmethod
    def _identifiers(cls, v: list[str] | None) -> list[str] | None:
        return None if v is None else check_identifiers(v)


class ReachConfig(Strict):
    """Reachability and stability audit of a recommender's model snapshots
    (seed 003; DESIGN §2 model snapshots, §4.8)."""

    path: str = Field(description="snapshot folder per day, a template with {ds} (users, items, ratings, global files)")
    rating_min: float = Field(description="lowest rating of the scale: the action box's lower end")
    rating_max: float = Field(description="highest rating of the scale: the action box's upper end")
    user_attributes: list[str] | None = Field(
        default=None, description="user attribute columns to compare (default: every non-factor column)"
    )
    item_attributes: list[str] | None = Field(
        default=None, description="item attribute columns to compare (default: every non-factor column)"
    )
    beta: float = Field(
        default=1.0,
        gt=0,
        description="softmax inverse temperature β of the selection rule (default 1: Curmei, Dean and Recht's "
        "default, on a rating scale like Coat's)",
    )
    betas: list[float] = Field(
        default=[1.0, 2.0, 4.0, 10.0],
        description="β values reach_beta publishes beside `beta` (default Curmei, Dean and Recht's grid 1, 2, 4, "
        "10; [] for none)",
    )
    thin_users: int = Field(
        default=30,
        ge=1,
        description="reach_item flags an item `thin` when fewer users than this have it as a target",
    )
    budget: int = Field(default=10, ge=1, description="K: the action set, the K unseen items predicted highest")
    stability_budgets: list[int] = Field(
        default=[1, 5, 10], min_length=1, description="B: how many other users' data each perturbation changes"
    )
    perturbations: int = Field(default=5, ge=1, description="R: random perturbations (retrainings) per B")
    noise_seeds: int = Field(default=3, ge=0, description="retrainings of the unchanged data with other seeds")
    bootstrap_resamples: int = Field(default=2000, ge=100, description="bootstrap resamples of the group CIs")
    seed: int = Field(default=0, description="seed of the perturbation draws and the bootstrap")

    @model_validator(mode="after")
    def _scale(self) -> ReachConfig:
        check_template(self.path, {"ds"}, "path")
        if "{ds}" not in self.path:
            raise ValueError("path must contain {ds}: one snapshot per day")
        if self.rating_max <= self.rating_min:
            raise ValueError("rating_max must be above rating_min")
        if any(not b > 0 for b in self.betas):
            raise ValueError(f"betas must be > 0, got {self.betas}")
        return self

    @field_validator("user_attributes", "item_attributes")
    @classmethod
    def _identifiers(cls, v: list[str] | None) -> list[str] | None:
        return None if v is None else check_identifiers(v)


class SparkConfig(Strict):
    """Where the Spark engine runs the count stage (DESIGN §1 "Engines"): a
    cluster manager (``master``) or a Spark Connect server (``remote``)."""

    master: str | None = Field(
        default=None,
        description="Spark master: local[*] (default), local[2], spark://host:7077, yarn, k8s://…",
    )
    remote: str | None = Field(
        default=None, description="Spark Connect URL, e.g. sc://spark-connect.internal:15002 (instead of master)"
    )
    app_name: str = Field(default="fairmon", description="the application name the cluster shows")
    conf: dict[str, str] = Field(
        default_factory=dict,
        description="extra Spark settings, e.g. {'spark.executor.memory' = '8g', "
        "'spark.sql.shuffle.partitions' = '64'}",
    )

    @model_validator(mode="before")
    @classmethod
    def _engine_at_top(cls, data):
        if isinstance(data, dict) and "engine" in data:
            raise ValueError(
                "engine goes at the top of the file (engine = 'spark', before any [section]), not in [spark]"
            )
        return data

    @model_validator(mode="after")
    def _one_target(self) -> SparkConfig:
        if self.master is not None and self.remote is not None:
            raise ValueError("give master or remote, not both")
        if self.remote is not None and not self.remote.startswith("sc://"):
            raise ValueError(f"remote {self.remote!r} must be a Spark Connect URL sc://host:port")
        return self
