"""File commands: what a step writes to ``$GITHUB_ENV``, ``$GITHUB_PATH``, ``$GITHUB_OUTPUT``,
``$GITHUB_STATE`` and ``$GITHUB_STEP_SUMMARY``.

Each step (each process of it) gets five fresh, empty files; after it ends the runner reads
them (at most 1 MiB each) with GitHub's syntax::

    NAME=value                 one line
    NAME<<DELIMITER            several lines, ended by a line that is exactly DELIMITER
    line 1
    line 2
    DELIMITER

``=`` before ``<<`` on a line means the one-line form. Empty lines are skipped; anything else
is an error that fails the step, naming the file and line. ``GITHUB_PATH`` holds one directory
per line, prepended to ``PATH`` for later steps (the last line written comes first).

``GITHUB_ENV`` names are free as in workflow ``env`` (``ruby-version``, ``a.b``; not ``=``,
control characters or over 255 characters), except reserved names: the executor's
``FORGE_CI_*`` and ``RUNNER_*``, GitHub's default ``GITHUB_*`` variables
(:mod:`forge_ci.protocol.envnames`), ``PATH`` (use
``GITHUB_PATH``), ``HOME``, ``TMPDIR``, ``CI``, and the variables that make a shell or the loader
run other code, as in workflow ``env``, except ``LD_LIBRARY_PATH``, which tool installers
(``actions/setup-python``) export. The values are text: nothing in them is evaluated.

``GITHUB_STATE`` (same syntax as ``GITHUB_OUTPUT``) is state a node action's ``pre`` or
``main`` script keeps for its later scripts, which get it as ``STATE_<name>``.
``GITHUB_STEP_SUMMARY`` is Markdown text, kept as the step's summary (shown as text).

Workflow commands printed to the log (``::set-output`` and the others) are applied by
:mod:`worker.runner.actions.sink`.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

from forge_ci.protocol.envnames import reserved_reason, unfit_reason

MAX_FILE_BYTES = 1024 * 1024
#: Total size of the names and values the job's steps added to the environment.
MAX_ENV_BYTES = 1024 * 1024
MAX_PATH_ENTRIES = 100
_OUTPUT_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_-]{0,99}\Z")
#: Besides the workflow rule (forge_ci.protocol.envnames): what the runner itself sets.
_RESERVED_NAMES = frozenset({"PATH", "HOME", "TMPDIR", "CI", "FORGE_CI"})


class FileCommandError(Exception):
    """A file command could not be applied; the message names the file and line."""


#: Reserved names a step may still set through ``GITHUB_ENV`` for later steps: a library
#: search path, which tool installers such as ``actions/setup-python`` export.
_GITHUB_ENV_ALLOWED = frozenset({"LD_LIBRARY_PATH"})


def reserved_env_name(name: str) -> bool:
    """Whether ``name`` belongs to the executor (compared without regard to case)."""
    return name.upper() in _RESERVED_NAMES or reserved_reason(name) is not None


def _read(path: str, what: str) -> str:
    """The file's text ("" when a step removed it), or FileCommandError."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        return ""
    except OSError as exc:
        raise FileCommandError(f"{what}: cannot read it: {exc.strerror}") from None
    with os.fdopen(fd, "rb") as handle:
        data = handle.read(MAX_FILE_BYTES + 1)
    if len(data) > MAX_FILE_BYTES:
        raise FileCommandError(f"{what}: larger than {MAX_FILE_BYTES} bytes")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise FileCommandError(f"{what}: not UTF-8 (byte {exc.start})") from None
    if "\x00" in text:
        raise FileCommandError(f"{what}: contains a NUL character")
    return text


