"""fairmon configuration: one TOML file validated by Pydantic.

Relative paths in the file are resolved against the file's own directory, so a
config and its data can move together. Errors name the offending key, e.g.
``impressions.random_window_days: Input should be greater than or equal to 1``.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import re
import tomllib
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_TABLE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*){0,2}$")


def _check_identifiers(v: list[str]) -> list[str]:
    for name in v:
        if not _IDENT.match(name):
            raise ValueError(f"{name!r} is not a valid column name (letters, digits, _)")
    if len(set(v)) != len(v):
        raise ValueError("names must be unique")
    return v


#: Version of the cluster-bucket formula of sql/impressions_bucket.sql, part of
#: :meth:`FairmonConfig.fingerprint` when rows are clustered: changing the formula
#: re-stages every file (2: the hash shifted right one bit, as BIGINT, modulo the buckets).
BUCKET_FORMULA = 2


class ConfigError(ValueError):
    """A config file is missing, unreadable or invalid; the message names the key."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class RandomPool(_Strict):
    """A pooled random-traffic file covering the days ``start``..``end`` (inclusive)."""

    path: str
    start: dt.date
    end: dt.date

    @model_validator(mode="after")
    def _ordered(self) -> RandomPool:
        if self.end < self.start:
            raise ValueError(f"end {self.end} is before start {self.start}")
        return self


