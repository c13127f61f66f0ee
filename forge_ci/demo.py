"""The demo behind ``forge-ci up --demo``: an account, a key and a repository to push to."""

from __future__ import annotations

import secrets
import subprocess
from collections.abc import Callable
from pathlib import Path

from sqlalchemy import select

from forge_ci.accounts import add_key, create_user
from forge_ci.authz import Actor
from forge_ci.db import Database
from forge_ci.models import Repository, User
from forge_ci.repos import create_repository
from forge_ci.settings import Settings

DEMO_USER = "demo"
DEMO_REPO = "demo/hello"


def ensure_demo_account(settings: Settings) -> tuple[Path, Path]:
    """Create the demo user, key and repository once; return (key path, password file)."""
    folder = settings.data_dir / "demo"
    folder.mkdir(mode=0o700, exist_ok=True)
    key = folder / "id_ed25519"
    password_file = folder / "password"
    if not key.exists():
        subprocess.run(
            ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "demo@forge-ci", "-f", str(key)],
            check=True,
            stdin=subprocess.DEVNULL,
        )
    if not password_file.exists():
        password_file.touch(mode=0o600)
        password_file.write_text(secrets.token_urlsafe(12) + "\n")
    database = Database(settings)
    try:
        with database.session() as session:
            operator = Actor.operator()
            if session.scalar(select(User).where(User.name == DEMO_USER)) is None:
                create_user(
                    session, operator, DEMO_USER, password_file.read_text().strip(), is_admin=True
                )
                add_key(session, operator, DEMO_USER, Path(f"{key}.pub").read_text())
            owner = session.scalar(select(User).where(User.name == DEMO_USER))
            exists = session.scalar(
                select(Repository).where(
                    Repository.owner == owner, Repository.name == DEMO_REPO.split("/")[1]
                )
            )
            if exists is None:
                create_repository(session, settings, operator, DEMO_REPO)
            session.commit()
    finally:
        database.dispose()
    return key, password_file


def run_demo(settings: Settings, started: list[str], echo: Callable[[str], None]) -> None:
    key, password_file = ensure_demo_account(settings)
    echo(f"demo user   {DEMO_USER} (password in {password_file})")
    echo(f"demo key    {key}")
    echo(f"demo repo   {DEMO_REPO}")
    if "ssh" in started:
        echo(
            f"push with   GIT_SSH_COMMAND='ssh -i {key} -o StrictHostKeyChecking=no' "
            f"git push {settings.ssh_url}/{DEMO_REPO}.git HEAD:main"
        )
    if "web" in started:
        echo(f"web         {settings.public_url}/")
