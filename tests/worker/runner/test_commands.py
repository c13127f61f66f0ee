"""The workflow-command parser against a simple reference (GitHub runner's ActionCommand)."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from worker.runner.actions.commands import (
    COMMANDS,
    Command,
    CommandStream,
    parse_line,
    valid_stop_token,
)

DATA = (("%0D", "\r"), ("%0A", "\n"), ("%25", "%"))
PROPERTY = (("%0D", "\r"), ("%0A", "\n"), ("%3A", ":"), ("%2C", ","), ("%25", "%"))
SPACES = "\t\n\v\f\r \x85\xa0\u1680" + "".join(map(chr, range(0x2000, 0x200B)))
SPACES += "\u2028\u2029\u202f\u205f\u3000"


def reference_unescape(text: str, mappings: tuple[tuple[str, str], ...]) -> str:
    for code, char in mappings:
        text = text.replace(code, char)
    return text


V1 = (("%3B", ";"), ("%0D", "\r"), ("%0A", "\n"), ("%5D", "]"), ("%25", "%"))


def reference_v1(line: str, registered: frozenset[str] = COMMANDS) -> Command | None:
    """ActionCommand.TryParse (the ``##[name]`` form), transcribed naively."""
    if "##[" not in line:
        return None
    start = line.index("##[")
    if "]" not in line[start:]:
        return None
    end = line.index("]", start)
    info = line[start + 3 : end]
    name = info.split(" ", 1)[0]
    if name not in registered:
        return None
    properties = {}
    if " " in info and info.index(" ") > 0:
        for pair in [p for p in info.split(" ", 1)[1].split(";") if p]:
            parts = [p for p in pair.split("=", 1) if p]
            if len(parts) == 2 and not pair.startswith("="):
                properties[parts[0].lower()] = reference_unescape(parts[1], V1)
    return Command(name, properties, reference_unescape(line[end + 1 :], V1))


def reference_parse(line: str, registered: frozenset[str] = COMMANDS) -> Command | None:
    return reference_v2(line, registered) or reference_v1(line, registered)


def reference_v2(line: str, registered: frozenset[str] = COMMANDS) -> Command | None:
    """ActionCommand.TryParseV2, transcribed naively."""
    message = line.lstrip(SPACES)
    if not message.startswith("::"):
        return None
    end = message.find("::", 2)
    if end < 0:
        return None
    info = message[2:end]
    name = info.split(" ", 1)[0]
    if name not in registered:
        return None
    properties = {}
    if " " in info and info.index(" ") > 0:
        for pair in [p for p in info.split(" ", 1)[1].strip(SPACES).split(",") if p]:
            parts = [p for p in pair.split("=", 1) if p]
            if len(parts) == 2 and "=" in pair and not pair.startswith("="):
                properties[parts[0].lower()] = reference_unescape(parts[1], PROPERTY)
    return Command(name, properties, reference_unescape(message[end + 2 :], DATA))


def reference_could_still_be_command(prefix: str) -> bool:
    """The documented rule for a partial line: it waits when it could still become a ``::``
    command, already holds ``##[`` or ends in ``#``; otherwise it is shown at once."""
    head = prefix.lstrip(SPACES)
    return head == "" or head.startswith(":") or "##[" in prefix or prefix.endswith("#")


def reference_stream(text: str, cuts: list[int] | tuple[int, ...] = ()) -> list[str | Command]:
    """Whole text, line by line; output lines merged. ``cuts`` are where the text arrived in
    pieces: a line of which some arrived prefix was shown at once is output, whatever follows."""
    result: list[str | Command] = []
    stop: str | None = None
    offset = 0
    for line in re.split("(?<=\n)", text):
        start, offset = offset, offset + len(line)
        body = line.removesuffix("\n").removesuffix("\r")
        if any(
            start < cut < offset and not reference_could_still_be_command(text[start:cut])
            for cut in cuts
        ):
            result.append(line)
            continue
        if stop is not None:
            if reference_v2(body, frozenset({stop})) is not None:
                stop = None
                result.append(Command("resume-commands"))
                continue
        else:
            command = reference_parse(body)
            if command is not None:
                if command.name == "stop-commands" and valid_stop_token(command.data):
                    stop = command.data
                result.append(command)
                continue
        if line:
            result.append(line)
    return merged(result)


def merged(items: list[str | Command]) -> list[str | Command]:
    out: list[str | Command] = []
    for item in items:
        if isinstance(item, str) and out and isinstance(out[-1], str):
            out[-1] += item
        elif item != "":
            out.append(item)
    return out


pieces = st.sampled_from(
    [
        ":",
        "::",
        " ",
        "\t",
        ",",
        "=",
        "%",
        "%25",
        "%0A",
        "%0D",
        "%3A",
        "%2C",
        "%0",
        "a",
        "Z",
        "\n",
        "\r\n",
        "\r",
        "\u3000",
        "error",
        "warning ",
        "add-mask",
        "stop-commands",
        "tok",
        "file=",
        "line=1",
        "set-output name=x",
        "é",
        "\x00",
        "##[",
        "]",
        ";",
        "#",
        "add-matcher",
        "%3B",
        "%5D",
    ]
)
lines = st.lists(pieces, max_size=12).map("".join)


@settings(max_examples=600, deadline=None)
@given(lines)
def test_parse_line_matches_the_reference(line: str) -> None:
    line = line.replace("\n", "")
    assert parse_line(line) == reference_parse(line)


@settings(max_examples=400, deadline=None)
@given(st.lists(lines, max_size=8), st.data())
def test_stream_matches_the_reference_whatever_the_chunks(
    parts: list[str], data: st.DataObject
) -> None:
    text = "".join(parts)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(text)), max_size=6)))
    stream = CommandStream()
    got: list[str | Command] = []
    start = 0
    for cut in [*cuts, len(text)]:
        got.extend(stream.feed(text[start:cut]))
        start = cut
    got.extend(stream.feed("", final=True))
    assert merged(got) == reference_stream(text, cuts)


