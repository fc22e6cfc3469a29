"""The parser every ``engram`` command shares: help that shows each option's default, and ``--version``."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Every option's help ends with its default, when it has one worth saying (None and off are said in words)."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        default = action.default
        if (
            action.option_strings
            and "%(default)" not in text
            and default is not argparse.SUPPRESS
            and default not in (None, False, [])
        ):
            text += " (default: %(default)s)"
        return text


class Parser(argparse.ArgumentParser):
    """An ``argparse`` parser whose sub-commands (made with ``add_parser``) share its help format."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(*args, **kwargs)


class Version(argparse.Action):
    """``--version``: read from the installed package only when asked."""

    def __init__(self, option_strings: Sequence[str], dest: str = argparse.SUPPRESS, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, default=argparse.SUPPRESS, nargs=0, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, *_: Any) -> None:
        from importlib.metadata import PackageNotFoundError, version

        try:
            found = version("engram")
        except PackageNotFoundError:
            found = "unknown (not installed)"
        print(f"engram {found}")
        parser.exit()
