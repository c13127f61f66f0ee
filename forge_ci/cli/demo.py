"""The demo behind ``forge-ci up --demo``: an account, a repository and a pipeline that runs.

::

    demo user (site admin), SSH key, repository demo/hello, push workflows on
      ──► a work tree in <data dir>/demo/hello with a small program and .github/workflows/ci.yml
      ──► commit, git push over SSH (the real git and OpenSSH clients)
      ──► wait for the run ──► each job's conclusion and a few log lines, the web URL, and how
          to push more

The workflow is a small DAG: ``lint`` (its output ``greeting``) ──► ``test`` (a matrix of two
legs, each in its own container) ──► ``report``, which reads the output through ``needs``.
Without a provider the run stays queued; the demo says so instead of waiting.
"""

from __future__ import annotations

import os
import secrets
import shlex
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from sqlalchemy import func, select

from forge_ci import states
from forge_ci.accounts import add_key, create_user
from forge_ci.authz import Actor
from forge_ci.db import Database
from forge_ci.errors import ForgeCIError, NotFound, Unavailable
from forge_ci.models import Repository, Run, User
from forge_ci.repos import create_repository, set_push_workflows
from forge_ci.settings import Settings

DEMO_USER = "demo"
DEMO_REPO = "demo/hello"
#: How long the demo waits for the worker to create the run, and for the run to end.
RUN_APPEARS_SECONDS = 60.0
RUN_ENDS_SECONDS = 300.0
LOG_LINES_PER_JOB = 4

WORKFLOW = """\
name: demo
on:
  push:
    branches: [main]
jobs:
  lint:
    runs-on: [self-hosted, linux]
    outputs:
      greeting: ${{ steps.greet.outputs.greeting }}
    steps:
      - name: Compile
        run: python3 -m py_compile hello.py && echo "hello.py compiles"
      - id: greet
        name: Pick a greeting
        run: echo "greeting=$(python3 hello.py --greeting)" >> "$GITHUB_OUTPUT"
  test:
    needs: lint
    runs-on: [self-hosted, linux]
    strategy:
      matrix:
        name: [Ada, Grace]
    steps:
      - name: Greet ${{ matrix.name }}
        run: |
          python3 hello.py "${{ matrix.name }}" "${{ needs.lint.outputs.greeting }}"
          echo "test ${{ matrix.name }} ran as user $(id -u) in $PWD"
  report:
    needs: [lint, test]
    runs-on: [self-hosted, linux]
    steps:
      - name: Report
        run: echo "every test passed; lint chose '${{ needs.lint.outputs.greeting }}'"
"""

PROGRAM = """\
import sys

if sys.argv[1:] == ["--greeting"]:
    print("Hello")
else:
    name, greeting = sys.argv[1], sys.argv[2]
    print(f"{greeting}, {name}!")
"""

README = """\
# hello

The forge-ci demo repository. Push to main to run `.github/workflows/ci.yml`.
"""

Echo = Callable[[str], None]


def ensure_demo_account(settings: Settings) -> tuple[Path, Path]:
    """Create the demo user, key and repository once (push workflows on); return (key path,
    password file)."""
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
            set_push_workflows(session, operator, DEMO_REPO, True)
            session.commit()
    finally:
        database.dispose()
    return key, password_file


def ssh_command(key: Path) -> str:
    """The ``GIT_SSH_COMMAND`` that pushes as the demo user (a local demo: no host key check)."""
    return (
        f"ssh -i {shlex.quote(str(key))} -o IdentitiesOnly=yes -o StrictHostKeyChecking=no"
        " -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR"
    )