class ImpressionsConfig(_Strict):
    """Where impressions come from and how they are read (DESIGN §2, impressions)."""

    format: Literal["contract", "tiktok", "coat"] = Field(
        description="contract: files with the DESIGN §2 columns; tiktok: the published TikTok "
        "layout (one default file per day, pooled random files); coat: the Coat data set"
    )
    path: str | None = Field(
        default=None,
        description="contract/tiktok: default-traffic file per day, a path template with {ds} "
        "(YYYY-MM-DD), glob characters allowed; coat: the Coat directory",
    )
    table: str | None = Field(
        default=None,
        description="contract, engine = 'spark': a catalog table of contract rows partitioned by ds "
        "(e.g. 'logs.impressions'), read instead of path; a day's unit is its ds partition",
    )
    random_path: str | None = Field(
        default=None,
        description="tiktok: template of pooled random files with {start} and {end}, e.g. "
        "'random_{start}_{end}.csv'; every matching file is a pool",
    )
    random_pools: list[RandomPool] = Field(default_factory=list, description="tiktok: pools listed explicitly")
    signals: list[str] = Field(min_length=1, description="boolean signal columns; label Y = rule over them")
    label_rule: Literal["any", "all"] = "any"
    attributes: list[str] = Field(min_length=1, description="sensitive attribute columns, one grouping each")
    intersections: list[list[str]] = Field(
        default_factory=list,
        description="intersectional groupings, e.g. [['young_adult', 'region']]: each adds the attribute "
        "young_adult×region with groups such as 1×north, counted in the same scan",
    )
    traffic_stages: list[str] = Field(
        default_factory=list, description="extra traffic values allowed besides default and random"
    )
    stage_paths: dict[str, str] = Field(
        default_factory=dict,
        description="tiktok: per-day files of another traffic stage, e.g. {post_recall = "
        "'post_recall/{ds}.csv'} (forced-inserted post-recall rows, seed 001 App. I.4); their rows get "
        "traffic = the key, which is then an allowed traffic value",
    )
    random_window_days: int = Field(
        default=7,
        ge=1,
        le=366,
        description="days of random traffic a day's REO uses: ds - random_window_days + 1 .. ds (DESIGN §2)",
    )
    pool_policy: Literal["contained", "overlap"] = Field(
        default="contained",
        description="tiktok: which pooled random files (no per-row dates) a day uses. contained: only pools "
        "whose declared range lies inside the day's window, so no row can come from after ds (a day with none "
        "has no random traffic and is quarantined); overlap: every pool overlapping the window, e.g. to "
        "backfill a published data set whose pools span several days (reo.look_ahead then marks days whose "
        "pools reach past ds). Rows that carry their own ds are always windowed by it; the policy decides "
        "whether a pool file is read for the day at all",
    )
    default_arm: str = "all"
    # coat only
    ds: dt.date | None = Field(default=None, description="coat: the day assigned to the whole set")
    min_rating: int = Field(default=4, ge=1, le=5, description="coat: label Y = rating >= min_rating")

    @field_validator("signals", "attributes", "traffic_stages")
    @classmethod
    def _identifiers(cls, v: list[str]) -> list[str]:
        return _check_identifiers(v)

    @model_validator(mode="after")
    def _intersections(self) -> ImpressionsConfig:
        seen = set()
        for names in self.intersections:
            if len(names) < 2 or len(set(names)) != len(names):
                raise ValueError(f"intersections: {names} must name at least two different attributes")
            unknown = [a for a in names if a not in self.attributes]
            if unknown:
                raise ValueError(f"intersections: {unknown} not in attributes {self.attributes}")
            if tuple(names) in seen:
                raise ValueError(f"intersections: {names} is listed twice")
            seen.add(tuple(names))
        return self

    @model_validator(mode="after")
    def _format_fields(self) -> ImpressionsConfig:
        if (self.path is None) == (self.table is None):
            raise ValueError("give exactly one of path (files) and table (a catalog table, engine = 'spark')")
        if self.table is not None:
            if self.format != "contract":
                raise ValueError("table is for format 'contract' (rows with the DESIGN §2 columns)")
            if not _TABLE.match(self.table):
                raise ValueError(f"table {self.table!r} must be [catalog.][database.]name of letters, digits, _")
            if self.random_path or self.random_pools or self.stage_paths:
                raise ValueError(
                    "a table carries its own traffic column: random_path, random_pools and stage_paths do not apply"
                )
            return self
        check_template(self.path, {"ds"}, "path")
        if self.random_path is not None:
            check_template(self.random_path, {"start", "end"}, "random_path")
        if self.format in ("contract", "tiktok") and "{ds}" not in self.path:
            raise ValueError("path must contain {ds} for format " + self.format)
        if self.format == "coat" and self.ds is None:
            raise ValueError("ds is required for format coat (Coat has no dates)")
        if self.random_path is not None and not ("{start}" in self.random_path and "{end}" in self.random_path):
            raise ValueError("random_path must contain {start} and {end}")
        if self.stage_paths and self.format != "tiktok":
            raise ValueError("stage_paths is for format tiktok; contract files carry their own traffic column")
        for stage, template in self.stage_paths.items():
            _check_identifiers([stage])
            if stage in ("default", "random", "swap"):
                raise ValueError(f"stage_paths: {stage!r} is not an extra stage; use path or random_path")
            check_template(template, {"ds"}, f"stage_paths.{stage}")
            if "{ds}" not in template:
                raise ValueError(f"stage_paths.{stage} must contain {{ds}}")
        return self

    @property
    def stages(self) -> list[str]:
        """Traffic values allowed besides default and random: ``traffic_stages``
        and the keys of ``stage_paths``, in that order, without repeats."""
        return list(dict.fromkeys([*self.traffic_stages, *self.stage_paths]))


def check_template(template: str, allowed: set[str], key: str) -> str:
    """Refuse a path template whose ``{...}`` fields are not all in ``allowed``
    (or whose braces do not parse), naming the config key and the field."""
    import string

    try:
        fields = {f for _, f, _, _ in string.Formatter().parse(template) if f is not None}
    except ValueError as e:
        raise ValueError(f"{key} {template!r}: {e}; only {', '.join(sorted('{' + a + '}' for a in allowed))}") from None
    unknown = sorted(fields - allowed)
    if unknown:
        raise ValueError(
            f"{key} {template!r} has the field {{{unknown[0]}}}; it may use only "
            + ", ".join(sorted("{" + a + "}" for a in allowed))
        )
    return template


class ThresholdSpec(_Strict):
    """A model's decision threshold t and the half-width d of the local window (seed 002 eqs. 8-11)."""

    model: str
    t: float
    d: float = Field(gt=0)


class _LogInput(_Strict):
    """Shared fields of the score and labeling logs."""

    attributes: list[str] = Field(min_length=1, description="group columns, one grouping each")
    window_days: int = Field(default=1, ge=1, description="trailing window of days pooled per estimate")

    @field_validator("attributes")
    @classmethod
    def _identifiers(cls, v: list[str]) -> list[str]:
        return _check_identifiers(v)


