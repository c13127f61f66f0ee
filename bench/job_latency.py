"""How long a push waits for its job: ``python bench/job_latency.py [-n 10]``.

Starts a whole forge-ci on this machine (web, ssh, worker, a provider, a private Redis; the
harness of tests/e2e) with production clocks, then pushes one new commit at a time over SSH to a
repository whose workflow has one job with one step, and measures from the moment ``git push``
returned:

- ``first log line``  when the server stored the job's first log line (the runner's checkout
                      line: the container runs and talks to the server);
- ``success``         when the server recorded the job's success;

next to ``docker run --rm <runner image> true`` on the same machine (median of as many runs),
the floor of any job: the figure to beat is at most 2x that to the first log line, and 1.5 s.

Where the time goes, as medians of the server's own timestamps (all relative to the push):
``run created`` (the worker took the push event), ``claimed`` (a waiting claim woke up),
``runner started`` (container created and started, runner's ``start`` received), then the
first log line and the end. Figures only: nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from sqlalchemy import func, select

from forge_ci.models import Attempt, Job, LogRecord, Repository, Run
from forge_ci_testing.forge import Forge, wait_for, workflow
from forge_ci_testing.redis import RedisServer

ROOT = Path(__file__).resolve().parents[1]

WORKFLOW = workflow(
    """\
  hello:
    runs-on: [self-hosted, linux]
    steps:
      - run: echo "hello from the job"
"""
)


def seconds(moment: datetime | None, origin: float) -> float:
    if moment is None:
        return float("nan")
    return moment.replace(tzinfo=UTC).timestamp() - origin


def docker_run_seconds(image: str, count: int) -> list[float]:
    subprocess.run(["docker", "run", "--rm", image, "true"], check=True, capture_output=True)
    times = []
    for _ in range(count):
        began = time.monotonic()
        subprocess.run(["docker", "run", "--rm", image, "true"], check=True, capture_output=True)
        times.append(time.monotonic() - began)
    return times


def one_push(forge: Forge, full_name: str, round_number: int) -> dict[str, float]:
    client = forge.git_client
    work = client.home / "bench"
    if not (work / ".git").exists():
        client.git("init", "-q", "-b", "main", str(work))
        (work / ".github" / "workflows").mkdir(parents=True)
        (work / ".github" / "workflows" / "ci.yml").write_text(WORKFLOW)
    (work / "round.txt").write_text(f"{round_number}\n")
    client.git("add", "-A", cwd=work)
    client.git("commit", "-q", "-m", f"round {round_number}", cwd=work)
    client.git("push", "-q", client.url(f"{full_name}.git"), "main", cwd=work)
    pushed = time.time()
    sha = client.git("rev-parse", "HEAD", cwd=work).stdout.strip()
    assert forge.database is not None

    def finished() -> dict[str, float] | None:
        assert forge.database is not None
        with forge.database.session() as session:
            row = session.execute(
                select(
                    Run.created_at,
                    Attempt.claimed_at,
                    Attempt.started_at,
                    Attempt.completed_at,
                    Attempt.conclusion,
                    Attempt.id,
                )
                .join(Job, Job.run_id == Run.id)
                .join(Attempt, Attempt.job_id == Job.id)
                .join(Repository, Repository.id == Run.repository_id)
                .where(Run.sha == sha, Repository.name == full_name.split("/")[1])
            ).first()
            if row is None or row.completed_at is None:
                return None
            first_log = session.scalar(
                select(func.min(LogRecord.created_at)).where(LogRecord.attempt_id == row.id)
            )
        assert row.conclusion == "success", f"round {round_number}: {row.conclusion}"
        return {
            "run created": seconds(row.created_at, pushed),
            "claimed": seconds(row.claimed_at, pushed),
            "runner started": seconds(row.started_at, pushed),
            "first log line": seconds(first_log, pushed),
            "success": seconds(row.completed_at, pushed),
        }

    result: dict[str, float] = wait_for(f"round {round_number}", finished, 120, 0.05)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=10, help="pushes (and docker runs)")
    args = parser.parse_args()
    image = os.environ.get("FORGE_CI_RUNNER_IMAGE") or "forge-ci-runner:latest"
    subprocess.run(
        [str(ROOT / "deploy" / "build-runner-image")],
        check=True,
        capture_output=True,
        env={**os.environ, "FORGE_CI_RUNNER_IMAGE": image},
    )
    with tempfile.TemporaryDirectory(prefix="forge-ci-latency-") as folder:
        root = Path(folder)
        redis = RedisServer(root / "redis-dir")
        (root / "redis-dir").mkdir()
        redis.start()
        forge = Forge(
            root / "forge",
            redis.url,
            image,
            overrides={
                "FORGE_CI_LEASE_SECONDS": None,
                "FORGE_CI_TESTING": None,
                "FORGE_CI_TEST_FAULTS": None,
            },
        )
        try:
            forge.start()
            full_name = forge.repository("latency")
            one_push(forge, full_name, 0)  # warm-up: first imports, image layers in cache
            rounds = [one_push(forge, full_name, n) for n in range(1, args.n + 1)]
        finally:
            forge.stop()
            redis.stop()
    baseline = statistics.median(docker_run_seconds(image, args.n))
    print(f"job latency over {args.n} pushes (median seconds after `git push` returned)")
    for name in rounds[0]:
        values = sorted(r[name] for r in rounds)
        print(
            f"  {name:<16} {statistics.median(values):6.3f}   (min {values[0]:.3f},"
            f" max {values[-1]:.3f})"
        )
    first = statistics.median(r["first log line"] for r in rounds)
    done = statistics.median(r["success"] for r in rounds)
    print(f"  docker run --rm {image} true: {baseline:.3f}")
    print(f"  first log line / docker run: {first / baseline:.2f}x (goal: <= 2x and <= 1.5 s)")
    print(f"  success / docker run:        {done / baseline:.2f}x")


if __name__ == "__main__":
    main()
