"""The secret and variable stores on both databases: names, limits, versions, scope, audit,
sealing (a database copy without the key file holds no value) and key rotation."""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select
from sqlalchemy.engine import make_url

from forge_ci.db import Database
from forge_ci.errors import Conflict, InvalidInput, NotFound, PermissionDenied
from forge_ci.models import RepositorySecret, SettingsAudit
from forge_ci.secrets.policy import open_secret, variables_for
from forge_ci.secrets.rotation import rotate_key
from forge_ci.secrets.rules import MAX_SECRETS, SECRET, VARIABLE
from forge_ci.secrets.sealing import Keyring, SealingKeyError
from forge_ci.secrets.store import (
    audit_log,
    delete_entry,
    list_entries,
    set_secret,
    set_variable,
)
from forge_ci.settings import Settings
from tests.forge_ci.secrets.conftest import OPERATOR, PUBLISH, REPOSITORY, People

VALUE = "tok-9f1c2e7a-credential-value"


def put(
    database: Database,
    settings: Settings,
    actor: Any,
    name: str,
    value: str | None,
    version: str = "0",
    branch: str = "main",
    workflow: str = PUBLISH,
) -> Any:
    with database.session() as session:
        entry = set_secret(
            session,
            settings,
            actor,
            REPOSITORY,
            name,
            branch=branch,
            workflow_path=workflow,
            value=value,
            version=version,
        )
        session.commit()
        return entry


def current(database: Database, settings: Settings, name: str) -> str | None:
    with database.session() as session:
        repository_id = session.scalar(select(RepositorySecret.repository_id).limit(1))
        assert repository_id is not None
        return open_secret(session, Keyring.load(settings.sealing_key_path), repository_id, name)


def test_versions_survive_deletion_and_recreation(
    database: Database, settings: Settings, people: People
) -> None:
    created = put(database, settings, people.alice, "deploy_token", VALUE)
    assert (created.name, created.version, created.value) == ("DEPLOY_TOKEN", 1, None)
    # Creating it again with version 0 is refused: it exists.
    with pytest.raises(Conflict, match="already exists .version 1"):
        put(database, settings, people.alice, "DEPLOY_TOKEN", "other")
    # Updating without a value keeps the value and changes only the scope.
    moved = put(database, settings, people.alice, "Deploy_Token", None, "1", branch="dev")
    assert (moved.version, moved.branch) == (2, "dev")
    assert current(database, settings, "DEPLOY_TOKEN") == VALUE
    with pytest.raises(Conflict, match="at version 2, not 1"):
        put(database, settings, people.alice, "DEPLOY_TOKEN", "stale", "1")
    with database.session() as session:
        deleted = delete_entry(session, people.alice, SECRET, REPOSITORY, "deploy_token", "2")
        session.commit()
    assert deleted.version == 3
    with database.session() as session:
        assert list_entries(session, people.alice, SECRET, REPOSITORY) == []
        with pytest.raises(NotFound):
            delete_entry(session, people.alice, SECRET, REPOSITORY, "DEPLOY_TOKEN", "3")
    with pytest.raises(Conflict, match="deleted at version 3"):
        put(database, settings, people.alice, "DEPLOY_TOKEN", "after delete", "2")
    again = put(database, settings, people.alice, "DEPLOY_TOKEN", "replacement")
    assert again.version == 4
    # A stale form from before the deletion cannot overwrite the replacement.
    for stale in ("1", "2", "3"):
        with pytest.raises(Conflict):
            put(database, settings, people.alice, "DEPLOY_TOKEN", "stale form", stale)
    assert current(database, settings, "DEPLOY_TOKEN") == "replacement"
    with database.session() as session:
        listed = list_entries(session, people.alice, SECRET, REPOSITORY)
        assert [e.as_json()["version"] for e in listed] == ["4"]
        assert "value" not in listed[0].as_json()
        audit = audit_log(session, people.alice, REPOSITORY)
    assert [(a.action, a.version) for a in reversed(audit)] == [
        ("create", 1),
        ("update", 2),
        ("delete", 3),
        ("create", 4),
    ]
    assert [a.value_changed for a in reversed(audit)] == [True, False, True, True]
    for row in audit:
        assert VALUE not in repr(row) and "replacement" not in repr(row)


