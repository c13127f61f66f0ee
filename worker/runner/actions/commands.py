"""Workflow commands on a step's standard output, parsed as the GitHub runner parses them.

A line is a command when, after leading white space, it reads ``::NAME[ PROPERTIES]::DATA``
and ``NAME`` is a known command, or when it holds the older form ``##[NAME k=v;k=v]DATA``
(anywhere in the line, as the runner's ``TryParse`` finds it); anything else is output.
``PROPERTIES`` is ``key=value`` pairs separated by ``,`` (``;`` in the older form; keys ignore
case; a pair without ``=`` or with an empty side is dropped). Escapes are undone in this order,
one pass each: in data ``%0D`` ``%0A`` ``%25``; in property values ``%0D`` ``%0A`` ``%3A``
``%2C`` ``%25``; in the older form ``%3B`` ``%0D`` ``%0A`` ``%5D`` ``%25``.

``::stop-commands::TOKEN`` turns command processing off until a line ``::TOKEN::``; meanwhile
every other line is output, whatever it holds.

:class:`CommandStream` splits the text of one stream into lines across reads (a partial last line
waits for its end while it could still become a command; one that cannot is released at once,
and the rest of its line is output even if it holds ``##[``: live progress wins over the older
form in mid-line) and yields output text and :class:`Command` objects in order.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

COMMANDS = frozenset(
    {
        "add-mask",
        "group",
        "endgroup",
        "error",
        "warning",
        "notice",
        "debug",
        "stop-commands",
        "add-matcher",
        "remove-matcher",
        "set-output",
        "save-state",
        "set-env",
        "add-path",
        "echo",
    }
)
_DATA_ESCAPES = (("%0D", "\r"), ("%0A", "\n"), ("%25", "%"))
_PROPERTY_ESCAPES = (("%0D", "\r"), ("%0A", "\n"), ("%3A", ":"), ("%2C", ","), ("%25", "%"))
#: The older ``##[name key=value;key=value]data`` form (setup-python prints ``##[add-matcher]``).
_V1_ESCAPES = (("%3B", ";"), ("%0D", "\r"), ("%0A", "\n"), ("%5D", "]"), ("%25", "%"))
#: A line longer than this is output, not a command (and is not held back).
MAX_LINE = 1024 * 1024
#: What .NET's ``Trim`` removes: U+0009-U+000D, U+0085 and the Unicode space separators.
_WHITESPACE = (
    "\t\n\v\f\r \x85\xa0\u1680"
    + "".join(map(chr, range(0x2000, 0x200B)))
    + ("\u2028\u2029\u202f\u205f\u3000")
)


@dataclass(frozen=True)
class Command:
    name: str
    properties: dict[str, str] = field(default_factory=dict)
    data: str = ""


def unescape(text: str, escapes: tuple[tuple[str, str], ...]) -> str:
    """Undo ``escapes`` in one left-to-right pass (the same result as replacing each in turn)."""
    if "%" not in text:
        return text
    table = dict(escapes)
    out: list[str] = []
    index = 0
    while True:
        found = text.find("%", index)
        if found < 0:
            out.append(text[index:])
            return "".join(out)
        out.append(text[index:found])
        code = text[found : found + 3]
        if code in table:
            out.append(table[code])
            index = found + 3
        else:
            out.append("%")
            index = found + 1


def parse_line(line: str, registered: frozenset[str] = COMMANDS) -> Command | None:
    """The command of one line (without its line ending), or None when it is output."""
    command = _parse_v2(line, registered)
    if command is None and "##[" in line:
        command = _parse_v1(line, registered)
    return command


def _parse_v1(line: str, registered: frozenset[str]) -> Command | None:
    """``##[NAME k=v;k=v]DATA`` anywhere in the line (ActionCommand.TryParse)."""
    start = line.find("##[")
    end = line.find("]", start)
    if end < 0:
        return None
    head = _head(line[start + 3 : end], registered, ";", _V1_ESCAPES, strip=False)
    if head is None:
        return None
    return Command(head[0], head[1], unescape(line[end + 1 :], _V1_ESCAPES))


def _head(
    info: str,
    registered: frozenset[str],
    separator: str,
    escapes: tuple[tuple[str, str], ...],
    strip: bool,
) -> tuple[str, dict[str, str]] | None:
    """The name and properties of ``NAME k=v<separator>k=v``; None for an unknown name."""
    space = info.find(" ")
    name = info if space < 0 else info[:space]
    if name not in registered:
        return None
    properties: dict[str, str] = {}
    if space > 0:
        text = info[space + 1 :]
        for pair in (text.strip(_WHITESPACE) if strip else text).split(separator):
            key, sep, value = pair.partition("=")
            if sep and key and value:
                properties[key.lower()] = unescape(value, escapes)
    return name, properties


def _parse_v2(line: str, registered: frozenset[str]) -> Command | None:
    message = line.lstrip(_WHITESPACE)
    if not message.startswith("::"):
        return None
    end = message.find("::", 2)
    if end < 0:
        return None
    head = _head(message[2:end], registered, ",", _PROPERTY_ESCAPES, strip=True)
    if head is None:
        return None
    return Command(head[0], head[1], unescape(message[end + 2 :], _DATA_ESCAPES))


def valid_stop_token(token: str) -> bool:
    """A token that can end ``stop-commands``: not empty and not a command's name."""
    return bool(token) and token not in COMMANDS


class CommandStream:
    """Lines of one stream -> output text and commands, in order (see the module docstring)."""

    def __init__(self) -> None:
        self._partial = ""
        #: A partial line was released: the rest of that line is output, never a command.
        self._inside_line = False
        #: The token of ``::stop-commands::`` while processing is off.
        self.stop_token: str | None = None

    def _could_be_command(self, text: str) -> bool:
        head = text.lstrip(_WHITESPACE)
        if len(text) > MAX_LINE:
            return False
        return head == "" or head.startswith(":") or "##[" in text or text.endswith("#")

    def feed(self, text: str, final: bool = False) -> Iterator[str | Command]:
        """Output pieces and commands for ``text``; ``final`` releases a partial last line."""
        data = self._partial + text
        self._partial = ""
        start = 0
        while start < len(data):
            end = data.find("\n", start)
            if end < 0:
                rest = data[start:]
                if final:
                    if self._inside_line:
                        yield rest
                    else:
                        yield from self._line(rest, "")
                    self._inside_line = False
                elif not self._inside_line and self._could_be_command(rest):
                    self._partial = rest
                else:
                    self._inside_line = True
                    yield rest
                return
            if self._inside_line:
                self._inside_line = False
                yield data[start : end + 1]
            else:
                yield from self._line(data[start:end], "\n")
            start = end + 1
        if final:
            self._inside_line = False

    def _line(self, line: str, ending: str) -> Iterator[str | Command]:
        body = line[:-1] if line.endswith("\r") else line
        if len(body) <= MAX_LINE:
            if self.stop_token is not None:
                command = _parse_v2(body, frozenset({self.stop_token}))
                if command is not None:
                    self.stop_token = None
                    yield Command("resume-commands")
                    return
            else:
                command = parse_line(body)
                if command is not None:
                    if command.name == "stop-commands" and valid_stop_token(command.data):
                        self.stop_token = command.data
                    yield command
                    return
        if line or ending:
            yield line + ending
