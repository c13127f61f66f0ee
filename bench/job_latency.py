"""How long a push waits for its job: ``python bench/job_latency.py [-n 10]``.

Three workflows, each pushed ``-n`` times: ``plain`` (one ``run`` step), ``checkout``
(``actions/checkout`` with ``fetch-depth: 0`` on a repository with some history, then
``git describe``) and ``checkout + setup-python`` (the same plus the real
``actions/setup-python@v5`` with the image's Python, mirrored into the forge from
../shared/actions), and that last one again with the job's node compile cache switched off
(an empty ``NODE_COMPILE_CACHE`` on the step), its peer in the same run, pushed in turns with
it so that both see the same load. Their push -> success
medians are printed side by side with what the actions add over the plain job (goal: the two
actions add < 1 s). When this forge-ci cannot
mirror or run actions yet, the last workflow is left out and the bench says so.

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
import re
import statistics
import subprocess
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from sqlalchemy import func, select

from forge_ci.models import Attempt, AttemptStep, Job, LogRecord, Repository, Run
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
ACTIONS_JOB = """\
  hello:
    runs-on: [self-hosted, linux]
    steps:
      - uses: actions/checkout@v4
        with:
          fetch-depth: 0
{setup}      - run: git describe --tags --always
"""
CHECKOUT_WORKFLOW = workflow(ACTIONS_JOB.format(setup=""))
SETUP_PYTHON = """\
      - uses: actions/setup-python@v5
        with:
          python-version: "3.11"
