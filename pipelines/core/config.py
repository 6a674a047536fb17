"""fairmon configuration: one TOML file validated by Pydantic.

Relative paths in the file are resolved against the file's own directory, so a
config and its data can move together. Errors name the offending key, e.g.
``impressions.random_window_days: Input should be greater than or equal to 1``.

The sections are declared in :mod:`fairmon.pipelines.core.config_inputs`
(what to read) and :mod:`fairmon.pipelines.core.config_sections` (how to
estimate and publish); this module assembles them into :class:`FairmonConfig`,
loads the file, and re-exports every section's name.
"""

from __future__ import annotations

import hashlib
import json
import tomllib
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field, ValidationError, model_validator

from fairmon.pipelines.core.config_inputs import (
    ConfigError,
    ImpressionsConfig,
    LabelsConfig,
    RandomPool,
    ScoresConfig,
    Strict,
    ThresholdSpec,
    check_identifiers,
    check_template,
)
from fairmon.pipelines.core.config_sections import (
    ABConfig,
    AlertsConfig,
    AuditConfig,
    EnvyConfig,
    EstimationConfig,
    GxConfig,
    ProjectConfig,
    QualityConfig,
    ReachConfig,
    ScheduleConfig,
    SparkConfig,
)

__all__ = [
    "BUCKET_FORMULA",
    "ABConfig",
    "AuditConfig",
    "ConfigError",
    "EnvyConfig",
    "EstimationConfig",
    "FairmonConfig",
    "AlertsConfig",
    "GxConfig",
    "ImpressionsConfig",
    "LabelsConfig",
    "ProjectConfig",
    "QualityConfig",
    "RandomPool",
    "ReachConfig",
    "ProjectConfig",
    "ScheduleConfig",
    "ScoresConfig",
    "SparkConfig",
    "Strict",
    "ThresholdSpec",
    "check_identifiers",
    "check_template",
    "load_config",
]

#: Version of the cluster-bucket formula of sql/impressions_bucket.sql, part of
#: :meth:`FairmonConfig.fingerprint` when rows are clustered: changing the formula
#: re-stages every file (2: DuckDB's or Spark's own hash() shifted right one bit, modulo the buckets;
#: 3: the first 8 hex digits of the id's SHA-1 as an integer, modulo the buckets, the same on every engine;
#: 4: as 3 for a file of more ids than buckets, else a per-cluster key, so a day of few clusters sums each alone;
#: 5: as 4 with ``cluster_exact_max``, not the buckets, deciding between the two).
BUCKET_FORMULA = 5


#: The sections whose settings can change a day's outputs (:meth:`FairmonConfig.output_fingerprints`).
OUTPUT_SECTIONS = ("impressions", "scores", "labels", "estimation", "quality", "ab", "envy", "reach", "alerts")
#: Of a section, only the fields that change a day's outputs (``[alerts]``: the level of ``reo``'s alert interval).
OUTPUT_FIELDS = {"alerts": {"enabled", "alpha", "horizon_days"}}