@pytest.mark.parametrize(
    "name, message",
    [
        ("1TOKEN", "must not start with a digit"),
        ("TOK-EN", "ASCII letters"),
        ("github_token", "reserved prefix GITHUB_"),
        ("FORGE_CI_X", "reserved prefix FORGE_CI_"),
        ("runner_x", "reserved prefix RUNNER_"),
        ("A" * 101, "longer than 100"),
        ("", "ASCII letters"),
    ],
)
def test_names_are_checked(
    database: Database, settings: Settings, people: People, name: str, message: str
) -> None:
    with pytest.raises(InvalidInput, match=message):
        put(database, settings, people.alice, name, VALUE)


def test_values_scopes_and_limits(database: Database, settings: Settings, people: People) -> None:
    for value, message in (("", "empty"), ("x" * 16_385, "16385 bytes"), ("a\x00b", "NUL")):
        with pytest.raises(InvalidInput, match=message):
            put(database, settings, people.alice, "T", value)
    with pytest.raises(InvalidInput, match="needs a value"):
        put(database, settings, people.alice, "T", None)
    with pytest.raises(InvalidInput, match="branch nope does not exist"):
        put(database, settings, people.alice, "T", VALUE, branch="nope")
    for path in ("ci.yml", ".github/workflows/../x.yml", ".github/workflows/a/b.yml"):
        with pytest.raises(InvalidInput, match="directly under .github/workflows"):
            put(database, settings, people.alice, "T", VALUE, workflow=path)
    put(database, settings, people.alice, "BIG", "é" * 8192)  # 16,384 bytes exactly
    for number in range(1, MAX_SECRETS):
        put(database, settings, people.alice, f"S{number}", f"value {number}")
    with pytest.raises(InvalidInput, match="already has 64 secrets"):
        put(database, settings, people.alice, "ONE_TOO_MANY", VALUE)
    with database.session() as session:
        delete_entry(session, people.alice, SECRET, REPOSITORY, "S1", "1")
        session.commit()
    put(database, settings, people.alice, "ONE_TOO_MANY", VALUE)  # a deletion frees a place


def test_only_owners_and_admins_manage(
    database: Database, settings: Settings, people: People
) -> None:
    put(database, settings, people.alice, "T", VALUE)
    with pytest.raises(PermissionDenied):
        put(database, settings, people.writer, "W", VALUE)
    with database.session() as session:
        with pytest.raises(PermissionDenied):
            list_entries(session, people.reader, SECRET, REPOSITORY)
        with pytest.raises(PermissionDenied):
            delete_entry(session, people.writer, SECRET, REPOSITORY, "T", "1")
        with pytest.raises(NotFound):
            list_entries(session, people.alice, SECRET, "alice/other")
        assert [e.name for e in list_entries(session, OPERATOR, SECRET, REPOSITORY)] == ["T"]


def test_variables_are_versioned_and_scoped(
    database: Database, settings: Settings, people: People
) -> None:
    with database.session() as session:
        set_variable(
            session,
            settings,
            people.alice,
            REPOSITORY,
            "region",
            branch=None,
            workflow_path=None,
            value="eu-west",
            version="0",
        )
        set_variable(
            session,
            settings,
            people.alice,
            REPOSITORY,
            "CHANNEL",
            branch="main",
            workflow_path=PUBLISH,
            value="stable",
            version="0",
        )
        with pytest.raises(InvalidInput, match="both a branch and a workflow"):
            set_variable(
                session,
                settings,
                people.alice,
                REPOSITORY,
                "HALF",
                branch="main",
                workflow_path=None,
                value="x",
                version="0",
            )
        with pytest.raises(Conflict):
            set_variable(
                session,
                settings,
                people.alice,
                REPOSITORY,
                "REGION",
                branch=None,
                workflow_path=None,
                value="us",
                version="7",
            )
        session.commit()
        repository_id = session.scalar(select(SettingsAudit.repository_id).limit(1))
        assert repository_id is not None
        listed = list_entries(session, people.alice, VARIABLE, REPOSITORY)
        assert [(e.name, e.value, e.as_json()["value"]) for e in listed] == [
            ("CHANNEL", "stable", "stable"),
            ("REGION", "eu-west", "eu-west"),
        ]
        assert variables_for(session, repository_id, "refs/heads/main", PUBLISH) == {
            "CHANNEL": "stable",
            "REGION": "eu-west",
        }
        # Another branch or workflow, or a pull request ref: only the repository-wide ones.
        assert variables_for(session, repository_id, "refs/heads/dev", PUBLISH) == {
            "REGION": "eu-west"
        }
        assert variables_for(
            session, repository_id, "refs/heads/main", ".github/workflows/x.yml"
        ) == {"REGION": "eu-west"}
        assert variables_for(session, repository_id, "refs/pull/1/merge", PUBLISH) == {
            "REGION": "eu-west"
        }


