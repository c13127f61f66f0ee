"""Benchmark of ``forge-ci`` start-up: what a person waits for at the terminal.

    python bench/cli_startup.py [--runs N] [--checkout DIR]

Times whole processes (the median of N runs after one warm-up) of ``forge-ci --help``,
``forge-ci user list`` (on a throwaway SQLite installation), and ``forge-ci workflow validate``
of one real-world file and of the whole 1,503-file corpus (``shared/corpus/actionlint-realworld``).
The validate figures are set against the floor of bare YAML loading: the same interpreter
running ``yaml.load`` with PyYAML's C loader on the same files, in one process. The issue's
comparison was actionlint, a Go binary that cannot be built here; bare loading is what any
Python validator must pay at least. Goals: one file under 0.1 s, the corpus within 2x the floor.
Each validate row also prints CPU seconds (user + system of the command and its worker processes,
which check many files in parallel as actionlint does; ``FORGE_CI_VALIDATE_WORKERS=1`` turns
them off), against the floor's.

Every command runs with bytecode caches, as an installed package has them (a temporary
``PYTHONPYCACHEPREFIX`` filled by the warm-up, so the checkout is not written to).
``--checkout DIR`` times the ``forge_ci`` of another source tree (``git archive`` of an older
commit) with this virtualenv, for before/after figures.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from forge_ci_testing.corpus import corpus_root as shared_corpus

ONE_FILE = "3b1b_manim_.github_workflows_docs.yml"
FLOOR = """
import sys, yaml
for path in sys.argv[1:]:
    with open(path, "rb") as stream:
        try:
            yaml.load(stream, Loader=yaml.CSafeLoader)
        except yaml.YAMLError:
            pass
"""


def corpus_root() -> Path:
    root = shared_corpus()
    if root is None:
        sys.exit("shared/corpus not found (beside the checkout or under $FORGE_CI_SHARED_DIR)")
    return root


def forge_ci() -> list[str]:
    """The console script of this virtualenv (what operators run), else ``python -m forge_ci``."""
    script = Path(sys.executable).parent / "forge-ci"
    return [str(script)] if script.exists() else [sys.executable, "-m", "forge_ci"]


def median_wall(argv: list[str], env: dict[str, str], runs: int) -> float:
    """Median wall seconds of ``argv`` over ``runs`` runs after one warm-up; output discarded."""
    return median_times(argv, env, runs)[0]


def median_times(argv: list[str], env: dict[str, str], runs: int) -> tuple[float, float]:
    """Median wall and CPU seconds (user + system, the process and its workers) of ``argv``."""
    walls, cpus = [], []
    for attempt in range(runs + 1):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        began = time.perf_counter()
        subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wall = time.perf_counter() - began
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        if attempt:
            walls.append(wall)
            cpus.append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
    return statistics.median(walls), statistics.median(cpus)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7, help="counted runs of each (default 7)")
    parser.add_argument("--checkout", type=Path, help="time the forge_ci of this source tree")
    args = parser.parse_args()
    workflows = sorted((corpus_root() / "actionlint-realworld" / "workflows").glob("*.y*ml"))
    one = [str(p) for p in workflows if p.name == ONE_FILE]
    every = [str(p) for p in workflows]
    with tempfile.TemporaryDirectory(prefix="cli-startup-") as scratch:
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env |= {"PYTHONPYCACHEPREFIX": f"{scratch}/pycache", "FORGE_CI_DATA_DIR": f"{scratch}/data"}
        env.pop("FORGE_CI_DATABASE_URL", None)
        env.pop("FORGE_CI_CONFIG", None)
        if args.checkout is not None:
            env["PYTHONPATH"] = str(args.checkout.resolve())
        command = forge_ci()
        subprocess.run([*command, "init"], env=env, check=True, stdout=subprocess.DEVNULL)
        floor = [sys.executable, "-c", FLOOR]
        print(f"{len(every)} corpus files; median of {args.runs} runs; wall seconds")
        start = median_wall([sys.executable, "-c", "pass"], env, args.runs)
        print(f"  interpreter start (python -c pass)   {start:7.3f}")
        for label, argv in (
            ("forge-ci --help", ["--help"]),
            ("forge-ci user list", ["user", "list"]),
        ):
            print(f"  {label:<37}{median_wall([*command, *argv], env, args.runs):7.3f}")
        for label, files, goal, absolute in (
            ("workflow validate, one file", one, "< 0.1 s", 0.1),
            ("workflow validate, whole corpus", every, "<= 2x floor", None),
        ):
            runs = args.runs if len(files) == 1 else max(3, args.runs // 2)
            ours, ours_cpu = median_times([*command, "workflow", "validate", *files], env, runs)
            base, base_cpu = median_times([*floor, *files], env, runs)
            ratio = ours / base
            met = ours < absolute if absolute is not None else ratio <= 2
            print(
                f"  {label:<37}{ours:7.3f}   bare YAML floor {base:.3f}   ratio {ratio:.2f}x"
                f"   goal {goal}: {'met' if met else 'NOT met'}"
            )
            print(
                f"  {'':<37}cpu {ours_cpu:.3f}   floor cpu {base_cpu:.3f}"
                f"   ratio {ours_cpu / base_cpu:.2f}x"
            )


if __name__ == "__main__":
    main()
