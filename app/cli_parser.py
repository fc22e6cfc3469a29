"""The parser every ``engram`` command shares: help that shows each option's default, ``--version``, and
sub-commands described only when the command line names them."""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

Describe = Callable[[argparse.ArgumentParser], None]

if TYPE_CHECKING:
    _SubParsers = argparse._SubParsersAction[argparse.ArgumentParser]
else:
    _SubParsers = argparse._SubParsersAction


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


class Commands(_SubParsers):
    """Sub-commands whose arguments may wait: ``add_parser(name, describe=...)`` lists the command at once (for
    ``--help``) and has ``describe`` add its arguments when the command line names it. Describing every command (and
    importing the modules that do) cost each run of ``engram`` about 5 ms of CPU."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._undescribed: dict[str, Describe] = {}

    def add_parser(self, name: str, *, describe: Describe | None = None, **kwargs: Any) -> argparse.ArgumentParser:
        parser = super().add_parser(name, **kwargs)
        if describe is not None:
            self._undescribed[name] = describe
        return parser

    def describe(self, name: str) -> None:
        describe = self._undescribed.pop(name, None)
        if describe is not None:
            describe(self.choices[name])

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any, *rest: Any) -> None:
        if values:
            self.describe(values[0])  # a name that is no command fails below, as before
        super().__call__(parser, namespace, values, *rest)


def sub_commands(parser: argparse.ArgumentParser, **kwargs: Any) -> Commands:
    """``parser.add_subparsers(**kwargs)``, whose commands may be described later (``Commands``)."""
    commands: Commands = parser.add_subparsers(action=Commands, **kwargs)  # type: ignore[assignment]
    return commands


def described_later(module: str, name: str) -> Describe:
    """The function ``name`` of ``module``, imported only when the command it describes is named."""

    def describe(parser: argparse.ArgumentParser) -> None:
        getattr(importlib.import_module(module), name)(parser)

    return describe


def describe_all(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Every command of ``parser`` described, at every level: the whole parser, for reading it rather than parsing."""
    for action in parser._actions:
        if isinstance(action, Commands):
            for name, sub in action.choices.items():
                action.describe(name)
                describe_all(sub)
    return parser


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
