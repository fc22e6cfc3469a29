"""How every list command of ``engram`` prints: one JSON object per line (the default, for scripts and ``jq``), or
``--format table``, aligned columns for people. Light to import: the parser of every list command uses it."""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

FORMATS = ("json", "table")


def add_format_option(parser: argparse.ArgumentParser) -> None:
    """The ``--format`` option every list command takes."""
    parser.add_argument(
        "--format", choices=FORMATS, default="json", help="one JSON object per line, or an aligned table for people"
    )


def print_rows(rows: Iterable[Mapping[str, Any]], fmt: str, columns: Sequence[str]) -> None:
    """Print ``rows`` in the chosen format. JSON lines carry every field; the table shows ``columns``, in order."""
    if fmt == "json":
        for row in rows:
            print(json.dumps(row, ensure_ascii=False), flush=True)
        return
    cells = [[_cell(row.get(column)) for column in columns] for row in rows]
    header = [column.upper() for column in columns]
    widths = [max(len(text) for text in column) for column in zip(header, *cells, strict=False)]
    for line in [header, *cells]:
        print("  ".join(text.ljust(width) for text, width in zip(line, widths, strict=True)).rstrip())


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, list | tuple):
        return ",".join(_cell(item) for item in value)
    if isinstance(value, dict):
        return json.dumps(value, ensure_ascii=False)
    return str(value).replace("\n", " ")
