from __future__ import annotations

import pygit2
import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from forge_ci.accounts import create_user
from forge_ci.authz import Actor, Role, role_in
from forge_ci.errors import Conflict, InvalidInput, NotFound, PermissionDenied
from forge_ci.gitstore import repository_path
from forge_ci.models import Repository
from forge_ci.repos import create_repository, find_repository, grant, list_repositories, revoke
from forge_ci.settings import Settings

OPERATOR = Actor.operator()


def test_create_makes_a_bare_repository_with_deployment_hooks(
    session: Session, settings: Settings
) -> None:
    create_user(session, OPERATOR, "alice", None)
    repo = create_repository(session, settings, OPERATOR, "alice/demo")
    session.commit()
    path = repository_path(settings.repositories_dir, "alice", "demo")
    git = pygit2.Repository(str(path))
    assert git.is_bare
    assert git.config["core.hooksPath"] == str(settings.hooks_dir)
    assert git.config["transfer.hideRefs"] == "refs/forge-ci"
    assert git.head_is_unborn and git.references["HEAD"].target == "refs/heads/main"
    assert repo.full_name == "alice/demo"


@pytest.mark.parametrize(
    ("name", "error", "message"),
    [
        ("alice", InvalidInput, "expected OWNER/NAME"),
        ("alice/a/b", InvalidInput, "expected OWNER/NAME"),
        ("alice/.hidden", InvalidInput, "invalid repository name"),
        ("alice/x.git", InvalidInput, "end in .git"),
        ("alice/a..b", InvalidInput, "may not contain '..'"),
        ("alice/sp ace", InvalidInput, "invalid repository name"),
        ("nobody/demo", NotFound, "unknown user 'nobody'"),
    ],
)
def test_bad_names_and_unknown_owners_are_refused(
    session: Session, settings: Settings, name: str, error: type[Exception], message: str
) -> None:
    create_user(session, OPERATOR, "alice", None)
    with pytest.raises(error, match=message):
        create_repository(session, settings, OPERATOR, name)
    assert list(settings.repositories_dir.rglob("*.git")) == []


def test_duplicates_are_refused_and_a_failed_insert_leaves_no_directory(
    session: Session, settings: Settings
) -> None:
    create_user(session, OPERATOR, "alice", None)
    create_repository(session, settings, OPERATOR, "alice/demo")
    with pytest.raises(Conflict, match="already exists"):
        create_repository(session, settings, OPERATOR, "alice/demo")
    # A database failure after the bare repository was made removes the directory again.
    session.add(Repository(owner_id=999_999, name="ghost"))
    with pytest.raises(Exception):  # noqa: B017 - the foreign key fails on flush
        create_repository(session, settings, OPERATOR, "alice/other")
    session.rollback()
    assert not repository_path(settings.repositories_dir, "alice", "other").exists()


def test_roles_are_ordered_and_unreadable_repositories_do_not_exist(
    session: Session, settings: Settings
) -> None:
    alice = create_user(session, OPERATOR, "alice", None)
    bob = create_user(session, OPERATOR, "bob", None)
    carol = create_user(session, OPERATOR, "carol", None)
    root = create_user(session, OPERATOR, "root1", None, is_admin=True)
    repo = create_repository(session, settings, OPERATOR, "alice/demo")
    assert Role.READ < Role.WRITE < Role.ADMIN < Role.OWNER
    assert role_in(session, Actor.for_user(alice), repo) == Role.OWNER
    assert role_in(session, Actor.for_user(root), repo) == Role.OWNER
    assert role_in(session, Actor.for_user(bob), repo) is None

    with pytest.raises(NotFound, match="repository alice/demo not found"):
        find_repository(session, Actor.for_user(bob), "alice/demo", Role.READ)
    with pytest.raises(NotFound, match="repository alice/nothing not found"):
        find_repository(session, Actor.for_user(bob), "alice/nothing", Role.READ)

    grant(session, OPERATOR, "alice/demo", "bob", Role.WRITE)
    assert find_repository(session, Actor.for_user(bob), "alice/demo", Role.WRITE) is repo
    with pytest.raises(
        PermissionDenied, match="admin access to alice/demo is required; you have write"
    ):
        find_repository(session, Actor.for_user(bob), "alice/demo", Role.ADMIN)
    with pytest.raises(PermissionDenied):  # a writer cannot grant
        grant(session, Actor.for_user(bob), "alice/demo", "carol", Role.READ)
    with pytest.raises(NotFound):  # a stranger cannot even see it to grant
        grant(session, Actor.for_user(carol), "alice/demo", "carol", Role.ADMIN)
    with pytest.raises(InvalidInput, match="owner role"):
        grant(session, OPERATOR, "alice/demo", "carol", Role.OWNER)
    with pytest.raises(Conflict, match="owns alice/demo"):
        grant(session, OPERATOR, "alice/demo", "alice", Role.READ)
    grant(session, OPERATOR, "alice/demo", "bob", Role.READ)  # replaces the role
    assert role_in(session, Actor.for_user(bob), repo) == Role.READ

    assert [r.full_name for r in list_repositories(session, Actor.for_user(bob))] == ["alice/demo"]
    assert list_repositories(session, Actor.for_user(carol)) == []
    revoke(session, OPERATOR, "alice/demo", "bob")
    assert list_repositories(session, Actor.for_user(bob)) == []
    with pytest.raises(NotFound, match="bob has no role"):
        revoke(session, OPERATOR, "alice/demo", "bob")

    # Deactivation removes access at once, even for the owner.
    alice.is_active = False
    session.flush()
    assert role_in(session, Actor.for_user(alice), repo) is None
    assert session.scalar(select(Repository.id)) == repo.id
