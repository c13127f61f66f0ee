"""Shared fixtures: real databases (SQLite and PostgreSQL), real Redis, real git repositories.

A test that needs a component that is missing skips with the reason; with
``FORGE_CI_REQUIRE_ALL=1`` (set by .ci/run) that skip is a failure instead.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url
from sqlalchemy.orm import Session

from forge_ci.db import Database, create_db_engine
from forge_ci.migrations import upgrade
from forge_ci.settings import Settings, load_settings
from forge_ci_testing import redis as testing_redis
from tests.postgres_pool import PostgresDatabases

REPO_ROOT = Path(__file__).resolve().parents[1]
REQUIRE_ALL = os.environ.get("FORGE_CI_REQUIRE_ALL") == "1"


def need(reason: str) -> None:
    """Skip for a missing component, or fail when every component is required."""
    if REQUIRE_ALL:
        pytest.fail(f"required component missing (FORGE_CI_REQUIRE_ALL=1): {reason}")
    pytest.skip(reason)


def shared_dir() -> Path:
    """The project's shared/ folder (beside the checkout), or FORGE_CI_SHARED_DIR."""
    configured = os.environ.get("FORGE_CI_SHARED_DIR")
    return Path(configured) if configured else REPO_ROOT.parent / "shared"


def action_bundle(name: str) -> Path:
    """``shared/actions/<name>.bundle``, a real upstream action (shared/actions/README.md).

    A missing bundle is a missing component: a skip, or a failure with FORGE_CI_REQUIRE_ALL=1.
    """
    bundle = shared_dir() / "actions" / f"{name}.bundle"
    if not bundle.exists():
        need(f"{bundle} is missing (the real actions: see shared/actions/README.md)")
    return bundle


# --- PostgreSQL ---------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def postgres_admin_url() -> str:
    url = os.environ.get("FORGE_CI_TEST_POSTGRES_URL")
    if not url:
        need(
            "PostgreSQL not configured: FORGE_CI_TEST_POSTGRES_URL is unset "
            "(deploy/run-tests sets it)"
        )
    assert url is not None
    try:
        engine = create_engine(url)
        with engine.connect() as conn:
            conn.execute(text("select 1"))
        engine.dispose()
    except Exception as exc:  # noqa: BLE001 - any failure means "not reachable"
        need(f"PostgreSQL not reachable at {make_url(url).render_as_string()}: {exc}")
    return url


@pytest.fixture(scope="session")
def postgres_databases(postgres_admin_url: str) -> Iterator[PostgresDatabases]:
    databases = PostgresDatabases(postgres_admin_url)
    yield databases
    databases.drop_all()


# --- SQLite template ----------------------------------------------------------------------------


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("sqlite-template") / "template.db"
    engine = create_db_engine(f"sqlite:///{path}")
    upgrade(engine)
    # Outside any transaction: a checkpoint cannot run inside one.
    connection = engine.raw_connection()
    try:
        connection.driver_connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # type: ignore[union-attr]
    finally:
        connection.close()
    engine.dispose()
    return path


# --- Databases per test -------------------------------------------------------------------------


@pytest.fixture(params=["sqlite", "postgres"])
def db_kind(request: pytest.FixtureRequest) -> str:
    kind: str = request.param
    return kind


def _new_db_url(
    kind: str, migrated: bool, tmp_path: Path, request: pytest.FixtureRequest
) -> Iterator[str]:
    if kind == "sqlite":
        path = tmp_path / "forge-ci.db"
        if migrated:
            shutil.copyfile(request.getfixturevalue("sqlite_template"), path)
        yield f"sqlite:///{path}"
        return
    databases: PostgresDatabases = request.getfixturevalue("postgres_databases")
    url = databases.create(migrated)
    yield url
    # Dropped with its test, not all at the session's end: hundreds of drops there would be
    # charged to the last test's timeout.
    databases.drop(url)


