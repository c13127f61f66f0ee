"""Every command facing a broken installation: one stderr line naming what and the fix, exit 2.

A missing or unusable data directory, a missing SQLite file, an unreachable database and a
missing schema are the operator's to fix, never a traceback (the operator guide's promise).
The commands come from the click tree itself: a new command is tested here as soon as it
exists, and fails until it is classified in ``NEEDS`` with arguments that reach the database.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

import forge_ci.settings
from forge_ci.cli import command_tree, main
from forge_ci_testing.keys import make_key

#: What a command needs of the installation, and so which breakages it must answer.
DATABASE = "database"  # an installation with a current database
UPGRADE = "upgrade"  # a data directory and a reachable database (it makes the schema)
CREATES = "creates"  # makes the data directory itself, then the database (init, up)
DATA_DIR = "data-dir"  # a data directory, no database
#: Commands that need no installation, each with the reason.
NO_INSTALLATION = {
    "workflow plan": "reads a workflow file only",
    "workflow validate": "reads workflow files only",
    "provider run": "talks to a server over HTTP; its machine need not hold an installation",
    "restore": "makes a new installation from a backup, and refuses an existing one "
    "(tests/forge_ci/backup)",
}

TOKEN = "ab" * 32
# command -> (what it needs, arguments that get it past its own input checks). {token} and
# {key} are files this test writes.
NEEDS: dict[str, tuple[str, list[str]]] = {
    "backup": (DATABASE, ["{token}-backup"]),
    "db check": (DATABASE, []),
    "db upgrade": (UPGRADE, []),
    "events list": (DATABASE, ["alice/demo"]),
    "events resolve": (DATABASE, ["alice/demo", "1", "--pushed"]),
    "events show": (DATABASE, ["alice/demo", "1"]),
    "hooks install": (DATA_DIR, []),
    "init": (CREATES, []),
    "key add": (DATABASE, ["alice", "{key}"]),
    "key list": (DATABASE, []),
    "key remove": (DATABASE, ["1"]),
    "provider access": (DATABASE, ["local", "--scope", "all"]),
    "provider create": (DATABASE, ["--name", "p", "--token-file", "{token}", "--labels", "x"]),
    "provider ensure": (DATABASE, ["--name", "p", "--token-file", "{token}", "--labels", "x"]),
    "provider labels": (DATABASE, ["local", "--labels", "x"]),
    "provider list": (DATABASE, []),
    "provider pause": (DATABASE, ["local"]),
    "provider resume": (DATABASE, ["local"]),
    "provider revoke": (DATABASE, ["local"]),
    "repo create": (DATABASE, ["alice/demo"]),
    "repo grant": (DATABASE, ["alice/demo", "bob"]),
    "repo list": (DATABASE, []),
    "repo show": (DATABASE, ["alice/demo"]),
    "repo mirror": (DATABASE, ["actions/x", "--from", "file:///nonexistent"]),
    "repo push-workflows": (DATABASE, ["alice/demo", "on"]),
    "repo revoke": (DATABASE, ["alice/demo", "bob"]),
    "repo scheduled-workflows": (DATABASE, ["alice/demo", "on"]),
    "repo schedules": (DATABASE, ["alice/demo"]),
    "run cancel": (DATABASE, ["alice/demo", "1"]),
    "run dispatch": (DATABASE, ["alice/demo", "--branch", "main", "--workflow", "ci.yml"]),
    "run list": (DATABASE, ["alice/demo"]),
    "run logs": (DATABASE, ["alice/demo", "1"]),
    "run rerun": (DATABASE, ["alice/demo", "1"]),
    "run show": (DATABASE, ["alice/demo", "1"]),
    "run watch": (DATABASE, ["alice/demo"]),
    "secret audit": (DATABASE, ["--repo", "alice/demo"]),
    "secret delete": (DATABASE, ["X", "--repo", "alice/demo", "--version", "1"]),
    "secret list": (DATABASE, ["--repo", "alice/demo"]),
    "secret rotate-key": (DATABASE, []),
    "secret set": (
        DATABASE,
        ["X", "--repo", "alice/demo", "--branch", "main", "--workflow", "w", "--version", "1"],
    ),
    "ssh": (DATABASE, []),
    "up": (CREATES, []),
    "user add": (DATABASE, ["alice", "--no-password"]),
    "user list": (DATABASE, []),
    "var delete": (DATABASE, ["X", "--repo", "alice/demo", "--version", "1"]),
    "var list": (DATABASE, ["--repo", "alice/demo"]),
    "var set": (DATABASE, ["X", "--repo", "alice/demo", "--version", "1"]),
    "web": (DATABASE, []),
    "worker": (DATABASE, []),
}

UNREACHABLE_URL = "postgresql+psycopg://forge:hunter2@127.0.0.1:1/forge"


COMMANDS = sorted(" ".join(words) for words in command_tree())


class Broken:
    """One way an installation is broken: how to make it and what the message must say."""

    def __init__(
        self,
        name: str,
        applies: set[str],
        make: Callable[[Path, pytest.MonkeyPatch], None],
        says: list[str],
    ) -> None:
        self.name, self.applies, self.make, self.says = name, applies, make, says


def _data_dir(value: Path) -> Callable[[Path, pytest.MonkeyPatch], None]:
    def make(tmp: Path, env: pytest.MonkeyPatch) -> None:
        env.setenv("FORGE_CI_DATA_DIR", str(tmp / value))

    return make


def _unset(tmp: Path, env: pytest.MonkeyPatch) -> None:
    # What a newcomer meets: no FORGE_CI_DATA_DIR, and no /var/lib/forge-ci either.
    env.setattr(forge_ci.settings, "DEFAULT_DATA_DIR", str(tmp / "var-lib-forge-ci"))


def _file_instead(tmp: Path, env: pytest.MonkeyPatch) -> None:
    (tmp / "a-file").write_text("")
    env.setenv("FORGE_CI_DATA_DIR", str(tmp / "a-file"))


def _under_a_file(tmp: Path, env: pytest.MonkeyPatch) -> None:
    (tmp / "a-file").write_text("")
    env.setenv("FORGE_CI_DATA_DIR", str(tmp / "a-file" / "data"))


def _empty_dir(tmp: Path, env: pytest.MonkeyPatch) -> None:
    (tmp / "data").mkdir()
    env.setenv("FORGE_CI_DATA_DIR", str(tmp / "data"))


def _no_schema(tmp: Path, env: pytest.MonkeyPatch) -> None:
    _empty_dir(tmp, env)
    (tmp / "data" / "forge-ci.db").write_bytes(b"")  # an empty SQLite database


def _unreachable(tmp: Path, env: pytest.MonkeyPatch) -> None:
    _empty_dir(tmp, env)
    env.setenv("FORGE_CI_DATABASE_URL", UNREACHABLE_URL)


FIX_DATA_DIR = ["set FORGE_CI_DATA_DIR", "`forge-ci init`"]
BREAKAGES = [
    Broken(
        "data-dir-unset-and-default-missing",
        {DATABASE, UPGRADE, DATA_DIR},
        _unset,
        ["the data directory", "var-lib-forge-ci does not exist", *FIX_DATA_DIR],
    ),
    Broken(
        "data-dir-missing",
        {DATABASE, UPGRADE, DATA_DIR},
        _data_dir(Path("missing")),
        ["the data directory", "missing does not exist", *FIX_DATA_DIR],
    ),
    Broken(
        "data-dir-is-a-file",
        {DATABASE, UPGRADE, DATA_DIR},
        _file_instead,
        ["a-file is not a directory", *FIX_DATA_DIR],
    ),
    Broken(
        "data-dir-cannot-be-made",
        {DATABASE, UPGRADE, DATA_DIR, CREATES},
        _under_a_file,
        ["a-file/data", "Not a directory", "FORGE_CI_DATA_DIR"],
    ),
    Broken(
        "no-database-file",
        {DATABASE},
        _empty_dir,
        ["no forge-ci database at", "forge-ci.db", "`forge-ci init`", "FORGE_CI_DATA_DIR"],
    ),
    Broken(
        "database-unreachable",
        {DATABASE, UPGRADE, CREATES},
        _unreachable,
        ["cannot use the database", "127.0.0.1:1", "FORGE_CI_DATABASE_URL", "Connection refused"],
    ),
    Broken(
        "no-schema",
        {DATABASE},
        _no_schema,
        ["no forge-ci schema", "`forge-ci db upgrade`"],
    ),
]


def _cases() -> list[object]:
    cases = []
    for command in COMMANDS:
        if command in NO_INSTALLATION:
            continue
        needs = NEEDS.get(command, ("unclassified", []))[0]
        for broken in BREAKAGES:
            if needs == "unclassified" or needs in broken.applies:
                cases.append(pytest.param(command, broken, id=f"{command}:{broken.name}"))
    return cases


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    import os

    for name in list(os.environ):
        if name.startswith("FORGE_CI_"):
            monkeypatch.delenv(name)
    return monkeypatch


def test_every_command_is_classified() -> None:
    unclassified = set(COMMANDS) - set(NEEDS) - set(NO_INSTALLATION)
    assert not unclassified, f"add {sorted(unclassified)} to NEEDS or NO_INSTALLATION"
    assert not (set(NEEDS) | set(NO_INSTALLATION)) - set(COMMANDS), "stale entries"


@pytest.mark.timeout(60)
@pytest.mark.parametrize(("command", "broken"), _cases())
def test_a_broken_installation_is_one_line_naming_the_fix_and_exit_2(
    command: str,
    broken: Broken,
    tmp_path: Path,
    clean_env: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert command in NEEDS, f"classify {command!r} in NEEDS or NO_INSTALLATION"
    inputs = tmp_path / "inputs"
    inputs.mkdir()
    token = inputs / "token"
    token.write_text(TOKEN + "\n")
    token.chmod(0o600)
    key = make_key(inputs).with_suffix(".pub") if "{key}" in NEEDS[command][1] else None
    argv = [arg.format(token=token, key=key) for arg in [*command.split(), *NEEDS[command][1]]]
    broken.make(tmp_path, clean_env)

    code = main(argv)

    out, err = capsys.readouterr()
    lines = err.strip().splitlines()
    assert code == 2, (out, err)
    assert len(lines) == 1 and lines[0].startswith("forge-ci: "), err
    for fragment in broken.says:
        assert fragment in lines[0], lines[0]
    assert "hunter2" not in err  # a database password is never printed
