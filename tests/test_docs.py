"""The repository documents itself: a short README, docs that point nowhere outside the repository, and every
"DESIGN §n" the code cites is a section of the repository's own DESIGN.md. (`make docs` builds the site with
--strict in CI, so a broken link or an unrendered page fails there.)"""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
OUTSIDE = "../" + "shared"  # the brief's folder beside the repository (spelled so this file does not match)
CITING = ("src", "pipelines", "transforms", "sql", "expectations", "tests", "bench", "docs")


def _texts(*suffixes: str):
    for folder in CITING:
        for path in (REPO / folder).rglob("*"):
            if path.suffix in suffixes and "__pycache__" not in path.parts:
                yield path, path.read_text(encoding="utf-8")


def test_the_readme_is_short_and_nothing_points_outside_the_repository():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 200
    outside = [
        str(path.relative_to(REPO))
        for path, text in [(REPO / "README.md", readme), (REPO / "DESIGN.md", (REPO / "DESIGN.md").read_text())]
        + list(_texts(".md", ".py", ".sql", ".json", ".toml", ".ipynb"))
        if path != Path(__file__) and OUTSIDE in text
    ]
    assert outside == [], outside


def test_every_design_section_the_code_cites_exists():
    design = (REPO / "DESIGN.md").read_text(encoding="utf-8")
    sections = set(re.findall(r"^#{2,3} (\d+(?:\.\d+)?)\.? ", design, re.M))
    assert {"1", "2", "3", "4", "4.1", "4.9", "5"} <= sections
    cited = {}
    for path, text in _texts(".py", ".sql", ".json", ".md"):
        for number in re.findall(r"DESIGN §(\d+(?:\.\d+)?)", text):
            cited.setdefault(number, str(path.relative_to(REPO)))
    missing = {number: where for number, where in cited.items() if number not in sections}
    assert cited and missing == {}, missing


def test_the_readme_links_resolve():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    links = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", readme)
    assert links
    assert [link for link in links if not link.startswith("http") and not (REPO / link).exists()] == []