class FairmonConfig(Strict):
    """The whole configuration. ``warehouse`` and ``duckdb`` are resolved paths."""

    warehouse: Path
    duckdb: Path
    engine: Literal["duckdb", "spark"] = Field(
        default="duckdb",
        description="where the count stage (input profiles, duplicate ids) scans the rows: the embedded DuckDB, "
        "or Apache Spark ([spark], extra fairmon[spark]); everything after the profiles runs here either way",
    )
    spark: SparkConfig = SparkConfig()
    project: ProjectConfig = ProjectConfig()
    impressions: ImpressionsConfig | None = None
    scores: ScoresConfig | None = None
    labels: LabelsConfig | None = None
    estimation: EstimationConfig = EstimationConfig()
    quality: QualityConfig = QualityConfig()
    ab: ABConfig = ABConfig()
    schedule: ScheduleConfig = ScheduleConfig()
    audit: AuditConfig = AuditConfig()
    gx: GxConfig = GxConfig()
    alerts: AlertsConfig = AlertsConfig()
    envy: EnvyConfig | None = None
    reach: ReachConfig | None = None
    base_dir: Path = Field(default=Path("."), exclude=True)

    def resolve(self, p: str | Path) -> Path:
        """Resolve a path from the config against the config file's directory."""
        p = Path(p).expanduser()
        return p if p.is_absolute() else (self.base_dir / p)

    @property
    def project_name(self) -> str:
        """``[project] name``, or the name of the config file's folder when the config does not declare one."""
        return self.project.name or self.base_dir.resolve().name

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

    def output_fingerprints(self) -> dict[str, str]:
        """A hash per section that can change a day's published outputs
        (:data:`OUTPUT_SECTIONS`: what is read, how it is estimated, checked
        and compared), recorded with each day's run; a day whose latest run
        had other hashes is stale (:func:`fairmon.pipelines.orchestration.ops.detect_stale`).
        Paths, the schedule, the engine, GX housekeeping and ``[audit]``
        (releases, not days) are left out."""
        out = {}
        for name in OUTPUT_SECTIONS:
            section = getattr(self, name)
            dumped = section.model_dump(mode="json", include=OUTPUT_FIELDS.get(name)) if section is not None else None
            out[name] = hashlib.sha256(json.dumps(dumped, sort_keys=True).encode()).hexdigest()[:16]
        return out

    def fingerprint(self) -> str:
        """Hash of the settings that change staged rows (used to decide re-ingest)."""
        # pool_policy picks which staged files a day counts, not what is staged: changing it re-stages nothing
        exclude = {"impressions": {"pool_policy"}}
        if self.scores is not None and not self.scores.intersections:  # as before the field: nothing re-staged
            exclude["scores"] = {"intersections"}
        inputs = {
            k: getattr(self, k).model_dump(mode="json", exclude=exclude.get(k)) if getattr(self, k) else None
            for k in ("impressions", "scores", "labels")
        }
        # the count stage's cluster buckets are staged with the rows (transforms/reo/cluster.py), and
        # which bucket an id gets is sql/impressions_bucket.sql's formula: rows bucketed by an
        # earlier formula must not be counted with rows bucketed by this one (a user would split)
        est = self.estimation
        inputs["cluster"] = [est.cluster_by, est.cluster_buckets]
        if est.cluster_by != "none":  # unclustered rows carry no key: neither setting changes them
            inputs["cluster"] += [BUCKET_FORMULA, est.cluster_exact_max]
        # with [envy] every impressions file also stages its per-user rows (and swap rows are allowed);
        # 2: random-traffic rows are staged too (n = 0), so a donor's group is found in them
        if self.envy is not None:
            inputs["envy"] = 2
        # buckets are the same on every engine (formula 3), but the staged rows are not: DuckDB stages the
        # rows per bucket and label from grouping sets of one scan (sql/impressions_profile_buckets.sql),
        # Spark the profile split by bucket, so the rows and their src_row differ although their sums agree
        if self.engine != "duckdb":
            inputs["engine"] = self.engine
        return hashlib.sha256(json.dumps(inputs, sort_keys=True).encode()).hexdigest()[:16]


def _format_validation_error(path: Path, err: ValidationError) -> str:
    lines = [f"invalid config {path}:"]
    for e in err.errors():
        key = ".".join(str(x) for x in e["loc"]) or "(top level)"
        hint = _did_you_mean(e["loc"]) if e["type"] == "extra_forbidden" else ""
        lines.append(f"  {key}: {e['msg']}{hint}")
    return "\n".join(lines)


