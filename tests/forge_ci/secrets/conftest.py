"""Fixtures of the secret store tests: a repository with branches main and dev, on each database."""

from __future__ import annotations

from dataclasses import dataclass

import pygit2
import pytest

from forge_ci.accounts import create_user
from forge_ci.authz import Actor, Role
from forge_ci.db import Database
from forge_ci.gitstore import repository_path
from forge_ci.models import User
from forge_ci.repos import create_repository, grant
from forge_ci.settings import Settings

OPERATOR = Actor.operator()
REPOSITORY = "alice/app"
PUBLISH = ".github/workflows/publish.yml"


def commit_branches(settings: Settings, full_name: str, *branches: str) -> None:
    owner, name = full_name.split("/")
    git = pygit2.Repository(str(repository_path(settings.repositories_dir, owner, name)))
    signature = pygit2.Signature("Alice", "alice@example.com")
    tree = git.TreeBuilder().write()
    oid = git.create_commit(None, signature, signature, "first", tree, [])
    for branch in branches:
        git.references.create(f"refs/heads/{branch}", oid, force=True)


@dataclass
class People:
    alice: Actor
    writer: Actor
    reader: Actor


@pytest.fixture
def people(database: Database, settings: Settings) -> People:
    with database.session() as session:
        actors = {}
        for name in ("alice", "walter", "rita"):
            user: User = create_user(session, OPERATOR, name, None)
            session.flush()
            actors[name] = Actor.for_user(user)
        create_repository(session, settings, OPERATOR, REPOSITORY)
        grant(session, OPERATOR, REPOSITORY, "walter", Role.WRITE)
        grant(session, OPERATOR, REPOSITORY, "rita", Role.READ)
        session.commit()
    commit_branches(settings, REPOSITORY, "main", "dev")
    return People(actors["alice"], actors["walter"], actors["rita"])
