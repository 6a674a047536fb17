"""Input sources: which units make up a day, answered once per input kind
(DESIGN §2 "Input identity"). Each configured input — the impressions log,
the scores and labels logs, the model snapshots — is an :class:`InputKind`
whose :meth:`~InputKind.units` names the units day ds needs *now* (path
templates, globs, pools, catalog partitions resolved afresh) and whose
:meth:`~InputKind.inputs` gives each one's identity (path relative to the
config's folder) and fingerprint. What a run stages, records as its inputs,
counts (``day_files``), and what late-data detection compares
(``current_inputs``) all come from here, so they cannot disagree.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import NamedTuple

import polars as pl

from fairmon.pipelines.core.config import FairmonConfig
from fairmon.pipelines.core.run import active_run
from fairmon.pipelines.ingest.identity import (
    IngestUnit,
    file_fingerprint,
    partition_fingerprints,
    table_unit_path,
    unit_key,
)
from fairmon.pipelines.ingest.windows import days_between, matches, pool_admitted, tiktok_pools, window_start
from fairmon.transforms.contract import InputContractError

#: The files of a model snapshot (DESIGN §2 model snapshots), each ``<name>.parquet`` or ``<name>.csv``.
SNAPSHOT_FILES = ("users", "items", "ratings", "global")


class DayInput(NamedTuple):
    """One unit a day needs as it is now: the unit, its identity
    (:func:`~fairmon.pipelines.ingest.identity.unit_key`) and fingerprint."""

    unit: IngestUnit
    key: str
    size: int
    digest: int


class InputKind:
    """One configured input kind under a config: ``source`` is its name
    (``impressions``, ``scores``, ``labels``, ``reach``)."""

    source: str = ""

    def __init__(self, cfg: FairmonConfig):
        self.cfg = cfg

    def units(self, ds: dt.date) -> list[IngestUnit]:
        """The units day ``ds`` needs now. Raises :class:`InputContractError`
        when the input cannot serve the day (e.g. Coat on another day)."""
        raise NotImplementedError

    def keys(self, ds: dt.date) -> list[str]:
        """Identities of :meth:`units`: the only staged rows the day may use."""
        return [unit_key(self.cfg, u.file) for u in self.units(ds)]

    def inputs(self, ds: dt.date) -> list[DayInput]:
        """:meth:`units` with identity and fingerprint; a unit that vanished
        between listing and stat is left out, and an input that cannot serve
        the day gives none."""
        try:
            units = self.units(ds)
        except InputContractError:
            return []
        out = []
        for u in units:
            try:
                size, digest = file_fingerprint(u.file, self.cfg)
            except OSError:
                continue
            out.append(DayInput(u, unit_key(self.cfg, u.file), size, digest))
        return out


class ImpressionsInput(InputKind):
    """The impressions log: default traffic of the day and the random traffic of its window."""

    source = "impressions"

    def units(self, ds: dt.date) -> list[IngestUnit]:
        """The ingest units that day ``ds`` needs: its default traffic and the
        random traffic of its trailing window (DESIGN §2 "Random-traffic
        windows"): for ``contract`` the files of the window's days (their rows
        carry their own ds); for ``tiktok`` the pools ``pool_policy`` admits
        (:func:`~fairmon.pipelines.ingest.windows.pool_admitted`); for a
        catalog table its ds partitions of the window. No file for the day
        gives no unit (the day gate's default_traffic_present reports it).

        Raises :class:`InputContractError` for a Coat config asked for another
        day, or naming the table when Spark cannot list its partitions.
        """
        cfg, imp = self.cfg, self.cfg.impressions
        w0 = window_start(ds, imp.random_window_days)
        if imp.format == "coat":
            if ds != imp.ds:
                raise InputContractError(
                    f"the Coat data set is configured as the single day {imp.ds}, not {ds}",
                    file=str(cfg.resolve(imp.path)),
                )
            return [IngestUnit(cfg.resolve(imp.path), ds, ds, "all")]
        if imp.table is not None:  # a catalog table (Spark engine): one unit per ds partition of the window
            have = partition_fingerprints(cfg, imp.table, days_between(w0, ds))
            return [
                IngestUnit(table_unit_path(imp.table, d), d, d, "all")
                for d in [ds, *days_between(w0, ds)[:-1]]
                if d in have
            ]
        day_files = matches(imp.path, cfg, ds=ds.isoformat())
        if imp.format == "contract":
            units = [IngestUnit(f, ds, ds, "all") for f in day_files]
            for d in days_between(w0, ds)[:-1]:  # earlier days of the window contribute their random rows
                units += [IngestUnit(f, d, d, "all") for f in matches(imp.path, cfg, ds=d.isoformat())]
            return units
        # tiktok
        units = [IngestUnit(f, ds, ds, "nonrandom", traffic="default") for f in day_files]
        for stage, template in imp.stage_paths.items():  # e.g. post_recall (seed 001 App. I.4)
            units += [
                IngestUnit(f, ds, ds, "nonrandom", traffic=stage) for f in matches(template, cfg, ds=ds.isoformat())
            ]
        for path, a, b in tiktok_pools(cfg):
            if pool_admitted(a, b, ds, imp.random_window_days, imp.pool_policy):
                units.append(IngestUnit(path, a, b, "random", traffic="random"))
        return units


class MissingDayFile(InputContractError):
    """Day ``ds`` of a scores or labels log named by day (``path`` with ``{ds}``) has no file of its own
    (:meth:`LogInput.missing_own_file`): its window's earlier files alone would publish their figures again
    under this day, "published" with exit 0. A defect of the inputs, so the pre-flight check refuses the day
    and a run quarantines it (check :attr:`check`), as a day without its default-traffic file."""

    check = "day_file_present"


class LogInput(InputKind):
    """A scores or labels log (``source``): one file per day of its trailing window, or the COMPAS file."""

    def __init__(self, cfg: FairmonConfig, source: str):
        super().__init__(cfg)
        self.source = source

    def missing_own_file(self, ds: dt.date) -> MissingDayFile | None:
        """The :class:`MissingDayFile` of day ``ds`` when its ``path`` names files by day and none is
        there for ``ds``, else None (a file holding every day, or the COMPAS file). Raises nothing."""
        sc = getattr(self.cfg, self.source)
        if getattr(sc, "format", "contract") != "contract" or "{ds}" not in sc.path:
            return None
        if matches(sc.path, self.cfg, ds=ds.isoformat()):
            return None
        expected = self.cfg.resolve(sc.path.replace("{ds}", ds.isoformat()))
        shown = sc.path.replace("{ds}", ds.isoformat())  # as the config names it, like the pre-flight's other files
        why = (
            f"no {self.source} file for {ds}: {shown} does not exist ([{self.source}] path = {sc.path!r}, "
            f"{{ds}} = {ds}); the day's figures need its own {self.source}, not only its window's earlier days'"
        )
        return MissingDayFile(why, file=str(expected))

    def units(self, ds: dt.date) -> list[IngestUnit]:
        """Files of the log that day ``ds`` needs: one per day of its trailing
        window (``window_days``), or the single COMPAS file. Raises
        :class:`InputContractError` when the COMPAS file is missing."""
        cfg = self.cfg
        sc = getattr(cfg, self.source)
        if self.source == "scores" and sc.format == "compas":
            path = cfg.resolve(sc.path)
            if not path.is_file():
                raise InputContractError("COMPAS file not found", file=str(path))
            return [IngestUnit(path, dt.date.min, dt.date.max, "file")]
        first = window_start(ds, sc.window_days)
        days = days_between(first, ds)
        return [IngestUnit(f, d, d, "file") for d in days for f in matches(sc.path, cfg, ds=d.isoformat())]


class SnapshotInput(InputKind):
    """The model snapshots (DESIGN §2): day ds's folder (``reach.path`` with {ds})."""

    source = "reach"

    def folder(self, ds: dt.date) -> Path:
        """The snapshot folder of day ``ds``, resolved against the config's folder."""
        return self.cfg.resolve(self.cfg.reach.path.replace("{ds}", ds.isoformat()))

    def units(self, ds: dt.date) -> list[IngestUnit]:
        """Every snapshot file of day ``ds`` present, per name Parquet before
        CSV (a folder holding both lists both: either is an input the day
        depends on)."""
        folder = self.folder(ds)
        found = [folder / f"{n}{ext}" for n in SNAPSHOT_FILES for ext in (".parquet", ".csv")]
        return [IngestUnit(f, ds, ds, "file") for f in found if f.exists()]


def input_of(cfg: FairmonConfig, source: str) -> InputKind:
    """The :class:`InputKind` of ``source`` under ``cfg``. Raises ValueError for an unknown name."""
    if source == "impressions":
        return ImpressionsInput(cfg)
    if source in ("scores", "labels"):
        return LogInput(cfg, source)
    if source == "reach":
        return SnapshotInput(cfg)
    raise ValueError(f"unknown input {source!r}")


def configured_inputs(cfg: FairmonConfig) -> list[InputKind]:
    """Every input kind the config has, in the order impressions, scores, labels, reach."""
    return [input_of(cfg, s) for s in ("impressions", "scores", "labels", "reach") if getattr(cfg, s) is not None]


def units_for_day(cfg: FairmonConfig, ds: dt.date) -> list[IngestUnit]:
    """The impressions units day ``ds`` needs (:meth:`ImpressionsInput.units`)."""
    return ImpressionsInput(cfg).units(ds)


def log_units_for_day(cfg: FairmonConfig, source: str, ds: dt.date) -> list[IngestUnit]:
    """The ``scores`` or ``labels`` files day ``ds`` needs (:meth:`LogInput.units`)."""
    return LogInput(cfg, source).units(ds)


def snapshot_folder(cfg: FairmonConfig, ds: dt.date) -> Path:
    """The snapshot folder of day ``ds`` (:meth:`SnapshotInput.folder`)."""
    return SnapshotInput(cfg).folder(ds)


def snapshot_files(cfg: FairmonConfig, ds: dt.date) -> dict[str, Path]:
    """{name: file} of the snapshot files of day ``ds`` that are read (Parquet preferred over CSV)."""
    out: dict[str, Path] = {}
    for u in SnapshotInput(cfg).units(ds):
        if u.file.is_file():
            out.setdefault(u.file.name.rsplit(".", 1)[0], u.file)
    return out


def current_inputs(cfg: FairmonConfig, ds: dt.date) -> list[dict]:
    """Every input file day ``ds`` needs under ``cfg`` *now*: {file (its
    identity), source, size, digest}, sorted by (source, file); what a run
    of the day records and late-data detection compares. Files that vanish
    between the listing and the stat are left out; an input that cannot
    serve the day (Coat on another day) contributes nothing."""
    out = [
        {"file": i.key, "source": kind.source, "size": i.size, "digest": i.digest}
        for kind in configured_inputs(cfg)
        for i in kind.inputs(ds)
    ]
    for source, path in side_tables(cfg, ds).items():
        try:
            size, digest = file_fingerprint(path, cfg)
        except OSError:
            continue
        out.append({"file": unit_key(cfg, path), "source": source, "size": size, "digest": digest})
    return sorted(out, key=lambda r: (r["source"], r["file"]))


def side_tables(cfg: FairmonConfig, ds: dt.date) -> dict[str, Path]:
    """The tables besides the logs that day ``ds``'s estimates read, by config key: ``[estimation] rsp_pool``
    (its ``{ds}`` filled in) and ``[envy] user_table``. They are not staged, but a changed one changes the
    day's numbers, so the day records their fingerprints and a corrected file makes it stale."""
    out = {}
    est = cfg.estimation
    if cfg.impressions is not None and est.rsp and est.rsp_pool is not None:
        out["estimation.rsp_pool"] = cfg.resolve(est.rsp_pool.format(ds=ds.isoformat()))
    if cfg.envy is not None and cfg.envy.user_table is not None:
        out["envy.user_table"] = cfg.resolve(cfg.envy.user_table)
    return out


def file_units(cfg: FairmonConfig, ds: dt.date) -> list[IngestUnit] | None:
    """Day ``ds``'s impressions units (:meth:`ImpressionsInput.units`) when they are files listed from the
    config's paths; None for a catalog table (listing its partitions is a Spark job), for Coat, or when
    they cannot be listed. What a message about the day's files may look up without running anything."""
    if cfg.impressions.format == "coat" or cfg.impressions.table is not None:
        return None
    try:
        return ImpressionsInput(cfg).units(ds)
    except InputContractError:
        return None


def day_files(cfg: FairmonConfig, days: list[dt.date]) -> pl.DataFrame:
    """(day, file) for every impressions file each of ``days`` needs, resolved
    now (file = its identity): the only staged rows a day may count. A day
    whose files cannot be resolved contributes no rows. A file is listed once
    a day however often the config names it (a pool matched by
    ``random_path`` and declared in ``random_pools`` too): its rows count once."""
    kind = ImpressionsInput(cfg)
    rows = []
    for ds in days:
        try:
            rows += [(ds, key) for key in dict.fromkeys(kind.keys(ds))]
        except InputContractError:
            continue
    return pl.DataFrame(rows, schema={"day": pl.Date, "file": pl.String}, orient="row")


def current_files(cfg: FairmonConfig, source: str, ds: dt.date) -> list[str]:
    """Identities of the ``scores`` or ``labels`` files day ``ds`` needs now:
    the only staged rows its estimates may use."""
    return LogInput(cfg, source).keys(ds)


def prime_table_fingerprints(cfg: FairmonConfig, days: list[dt.date]) -> None:
    """With ``[impressions] table``: list the partitions every day of
    ``days`` needs (its random-traffic window too) in one query, ahead of a
    backfill's days. Does nothing for file inputs or outside a run."""
    imp = cfg.impressions
    if imp is None or imp.table is None or active_run() is None or not days:
        return
    partition_fingerprints(cfg, imp.table, days_between(window_start(min(days), imp.random_window_days), max(days)))
