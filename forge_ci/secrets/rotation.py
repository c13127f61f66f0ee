"""Key rotation: a new current key, every stored value re-sealed under it, the old keys dropped.

::

    key file: [new, old...]  (written, synced)  ──►  one transaction: every live secret
    opened with whichever key sealed it, sealed with the new one, audited ``reseal``; COMMIT
    ──►  key file: [new]

A crash before the commit leaves the old keys in the file, so every value still opens;
running the rotation again finishes it. Values already delivered to attempts are sealed under
their attempt credentials, not under this key, and are not touched.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.orm import Session

from forge_ci.authz import Actor
from forge_ci.models import RepositorySecret, SettingsAudit, utcnow
from forge_ci.secrets.sealing import Keyring, new_key, secret_context, write_key_file
from forge_ci.settings import Settings


@dataclass(frozen=True)
class Rotation:
    resealed: int
    key_id: str


def rotate_key(session: Session, settings: Settings, actor: Actor) -> Rotation:
    """Rotate the key file and re-seal every value; commits (the operator's command)."""
    path = settings.sealing_key_path
    old = Keyring.load(path)
    keyring = Keyring((new_key(), *old.keys))
    write_key_file(path, keyring)
    now = utcnow()
    rows = session.scalars(
        select(RepositorySecret)
        .where(RepositorySecret.deleted_at.is_(None))
        .order_by(RepositorySecret.id)
        .with_for_update()
    ).all()
    for row in rows:
        assert row.sealed is not None
        context = secret_context(row.repository_id, row.name)
        row.sealed = keyring.seal(context, keyring.open(context, row.sealed))
        session.add(
            SettingsAudit(
                repository_id=row.repository_id,
                kind="secret",
                name=row.name,
                action="reseal",
                version=row.version,
                scope=f"{row.branch} {row.workflow_path}",
                value_changed=False,
                actor_name=actor.name[:40],
                at=now,
            )
        )
    _hold_for_tests(settings, "pause-before-reseal-commit")
    session.commit()
    write_key_file(path, Keyring(keyring.keys[:1]))
    return Rotation(len(rows), keyring.current_id)


def _hold_for_tests(settings: Settings, name: str) -> None:
    """A crash test's pause point: wait while ``<run dir>/fault-NAME`` exists (testing only)."""
    if settings.test_fault(name) is None:
        return
    marker = settings.run_dir / f"fault-{name}"
    marker.write_text(str(os.getpid()))
    while marker.exists():
        time.sleep(0.01)
