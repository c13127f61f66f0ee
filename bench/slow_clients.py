"""Slow-client and connection-exhaustion attacks on a live forge-ci: ``bench/slow_clients.py``.

Issue #14, findings 1 and 3. Against a real ``forge-ci web`` (gunicorn, 2 workers x 16 threads)
on loopback, for each size N: N/2 clients trickle a claim's body a byte every 2 s, N/4 trickle a
header, N/4 connect and say nothing, and they reconnect whenever the server closes them. While
they attack, a job heartbeats, ``/-/health`` is probed and the login page loads, three times a
second; each row says how many of those were answered and how fast.

Then against a real ``forge-ci ssh`` (in this process, 64 connections) for each size N: N idle
TCP connections from N different loopback addresses (127.0.x.y), and a real ``git push`` of a
new commit, five times; each row says how many pushes got in and how long they took.

Figures only, as every bench here; the ratio is to the row without attackers. Loopback only.
"""

from __future__ import annotations

import argparse
import dataclasses
import http.client
import json
import logging
import socket
import statistics
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from forge_ci.accounts import add_key
from forge_ci.authz import Actor
from forge_ci.coordinator.credentials import new_request_id, new_token
from forge_ci.db import Database
from forge_ci.settings import Settings
from forge_ci_testing.git import GitClient
from forge_ci_testing.keys import make_key
from forge_ci_testing.seeding import bench_settings, seed
from forge_ci_testing.slow_clients import Trickle
from forge_ci_testing.web_server import LiveWeb, running_web
from hooks.install import install_hooks
from ssh.server import SshServer

PREFIX = "/-/runner-api/v1"


def call(live: LiveWeb, method: str, path: str, body: Any = None, token: str = "") -> int:
    connection = http.client.HTTPConnection("127.0.0.1", live.port, timeout=5)
    try:
        headers = {"Content-Type": "application/json"}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        data = None if body is None else json.dumps(body).encode()
        connection.request(method, path, body=data, headers=headers)
        response = connection.getresponse()
        response.read()
        return response.status
    finally:
        connection.close()


def running_attempt(live: LiveWeb, provider_token: str) -> tuple[str, str, str]:
    attempt_token = new_token()
    claim = {
        "version": 1,
        "request_id": new_request_id(),
        "attempt_token": attempt_token,
        "wait_seconds": 0,
    }
    connection = http.client.HTTPConnection("127.0.0.1", live.port, timeout=10)
    connection.request(
        "POST",
        PREFIX + "/claims",
        body=json.dumps(claim).encode(),
        headers={"Authorization": f"Bearer {provider_token}", "Content-Type": "application/json"},
    )
    answer = json.loads(connection.getresponse().read())
    connection.close()
    path = f"{PREFIX}/attempts/{answer['assignment']['attempt_id']}"
    execution = new_request_id()[:32].ljust(32, "0")
    started = {"version": 1, "execution_id": execution}
    assert call(live, "POST", path + "/start", started, attempt_token) == 200
    return path, attempt_token, execution


def summary(latencies: list[float], answered: int, total: int, base: float | None) -> str:
    if not latencies:
        return f"{answered:>3}/{total:<3} answered{'':>24}"
    p50 = statistics.median(latencies) * 1000
    worst = max(latencies) * 1000
    ratio = f"x{p50 / base:5.1f}" if base else "   -  "
    return f"{answered:>3}/{total:<3} p50 {p50:7.1f} ms max {worst:7.1f} ms {ratio}"