def test_examples_from_the_github_documentation() -> None:
    command = parse_line(
        "::error file=app.js,line=1,col=5,endColumn=7,title=Bad::Missing semicolon"
    )
    assert command == Command(
        "error",
        {"file": "app.js", "line": "1", "col": "5", "endcolumn": "7", "title": "Bad"},
        "Missing semicolon",
    )
    assert parse_line("  ::add-mask::s%25e%0Acret") == Command("add-mask", {}, "s%e\ncret")
    assert parse_line("::set-output name=a%3Ab%2Cc::v%3A") == Command(
        "set-output", {"name": "a:b,c"}, "v%3A"
    )
    # Refusals: not commands, kept as output.
    assert parse_line("::unknown::x") is None
    assert parse_line("text ::error::x") is None
    assert parse_line("::error x") is None
    assert parse_line(":error::x") is None
    # The older form, anywhere in the line (setup-python prints ##[add-matcher]PATH).
    assert parse_line("##[add-matcher]/a/python.json") == Command(
        "add-matcher", {}, "/a/python.json"
    )
    assert parse_line("x ##[error file=a;line=2]b%5Dc") == Command(
        "error", {"file": "a", "line": "2"}, "b]c"
    )
    assert parse_line("##[unknown]x") is None and parse_line("##[error") is None


def test_stop_commands_and_resume() -> None:
    stream = CommandStream()
    out = list(
        stream.feed("::stop-commands::pause-1\n::error::not a command\n::pause-1::\n::warning::w\n")
    )
    assert out == [
        Command("stop-commands", {}, "pause-1"),
        "::error::not a command\n",
        Command("resume-commands"),
        Command("warning", {}, "w"),
    ]
    # Refused tokens: empty, or a command's name (processing stays on).
    stream = CommandStream()
    out = list(stream.feed("::stop-commands::error\n::error::x\n"))
    assert out[1] == Command("error", {}, "x") and stream.stop_token is None


def test_a_partial_line_waits_only_when_it_could_be_a_command() -> None:
    stream = CommandStream()
    assert list(stream.feed("progress 10%")) == ["progress 10%"]
    # The rest of a released line is output, however it looks.
    assert list(stream.feed("::error::x\n")) == ["::error::x\n"]
    assert list(stream.feed("::add-ma")) == []
    assert list(stream.feed("sk::x\n")) == [Command("add-mask", {}, "x")]
    assert list(stream.feed("::tail", final=True)) == ["::tail"]
    # The older form counts anywhere in a line, but only when the line's shown part held none
    # of it: a prefix shown at once keeps the rest of its line output (a documented difference).
    assert list(stream.feed(" ,")) == [" ,"]
    assert list(stream.feed("##[error]x\n")) == ["##[error]x\n"]
    assert list(stream.feed(" ,#")) == []
    assert list(stream.feed("#[error]x\n")) == [Command("error", {}, "x")]
