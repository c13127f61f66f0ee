"""A step's output on its way to the log: workflow commands are applied, the rest is logged.

Every process of a step (a ``run`` script, a node action's script, a composite action's steps)
writes through one :class:`StepSink` per process, which parses both streams with
:class:`~worker.runner.actions.commands.CommandStream` and does what the GitHub runner does:

    add-mask              the value goes to the server with the next log chunk; the server masks
                          it from then on (log, annotations, summaries, job outputs); not logged
    group / endgroup      ``##[group]TITLE`` / ``##[endgroup]`` in the log
    error/warning/notice  an annotation of the step (at most 10 of each level per step), and
                          ``##[error]MESSAGE`` in the log
    debug                 ``##[debug]MESSAGE`` in the log
    stop-commands         commands are off until ``::TOKEN::``
    add-matcher           accepted; problem matchers are not applied (a notice says so)
    set-output/save-state honoured, with GitHub's deprecation warning in the log
    set-env / add-path    refused as on GitHub (disabled commands), an error in the log
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Protocol

from forge_ci.protocol.api import (
    ANNOTATION_LEVELS,
    MAX_ANNOTATION_FIELD,
    MAX_ANNOTATION_MESSAGE,
    Annotation,
)
from worker.runner.actions.commands import Command, CommandStream

#: GitHub keeps 10 annotations of each level per step.
MAX_ANNOTATIONS_PER_LEVEL = 10
_DEPRECATED = (
    "The `{name}` command is deprecated and will be disabled soon. Please upgrade to using "
    "Environment Files. For more information see: https://github.blog/changelog/"
    "2022-10-11-github-actions-deprecating-save-state-and-set-output-commands/"
)
_DISABLED = (
    "The `{name}` command is disabled. Please upgrade to using Environment Files "
    "(forge-ci never runs it)."
)
_OUTPUT_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-")


class LogWriter(Protocol):
    def write(self, step_id: str, stream: str, text: str) -> None: ...

    def add_mask(self, value: str) -> None: ...


def _number(value: str) -> int:
    return int(value) if value.isascii() and value.isdigit() and len(value) <= 9 else 0


def annotation(command: Command) -> Annotation:
    """The annotation of an ``error``/``warning``/``notice`` command (fields cut to size)."""
    props = command.properties
    return Annotation(
        level=command.name,
        message=command.data[:MAX_ANNOTATION_MESSAGE],
        file=props.get("file", "")[:MAX_ANNOTATION_FIELD],
        title=props.get("title", "")[:MAX_ANNOTATION_FIELD],
        line=_number(props.get("line", "")),
        end_line=_number(props.get("endline", "")),
        col=_number(props.get("col", "")),
        end_column=_number(props.get("endcolumn", "")),
    )


@dataclass
class CommandEffects:
    """What a step's commands produced, for the runner to apply when the step ends."""

    outputs: dict[str, str] = field(default_factory=dict)
    state: dict[str, str] = field(default_factory=dict)
    annotations: list[Annotation] = field(default_factory=list)
    #: Annotations beyond the per-level limit, by level.
    dropped: dict[str, int] = field(default_factory=dict)
    notices: set[str] = field(default_factory=set)

    def annotate(self, item: Annotation) -> bool:
        kept = sum(1 for other in self.annotations if other.level == item.level)
        if kept >= MAX_ANNOTATIONS_PER_LEVEL:
            self.dropped[item.level] = self.dropped.get(item.level, 0) + 1
            return False
        self.annotations.append(item)
        return True


class StepSink:
    """Output of one process of a step (``log_id``: the step whose log it goes to)."""

    def __init__(self, writer: LogWriter, log_id: str, effects: CommandEffects) -> None:
        self.writer = writer
        self.log_id = log_id
        self.effects = effects
        self._streams = {"stdout": CommandStream(), "stderr": CommandStream()}

    def write(self, step_id: str, stream: str, text: str) -> None:
        self._apply(stream, self._streams[stream].feed(text))

    def close(self) -> None:
        for name, parser in self._streams.items():
            self._apply(name, parser.feed("", final=True))

    def _apply(self, stream: str, items: Iterable[str | Command]) -> None:
        for item in items:
            if isinstance(item, str):
                self.writer.write(self.log_id, stream, item)
            else:
                self._command(stream, item)

    def _log(self, stream: str, text: str) -> None:
        self.writer.write(self.log_id, stream, text + "\n")

    def _command(self, stream: str, command: Command) -> None:
        name, data = command.name, command.data
        if name == "add-mask":
            if data.strip():
                self.writer.add_mask(data)
        elif name in ("group", "endgroup", "debug"):
            self._log(stream, f"##[{name}]{data if name != 'endgroup' else ''}")
        elif name in ANNOTATION_LEVELS:
            self.effects.annotate(annotation(command))
            self._log(stream, f"##[{name}]{data}")
        elif name in ("add-matcher", "remove-matcher"):
            if name not in self.effects.notices:
                self.effects.notices.add(name)
                self._log(
                    "stderr",
                    f"forge-ci: ::{name}:: accepted; problem matchers are not applied by forge-ci",
                )
        elif name in ("set-output", "save-state"):
            key = command.properties.get("name", "")
            if not key or not set(key) <= _OUTPUT_NAME_CHARS or len(key) > 100:
                self._log("stderr", f"##[error]::{name}:: needs name=NAME (letters, digits, _ -)")
                return
            target = self.effects.outputs if name == "set-output" else self.effects.state
            target[key] = data
            self._log("stderr", "##[warning]" + _DEPRECATED.format(name=name))
        elif name in ("set-env", "add-path"):
            message = _DISABLED.format(name=name)
            self.effects.annotate(Annotation("error", message))
            self._log("stderr", f"##[error]{message}")
        # stop-commands, resume-commands and echo change nothing in the log.
