"""Parsing exec requests: the forms git sends, and everything else refused."""

from __future__ import annotations

import pytest

from forge_ci.authz import Role
from forge_ci.errors import InvalidInput, NotFound
from ssh.commands import GitCommand, parse_command


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (b"git-receive-pack 'alice/demo.git'", GitCommand("git-receive-pack", "alice/demo")),
        (b"git-receive-pack '/alice/demo.git'", GitCommand("git-receive-pack", "alice/demo")),
        (b"git-upload-pack '/alice/demo'", GitCommand("git-upload-pack", "alice/demo")),
        (b"git-upload-pack alice/demo", GitCommand("git-upload-pack", "alice/demo")),
        (b"git upload-pack 'alice/x.y_1.git'", GitCommand("git-upload-pack", "alice/x.y_1")),
    ],
)
def test_the_forms_git_sends(raw: bytes, expected: GitCommand) -> None:
    assert parse_command(raw) == expected


def test_roles_and_subcommands() -> None:
    push, fetch = parse_command(b"git-receive-pack 'a/b'"), parse_command(b"git-upload-pack 'a/b'")
    assert (push.needed_role, push.git_subcommand) == (Role.WRITE, "receive-pack")
    assert (fetch.needed_role, fetch.git_subcommand) == (Role.READ, "upload-pack")


@pytest.mark.parametrize(
    "raw",
    [
        b"ls /",
        b"git-upload-archive 'alice/demo.git'",
        b"git-upload-pack",
        b"git-upload-pack 'alice/demo.git' --upload-pack=evil",
        b"git-receive-pack 'alice/demo.git'; rm -rf /",
        b"git-upload-pack 'unterminated",
        b"\xff\xfe",
        b"git-upload-pack '" + b"a" * 2000 + b"'",
    ],
)
def test_anything_else_is_refused(raw: bytes) -> None:
    with pytest.raises(InvalidInput):
        parse_command(raw)


@pytest.mark.parametrize(
    "path",
    ["alice", "alice/demo/extra.git", "../alice/demo", "alice/../demo", "Alice/demo", "~/x", ""],
)
def test_paths_that_name_no_repository_are_not_found(path: str) -> None:
    with pytest.raises(NotFound, match="not found"):
        parse_command(f"git-upload-pack '{path}'".encode())