def _git(work: Path, key: Path, *args: str) -> str:
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(work.parent),
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_SSH_COMMAND": ssh_command(key),
        "GIT_AUTHOR_NAME": "forge-ci demo",
        "GIT_AUTHOR_EMAIL": "demo@forge-ci.invalid",
        "GIT_COMMITTER_NAME": "forge-ci demo",
        "GIT_COMMITTER_EMAIL": "demo@forge-ci.invalid",
    }
    done = subprocess.run(
        ["git", *args],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    if done.returncode != 0:
        raise Unavailable(f"git {args[0]} failed in {work}: {done.stderr.strip()[-500:]}")
    return done.stdout.strip()


def push_demo(settings: Settings, key: Path) -> tuple[Path, str]:
    """Commit the demo files (a fresh commit every time) and push them; return (work tree, sha)."""
    work = settings.data_dir / "demo" / "hello"
    remote = f"{settings.ssh_url}/{DEMO_REPO}.git"
    if not (work / ".git").is_dir():
        work.mkdir(parents=True, exist_ok=True)
        _git(work, key, "init", "-q", "-b", "main")
        _git(work, key, "remote", "add", "origin", remote)
    _git(work, key, "remote", "set-url", "origin", remote)
    (work / ".github" / "workflows").mkdir(parents=True, exist_ok=True)
    (work / ".github" / "workflows" / "ci.yml").write_text(WORKFLOW)
    (work / "hello.py").write_text(PROGRAM)
    (work / "README.md").write_text(README)
    _git(work, key, "add", "-A")
    _git(work, key, "commit", "-q", "--allow-empty", "-m", "forge-ci demo")
    _git(work, key, "push", "-q", "origin", "main")
    return work, _git(work, key, "rev-parse", "HEAD")


def _latest_run(database: Database, sha: str) -> int | None:
    with database.session() as session:
        number: int | None = session.scalar(
            select(func.max(Run.number))
            .join(Repository, Repository.id == Run.repository_id)
            .join(User, User.id == Repository.owner_id)
            .where(User.name == DEMO_USER, Repository.name == "hello", Run.sha == sha)
        )
        return number


def wait_for_run(database: Database, sha: str, echo: Echo, has_provider: bool) -> int | None:
    """The number of the run of ``sha`` once it has ended (None if it never appeared)."""
    from forge_ci.runs.queries import show_run

    deadline = time.monotonic() + RUN_APPEARS_SECONDS
    number = _latest_run(database, sha)
    while number is None:
        if time.monotonic() > deadline:
            echo("the worker did not create a run in time; see its log")
            return None
        time.sleep(0.2)
        number = _latest_run(database, sha)
    if not has_provider:
        echo(f"run #{number} created; its jobs stay queued until a provider runs them")
        return None
    echo(f"run #{number} created; waiting for its jobs ...")
    deadline = time.monotonic() + RUN_ENDS_SECONDS
    while True:
        with database.session() as session:
            view = show_run(session, Actor.operator(), DEMO_REPO, number)
        if view.state == states.COMPLETED:
            return number
        if time.monotonic() > deadline:
            echo(f"run #{number} is still {view.state} after {RUN_ENDS_SECONDS:g} s")
            return None
        time.sleep(0.3)


def print_run(database: Database, number: int, echo: Echo) -> str:
    """Each job's conclusion and its first log lines; returns the run's conclusion."""
    from forge_ci.coordinator.follow import LogPrinter
    from forge_ci.coordinator.logs import read_log_page, run_attempts
    from forge_ci.runs.queries import show_run

    operator = Actor.operator()
    with database.session() as session:
        view = show_run(session, operator, DEMO_REPO, number)
        attempts = {
            a.job_key: a for a in run_attempts(session, operator, DEMO_REPO, number).attempts
        }
        echo(f"run #{number} of {DEMO_REPO}: {view.conclusion}")
        for job in view.jobs:
            echo(f"  {job.key:<12} {job.conclusion}")
            attempt = attempts.get(job.key)
            if attempt is None:
                continue
            lines: list[str] = []
            printer = LogPrinter(lines.append)
            try:
                page = read_log_page(session, operator, DEMO_REPO, number, attempt.attempt_id)
            except NotFound:
                continue
            for record in page.records:
                printer.add("", attempt.attempt_id, record.step_id, record.stream, record.text)
            printer.flush()
            for line in lines[:LOG_LINES_PER_JOB]:
                echo(f"    | {line}")
    return view.conclusion or ""


def run_demo(
    settings: Settings, started: list[str], echo: Echo, *, wait: bool = True
) -> str | None:
    """Prepare and push the demo, wait for its run and print it; returns its conclusion."""
    key, password_file = ensure_demo_account(settings)
    echo(f"demo user   {DEMO_USER} (password in {password_file})")
    echo(f"demo key    {key}")
    echo(f"demo repo   {DEMO_REPO}")
    if "ssh" not in started:
        return None
    work, sha = push_demo(settings, key)
    echo(f"pushed      {sha[:12]} to {DEMO_REPO} over SSH")
    conclusion: str | None = None
    if wait and "worker" in started:
        database = Database(settings)
        try:
            number = wait_for_run(database, sha, echo, "provider" in started)
            if number is not None:
                conclusion = print_run(database, number, echo)
        except ForgeCIError as exc:
            echo(f"could not follow the demo run: {exc.message}")
        finally:
            database.dispose()
    if "web" in started:
        echo(f"web         {settings.public_url}/{DEMO_REPO}/pipelines (sign in as {DEMO_USER})")
    echo("push more:")
    echo(f"  cd {shlex.quote(str(work))}")
    echo("  git commit --allow-empty -m 'run again'")
    echo(f"  GIT_SSH_COMMAND={shlex.quote(ssh_command(key))} git push origin main")
    return conclusion
