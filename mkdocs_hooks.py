"""MkDocs hook: the command-line reference page is generated from the installed ``fairmon`` command at build time,
so it can never drift from ``fairmon --help`` (Typer's own Markdown renderer, ``typer.cli.get_docs_for_click``)."""

from __future__ import annotations

import typer
from typer.cli import get_docs_for_click

MARKER = "<!-- fairmon-cli-reference -->"


def on_page_markdown(markdown: str, page, config, files) -> str:
    """Replace :data:`MARKER` with the help of every ``fairmon`` command, one section each."""
    if MARKER not in markdown:
        return markdown
    from fairmon.pipelines.faces.cli import app

    command = typer.main.get_command(app)
    ctx = typer.Context(command, info_name="fairmon")
    text = get_docs_for_click(obj=command, ctx=ctx, name="fairmon", indent=1, title="`fairmon`")
    return markdown.replace(MARKER, text.strip() + "\n")
