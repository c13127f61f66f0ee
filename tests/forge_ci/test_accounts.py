from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy.orm import Session

from forge_ci.accounts import (
    add_key,
    authenticate_password,
    create_user,
    list_keys,
    list_users,
    remove_key,
    user_for_key_blob,
)
from forge_ci.authz import Actor
from forge_ci.errors import Conflict, InvalidInput, NotFound, PermissionDenied
from forge_ci.sshkeys import parse_public_key
from forge_ci_testing.keys import fingerprint, make_key

OPERATOR = Actor.operator()


def test_users_are_created_with_argon2_hashes_and_can_log_in(session: Session) -> None:
    user = create_user(session, OPERATOR, "alice", "correct horse", is_admin=True)
    session.commit()
    assert user.password_hash is not None and user.password_hash.startswith("$argon2id$")
    assert authenticate_password(session, "alice", "correct horse") == user
    assert authenticate_password(session, "alice", "wrong horse!") is None
    assert authenticate_password(session, "nobody", "correct horse") is None
    user.is_active = False
    session.commit()
    assert authenticate_password(session, "alice", "correct horse") is None


def test_duplicate_and_invalid_user_names_are_refused(session: Session) -> None:
    create_user(session, OPERATOR, "alice", None)
    with pytest.raises(Conflict, match="user 'alice' already exists"):
        create_user(session, OPERATOR, "alice", None)
    for bad in ["Alice", "-x", "x-", "a--b", "a_b", "", "a" * 40, "admin", "al ice"]:
        with pytest.raises(InvalidInput, match="user name"):
            create_user(session, OPERATOR, bad, None)
    with pytest.raises(InvalidInput, match="at least 8 characters"):
        create_user(session, OPERATOR, "bob", "short")


def test_only_site_administrators_create_or_list_users(session: Session) -> None:
    alice = create_user(session, OPERATOR, "alice", None)
    with pytest.raises(PermissionDenied):
        create_user(session, Actor.for_user(alice), "bob", None)
    with pytest.raises(PermissionDenied):
        list_users(session, Actor.for_user(alice))
    assert [u.name for u in list_users(session, OPERATOR)] == ["alice"]


@pytest.mark.parametrize(
    ("key_type", "bits"), [("ed25519", None), ("ecdsa", 256), ("ecdsa", 521), ("rsa", 2048)]
)
def test_accepted_key_types_get_ssh_keygen_fingerprints(
    session: Session, tmp_path: Path, key_type: str, bits: int | None
) -> None:
    create_user(session, OPERATOR, "alice", None)
    private = make_key(tmp_path, key_type, bits)
    info = add_key(session, OPERATOR, "alice", Path(f"{private}.pub").read_text())
    assert info.fingerprint == fingerprint(private)
    assert info.comment == "id@test"
    blob = parse_public_key(Path(f"{private}.pub").read_text()).blob
    found = user_for_key_blob(session, blob)
    assert found is not None and found.name == "alice"


def test_weak_malformed_and_duplicate_keys_are_refused_with_the_reason(
    session: Session, tmp_path: Path
) -> None:
    create_user(session, OPERATOR, "alice", None)
    create_user(session, OPERATOR, "bob", None)
    weak = make_key(tmp_path, "rsa", 1024)
    with pytest.raises(InvalidInput, match="RSA key of 1024 bits is too weak"):
        add_key(session, OPERATOR, "alice", Path(f"{weak}.pub").read_text())
    with pytest.raises(InvalidInput, match="not valid base64"):
        add_key(session, OPERATOR, "alice", "ssh-ed25519 !!!notbase64")
    with pytest.raises(InvalidInput, match="malformed public key"):
        add_key(session, OPERATOR, "alice", "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIA==")
    with pytest.raises(InvalidInput, match="unsupported key type 'ssh-foo'"):
        add_key(session, OPERATOR, "alice", "ssh-foo AAAA")
    with pytest.raises(InvalidInput, match="DSA keys are refused"):
        add_key(session, OPERATOR, "alice", "ssh-dss AAAA")
    with pytest.raises(InvalidInput, match="exactly one public key line"):
        add_key(session, OPERATOR, "alice", "")
    good = make_key(tmp_path)
    text = Path(f"{good}.pub").read_text()
    add_key(session, OPERATOR, "alice", text)
    with pytest.raises(Conflict, match="already registered to this user"):
        add_key(session, OPERATOR, "alice", text)
    with pytest.raises(Conflict, match="already registered to another user"):
        add_key(session, OPERATOR, "bob", text)
    with pytest.raises(NotFound, match="unknown user 'carol'"):
        add_key(session, OPERATOR, "carol", text)


def test_keys_are_listed_and_removed_by_fingerprint_or_id(session: Session, tmp_path: Path) -> None:
    alice = create_user(session, OPERATOR, "alice", None)
    bob = create_user(session, OPERATOR, "bob", None)
    one = add_key(
        session, OPERATOR, "alice", Path(f"{make_key(tmp_path, name='a')}.pub").read_text()
    )
    two = add_key(session, OPERATOR, "bob", Path(f"{make_key(tmp_path, name='b')}.pub").read_text())
    assert [k.user for k in list_keys(session, OPERATOR)] == ["alice", "bob"]
    assert [k.fingerprint for k in list_keys(session, Actor.for_user(alice), "alice")] == [
        one.fingerprint
    ]
    with pytest.raises(PermissionDenied):
        list_keys(session, Actor.for_user(alice), "bob")
    with pytest.raises(NotFound):  # someone else's key does not exist for alice
        remove_key(session, Actor.for_user(alice), two.fingerprint)
    remove_key(session, Actor.for_user(bob), two.fingerprint)
    remove_key(session, OPERATOR, str(one.id))
    assert list_keys(session, OPERATOR) == []
    with pytest.raises(InvalidInput):
        remove_key(session, OPERATOR, "md5:whatever")