class ScoresConfig(_LogInput):
    """Model score logs (DESIGN §2 scores) and prevalence at the threshold (§4.2; seed 002 eqs. 6, 8-11)."""

    format: Literal["contract", "compas"] = "contract"
    path: str = Field(description="contract: file per day, template with {ds}; compas: the COMPAS CSV")
    thresholds: list[ThresholdSpec] = Field(min_length=1)
    propublica_filter: bool = Field(default=True, description="compas: keep the usual ProPublica rows only")
    hc: Literal["HC0", "HC1", "HC3"] = Field(
        default="HC1",
        description="heteroskedasticity-robust variance of the local fit, as statsmodels' WLS cov_type "
        "(HC3 is the safer choice in small windows)",
    )
    min_window_rows: int = Field(
        default=100,
        ge=1,
        description="windows (rows with |s - t| < d, per group) with fewer rows get a Wilson interval on the "
        "effective n instead of the normal one; below 10 rows the estimate is NaN with a reason",
    )
    ci: Literal["robust", "conventional"] = Field(
        default="robust",
        description="robust: interval around the bias-corrected (local quadratic) fit, holding its level "
        "where the local linear fit is biased; conventional: around the local linear fit (narrower)",
    )

    @model_validator(mode="before")
    @classmethod
    def _renamed(cls, data: object) -> object:
        if isinstance(data, dict) and "min_rows" in data:
            raise ValueError(
                "min_rows was replaced by min_window_rows (default 100): smaller windows now get a "
                "small-sample interval instead of NaN; below 10 rows the estimate is NaN"
            )
        return data

    @model_validator(mode="after")
    def _template(self) -> ScoresConfig:
        if self.format == "contract":
            check_template(self.path, {"ds"}, "path")
        if self.format == "contract" and "{ds}" not in self.path:
            raise ValueError("path must contain {ds} for format contract")
        return self


class LabelsConfig(_LogInput):
    """Human labeling logs (DESIGN §2 labels) and signal-detection metrics (§4.3; seed 002 §5.3)."""

    path: str = Field(description="file per day, template with {ds}")
    min_pos: int = Field(default=10, ge=1, description="gold positives needed per cell")
    min_neg: int = Field(default=10, ge=1, description="gold negatives needed per cell")
    min_errors: int = Field(
        default=5,
        ge=0,
        description="a confusion cell (tp, fn, fp, tn) with fewer counts switches the intervals from the "
        "delta method to exact Clopper-Pearson bounds carried through",
    )

    @model_validator(mode="after")
    def _template(self) -> LabelsConfig:
        check_template(self.path, {"ds"}, "path")
        if "{ds}" not in self.path:
            raise ValueError("path must contain {ds}")
        return self


class EstimationConfig(_Strict):
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
        description="cluster ids are hashed into this many buckets in the count stage; the robust variance "
        "has buckets - 1 degrees of freedom",
    )


class ABConfig(_Strict):
    """A/B fairness tests between experiment arms (seed 001 App. D-G)."""

    control: str | None = Field(default=None, description="compare every other arm of the day with this arm")
    pairs: list[tuple[str, str]] = Field(default_factory=list, description="explicit [control, treatment] pairs")
    methods: list[Literal["delta", "delta_paper", "partition", "bootstrap"]] = Field(
        default_factory=lambda: ["delta"], min_length=1, description="first = the headline method"
    )
    partition_folds: int = Field(default=10, ge=2, description="M of Algorithm 3")
    bootstrap_resamples: int = Field(default=1000, ge=100, description="B of Algorithm 4 (≥ 1000 recommended)")


class QualityConfig(_Strict):
    """Data-quality gate settings (expectations/*.json)."""

    positive_rate_min: float = Field(default=0.0, ge=0.0, le=1.0, description="lowest plausible n_pos/n per group")
    positive_rate_max: float = Field(default=1.0, ge=0.0, le=1.0, description="highest plausible n_pos/n per group")
    sufficiency_epsilon: float = Field(default=0.1, gt=0.0, description="relative error ε for seed 001 Thm E.1")
    sufficiency_delta: float = Field(default=0.05, gt=0.0, lt=1.0, description="failure probability δ for Thm E.1")
    severity: dict[str, Literal["critical", "warning"]] = Field(
        default_factory=dict, description="override an expectation's severity by name, e.g. random_traffic_sufficient"
    )

    @model_validator(mode="after")
    def _bounds(self) -> QualityConfig:
        if self.positive_rate_max < self.positive_rate_min:
            raise ValueError("positive_rate_max is below positive_rate_min")
        return self