def _did_you_mean(loc: tuple) -> str:
    """For an unknown key at ``loc``: the closest key its section has (``signal`` -> ``signals``), if any is
    close; the section's model is found by walking the config's schema along ``loc``."""
    import difflib
    import typing

    model: type[BaseModel] | None = FairmonConfig
    for part in loc[:-1]:
        field = model.model_fields.get(str(part)) if model is not None else None
        kinds = [field.annotation] if field is not None else []
        model = None
        while kinds:
            kind = kinds.pop()
            if isinstance(kind, type) and issubclass(kind, BaseModel):
                model = kind
                break
            kinds.extend(typing.get_args(kind))
    if model is None:
        return ""
    close = difflib.get_close_matches(str(loc[-1]), list(model.model_fields), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def load_config(path: str | Path) -> FairmonConfig:
    """Read and validate a fairmon TOML config.

    Raises :class:`ConfigError` (naming the file and key) when the file is
    missing, is not valid TOML, or breaks a rule of the schema.
    """
    path = Path(path)
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"config file not found: {path}") from None
    except IsADirectoryError:
        raise ConfigError(f"config {path} is a folder, not a TOML file") from None
    except UnicodeDecodeError as e:
        raise ConfigError(f"config {path} is not UTF-8 text (byte {e.start}): TOML files are UTF-8") from None
    except OSError as e:
        raise ConfigError(f"config {path} cannot be read: {e.strerror or e}") from None
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"config {path} is not valid TOML: {e}") from None
    except RecursionError:  # tomllib parses nesting by recursion: arrays or tables thousands deep
        raise ConfigError(f"config {path} nests arrays or tables too deeply to be a fairmon config") from None
    raw["base_dir"] = path.resolve().parent
    try:
        cfg = FairmonConfig.model_validate(raw)
    except ValidationError as e:
        raise ConfigError(_format_validation_error(path, e)) from None
    check_paths(cfg, path)
    return cfg


#: Bytes 8..12 of every DuckDB database file.
DUCKDB_MAGIC = b"DUCK"


def check_paths(cfg: FairmonConfig, path: Path | str = "") -> None:
    """The config's ``warehouse`` and ``duckdb`` paths as they are on disk
    now: the warehouse a folder (or not there yet), the DuckDB file a DuckDB
    database (or not there yet), and not the same path. Raises
    :class:`ConfigError` naming the key and the path otherwise (a CSV named as
    ``duckdb`` would otherwise be opened, refused or overwritten)."""
    wh, db = cfg.warehouse_path, cfg.duckdb_path
    where = f"config {path}: " if path else ""
    if wh.resolve() == db.resolve():
        raise ConfigError(f"{where}warehouse and duckdb are the same path {wh}: one folder, one file")
    if wh.exists() and not wh.is_dir():
        raise ConfigError(f"{where}warehouse {wh} is a file, not a folder")
    if db.is_dir():
        raise ConfigError(f"{where}duckdb {db} is a folder, not a DuckDB file")
    if db.exists():
        try:
            with open(db, "rb") as fh:
                head = fh.read(12)
        except OSError as e:
            raise ConfigError(f"{where}duckdb {db} cannot be read: {e.strerror or e}") from None
        if head[8:12] != DUCKDB_MAGIC:
            raise ConfigError(f"{where}duckdb {db} is not a DuckDB database file (another kind of file is there)")


def check_writable(cfg: FairmonConfig) -> None:
    """Before a run writes: the warehouse folder and the DuckDB file's folder
    (or the nearest folder above each that exists, where they will be made)
    accept new files. Raises :class:`ConfigError` naming the key and the
    folder otherwise (a read-only mount or folder), before anything is written."""
    import os

    for key, folder in (("warehouse", cfg.warehouse_path), ("duckdb", cfg.duckdb_path.parent)):
        near = folder.resolve()
        while not near.exists() and near != near.parent:
            near = near.parent
        if not os.access(near, os.W_OK | os.X_OK):
            raise ConfigError(f"{key}: folder {near} is read-only; fairmon must write there ({key} = {folder})")
