"""Pushes of many refs at once: ``python bench/push_refs.py [--refs 1 100 1000 2000] [-n 3]``.

Each push creates N new branches, all at one commit the server already has (so no objects are
sent: only refs), over real ``ssh`` to a repository with the deployment's hooks (every ref
update recorded, confirmed, pinned and enqueued) and to a plain one served by the same server
process without hooks (``python -m forge_ci_testing.unhooked_ssh``, as in push_overhead.py),
with and without ``--atomic``. The deployment's one hook is pre-receive, run once per push
either way. (forge-ci once also installed a reference-transaction hook, which git 2.39 starts
twice per ref without ``--atomic``: ``--floor-hook reference-transaction`` shows what that alone
costs.)

Every push goes to a fresh repository (created beforehand, its one commit pushed untimed), so
no figure carries the refs of an earlier one. Prints the median wall time of each, the CPU time
of the server and everything it ran (receive-pack, hooks), the per-ref cost, and the ratio
hooked / plain against the goal (at most 2x, linear in refs). Figures only: nothing asserts.

SQLite always; PostgreSQL too with ``--database-url`` (or FORGE_CI_BENCH_POSTGRES_URL), a server
where the user may create databases (a throwaway one is made and dropped).
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from forge_ci.accounts import add_key, create_user
from forge_ci.authz import Actor
from forge_ci.db import Database
from forge_ci.repos import create_repository
from forge_ci.settings import Settings
from forge_ci_testing.git import GitClient
from forge_ci_testing.keys import make_key
from forge_ci_testing.redis import RedisServer
from forge_ci_testing.seeding import bench_settings, postgres_url
from hooks.install import install_hooks

ROOT = Path(__file__).resolve().parents[1]
GOAL = 2.0
TARGETS = ("hooked", "plain")
#: (target, refs, atomic) -> median wall time and server CPU time, seconds.
Figures = dict[tuple[str, int, bool], tuple[float, float]]


def cpu_seconds(pid: int) -> float:
    """CPU time of a process and of its waited-for descendants (utime+stime+cutime+cstime)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return sum(int(x) for x in fields[11:15]) / os.sysconf("SC_CLK_TCK")


def repo_name(target: str, refs: int, atomic: bool, repeat: int) -> str:
    return f"bench/{target}-{refs}-{'a' if atomic else 'n'}-{repeat}"


def prepare(settings: Settings, key: Path, names: list[str]) -> None:
    install_hooks(settings)
    database = Database(settings)
    operator = Actor.operator()
    with database.session() as session:
        create_user(session, operator, "bench", None)
        add_key(session, operator, "bench", Path(f"{key}.pub").read_text())
        session.commit()
        for name in names:
            create_repository(session, settings, operator, name)
            session.commit()
    database.dispose()


def floor(
    client: GitClient, work: Path, base: Path, refs: int, atomic: bool, hook_name: str
) -> float:
    """The same push over ``file://`` to a bare repository whose only hook does nothing.

    What git itself makes a hook of that name cost before forge-ci does anything in it:
    pre-receive once per push; reference-transaction a new process per transaction (twice per
    ref without ``--atomic``).
    """
    hooks = base / f"noop-hooks-{hook_name}"
    hooks.mkdir(exist_ok=True)
    hook = hooks / hook_name
    hook.write_text("#!/bin/bash\ncat >/dev/null\n")
    hook.chmod(0o755)
    bare = Path(tempfile.mkdtemp(dir=base, suffix=".git"))
    client.git("init", "-q", "--bare", str(bare))
    client.git("config", "core.hooksPath", str(hooks), cwd=bare)
    client.git("push", "-q", str(bare), "main", cwd=work)
    refspecs = [f"refs/heads/n{refs}/*"]
    began = time.perf_counter()
    client.git("push", "-q", *(["--atomic"] if atomic else []), str(bare), *refspecs, cwd=work)
    return time.perf_counter() - began


