"""fairmon configuration, the input sections: ``[impressions]`` (with its
random-traffic pools), ``[scores]`` and ``[labels]``, and what every section
shares (the strict base model, identifier and path-template checks,
:class:`ConfigError`).

Why a module of its own: these sections decide what is staged from which
files, and their checks (identifiers that reach SQL, path templates) are
the config's guard at the input boundary. :mod:`fairmon.pipelines.core.config`
assembles the whole file and re-exports every name here.
"""

from __future__ import annotations

import datetime as dt
import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_TABLE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*){0,2}$")


def check_identifiers(v: list[str]) -> list[str]:
    """``v`` unchanged when every name is a valid, unique SQL identifier (they
    become column names in generated SQL); raises ValueError otherwise."""
    for name in v:
        if not _IDENT.match(name):
            raise ValueError(f"{name!r} is not a valid column name (letters, digits, _)")
    if len(set(v)) != len(v):
        raise ValueError("names must be unique")
    return v


class ConfigError(ValueError):
    """A config file is missing, unreadable or invalid; the message names the key."""


class Strict(BaseModel):
    """Base of every config section: unknown keys are errors (a typo never passes
    silently) and a loaded config is immutable (one config per run)."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class RandomPool(Strict):
    """A pooled random-traffic file covering the days ``start``..``end`` (inclusive)."""

    path: str
    start: dt.date
    end: dt.date

    @model_validator(mode="after")
    def _ordered(self) -> RandomPool:
        if self.end < self.start:
            raise ValueError(f"end {self.end} is before start {self.start}")
        return self


class ImpressionsConfig(Strict):
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
        default_factory=list,
        description="extra traffic values allowed besides default and random, e.g. ['post_recall'] for "
        "contract files with forced-inserted post-recall rows (reo_stage, seed 001 App. I.4); a value not "
        "listed here (nor a stage_paths key) fails the raw suite's traffic_known check and quarantines the day",
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
        return check_identifiers(v)

    @model_validator(mode="after")
    def _intersections(self) -> ImpressionsConfig:
        check_intersections(self.intersections, self.attributes)
        return self

    @model_validator(mode="after")
    def _attributes_are_groups(self) -> ImpressionsConfig:
        """An attribute that is a signal or the rows' day, traffic or arm groups rows by what REO measures or
        by how they were served: its REO rows mean nothing, and were published with warnings only."""
        for a in self.attributes:
            if a in self.signals:
                raise ValueError(f"attributes: {a!r} is also a signal; an attribute names a group of items or users")
            if a in ("ds", "traffic", "arm"):
                raise ValueError(f"attributes: {a!r} is a contract column fairmon reads itself, not a group")
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
            check_identifiers([stage])
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


def check_intersections(intersections: list[list[str]], attributes: list[str]) -> None:
    """Raise ValueError unless each intersection names at least two different
    ``attributes`` and none is listed twice (DESIGN §2 ``intersections``)."""
    seen = set()
    for names in intersections:
        if len(names) < 2 or len(set(names)) != len(names):
            raise ValueError(f"intersections: {names} must name at least two different attributes")
        unknown = [a for a in names if a not in attributes]
        if unknown:
            raise ValueError(f"intersections: {unknown} not in attributes {attributes}")
        if tuple(names) in seen:
            raise ValueError(f"intersections: {names} is listed twice")
        seen.add(tuple(names))


class ThresholdSpec(Strict):
    """A model's decision threshold t and the half-width d of the local window (seed 002 eqs. 8-11)."""

    model: str
    t: float
    d: float = Field(gt=0)


class _LogInput(Strict):
    """Shared fields of the score and labeling logs."""

    attributes: list[str] = Field(min_length=1, description="group columns, one grouping each")
    window_days: int = Field(default=1, ge=1, description="trailing window of days pooled per estimate")

    @field_validator("attributes")
    @classmethod
    def _identifiers(cls, v: list[str]) -> list[str]:
        return check_identifiers(v)


class ScoresConfig(_LogInput):
    """Model score logs (DESIGN §2 scores) and prevalence at the threshold (§4.2; seed 002 eqs. 6, 8-11)."""

    intersections: list[list[str]] = Field(
        default_factory=list,
        description="cells of several attributes, e.g. [['publisher_group', 'viewer_group']]: each adds the "
        "attribute publisher_group×viewer_group, whose cells a×b get their own implied threshold and cost "
        "ratio c_ab (seed 002 eq. 5)",
    )
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
        check_intersections(self.intersections, self.attributes)
        return self

    @property
    def groupings(self) -> list[str]:
        """The attributes, then each intersection's name (``a×b``, the separator
        of :data:`fairmon.transforms.contract.INTERSECTION_SEP`): the groupings
        prevalence at the threshold is estimated for."""
        return [*self.attributes, *("×".join(names) for names in self.intersections)]


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