def _database_bytes(database: Database, settings: Settings, tmp_path: Path) -> bytes:
    """Every byte of the database as a copy would hold it: the SQLite file (and WAL), or a
    pg_dump of the PostgreSQL database."""
    url = make_url(database.engine.url)
    if url.get_backend_name() == "sqlite":
        path = Path(str(url.database))
        return b"".join(p.read_bytes() for p in (path, Path(f"{path}-wal")) if p.exists())
    out = tmp_path / "dump.sql"
    env = {**os.environ, "PGPASSWORD": url.password or ""}
    subprocess.run(
        [
            "pg_dump",
            "-h",
            url.host or "127.0.0.1",
            "-p",
            str(url.port or 5432),
            "-U",
            url.username or "",
            "-f",
            str(out),
            url.database or "",
        ],
        env=env,
        check=True,
        timeout=120,
    )
    return out.read_bytes()


def test_the_database_alone_holds_no_value(
    database: Database, settings: Settings, people: People, tmp_path: Path
) -> None:
    put(database, settings, people.alice, "DEPLOY_TOKEN", VALUE)
    put(database, settings, people.alice, "DEPLOY_TOKEN", VALUE + "-v2", "1")
    dump = _database_bytes(database, settings, tmp_path)
    assert b"DEPLOY_TOKEN" in dump  # the dump is real: the name is there
    assert VALUE.encode() not in dump and (VALUE + "-v2").encode() not in dump
    # The key file is outside the database, private, and needed to read anything.
    mode = stat.S_IMODE(settings.sealing_key_path.stat().st_mode)
    assert mode == 0o600 and settings.sealing_key_path.parent == settings.data_dir
    assert current(database, settings, "DEPLOY_TOKEN") == VALUE + "-v2"
    key = settings.sealing_key_path.read_bytes()
    settings.sealing_key_path.unlink()
    with pytest.raises(SealingKeyError, match="does not exist"):
        current(database, settings, "DEPLOY_TOKEN")
    settings.sealing_key_path.write_bytes(Keyring(((("00000000"), b"\x01" * 32),)).render())
    with pytest.raises(SealingKeyError, match="does not open"):
        current(database, settings, "DEPLOY_TOKEN")
    settings.sealing_key_path.write_bytes(key)


def test_a_value_does_not_open_in_another_row(
    database: Database, settings: Settings, people: People
) -> None:
    put(database, settings, people.alice, "A", "value of a")
    put(database, settings, people.alice, "B", "value of b")
    with database.session() as session:
        rows = {r.name: r for r in session.scalars(select(RepositorySecret))}
        rows["B"].sealed = rows["A"].sealed
        session.commit()
    with pytest.raises(SealingKeyError):
        current(database, settings, "B")


def test_key_rotation_reseals_every_value(
    database: Database, settings: Settings, people: People
) -> None:
    put(database, settings, people.alice, "A", "value of a")
    put(database, settings, people.alice, "B", "value of b")
    before = Keyring.load(settings.sealing_key_path)
    with database.session() as session:
        old_sealed = {r.name: r.sealed for r in session.scalars(select(RepositorySecret))}
        rotation = rotate_key(session, settings, OPERATOR)
    assert rotation.resealed == 2 and rotation.key_id != before.current_id
    after = Keyring.load(settings.sealing_key_path)
    assert [k for k, _ in after.keys] == [rotation.key_id]  # the old key is gone
    assert stat.S_IMODE(settings.sealing_key_path.stat().st_mode) == 0o600
    assert current(database, settings, "A") == "value of a"
    assert current(database, settings, "B") == "value of b"
    with database.session() as session:
        for row in session.scalars(select(RepositorySecret)):
            assert row.sealed != old_sealed[row.name] and after.sealed_with_current(row.sealed)
        actions = [a.action for a in audit_log(session, OPERATOR, REPOSITORY)]
    assert actions[:2] == ["reseal", "reseal"]
    # The old key no longer opens anything stored now.
    with pytest.raises(SealingKeyError):
        settings.sealing_key_path.write_bytes(before.render())
        current(database, settings, "A")


