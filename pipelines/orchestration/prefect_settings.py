"""Whether a Prefect API is configured, read without importing Prefect.

Importing Prefect's settings costs about a second of CPU; a command that runs
in process when no API is configured asks this question before anything
else, so it is answered here from the same sources Prefect 3.8 reads, in the
same order (``prefect.settings.sources``): the environment (names in any
case, as pydantic-settings reads them; an empty value counts), then the
active profile of the profiles file. Sources fairmon does not read (a
``.env`` or ``prefect.toml`` file or a ``[tool.prefect]`` table in the
working directory, a profiles file that is not TOML, the same variable set
in two cases) make the answer None: Prefect is asked then
(:func:`api_configured`).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

#: Prefect's settings source reads no profile while any of these is set (its test mode).
TEST_MODE = (
    "PREFECT_TEST_MODE",
    "PREFECT_UNIT_TEST_MODE",
    "PREFECT_TESTING_UNIT_TEST_MODE",
    "PREFECT_TESTING_TEST_MODE",
)


def api_configured() -> bool:
    """Whether a Prefect API is configured (``PREFECT_API_URL`` in the
    environment or the active Prefect profile, or set by a temporary server
    this process started): runs go through Prefect then, in process otherwise.
    Read without importing Prefect when the environment and the profiles file
    answer (:func:`api_url_without_prefect`); Prefect's own settings answer
    otherwise, and once Prefect is imported."""
    url = None if "prefect" in sys.modules else api_url_without_prefect()
    if url is not None:
        return bool(url)
    from prefect.settings import PREFECT_API_URL

    return bool(PREFECT_API_URL.value())


def api_url_without_prefect(cwd: Path | None = None) -> str | None:
    """``PREFECT_API_URL`` as Prefect 3.8 resolves it in a process started in
    ``cwd`` (default the working directory), without importing Prefect.

    The rules (``prefect.settings.sources``): the environment first, the name
    in any case, an empty value included; then the profiles file
    (``PREFECT_PROFILES_PATH``, else ``$PREFECT_HOME/profiles.toml``, else
    ``~/.prefect/profiles.toml`` when it exists, else the profiles Prefect
    ships), whose profile named by ``PREFECT_PROFILE`` or by the file's
    ``active`` key gives the value; a file that is missing, or holds no such
    profile, gives the shipped file's active profile ("ephemeral": no API).
    In Prefect's test mode (:data:`TEST_MODE`) no profile is read.

    Returns the URL, "" when none is set, or None when a source fairmon does
    not read may set it (module docstring). Raises nothing.
    """
    import tomllib

    named = [k for k in os.environ if k.upper() == "PREFECT_API_URL"]
    if len(named) > 1:
        return None
    if named:
        return os.environ[named[0]]
    here = cwd or Path.cwd()
    try:
        if (here / "prefect.toml").exists() or (here / ".env").exists():
            return None
        pyproject = here / "pyproject.toml"
        if pyproject.exists() and "prefect" in tomllib.loads(pyproject.read_text()).get("tool", {}):
            return None
        if any(os.environ.get(k) for k in TEST_MODE):
            return ""
        shipped = _shipped_profiles()
        path = _profiles_path(here, shipped)
        if path is None or not path.exists():
            return _shipped_url(shipped)  # Prefect ignores PREFECT_PROFILE then
        data = tomllib.loads(path.read_text())
        active = os.environ.get("PREFECT_PROFILE") or data.get("active")
        table = data.get("profiles", {}).get(active) if active else None
        return _shipped_url(shipped) if table is None else _value(table)
    except (OSError, ValueError, AttributeError):  # AttributeError: a "profiles" key that is not a table
        return None


def _profiles_path(here: Path, shipped: Path | None) -> Path | None:
    """The profiles file Prefect reads in a process started in ``here`` (its
    ``_get_profiles_path`` once that folder's files are ruled out; a relative
    path is relative to ``here``, ``~`` is not expanded): None when Prefect is
    not installed."""
    if os.environ.get("PREFECT_PROFILES_PATH"):
        return here / os.environ["PREFECT_PROFILES_PATH"]
    if os.environ.get("PREFECT_HOME"):
        return here / os.environ["PREFECT_HOME"] / "profiles.toml"
    user = Path.home() / ".prefect" / "profiles.toml"
    return user if user.exists() else shipped


def _shipped_profiles() -> Path | None:
    """The profiles file installed with Prefect (``prefect/settings/profiles.toml``), found
    without importing Prefect; None when Prefect is not installed."""
    from importlib.util import find_spec

    spec = find_spec("prefect")
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations))) / "settings" / "profiles.toml"


def _shipped_url(shipped: Path | None) -> str:
    """``PREFECT_API_URL`` of the shipped file's own active profile (Prefect's default
    profile, "ephemeral": none); "" when Prefect is not installed. Raises OSError, ValueError."""
    import tomllib

    if shipped is None or not shipped.exists():
        return ""
    own = tomllib.loads(shipped.read_text())
    return _value(own.get("profiles", {}).get(own.get("active", "ephemeral"), {}))


def _value(profile: dict) -> str:
    """A profile's ``PREFECT_API_URL`` as text, "" when it sets none."""
    value = profile.get("PREFECT_API_URL")
    return "" if value is None else str(value)