class AuditConfig(_Strict):
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


class ScheduleConfig(_Strict):
    """When the daily job runs (``fairmon serve``)."""

    cron: str = Field(default="0 6 * * *", description="cron expression of the daily run")
    timezone: str = "UTC"
    lag_days: int = Field(default=1, ge=0, description="the run computes the day this many days before today")
    name: str = "fairmon-daily"


class GxConfig(_Strict):
    """Great Expectations' own files (validation results, Data Docs pages)."""

    keep_days: int = Field(
        default=30,
        ge=1,
        description="validation results and their Data Docs pages older than this many days are deleted after "
        "each run (dq_results keeps every day's outcome in the warehouse)",
    )


class EnvyConfig(_Strict):
    """Envy-freeness audit from swap traffic (seed 004; DESIGN §4.7). Needs
    contract-format impressions with ``user_id`` and, on ``traffic = 'swap'``
    rows, ``policy_user_id`` (the donor whose policy served the row) or
    ``policy_group``."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    epsilon: float = Field(default=0.05, gt=0, le=1, description="ε: envy below this is tolerated (reward scale)")
    delta: float = Field(default=0.05, gt=0, lt=1, description="δ: failure probability of the whole audit")
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

    @field_validator("attributes")
    @classmethod
    def _identifiers(cls, v: list[str] | None) -> list[str] | None:
        return None if v is None else _check_identifiers(v)


class ReachConfig(_Strict):
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
    beta: float = Field(default=1.0, gt=0, description="softmax inverse temperature β of the selection rule")
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
        return self

    @field_validator("user_attributes", "item_attributes")
    @classmethod
    def _identifiers(cls, v: list[str] | None) -> list[str] | None:
        return None if v is None else _check_identifiers(v)


class SparkConfig(_Strict):
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


class FairmonConfig(_Strict):
    """The whole configuration. ``warehouse`` and ``duckdb`` are resolved paths."""

    warehouse: Path
    duckdb: Path
    engine: Literal["duckdb", "spark"] = Field(
        default="duckdb",
        description="where the count stage (input profiles, duplicate ids) scans the rows: the embedded DuckDB, "
        "or Apache Spark ([spark], extra fairmon[spark]); everything after the profiles runs here either way",
    )
    spark: SparkConfig = SparkConfig()
    impressions: ImpressionsConfig | None = None
    scores: ScoresConfig | None = None
    labels: LabelsConfig | None = None
    estimation: EstimationConfig = EstimationConfig()
    quality: QualityConfig = QualityConfig()
    ab: ABConfig = ABConfig()
    schedule: ScheduleConfig = ScheduleConfig()
    audit: AuditConfig = AuditConfig()
    gx: GxConfig = GxConfig()
    envy: EnvyConfig | None = None
    reach: ReachConfig | None = None
    base_dir: Path = Field(default=Path("."), exclude=True)

    def resolve(self, p: str | Path) -> Path:
        """Resolve a path from the config against the config file's directory."""
        p = Path(p).expanduser()
        return p if p.is_absolute() else (self.base_dir / p)

    @property
    def warehouse_path(self) -> Path:
        """The Parquet warehouse folder, resolved against the config's folder."""
        return self.resolve(self.warehouse)

    @property
    def duckdb_path(self) -> Path:
        """The DuckDB file (staging, run records, ledger), resolved against the config's folder."""
        return self.resolve(self.duckdb)

    @model_validator(mode="after")
    def _some_source(self) -> FairmonConfig:
        if self.impressions is None and self.scores is None and self.labels is None and self.reach is None:
            raise ValueError("configure at least one of [impressions], [scores], [labels], [reach]")
        return self

    @model_validator(mode="after")
    def _engine_inputs(self) -> FairmonConfig:
        imp = self.impressions
        if imp is not None and imp.table is not None and self.engine != "spark":
            raise ValueError("impressions.table is read by the Spark engine: set engine = 'spark'")
        if "spark" in self.model_fields_set and self.engine != "spark":
            raise ValueError(
                f"a [spark] section is set but engine = {self.engine!r}: add engine = 'spark' at the top of the file "
                "(before any [section]) to count on Spark, or remove [spark]"
            )
        return self

    @model_validator(mode="after")
    def _user_attributes_known(self) -> FairmonConfig:
        users = self.estimation.user_attributes
        if users and self.impressions is not None:
            unknown = [a for a in users if a not in self.impressions.attributes]
            if unknown:
                raise ValueError(
                    f"estimation.user_attributes: {unknown} not in impressions.attributes "
                    f"{self.impressions.attributes}; a user attribute must also be counted"
                )
        return self

    @model_validator(mode="after")
    def _envy_inputs(self) -> FairmonConfig:
        if self.envy is None:
            return self
        imp = self.impressions
        if imp is None or imp.format != "contract":
            raise ValueError("[envy] needs [impressions] of format 'contract' (rows with user_id and traffic = 'swap')")
        for key, names in (
            ("attributes", self.envy.attributes or []),
            ("group_attribute", [self.envy.group_attribute]),
        ):
            unknown = [a for a in names if a is not None and a not in imp.attributes]
            if unknown:
                raise ValueError(f"envy.{key}: {unknown} not in impressions.attributes {imp.attributes}")
        return self

    @property
    def envy_attributes(self) -> list[str]:
        """The user attributes of the group-envy table ([envy] attributes, default every impressions attribute)."""
        if self.envy is None or self.impressions is None:
            return []
        return self.envy.attributes or list(self.impressions.attributes)

    @property
    def gx_root(self) -> Path:
        """GX project folder, beside the warehouse (Data Docs under gx/uncommitted/data_docs)."""
        return self.warehouse_path.parent

    def fingerprint(self) -> str:
        """Hash of the settings that change staged rows (used to decide re-ingest)."""
        # pool_policy picks which staged files a day counts, not what is staged: changing it re-stages nothing
        exclude = {"impressions": {"pool_policy"}}
        inputs = {
            k: getattr(self, k).model_dump(mode="json", exclude=exclude.get(k)) if getattr(self, k) else None
            for k in ("impressions", "scores", "labels")
        }
        # the count stage's cluster buckets are staged with the rows (transforms/reo/cluster.py), and
        # which bucket an id gets is sql/impressions_bucket.sql's formula: rows bucketed by an
        # earlier formula must not be counted with rows bucketed by this one (a user would split)
        inputs["cluster"] = [self.estimation.cluster_by, self.estimation.cluster_buckets]
        if self.estimation.cluster_by != "none":
            inputs["cluster"].append(BUCKET_FORMULA)
        # with [envy] every impressions file also stages its per-user rows (and swap rows are allowed)
        if self.envy is not None:
            inputs["envy"] = True
        # each engine hashes cluster ids its own way (sql/impressions_bucket.sql): its profiles are its own
        if self.engine != "duckdb":
            inputs["engine"] = self.engine
        return hashlib.sha256(json.dumps(inputs, sort_keys=True).encode()).hexdigest()[:16]


def _format_validation_error(path: Path, err: ValidationError) -> str:
    lines = [f"invalid config {path}:"]
    for e in err.errors():
        key = ".".join(str(x) for x in e["loc"]) or "(top level)"
        lines.append(f"  {key}: {e['msg']}")
    return "\n".join(lines)


def load_config(path: str | Path) -> FairmonConfig:
    """Read and validate a fairmon TOML config.

    Raises :class:`ConfigError` (naming the file and key) when the file is
    missing, is not valid TOML, or breaks a rule of the schema.
    """
    path = Path(path)
    try:
        raw = tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise ConfigError(f"config file not found: {path}") from None
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"config {path} is not valid TOML: {e}") from None
    raw["base_dir"] = path.resolve().parent
    try:
        return FairmonConfig.model_validate(raw)
    except ValidationError as e:
        raise ConfigError(_format_validation_error(path, e)) from None
