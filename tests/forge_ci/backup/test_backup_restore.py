"""``forge-ci backup`` / ``forge-ci restore`` on SQLite and PostgreSQL, with every refusal.

One installation is made through the real CLI (a user, a repository with a branch and a hidden
pin, a sealed secret), backed up, and restored into a second, empty one: the users, refs
(byte-identical, pins included) and the secret (opened with the restored key) are all back.
Restore refuses a non-empty data directory, a non-empty database, a damaged or added file, a
newer schema and the other database kind, before it writes anything.
"""

from __future__ import annotations

import json
import shutil
import threading
import time
from pathlib import Path

import pygit2
import pytest
from sqlalchemy import select

from forge_ci.backup.repositories import list_refs
from forge_ci.db import Database
from forge_ci.models import Repository
from forge_ci.secrets.policy import open_secret
from forge_ci.secrets.sealing import Keyring
from tests.conftest import make_settings
from tests.forge_ci.cli.test_operator_cli import Cli

PIN = "refs/forge-ci/pipelines/backup-test-pin"
#: ``forge-ci secret set`` of alice/app's TOKEN for the CI workflow on main, less the value file.
SET_TOKEN = (
    "secret",
    "set",
    "TOKEN",
    "--repo",
    "alice/app",
    "--branch",
    "main",
    "--workflow",
    ".github/workflows/ci.yml",
    "--version",
    "0",
    "--body-file",
)


def _commit(git_dir: Path, ref: str, message: str) -> str:
    repo = pygit2.Repository(str(git_dir))
    blob = repo.create_blob(message.encode())
    builder = repo.TreeBuilder()
    builder.insert("file.txt", blob, pygit2.GIT_FILEMODE_BLOB)
    signature = pygit2.Signature("Test", "test@example.org", 1_700_000_000, 0)
    parents = [repo.references[ref].target] if ref in repo.references else []
    oid = repo.create_commit(ref, signature, signature, message, builder.write(), parents)
    return str(oid)


