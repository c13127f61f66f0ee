"""The SSH-side command layer's rules as tables and properties (no server needed)."""

from __future__ import annotations

import shlex

import pytest
from hypothesis import given
from hypothesis import strategies as st

from forge_ci.coordinator.follow import LogPrinter, defused
from forge_ci.errors import Conflict, InvalidInput
from ssh.commands import is_git_command
from ssh.console.catalog import COMMANDS
from ssh.console.parser import Usage, parse, split_words
from ssh.console.slots import CommandSlots


def reference_defused(text: str) -> str:
    out = []
    for char in text:
        if char != "\t" and (ord(char) < 0x20 or ord(char) == 0x7F):
            out.append("^" + chr(ord(char) ^ 0x40))
        else:
            out.append(char)
    return "".join(out)


@given(st.text())
def test_defused_matches_the_reference(text: str) -> None:
    assert defused(text) == reference_defused(text)


@given(st.lists(st.text(), max_size=8))
def test_every_printed_line_is_prefixed_whole_and_free_of_controls(chunks: list[str]) -> None:
    lines: list[str] = []
    printer = LogPrinter(lines.append)
    for chunk in chunks:
        printer.add("job | ", 1, "step", "stdout", chunk)
    printer.flush()
    for line in lines:
        assert line.startswith("job | ")
        assert defused(line) == line  # nothing left to defuse: no ESC, CR, LF, BEL ...


@given(
    st.lists(
        st.text(st.characters(blacklist_categories=["Cs"], blacklist_characters="\x00")), max_size=6
    )
)
def test_words_survive_the_quoting_clients_use(words: list[str]) -> None:
    raw = shlex.join(words).encode()
    if len(raw) > 1024:
        with pytest.raises(InvalidInput, match="longer than 1024 bytes"):
            split_words(raw, 1024)
    else:
        assert split_words(raw, 1024) == words


@pytest.mark.parametrize(
    ("words", "git"),
    [
        (["git-upload-pack", "'a/b'"], True),
        (["git-upload-archive", "a/b"], True),  # git's, refused by the git parser
        (["git", "upload-pack", "a/b"], True),
        (["run", "list", "a/b"], False),
        (["gitk"], False),
        ([], False),
    ],
)
def test_which_requests_are_gits(words: list[str], git: bool) -> None:
    assert is_git_command(words) is git


@pytest.mark.parametrize(
    ("words", "message"),
    [
        (["ls"], "unknown command 'ls'"),
        (["run"], "unknown command 'run'"),
        (["run", "lis", "a/b"], "unknown command 'run lis'"),
        (["run", "list"], "the following arguments are required: OWNER/NAME"),
        (["run", "list", "a/b", "--limit", "x"], "argument --limit: invalid int value: 'x'"),
        (["run", "list", "a/b", "--lim", "3"], "unrecognized arguments: --lim 3"),
        (["workflows", "a/b", "pull", "on"], "argument which: invalid choice: 'pull'"),
        (["key", "remove"], "the following arguments are required: ID|FINGERPRINT"),
    ],
)
def test_refused_commands_name_the_problem(words: list[str], message: str) -> None:
    with pytest.raises(Usage) as refused:
        parse(words, COMMANDS)
    assert message in refused.value.message
    assert refused.value.usage


def test_accepted_commands_and_help() -> None:
    parsed = parse(["run", "logs", "a/b", "3", "--follow", "--job", "build"], COMMANDS)
    assert parsed.command.handler == "following.run_logs"
    assert (parsed.arguments.number, parsed.arguments.follow, parsed.arguments.job) == (
        3,
        True,
        "build",
    )
    assert parse([], COMMANDS).command.words == ("help",)
    assert parse(["secret", "set", "--help"], COMMANDS).wants_help
    dispatch = parse(
        ["run", "dispatch", "a/b", "--branch", "m", "--workflow", "w", "--input", "a=1"]
        + ["--input", "b=2"],
        COMMANDS,
    )
    assert dispatch.arguments.input == ["a=1", "b=2"]
    assert parse(["var", "list", "--repo", "a/b"], COMMANDS).arguments.kind == "var"


def test_slots_per_user() -> None:
    slots = CommandSlots(per_user=2)
    with slots.hold(1), slots.hold(1):
        with pytest.raises(Conflict, match="you already have 2 commands running"):
            with slots.hold(1):
                pass
        with slots.hold(2):  # another user's slots are their own
            assert (slots.running(1), slots.running(2)) == (2, 1)
    assert slots.running(1) == 0
    with pytest.raises(RuntimeError), slots.hold(1):
        raise RuntimeError  # a command that fails frees its slot too
    assert slots.running(1) == 0
