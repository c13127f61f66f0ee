"""What the deployment's hooks cost a push: ``python bench/push_overhead.py [-n 30]``.

Pushes one new commit at a time, in turn, to three places:

- ``hooked``: a repository served by ``forge-ci ssh`` with the deployment's pre-receive hook,
  the intent recorded and committed, the push settled (the event confirmed and pinned) and
  enqueued;
- ``plain``:  a repository served by the *same* server process with no hooks and no events
  (the server is ``python -m forge_ci_testing.unhooked_ssh bench/plain``, which switches that
  one repository's hooks off in Python; no setting can make ``forge-ci ssh`` do that);
- ``file``:   a bare repository pushed to over ``file://``, without SSH or forge-ci.

and prints the median and 90th percentile wall time of each, the hooks' cost (hooked - plain,
also as the median of paired differences) and the ratios. The goal is at most 50 ms of hook cost
at the median. Figures only: nothing here asserts a time, since machines differ.

Wall time on a busy machine mostly measures waiting for a CPU, so the CPU time the server
process and everything it ran for the push (receive-pack, hooks) used is printed as well
(average per push, from /proc; what wall time would be on an idle machine, roughly).

With ``--push-workflows`` the hooked repository has Run push workflows on and a ``forge-ci
worker`` runs beside the server, so each hooked push also waits for the worker's decision on
its event and prints its ``remote: forge-ci: ...`` line (forge_ci.runs.announcements): the
figures then include that wait (the pushes carry no workflow file: "no workflow matched").

Uses a throwaway data directory with SQLite (or ``--database-url``) and, when ``redis-server``
is installed, a private Redis, so that enqueueing is part of the measured push.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from forge_ci.accounts import add_key, create_user
from forge_ci.authz import Actor
from forge_ci.cli.setup import ensure_layout
from forge_ci.db import Database, create_db_engine
from forge_ci.migrations import upgrade
from forge_ci.repos import create_repository, set_push_workflows
from forge_ci.settings import load_settings
from hooks.install import install_hooks

ROOT = Path(__file__).resolve().parents[1]


def cpu_seconds(pid: int) -> float:
    """CPU time of a process and of its waited-for descendants (utime+stime+cutime+cstime)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return sum(int(x) for x in fields[11:15]) / os.sysconf("SC_CLK_TCK")


def run(command: list[str], **kwargs: object) -> str:
    result = subprocess.run(command, capture_output=True, text=True, check=False, **kwargs)  # type: ignore[call-overload]
    if result.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed:\n{result.stderr}")
    return str(result.stdout)


def start_redis(directory: Path) -> tuple[subprocess.Popen[bytes] | None, str]:
    socket_path = directory / "redis.sock"
    binary = shutil.which("redis-server")
    if binary is None:
        print("redis-server not found: enqueueing fails fast and is not measured", flush=True)
        return None, f"unix://{socket_path}"
    process = subprocess.Popen(
        [
            binary,
            "--port",
            "0",
            "--unixsocket",
            str(socket_path),
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            str(directory),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 10
    while not socket_path.exists():
        if time.monotonic() > deadline:
            raise SystemExit("redis-server did not start")
        time.sleep(0.02)
    return process, f"unix://{socket_path}"


def prepare(
    base: Path, database_url: str | None, redis_url: str, push_workflows: bool
) -> dict[str, str]:
    data = base / "data"
    env = {
        "FORGE_CI_DATA_DIR": str(data),
        "FORGE_CI_SSH_LISTEN": "127.0.0.1:0",
        "FORGE_CI_REDIS_URL": redis_url,
    }
    if database_url:
        env["FORGE_CI_DATABASE_URL"] = database_url
    settings = load_settings(env=env)
    ensure_layout(settings)
    install_hooks(settings)
    engine = create_db_engine(settings.database_url)
    upgrade(engine)
    engine.dispose()
    run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(base / "key")])
    database = Database(settings)
    with database.session() as session:
        operator = Actor.operator()
        create_user(session, operator, "bench", None)
        add_key(session, operator, "bench", (base / "key.pub").read_text())
        create_repository(session, settings, operator, "bench/hooked")
        create_repository(session, settings, operator, "bench/plain")
        session.commit()
        if push_workflows:
            set_push_workflows(session, operator, "bench/hooked", True)
            session.commit()
    database.dispose()
    return env