def _second_database(db_kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> str:
    if db_kind == "sqlite":
        return f"sqlite:///{tmp_path / 'restored' / 'forge-ci.db'}"
    databases = request.getfixturevalue("postgres_databases")
    url: str = databases.create(migrated=False)
    request.addfinalizer(lambda: databases.drop(url))
    return url


@pytest.fixture
def original(tmp_path: Path, empty_db_url: str, capsys: pytest.CaptureFixture[str]) -> Cli:
    return _installation(Cli(tmp_path / "original", empty_db_url, capsys), tmp_path)


def _installation(cli: Cli, tmp_path: Path) -> Cli:
    cli.ok("init")
    cli.ok("user", "add", "alice", "--no-password")
    cli.ok("repo", "create", "alice/app")
    git_dir = cli.data_dir / "repositories" / "alice" / "app.git"
    head = _commit(git_dir, "refs/heads/main", "first")
    _commit(git_dir, "refs/heads/main", "second")
    pygit2.Repository(str(git_dir)).references.create(PIN, head)
    secret = tmp_path / "secret.txt"
    secret.write_text("s3cret-value")
    cli.ok(*SET_TOKEN, str(secret))
    return cli


def _open_token(cli: Cli) -> str | None:
    database = Database(make_settings(cli.data_dir, cli.database_url))
    try:
        with database.session(read_only=True) as session:
            repo_id = session.scalar(select(Repository.id))
            keyring = Keyring.load(cli.data_dir / "secrets.key")
            return open_secret(session, keyring, repo_id, "TOKEN")
    finally:
        database.dispose()


def test_backup_and_restore_bring_everything_back_and_refuse_what_they_must(
    original: Cli,
    tmp_path: Path,
    db_kind: str,
    request: pytest.FixtureRequest,
    capsys: pytest.CaptureFixture[str],
) -> None:
    backup = tmp_path / "backup"
    out = original.ok("backup", str(backup))
    assert "1 repositories" in out and "secrets.key" in out
    manifest = json.loads((backup / "manifest.json").read_text())
    refs = manifest["repositories"]["alice/app"]
    git_dir = original.data_dir / "repositories" / "alice" / "app.git"
    assert refs == list_refs(git_dir) and PIN in refs and refs["HEAD"] == "ref: refs/heads/main"
    assert manifest["database"] == ("sqlite" if db_kind == "sqlite" else "postgresql")
    assert "files/secrets.key" in manifest["files"]
    assert not list(tmp_path.glob("backup.partial-*"))
    # A backup never overwrites one.
    assert "not an empty directory" in original.refused("backup", str(backup))

    restored = Cli(tmp_path / "restored", _second_database(db_kind, tmp_path, request), capsys)
    # Damage: one byte of a repository file, a file added, a newer schema: all refused, and
    # nothing is written.
    for damage, expected in (
        ("flip", "checksum mismatch"),
        ("add", "which its manifest does not list"),
        ("schema", "is newer than this forge-ci"),
        ("missing", "is incomplete"),
    ):
        copy = tmp_path / f"damaged-{damage}"
        shutil.copytree(backup, copy)
        if damage == "flip":
            target = copy / "repositories" / "alice" / "app.git" / "HEAD"
            target.write_bytes(target.read_bytes().replace(b"main", b"mair"))
        elif damage == "add":
            (copy / "files" / "extra").write_text("x")
        elif damage == "missing":
            (copy / "files" / "secrets.key").unlink()
        else:
            data = json.loads((copy / "manifest.json").read_text())
            data["schema_revision"] = "9999_from_the_future"
            (copy / "manifest.json").write_text(json.dumps(data))
        assert expected in restored.refused("restore", str(copy))
        assert not restored.data_dir.exists() or not any(restored.data_dir.iterdir())
    # Into the original's (non-empty) database, with an empty data directory: refused.
    other = Cli(tmp_path / "other", original.database_url, capsys)
    refusal = other.refused("restore", str(backup))
    assert "not empty" in refusal or "already exists" in refusal
    assert not other.data_dir.exists()

    out = restored.ok("restore", str(backup))
    assert "restored 1 repositories" in out
    restored.ok("db", "check")
    assert "alice" in restored.ok("user", "list")
    restored_git = restored.data_dir / "repositories" / "alice" / "app.git"
    assert list_refs(restored_git) == refs
    config = pygit2.Repository(str(restored_git)).config
    assert config["core.hooksPath"] == str(restored.data_dir / "hooks")
    assert (restored.data_dir / "hooks").is_dir() and any((restored.data_dir / "hooks").iterdir())
    assert _open_token(restored) == "s3cret-value"
    for name in ("secrets.key", "secret_key", "ssh_host_ed25519_key"):
        assert (restored.data_dir / name).read_bytes() == (original.data_dir / name).read_bytes()
        assert (restored.data_dir / name).stat().st_mode & 0o777 == 0o600
    # Now that it is restored, a second restore finds the data directory in use.
    assert "is not empty" in restored.refused("restore", str(backup))


def test_restore_refuses_the_other_database_kind(
    original: Cli,
    tmp_path: Path,
    db_kind: str,
    capsys: pytest.CaptureFixture[str],
    request: pytest.FixtureRequest,
) -> None:
    backup = tmp_path / "backup"
    original.ok("backup", str(backup))
    if db_kind == "sqlite":
        databases = request.getfixturevalue("postgres_databases")
        url = databases.create(migrated=False)
        request.addfinalizer(lambda: databases.drop(url))
    else:
        url = f"sqlite:///{tmp_path / 'elsewhere' / 'forge-ci.db'}"
    target = Cli(tmp_path / "elsewhere", url, capsys)
    assert "restore into the same kind of database" in target.refused("restore", str(backup))


def test_backup_during_pushes_holds_only_whole_pushes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A writer moving a branch and a pin together under the repository lock (as a push and
    its pinning do) never has one half of its update in the backup without the other.
    (Repositories are copied the same way whatever the database: SQLite only.)"""
    from forge_ci.locks import repository_lock

    url = f"sqlite:///{tmp_path / 'original' / 'forge-ci.db'}"
    original = _installation(Cli(tmp_path / "original", url, capsys), tmp_path)

    git_dir = original.data_dir / "repositories" / "alice" / "app.git"
    settings = make_settings(original.data_dir, original.database_url)
    stop = threading.Event()
    written: list[str] = []

    def pusher() -> None:
        count = 0
        while not stop.is_set() and count < 300:
            count += 1
            time.sleep(0.002)
            with repository_lock(settings.locks_dir, 1, "alice/app", 30):
                oid = _commit(git_dir, "refs/heads/main", f"push {count}")
                pygit2.Repository(str(git_dir)).references.create(
                    f"refs/forge-ci/push-events/{count}", oid
                )
                written.append(oid)

    thread = threading.Thread(target=pusher)
    thread.start()
    try:
        manifests = []
        for number in range(2):
            backup = tmp_path / f"concurrent-{number}"
            original.ok("backup", str(backup))
            manifests.append(json.loads((backup / "manifest.json").read_text()))
    finally:
        stop.set()
        thread.join()
    assert len(written) > 2
    for number, manifest in enumerate(manifests):
        refs = manifest["repositories"]["alice/app"]
        events = {k: v for k, v in refs.items() if k.startswith("refs/forge-ci/push-events/")}
        latest = max(events, key=lambda k: int(k.rsplit("/", 1)[1]), default=None)
        if latest is not None:
            assert refs["refs/heads/main"] == events[latest]
        copy = pygit2.Repository(
            str(tmp_path / f"concurrent-{number}" / "repositories" / "alice" / "app.git")
        )
        for name, oid in refs.items():
            if name != "HEAD":
                assert copy.get(oid) is not None, name