def test_a_rotation_interrupted_before_its_commit_loses_nothing(
    database: Database, settings: Settings, people: People, monkeypatch: pytest.MonkeyPatch
) -> None:
    put(database, settings, people.alice, "A", "value of a")

    def crash(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError("killed before the commit")

    with database.session() as session:
        monkeypatch.setattr("sqlalchemy.orm.Session.commit", crash)
        with pytest.raises(RuntimeError):
            rotate_key(session, settings, OPERATOR)
        monkeypatch.undo()
        session.rollback()
    assert len(Keyring.load(settings.sealing_key_path).keys) == 2  # new in front, old kept
    assert current(database, settings, "A") == "value of a"
    with database.session() as session:
        rotate_key(session, settings, OPERATOR)  # running it again finishes the job
    assert len(Keyring.load(settings.sealing_key_path).keys) == 1
    assert current(database, settings, "A") == "value of a"


def test_a_rotation_killed_before_its_commit_loses_nothing(
    database: Database, settings: Settings, people: People
) -> None:
    """kill -9 of ``forge-ci secret rotate-key`` at the worst moment: every value re-sealed in
    the open transaction, the key file holding the new key in front of the old one."""
    import signal
    import sys
    import time

    put(database, settings, people.alice, "A", "value of a")
    put(database, settings, people.alice, "B", "value of b")
    env = {
        **os.environ,
        "FORGE_CI_DATA_DIR": str(settings.data_dir),
        "FORGE_CI_DATABASE_URL": settings.database_url,
        "FORGE_CI_TESTING": "1",
        "FORGE_CI_TEST_FAULTS": "pause-before-reseal-commit",
    }
    marker = settings.run_dir / "fault-pause-before-reseal-commit"
    child = subprocess.Popen(
        [sys.executable, "-m", "forge_ci", "secret", "rotate-key"],
        env=env,
        cwd=Path(__file__).resolve().parents[3],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        while not marker.exists():
            assert child.poll() is None, "the rotation ended before its pause"
            assert time.monotonic() < deadline, "the rotation never reached its pause"
            time.sleep(0.02)
        assert len(Keyring.load(settings.sealing_key_path).keys) == 2
        child.send_signal(signal.SIGKILL)
        child.wait(30)
    finally:
        if child.poll() is None:
            child.kill()
        marker.unlink(missing_ok=True)
    assert current(database, settings, "A") == "value of a"
    assert current(database, settings, "B") == "value of b"
    with database.session() as session:
        rotation = rotate_key(session, settings, OPERATOR)
    assert rotation.resealed == 2
    assert len(Keyring.load(settings.sealing_key_path).keys) == 1
    assert current(database, settings, "A") == "value of a"


def test_concurrent_changes_of_one_version_let_exactly_one_win(
    database: Database, settings: Settings, people: People
) -> None:
    """Eight writers update the same secret from the same listed version at once."""
    import threading

    put(database, settings, people.alice, "RACE", "start")
    results: list[str] = []
    barrier = threading.Barrier(8)

    def writer(number: int) -> None:
        barrier.wait()
        try:
            put(database, settings, people.alice, "RACE", f"writer {number}", "1")
            results.append(f"won {number}")
        except Conflict:
            results.append("conflict")

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    winners = [r for r in results if r.startswith("won")]
    assert len(results) == 8 and len(winners) == 1, results
    assert current(database, settings, "RACE") == f"writer {winners[0].split()[1]}"
    with database.session() as session:
        (entry,) = list_entries(session, people.alice, SECRET, REPOSITORY)
    assert entry.version == 2