def web_attack(settings: Settings, sizes: list[int], seconds: float) -> None:
    tokens = seed(settings, repositories=1, jobs=len(sizes) + 1, providers=1)
    print(f"web: gunicorn 2 workers x 16 threads; {seconds:.0f} s per size", flush=True)
    bases: dict[str, float] = {}
    with running_web(settings.data_dir, settings.database_url, workers=2, threads=16) as live:
        for size in sizes:
            path, token, execution = running_attempt(live, tokens[0])
            heartbeat = {"version": 1, "execution_id": execution}
            probes: dict[str, tuple[list[float], list[bool]]] = {
                name: ([], []) for name in ("health", "heartbeat", "page")
            }
            attackers = [
                Trickle("127.0.0.1", live.port, size // 2, "body"),
                Trickle("127.0.0.1", live.port, size // 4, "head"),
                Trickle("127.0.0.1", live.port, size - size // 2 - size // 4, "idle"),
            ]
            for attacker in attackers:
                attacker.__enter__()
            try:
                time.sleep(1.0 if size else 0)
                end = time.monotonic() + seconds
                while time.monotonic() < end:
                    for name, method, url, body, credential in (
                        ("health", "GET", "/-/health", None, ""),
                        ("heartbeat", "POST", path + "/heartbeat", heartbeat, token),
                        ("page", "GET", "/-/login", None, ""),
                    ):
                        began = time.monotonic()
                        try:
                            ok = call(live, method, url, body, credential) == 200
                        except OSError:
                            ok = False
                        latencies, answers = probes[name]
                        answers.append(ok)
                        if ok:
                            latencies.append(time.monotonic() - began)
                    time.sleep(0.3)
            finally:
                for attacker in attackers:
                    attacker.__exit__(None, None, None)
            cut = sum(attacker.closed_by_server for attacker in attackers)
            print(f"  {size:>4} slow clients (server closed {cut:>5}):", flush=True)
            for name, (latencies, answers) in probes.items():
                if size == 0 and latencies:
                    bases[name] = statistics.median(latencies) * 1000
                line = summary(latencies, sum(answers), len(answers), bases.get(name))
                print(f"      {name:<9} {line}", flush=True)


def ssh_attack(settings: Settings, sizes: list[int], pushes: int) -> None:
    install_hooks(settings)
    home = Path(tempfile.mkdtemp(prefix="forge-ci-bench-ssh-"))
    key = make_key(home, name="bench")
    database = Database(settings)
    with database.session() as session:
        add_key(session, Actor.operator(), "bench", Path(f"{key}.pub").read_text())
        session.commit()
    database.dispose()
    settings = dataclasses.replace(settings, ssh_listen=("127.0.0.1", 0))
    server = SshServer(settings)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    port = server.address[1]
    client = GitClient(home / "client", key, port)
    work = client.work_tree()
    url = client.url("bench/repo0.git")
    print(f"ssh: ssh_max_connections {settings.ssh_max_connections}, {pushes} pushes per size")
    base = None
    try:
        for size in sizes:
            held = []
            for n in range(size):
                sock = socket.socket()
                sock.bind((f"127.0.{n // 250 + 1}.{n % 250 + 2}", 0))
                sock.settimeout(5)
                try:
                    sock.connect(server.address)
                    held.append(sock)
                except OSError:
                    sock.close()
            time.sleep(2.5 if size else 0)  # the idle connections are old startups now
            times = []
            for index in range(pushes):
                client.commit(work, f"size {size} push {index}")
                began = time.monotonic()
                result = client.git(
                    "push", "-q", url, "HEAD:refs/heads/main", cwd=work, check=False
                )
                if result.returncode == 0:
                    times.append(time.monotonic() - began)
            for sock in held:
                sock.close()
            if size == 0 and times:
                base = statistics.median(times) * 1000
            line = summary(times, len(times), pushes, base)
            print(f"  {size:>4} idle connections: push {line}", flush=True)
    finally:
        server.close(grace=1)
        thread.join(10)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="0,100,300,600", help="slow web clients per round")
    parser.add_argument("--ssh-sizes", default="0,64,256", help="idle SSH connections per round")
    parser.add_argument("--seconds", type=float, default=15.0, help="probing time per web round")
    parser.add_argument("--pushes", type=int, default=5, help="pushes per SSH round")
    args = parser.parse_args()
    # Every refused or evicted attacker makes paramiko log a traceback; the figures are the news.
    logging.getLogger("paramiko").setLevel(logging.CRITICAL)
    logging.getLogger("ssh").setLevel(logging.ERROR)
    logging.getLogger("forge_ci.queueing").setLevel(logging.ERROR)
    with bench_settings("sqlite") as settings:
        web_attack(settings, [int(s) for s in args.sizes.split(",")], args.seconds)
        ssh_attack(settings, [int(s) for s in args.ssh_sizes.split(",")], args.pushes)


if __name__ == "__main__":
    main()
