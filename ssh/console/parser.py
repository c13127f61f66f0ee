"""Parsing an SSH-side command: words from ``shlex`` (never a shell), then ``argparse``.

An unknown command or a bad argument raises :class:`Usage`, which the front door prints as one
``forge-ci: ...`` line naming the problem, then the usage of the command (or of all of them),
with exit status 2. ``argparse`` never prints or exits here: its ``error`` and ``exit`` are
turned into :class:`Usage`, and ``-h``/``--help`` is handled as the ``help`` command.
"""

from __future__ import annotations

import argparse
import shlex
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import NoReturn

from forge_ci.errors import InvalidInput

PROG = "ssh git@HOST"
AddArguments = Callable[[argparse.ArgumentParser], None]


@dataclass(frozen=True)
class Command:
    """One SSH-side command: its words, what it does, and its arguments."""

    words: tuple[str, ...]
    summary: str
    #: ``module.function`` in ``ssh.console`` that carries it out.
    handler: str
    add_arguments: AddArguments = field(default=lambda parser: None, compare=False)
    #: Site administrators only (the use cases check it; this only sorts the help).
    admin: bool = False
    #: Prints something worth a ``--json`` form.
    json: bool = True

    @property
    def name(self) -> str:
        return " ".join(self.words)

    def parser(self) -> argparse.ArgumentParser:
        parser = _Parser(
            prog=f"{PROG} {self.name}",
            add_help=False,
            allow_abbrev=False,
            description=self.summary,
            formatter_class=_wide,
        )
        self.add_arguments(parser)
        if self.json:
            parser.add_argument("--json", action="store_true", help="print JSON")
        parser.usage = " ".join(["%(prog)s", *_synopsis(parser)])
        return parser

    def usage(self) -> str:
        return self.parser().format_usage().removeprefix("usage: ").strip()


def _synopsis(parser: argparse.ArgumentParser) -> list[str]:
    """Arguments in the order people write them: positionals first, then the options."""
    words: list[str] = []
    options: list[str] = []
    for action in parser._actions:
        if not action.option_strings:
            if action.choices:
                words.append("|".join(str(c) for c in action.choices))
            else:
                words.append(str(action.metavar or action.dest))
                if action.nargs == "*":
                    words[-1] = f"[{words[-1]} ...]"
            continue
        flag = action.option_strings[0]
        if action.nargs == 0:
            options.append(f"[{flag}]")
            continue
        value = "|".join(action.choices) if action.choices else str(action.metavar)
        if isinstance(action, argparse._AppendAction):
            options.append(f"[{flag} {value} ...]")
        elif action.required:
            options.append(f"{flag} {value}")
        else:
            options.append(f"[{flag} {value}]")
    return words + options


def _wide(prog: str) -> argparse.HelpFormatter:
    # One usage line per command, whatever COLUMNS the server process was started with.
    return argparse.HelpFormatter(prog, width=200)


class Usage(Exception):
    """A command that cannot be parsed: ``message`` names the problem, ``usage`` the fix."""

    def __init__(self, message: str, usage: list[str]) -> None:
        super().__init__(message)
        self.message = message
        self.usage = usage


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise Usage(f"{self.prog.removeprefix(PROG + ' ')}: {message}", [self.format_usage()])

    def exit(self, status: int = 0, message: str | None = None) -> NoReturn:
        raise Usage(message or "cannot parse the command", [self.format_usage()])


@dataclass(frozen=True)
class Parsed:
    command: Command
    arguments: argparse.Namespace
    #: ``--help`` was asked for: show the command's help instead of running it.
    wants_help: bool = False


def split_words(raw: bytes, limit: int) -> list[str]:
    """The command string as words, as a POSIX shell would split it (nothing is expanded)."""
    if len(raw) > limit:
        raise InvalidInput(f"the command is longer than {limit} bytes")
    try:
        return shlex.split(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise InvalidInput("the command is not UTF-8 text") from None
    except ValueError as exc:  # "No closing quotation", "No escaped character"
        raise InvalidInput(f"the command cannot be split into words: {exc}") from None


def parse(words: Sequence[str], commands: Sequence[Command]) -> Parsed:
    """The command ``words`` name and its parsed arguments, or Usage."""
    by_words = {c.words: c for c in commands}
    if not words:
        return Parsed(by_words[("help",)], argparse.Namespace(topic=[], json=False))
    for length in (2, 1):
        command = by_words.get(tuple(words[:length]))
        if command is not None:
            rest = list(words[length:])
            if "-h" in rest or "--help" in rest:
                return Parsed(command, argparse.Namespace(), wants_help=True)
            return Parsed(command, command.parser().parse_args(rest))
    group = [c for c in commands if c.words[0] == words[0]]
    if group:
        what = " ".join(words[:2])
        raise Usage(f"unknown command {what!r}", [c.usage() for c in group])
    raise Usage(
        f"unknown command {words[0]!r}; `{PROG} help` lists the commands",
        [c.usage() for c in commands],
    )


def help_lines(commands: Sequence[Command], topic: Sequence[str] = ()) -> list[str]:
    """The reference ``help`` prints: every command (of ``topic``, if given) and its summary."""
    chosen = [c for c in commands if tuple(topic) == c.words[: len(topic)]]
    if not chosen:
        raise InvalidInput(f"no command {' '.join(topic)!r}; `{PROG} help` lists them")
    lines = []
    for admin in (False, True):
        group = [c for c in chosen if c.admin == admin]
        if not group:
            continue
        lines.append("Site administrators:" if admin else "Commands:")
        for command in group:
            lines.append(f"  {command.usage()}")
            lines.append(f"      {command.summary}")
    lines.append("Add --json for machine-readable output. Exit status: 0 success, 1 a run that")
    lines.append("did not succeed, 2 a refused command (one line on stderr says why).")
    return lines
