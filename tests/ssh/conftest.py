"""A real ``forge-ci ssh`` (in a thread, or as a process for crash tests), real OpenSSH and git
clients, and a small world made through the core's use cases:

    alice  owns alice/demo          bob    may write to it
    carol  may read it              dave   has a key and nothing else
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from forge_ci.accounts import add_key, create_user
from forge_ci.authz import Actor, Role
from forge_ci.db import Database
from forge_ci.repos import create_repository, grant
from forge_ci.settings import Settings
from forge_ci_testing.git import GitClient
from forge_ci_testing.keys import make_key
from hooks.install import install_hooks
from ssh.server import SshServer

PEOPLE = ("alice", "bob", "carol", "dave")
MakeClient = Callable[..., GitClient]


@pytest.fixture(scope="session")
def keys(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """One ed25519 key per person (and one nobody registered), made once per test session."""
    directory = tmp_path_factory.mktemp("keys")
    return {name: make_key(directory, name=name) for name in (*PEOPLE, "nobody")}


@pytest.fixture
def ssh_settings(settings: Settings) -> Settings:
    """The test settings, listening on a free port, with the deployment's hooks installed."""
    value = dataclasses.replace(settings, ssh_listen=("127.0.0.1", 0), ssh_auth_timeout=5.0)
    install_hooks(value)
    return value


@pytest.fixture
def world(ssh_settings: Settings, database: Database, keys: dict[str, Path]) -> Settings:
    operator = Actor.operator()
    with database.session() as session:
        for name in PEOPLE:
            create_user(session, operator, name, None)
            add_key(session, operator, name, Path(f"{keys[name]}.pub").read_text())
        create_repository(session, ssh_settings, operator, "alice/demo")
        grant(session, operator, "alice/demo", "bob", Role.WRITE)
        grant(session, operator, "alice/demo", "carol", Role.READ)
        session.commit()
    return ssh_settings


def start_server(settings: Settings) -> tuple[SshServer, threading.Thread]:
    server = SshServer(settings)
    thread = threading.Thread(target=server.serve_forever, name="ssh-server", daemon=True)
    thread.start()
    return server, thread


@pytest.fixture
def server(world: Settings) -> Iterator[SshServer]:
    """``forge-ci ssh`` in a thread of the test process."""
    running, thread = start_server(world)
    yield running
    running.close(grace=10)
    thread.join(10)


@pytest.fixture
def client_for(tmp_path: Path, keys: dict[str, Path]) -> MakeClient:
    """``client_for(name, port)``: a GitClient for one person (``nobody``: an unknown key)."""

    def make(name: str, port: int, log_level: str = "ERROR") -> GitClient:
        return GitClient(tmp_path / "clients" / name, keys[name], port, log_level)

    return make