def start_worker(env: dict[str, str], redis_url: str) -> subprocess.Popen[bytes]:
    """``forge-ci worker``, returned once RQ lists it (so that no push waits for its start)."""
    import redis
    from rq import Worker

    worker = subprocess.Popen(
        [sys.executable, "-m", "forge_ci", "worker"],
        env={**os.environ, "PYTHONPATH": str(ROOT), **env},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    connection = redis.Redis.from_url(redis_url)
    deadline = time.monotonic() + 60
    while not Worker.all(connection=connection):
        if worker.poll() is not None or time.monotonic() > deadline:
            raise SystemExit("forge-ci worker did not start")
        time.sleep(0.1)
    return worker


def measure(iterations: int, database_url: str | None, push_workflows: bool) -> None:
    base = Path(tempfile.mkdtemp(prefix="forge-ci-bench-"))
    redis, redis_url = start_redis(base)
    server = None
    worker = None
    try:
        env = prepare(base, database_url, redis_url, push_workflows)
        if push_workflows:
            if redis is None:
                raise SystemExit("--push-workflows needs redis-server (the worker's queue)")
            worker = start_worker(env, redis_url)
        server = subprocess.Popen(
            [sys.executable, "-m", "forge_ci_testing.unhooked_ssh", "bench/plain"],
            env={**os.environ, "PYTHONPATH": str(ROOT), **env},
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        assert server.stdout is not None
        port = int(server.stdout.readline().rsplit(":", 1)[1])
        run(["git", "init", "-q", "--bare", str(base / "file.git")])
        git_env = {
            "PATH": os.environ["PATH"],
            "HOME": str(base),
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_AUTHOR_NAME": "bench",
            "GIT_AUTHOR_EMAIL": "bench@example.com",
            "GIT_COMMITTER_NAME": "bench",
            "GIT_COMMITTER_EMAIL": "bench@example.com",
            "GIT_SSH_COMMAND": (
                f"ssh -F /dev/null -i {base / 'key'} -o IdentitiesOnly=yes -o BatchMode=yes "
                "-o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR "
                f"-p {port}"
            ),
        }
        work = base / "work"
        run(["git", "init", "-q", "-b", "main", str(work)], env=git_env)
        targets = {
            "hooked": f"ssh://git@127.0.0.1:{port}/bench/hooked.git",
            "plain": f"ssh://git@127.0.0.1:{port}/bench/plain.git",
            "file": f"file://{base / 'file.git'}",
        }
        times: dict[str, list[float]] = {name: [] for name in targets}
        cpu: dict[str, float] = {name: 0.0 for name in ("hooked", "plain")}
        order = list(targets)
        for i in range(iterations + 2):  # the first two warm up caches and are not counted
            (work / "file.txt").write_text(f"{i}\n")
            run(["git", "add", "file.txt"], cwd=work, env=git_env)
            run(["git", "commit", "-q", "-m", f"commit {i}"], cwd=work, env=git_env)
            order = order[1:] + order[:1]  # rotate, so no target always goes first
            for name in order:
                cpu_before = cpu_seconds(server.pid)
                started = time.perf_counter()
                run(
                    ["git", "push", "-q", targets[name], "HEAD:refs/heads/main"],
                    cwd=work,
                    env=git_env,
                )
                if i >= 2:
                    times[name].append(time.perf_counter() - started)
                    if name in cpu:
                        cpu[name] += cpu_seconds(server.pid) - cpu_before
        report(times, {name: total / iterations for name, total in cpu.items()})
    finally:
        if worker is not None:
            worker.terminate()
            worker.wait(30)
        if server is not None:
            server.terminate()
            server.wait(30)
            if server.stdout is not None:
                server.stdout.close()
        if redis is not None:
            redis.terminate()
            redis.wait(10)
        shutil.rmtree(base, ignore_errors=True)


def report(times: dict[str, list[float]], cpu: dict[str, float]) -> None:
    def ms(value: float) -> str:
        return f"{value * 1000:7.1f} ms"

    def p90(values: list[float]) -> float:
        return statistics.quantiles(values, n=10)[-1]

    print(f"\n{len(times['hooked'])} pushes of one new commit to each target\n")
    print(f"{'target':<8} {'median':>10} {'p90':>10}")
    for name, values in times.items():
        print(f"{name:<8} {ms(statistics.median(values))} {ms(p90(values))}")
    hooked, plain, local = (statistics.median(times[n]) for n in ("hooked", "plain", "file"))
    paired = statistics.median(h - p for h, p in zip(times["hooked"], times["plain"], strict=True))
    print()
    print(f"hook cost, median(hooked) - median(plain):   {ms(hooked - plain)}   (goal: <= 50 ms)")
    print(f"hook cost, median of paired differences:     {ms(paired)}")
    print(f"ratio hooked / plain (same SSH server):      {hooked / plain:7.2f}")
    print(f"ratio hooked / file:// (no SSH, no forge-ci): {hooked / local:7.2f}")
    print()
    print("CPU time of the server and what it ran, average per push:")
    print(
        f"hooked {ms(cpu['hooked'])}   plain {ms(cpu['plain'])}   "
        f"hook cost {ms(cpu['hooked'] - cpu['plain'])}"
    )
    print(f"load average during the run: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-n", "--iterations", type=int, default=30)
    parser.add_argument(
        "--database-url", help="PostgreSQL URL of an empty database (default: a SQLite file)"
    )
    parser.add_argument(
        "--push-workflows",
        action="store_true",
        help="switch push workflows on and run a worker: pushes wait for their announcement",
    )
    args = parser.parse_args()
    measure(args.iterations, args.database_url, args.push_workflows)


if __name__ == "__main__":
    main()