def parse_assignments(text: str, what: str) -> list[tuple[str, str]]:
    """``NAME=value`` and ``NAME<<DELIMITER`` entries of ``text`` in order."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    entries: list[tuple[str, str]] = []
    index = 0
    while index < len(lines):
        number = index + 1
        line = lines[index].removesuffix("\r")
        index += 1
        if line == "":
            continue
        equals = line.find("=")
        heredoc = line.find("<<")
        if equals >= 0 and (heredoc < 0 or equals < heredoc):
            entries.append((line[:equals], line[equals + 1 :]))
            continue
        if heredoc < 0:
            raise FileCommandError(
                f"{what} line {number}: expected NAME=value or NAME<<DELIMITER, got {line[:80]!r}"
            )
        name, delimiter = line[:heredoc], line[heredoc + 2 :]
        if not delimiter:
            raise FileCommandError(f"{what} line {number}: the delimiter after << is empty")
        value: list[str] = []
        while True:
            if index >= len(lines):
                raise FileCommandError(
                    f"{what} line {number}: no line {delimiter[:80]!r} ends the value of "
                    f"{name[:80]!r}"
                )
            current = lines[index].removesuffix("\r")
            index += 1
            if current == delimiter:
                break
            value.append(current)
        entries.append((name, "\n".join(value)))
    return entries


def check_env_name(name: str, where: str) -> None:
    """Names are free as in workflow ``env`` (``ruby-version``, ``a.b``), not reserved."""
    unfit = unfit_reason(name)
    if unfit is not None:
        raise FileCommandError(f"{where}: {unfit}")
    if reserved_env_name(name) and name not in _GITHUB_ENV_ALLOWED:
        raise FileCommandError(f"{where}: {name} is reserved for the runner and cannot be set")


@dataclass
class Updates:
    """What one step's file commands change for the steps after it."""

    env: dict[str, str]
    path: list[str]
    outputs: dict[str, str]
    state: dict[str, str]
    summary: str


class CommandFiles:
    """The five files of one step, created empty in the runner's directory."""

    def __init__(self, directory: str, step_number: int) -> None:
        self.env = os.path.join(directory, f"env-{step_number}")
        self.path = os.path.join(directory, f"path-{step_number}")
        self.output = os.path.join(directory, f"output-{step_number}")
        self.state = os.path.join(directory, f"state-{step_number}")
        self.summary = os.path.join(directory, f"summary-{step_number}")

    def _all(self) -> tuple[str, ...]:
        return (self.env, self.path, self.output, self.state, self.summary)

    def create(self) -> None:
        for name in self._all():
            fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
            os.close(fd)

    def remove(self) -> None:
        for name in self._all():
            try:
                os.unlink(name)
            except FileNotFoundError:
                pass

    def read(self) -> Updates:
        env: dict[str, str] = {}
        for name, value in parse_assignments(_read(self.env, "GITHUB_ENV"), "GITHUB_ENV"):
            check_env_name(name, "GITHUB_ENV")
            env[name] = value
        outputs = _named_values(_read(self.output, "GITHUB_OUTPUT"), "GITHUB_OUTPUT")
        state = _named_values(_read(self.state, "GITHUB_STATE"), "GITHUB_STATE")
        path: list[str] = []
        for number, line in enumerate(_read(self.path, "GITHUB_PATH").split("\n"), start=1):
            entry = line.removesuffix("\r")
            if not entry:
                continue
            if ":" in entry:
                raise FileCommandError(
                    f"GITHUB_PATH line {number}: {entry[:80]!r} contains ':', which would add "
                    "several directories"
                )
            path.append(entry)
        if len(path) > MAX_PATH_ENTRIES:
            raise FileCommandError(f"GITHUB_PATH: more than {MAX_PATH_ENTRIES} directories")
        summary = _read(self.summary, "GITHUB_STEP_SUMMARY")
        return Updates(env, path, outputs, state, summary)


def _named_values(text: str, what: str) -> dict[str, str]:
    values: dict[str, str] = {}
    for name, value in parse_assignments(text, what):
        if not _OUTPUT_NAME.match(name):
            raise FileCommandError(
                f"{what}: {name[:80]!r} is not an output name (letters, digits, '_' "
                "and '-', not starting with a digit or '-', at most 100)"
            )
        values[name] = value
    return values