def measure(
    kind: str, counts: list[int], repeats: int, floor_hook: str, profile: str | None = None
) -> Figures:
    cases = [
        (target, refs, atomic, repeat)
        for refs in counts
        for atomic in (False, True)
        for repeat in range(repeats)
        for target in TARGETS
    ]
    with bench_settings(kind) as settings, tempfile.TemporaryDirectory() as folder:
        base = Path(folder)
        key = make_key(base, name="bench")
        prepare(settings, key, [repo_name(*case) for case in cases])
        redis = RedisServer(base)
        redis.start()
        env = {
            **os.environ,
            "PYTHONPATH": str(ROOT),
            "FORGE_CI_DATA_DIR": str(settings.data_dir),
            "FORGE_CI_DATABASE_URL": settings.database_url,
            "FORGE_CI_REDIS_URL": redis.url,
            "FORGE_CI_SSH_LISTEN": "127.0.0.1:0",
        }
        env.pop("FORGE_CI_CONFIG", None)
        plain = [repo_name(*case) for case in cases if case[0] == "plain"]
        command = [sys.executable, "-m", "forge_ci_testing.unhooked_ssh", *plain]
        if profile:  # py-spy (pip install py-spy) samples the server: flame-graph input
            command = [
                "py-spy",
                "record",
                "-r",
                "200",
                "--format",
                "raw",
                "-o",
                profile,
                "--",
                *command,
            ]
        server = subprocess.Popen(
            command,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        try:
            assert server.stdout is not None
            line = server.stdout.readline()
            while line and not line.startswith("forge-ci ssh listening on "):
                line = server.stdout.readline()  # py-spy's own lines, with --profile
            port = int(line.rsplit(":", 1)[1])
            client = GitClient(base / "client", key, port)
            work = client.work_tree()
            head = client.git("rev-parse", "HEAD", cwd=work).stdout.strip()
            # One namespace per size, pushed with one glob: git matches each refspec against
            # every local ref, so N refspecs would cost the client N^2 and hide the server.
            lines = "".join(
                f"create refs/heads/n{n}/r{i} {head}\n" for n in set(counts) for i in range(n)
            )
            subprocess.run(
                ["git", "update-ref", "--stdin"],
                cwd=work,
                env=client.env,
                input=lines,
                text=True,
                check=True,
            )
            figures: dict[tuple[str, int, bool], list[tuple[float, float]]] = {}
            for target, refs, atomic, repeat in cases:
                url = client.url(f"{repo_name(target, refs, atomic, repeat)}.git")
                client.git("push", "-q", url, "main", cwd=work)  # the objects, untimed
                refspecs = [f"refs/heads/n{refs}/*"]
                command = ["push", "-q", *(["--atomic"] if atomic else []), url, *refspecs]
                cpu_before = cpu_seconds(server.pid)
                began = time.perf_counter()
                client.git(*command, cwd=work, timeout=600)
                wall = time.perf_counter() - began
                cpu = cpu_seconds(server.pid) - cpu_before
                figures.setdefault((target, refs, atomic), []).append((wall, cpu))
            for refs, atomic in {(case[1], case[2]) for case in cases}:
                for _ in range(repeats):
                    wall = floor(client, work, base, refs, atomic, floor_hook)
                    figures.setdefault(("floor", refs, atomic), []).append((wall, 0.0))
        finally:
            if profile:  # py-spy writes its file on SIGINT (and passes it on)
                server.send_signal(signal.SIGINT)
            else:
                server.terminate()
            server.wait(30)
            if server.stdout is not None:
                server.stdout.close()
            redis.stop()
    return {
        case: (
            statistics.median(w for w, _ in values),
            statistics.median(c for _, c in values),
        )
        for case, values in figures.items()
    }


def report(kind: str, counts: list[int], figures: Figures, floor_hook: str) -> None:
    print(f"\n{kind}: pushes of N new branches, median wall time (server CPU in brackets)")
    print(
        f"{'N':>5} {'mode':<10} {'hooked':>17} {'plain':>17} {'ratio':>6} "
        f"{'hooked ms/ref':>14} {'floor':>10}   goal <= {GOAL:g}x"
    )
    print(f"(floor: file://, one no-op bash {floor_hook} hook, no forge-ci)")
    for atomic in (False, True):
        for refs in counts:
            (hw, hc), (pw, pc) = figures[("hooked", refs, atomic)], figures[("plain", refs, atomic)]
            ratio = hw / pw
            verdict = "ok" if ratio <= GOAL else "MISSED"
            fw = figures[("floor", refs, atomic)][0]
            print(
                f"{refs:>5} {'--atomic' if atomic else 'per-ref':<10} "
                f"{hw:7.3f}s ({hc:6.3f}) {pw:7.3f}s ({pc:6.3f}) {ratio:5.1f}x "
                f"{hw / refs * 1000:13.2f} {fw:9.3f}s   {verdict}"
            )
    print(f"load average during the run: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--refs", type=int, nargs="+", default=[1, 100, 1000, 2000])
    parser.add_argument("-n", "--repeats", type=int, default=3)
    parser.add_argument(
        "--database-url",
        help="PostgreSQL server where the user may create databases (also measured: SQLite)",
    )
    parser.add_argument(
        "--floor-hook",
        choices=["pre-receive", "reference-transaction"],
        default="pre-receive",
        help="the no-op hook of the floor (default: pre-receive, the deployment's one hook)",
    )
    parser.add_argument("--profile", help="sample the server with py-spy into this file")
    args = parser.parse_args()
    if args.database_url:
        os.environ["FORGE_CI_BENCH_POSTGRES_URL"] = args.database_url
    kinds = ["sqlite"] + (["postgres"] if postgres_url() else [])
    for kind in kinds:
        figures = measure(kind, args.refs, args.repeats, args.floor_hook, args.profile)
        report(kind, args.refs, figures, args.floor_hook)
    if "postgres" not in kinds:
        print("postgres: skipped (--database-url or FORGE_CI_BENCH_POSTGRES_URL)")


if __name__ == "__main__":
    main()
