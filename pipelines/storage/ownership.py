"""Which project owns a warehouse.

Two configs that share a warehouse cannot run at once (the project lock,
:mod:`fairmon.pipelines.storage.locking`), but run one after the other they
would replace each other's partitions, and one that no longer writes a table
(``reo_ab`` of a removed ``[ab]``) would remove the other's. So the first run
on a warehouse records its owner in ``<warehouse>/fairmon-project.json``
(written aside and renamed into place: never half-written): the project's
name (``[project] name``, default the config file's folder name) and the
config's identity (its path relative to the warehouse, so a project folder
moved whole keeps its owner). Later, a run is accepted when it comes from
the owner's config, or from a config that declares the owner's project name
in ``[project] name``; any other config is refused with
:class:`WarehouseOwnedError`, naming the owner (exit 2).
"""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path

from fairmon.pipelines.storage import db

#: The ownership record at the warehouse's root.
MARKER = "fairmon-project.json"


class WarehouseOwnedError(RuntimeError):
    """The warehouse belongs to another project (or its ownership record is unreadable): the message names both."""


def config_identity(warehouse: Path, config_path: str | Path | None) -> str | None:
    """The config file's path relative to the warehouse folder (POSIX
    separators), or None for a config built in code (no file)."""
    if not config_path:
        return None
    return Path(os.path.relpath(Path(config_path).resolve(), warehouse.resolve())).as_posix()


def read_owner(warehouse: Path) -> dict | None:
    """The warehouse's ownership record ({project, config, ...}), None when it
    has none yet. Raises :class:`WarehouseOwnedError` naming the file when it
    is not a JSON object with a ``project`` string."""
    path = warehouse / MARKER
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as e:
        raise WarehouseOwnedError(f"cannot read the warehouse's owner record {path}: {e}") from None
    try:
        owner = json.loads(text)
    except ValueError:
        owner = None
    if not isinstance(owner, dict) or not isinstance(owner.get("project"), str):
        raise WarehouseOwnedError(
            f'the warehouse\'s owner record {path} is not fairmon\'s ({{"project": ..., "config": ...}}): '
            "restore it, or remove it if this warehouse is this project's"
        )
    return owner


def _write_owner(warehouse: Path, record: dict) -> None:
    """Write the ownership record atomically (aside, fsynced, renamed into place)."""
    warehouse.mkdir(parents=True, exist_ok=True)
    final = warehouse / MARKER
    tmp = warehouse / f".{MARKER}.{uuid.uuid4().hex}.tmp"
    try:
        with open(tmp, "w", encoding="utf-8") as fh:
            json.dump(record, fh, indent=2, sort_keys=True)
            fh.write("\n")
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, final)
    finally:
        tmp.unlink(missing_ok=True)


def claim_warehouse(warehouse: Path, project: str, declared: bool, config_path: str | Path | None) -> dict:
    """Check that project ``project`` (``declared``: named in the config's
    ``[project] name``, not the folder default) may write ``warehouse``, from
    the config file ``config_path`` (None: a config built in code), and record
    it as the owner when the warehouse has none. Call it holding the project
    lock. Returns the ownership record.

    Accepted: no owner yet (this config becomes it), the owner's own config
    file, or a config that declares the owner's project name (a config built
    in code, or any config when the owner was one: whose project name is the
    owner's; the first config file seen then becomes the owner's). Raises
    :class:`WarehouseOwnedError` naming the owner's project and config, and
    how to proceed, otherwise."""
    identity = config_identity(warehouse, config_path)
    owner = read_owner(warehouse)
    if owner is None:
        record = {"project": project, "config": identity}
        _write_owner(warehouse, record)
        return record
    same_config = identity is not None and identity == owner.get("config")
    # a config built in code has no file to compare: its project name is the test, both ways
    same_project = project == owner["project"] and (declared or identity is None or owner.get("config") is None)
    if same_config or same_project:
        if owner.get("config") is None and identity is not None:  # the owner's config file is known from now on
            owner = {**owner, "config": identity}
            _write_owner(warehouse, owner)
        return owner
    mine = f"config {config_path}" if config_path else "a config built in code"
    raise WarehouseOwnedError(
        f"the warehouse {warehouse} belongs to project {owner['project']!r} (config {owner.get('config')} "
        f"relative to it; {warehouse / MARKER}), not to {mine} of project {project!r}"
        f"{'' if declared else ' (its folder name: no [project] name declared)'}: use another warehouse, or "
        f"declare [project] name = {json.dumps(owner['project'], ensure_ascii=False)} in this config if it is "
        "the same project (its runs then replace the owner's days)"
    )


def claim_duckdb(duckdb_path: Path, warehouse: Path, project: str) -> None:
    """Check that the DuckDB file ``duckdb_path`` serves ``warehouse`` (of
    project ``project``), recording it as the file's owner on a first run. One
    DuckDB file holds one project's staging, run records and ledger: a second
    project writing it would unpublish the first's days (their latest runs are
    read from it). The warehouse is recorded relative to the file's folder, so
    a project folder moved whole keeps its owner. Call it holding the project
    lock. Raises :class:`WarehouseOwnedError` naming the owner (exit 2)."""
    here = Path(os.path.relpath(warehouse.resolve(), duckdb_path.resolve().parent)).as_posix()
    with db.connect(duckdb_path) as con:
        db.execute(con, "owner_create")
        found = db.rows(con, "owner_read")
        if not found:
            db.execute(con, "owner_insert", project=project, warehouse=here)
            return
    (owner, theirs), *_ = found
    if theirs != here:
        raise WarehouseOwnedError(
            f"the DuckDB file {duckdb_path} serves the warehouse {theirs} (relative to its folder) of project "
            f"{owner!r}, not this config's warehouse {warehouse} (project {project!r}): set another duckdb path "
            "in this config; one DuckDB file holds one project's run records and privacy ledger"
        )