"""
SETUP_PYTHON_WORKFLOW = workflow(ACTIONS_JOB.format(setup=SETUP_PYTHON))
#: The same without the job's node compile cache (an empty NODE_COMPILE_CACHE switches it off
#: for the step's node processes; the compile-only processes still run): its peer in this run.
UNCACHED_WORKFLOW = workflow(
    ACTIONS_JOB.format(setup=SETUP_PYTHON + '        env:\n          NODE_COMPILE_CACHE: ""\n')
)
#: Commits of history behind each pushed commit of the checkout workflows (and a tag).
HISTORY = 50


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


def one_push(
    forge: Forge, full_name: str, round_number: int, text: str = WORKFLOW
) -> dict[str, float]:
    client = forge.git_client
    work = client.home / full_name.replace("/", "-")
    if not (work / ".git").exists():
        client.git("init", "-q", "-b", "main", str(work))
        if text != WORKFLOW:
            for number in range(HISTORY):
                (work / "history.txt").write_text(f"{number}\n")
                client.git("add", "-A", cwd=work)
                client.git("commit", "-q", "-m", f"history {number}", cwd=work)
            client.git("tag", "-a", "v1.0", "-m", "v1.0", cwd=work)
            client.git("push", "-q", client.url(f"{full_name}.git"), "v1.0", cwd=work)
        (work / ".github" / "workflows").mkdir(parents=True)
        (work / ".github" / "workflows" / "ci.yml").write_text(text)
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
            steps = session.execute(
                select(AttemptStep.step_id, AttemptStep.started_at, AttemptStep.completed_at)
                .where(AttemptStep.attempt_id == row.id)
                .order_by(AttemptStep.position)
            ).all()
        assert row.conclusion == "success", f"round {round_number}: {row.conclusion}"
        # Each step's own time, and the gap before it (from the runner's start or the end of
        # the step before): where an action's time goes.
        breakdown: dict[str, float] = {}
        previous = seconds(row.started_at, pushed)
        for step in steps:
            if step.started_at is None:
                continue
            began = seconds(step.started_at, pushed)
            ended = seconds(step.completed_at, pushed)
            breakdown[f"  before {step.step_id}"] = began - previous
            breakdown[f"  {step.step_id}"] = ended - began
            previous = ended
        breakdown["  after the last step"] = seconds(row.completed_at, pushed) - previous
        # The provider's own figure: from its claim answer to the container started.
        started = re.search(
            rf"attempt {row.id}: started container \S+ in ([0-9.]+) s", forge.log("provider")
        )
        if started:
            breakdown["  provider: claim answer -> container started"] = float(started.group(1))
        return {
            "run created": seconds(row.created_at, pushed),
            "claimed": seconds(row.claimed_at, pushed),
            "runner started": seconds(row.started_at, pushed),
            "first log line": seconds(first_log, pushed),
            "success": seconds(row.completed_at, pushed),
            **breakdown,
        }

    result: dict[str, float] = wait_for(f"round {round_number}", finished, 120, 0.05)
    return result


def mirror_setup_python(forge: Forge, root: Path) -> str:
    """Mirror actions/setup-python into the forge from the shared bundle; "" or why it cannot."""
    shared = Path(os.environ.get("FORGE_CI_SHARED_DIR") or ROOT.parent / "shared")
    bundle = shared / "actions" / "setup-python.bundle"
    if not bundle.is_file():
        return f"{bundle} is missing"
    clone = root / "setup-python.git"
    subprocess.run(["git", "clone", "-q", "--bare", str(bundle), str(clone)], check=True)
    try:
        forge.forge_ci("repo", "mirror", "actions/setup-python", "--from", f"file://{clone}")
    except (AssertionError, subprocess.CalledProcessError) as exc:
        return f"`forge-ci repo mirror` failed or does not exist here ({str(exc)[:200]})"
    return ""


def measure(
    forge: Forge, workflows: dict[str, tuple[str, str]], count: int
) -> dict[str, list[dict[str, float]] | str]:
    """``count`` rounds (after one warm-up each) of each of ``workflows`` (label -> (repository
    name, text)), interleaved round by round so that peers see the same load; or why not."""
    results: dict[str, list[dict[str, float]] | str] = {}
    names: dict[str, str] = {}
    for label, (name, text) in workflows.items():
        names[label] = forge.repository(name)
        try:
            one_push(forge, names[label], 0, text)  # warm-up: imports, image layers in cache
            results[label] = []
        except AssertionError as exc:
            results[label] = str(exc)[:300]
    for number in range(1, count + 1):
        for label, (_, text) in workflows.items():
            rounds = results[label]
            if not isinstance(rounds, str):
                rounds.append(one_push(forge, names[label], number, text))
    return results


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
    load_before = f"{os.getloadavg()[0]:.2f}"
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
            measured = measure(forge, {"plain": ("latency", WORKFLOW)}, args.n)["plain"]
            assert not isinstance(measured, str), measured
            rounds = measured
            others = measure(forge, {"checkout": ("latency-checkout", CHECKOUT_WORKFLOW)}, args.n)
            missing = mirror_setup_python(forge, root)
            peers = {
                "checkout + setup-python": ("latency-setup-python", SETUP_PYTHON_WORKFLOW),
                "the same, no compile cache": ("latency-uncached", UNCACHED_WORKFLOW),
            }
            if missing:
                others.update({label: missing for label in peers})
            else:
                others.update(measure(forge, peers, args.n))
        finally:
            forge.stop()
            redis.stop()
    baseline = statistics.median(docker_run_seconds(image, args.n))
    print(f"job latency over {args.n} pushes (median seconds after `git push` returned)")
    print(f"  load average before {load_before}, after {os.getloadavg()[0]:.2f}")
    for name in rounds[0]:
        if name.startswith(" "):
            continue
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
    print("push -> success with actions (median seconds; added over the plain job):")
    print(f"  {'plain':<26} {done:6.3f}")
    for name, result in others.items():
        if isinstance(result, str):
            print(f"  {name:<26} not measured: {result}")
            continue
        value = statistics.median(r["success"] for r in result)
        print(f"  {name:<26} {value:6.3f}   +{value - done:.3f} (goal: the actions add < 1 s)")
    print("where the time goes after the runner started (median seconds per step and gap):")
    for name, result in {"plain": rounds, **others}.items():
        if isinstance(result, str):
            continue
        started = statistics.median(r["runner started"] for r in result)
        claimed = statistics.median(r["claimed"] for r in result)
        print(f"  {name} (claimed {claimed:.3f}, runner started {started:.3f} after the push)")
        for key in result[0]:
            if key.startswith(" ") and all(key in r for r in result):
                print(f"  {key:<40} {statistics.median(r[key] for r in result):6.3f}")


if __name__ == "__main__":
    main()