@pytest.fixture
def db_url(db_kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[str]:
    """A migrated, empty database of each kind."""
    yield from _new_db_url(db_kind, True, tmp_path, request)


@pytest.fixture
def empty_db_url(db_kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[str]:
    """A database of each kind with no schema at all."""
    yield from _new_db_url(db_kind, False, tmp_path, request)


@pytest.fixture
def sqlite_db_url(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[str]:
    """A migrated SQLite database, for tests where the database kind does not matter."""
    yield from _new_db_url("sqlite", True, tmp_path, request)


# --- Settings and sessions ----------------------------------------------------------------------


def make_settings(data_dir: Path, database_url: str, **extra: str) -> Settings:
    # No test reaches https://github.com: upstream action sources are loopback or file:// URLs
    # a test names itself.
    env = {
        "FORGE_CI_DATA_DIR": str(data_dir),
        "FORGE_CI_DATABASE_URL": database_url,
        "FORGE_CI_ACTION_SOURCES": "none",
        **extra,
    }
    return load_settings(env=env)


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    path = tmp_path / "data"
    path.mkdir()
    return path


@pytest.fixture
def settings(data_dir: Path, db_url: str) -> Settings:
    from forge_ci.cli.setup import ensure_layout

    value = make_settings(data_dir, db_url)
    ensure_layout(value)
    return value


@pytest.fixture
def database(settings: Settings) -> Iterator[Database]:
    db = Database(settings)
    yield db
    db.dispose()


@pytest.fixture
def session(database: Database) -> Iterator[Session]:
    with database.session() as s:
        yield s


# --- Redis --------------------------------------------------------------------------------------


class RedisServer(testing_redis.RedisServer):
    """The support package's Redis; a missing redis-server skips the test (see ``need``)."""

    def __init__(self, directory: Path) -> None:
        try:
            super().__init__(directory)
        except LookupError as exc:
            need(str(exc))


@pytest.fixture
def own_signal_handlers() -> Iterator[None]:
    """For code that installs SIGTERM/SIGINT handlers (or ignores them) in the test process:
    put pytest's back afterwards, or every later child process would inherit them."""
    saved = {signum: signal.getsignal(signum) for signum in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for signum, handler in saved.items():
            signal.signal(signum, handler)


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    server = RedisServer(tmp_path_factory.mktemp("redis"))
    server.start()
    yield server
    server.stop()


@pytest.fixture
def redis_url(redis_server: RedisServer) -> str:
    """A Redis URL with an empty database for this test."""
    if redis_server.process is None or redis_server.process.poll() is not None:
        redis_server.start()
    redis_server.flush()
    return redis_server.url


# --- Docker -------------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def docker_engine() -> None:
    """A reachable Docker engine, or a skip naming what is missing (deploy/start-dockerd)."""
    from forge_ci.errors import Unavailable
    from worker.provider.containers import DockerDriver

    if shutil.which("docker") is None:
        need("Docker engine not reachable: the docker CLI is not installed")
    try:
        with DockerDriver("probe") as engine:
            engine.ping()
    except Unavailable as exc:
        reason = str(exc)
        if not reason.startswith("Docker engine not reachable"):
            reason = f"Docker engine not reachable: {reason}"
        need(f"{reason} (start one with deploy/start-dockerd)")


@pytest.fixture(scope="session")
def runner_image(docker_engine: None) -> str:
    """The runner image of this checkout, built (or found up to date) once per session."""
    tag = os.environ.get("FORGE_CI_RUNNER_IMAGE") or "forge-ci-runner:latest"
    done = subprocess.run(
        [str(REPO_ROOT / "deploy" / "build-runner-image")],
        capture_output=True,
        text=True,
        timeout=1800,
        env={**os.environ, "FORGE_CI_RUNNER_IMAGE": tag},
        check=False,
    )
    if done.returncode != 0:
        pytest.fail(f"deploy/build-runner-image failed:\n{done.stderr}")
    return tag
