"""Benchmark of ``parse_workflow``: the real-world corpus and 64 KiB worst cases.

    python bench/workflow_parse.py [--repeat N]

Prints files per second over ``shared/corpus/actionlint-realworld`` (1,503 files) and the
starter workflows, the slowest file, and the time of each constructed worst case. Goals: the whole
real-world corpus in under 5 s, no file over 100 ms. The corpus is found beside the checkout or
under ``$FORGE_CI_SHARED_DIR/corpus``.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path

from forge_ci.workflow import WorkflowInvalid, build_plan, parse_workflow, plan_digest
from forge_ci_testing.corpus import corpus_root as shared_corpus

LIMIT = 64 * 1024


def corpus_root() -> Path:
    root = shared_corpus()
    if root is None:
        sys.exit("shared/corpus not found (beside the checkout or under $FORGE_CI_SHARED_DIR)")
    return root


def parse_once(data: bytes | str) -> bool:
    """Parse and plan like push processing does; True when the file is valid."""
    try:
        plan_digest(build_plan(parse_workflow(data, "bench.yml")))
    except WorkflowInvalid:
        return False
    return True


def run_corpus(name: str, files: list[Path], repeat: int) -> None:
    datas = [(path, path.read_bytes()) for path in files]
    best_total = float("inf")
    slowest: dict[Path, float] = {}
    valid = 0
    for _ in range(repeat):
        valid = 0
        start = time.perf_counter()
        for path, data in datas:
            began = time.perf_counter()
            valid += parse_once(data)
            spent = time.perf_counter() - began
            slowest[path] = min(slowest.get(path, spent), spent)
        best_total = min(best_total, time.perf_counter() - start)
    worst_path, worst = max(slowest.items(), key=lambda item: item[1])
    over = sum(1 for spent in slowest.values() if spent > 0.1)
    print(
        f"{name}: {len(datas)} files ({valid} valid) in {best_total:.2f} s = "
        f"{len(datas) / best_total:.0f} files/s; slowest {worst * 1000:.1f} ms "
        f"({worst_path.name}); files over 100 ms: {over}"
    )


def fit(text: str) -> str:
    """``text`` padded with a comment to exactly 64 KiB (or refused if already longer)."""
    size = len(text.encode())
    if size > LIMIT:
        raise SystemExit(f"worst case is {size} bytes, over the limit")
    return text + "#" + "x" * (LIMIT - size - 2) + "\n" if size < LIMIT - 1 else text


def widest_plan() -> str:
    """16 jobs x 16 matrix instances x 16 steps: 4,096 steps, every env value a template."""
    jobs = []
    for j in range(16):
        steps = "".join(
            f"      - run: echo ${{{{ matrix.a }}}} ${{{{ steps.s{k - 1}.outputs.x }}}}\n"
            f"        id: s{k}\n"
            if k
            else "      - run: echo start\n        id: s0\n"
            for k in range(16)
        )
        jobs.append(
            f"  j{j}:\n    runs-on: [self-hosted, '${{{{ matrix.a }}}}']\n"
            f"    strategy:\n      matrix:\n        a: [l0, l1, l2, l3]\n        b: [0, 1, 2, 3]\n"
            f"    env:\n      A: ${{{{ matrix.a }}}}-${{{{ github.sha }}}}\n    steps:\n{steps}"
        )
    return fit("on: push\nenv:\n  W: ${{ github.sha }}\njobs:\n" + "".join(jobs))


def most_nodes() -> str:
    """One flow sequence of 8,189 scalars: the most YAML nodes a file may have."""
    values = ",".join(["1"] * 8189)
    return fit(f"on: push\njobs: [{values}]\n")


def most_expressions() -> str:
    """A run script of long expressions, just under the 21,000-character template limit, x3."""
    expression = "${{ format('{0}{1}', matrix.a, steps.s.outputs.x) == 'x' && 'a' || 'b' }} "
    script = expression * (20_000 // len(expression))
    steps = "".join(f'      - run: "{script}"\n' for _ in range(3))
    head = "on: push\njobs:\n  a:\n    runs-on: self-hosted\n"
    matrix = "    strategy:\n      matrix:\n        a: [x]\n"
    return fit(head + matrix + "    steps:\n      - id: s\n        run: x\n" + steps)


def most_problems() -> str:
    """Thousands of misspelt keys: the diagnostics path (capped at 500 messages)."""
    keys = "".join(f"    runs_on{i}: x\n" for i in range(3000))
    return fit("on: push\njobs:\n  a:\n" + keys)


def deepest() -> str:
    """32 nested collections repeated through the file."""
    nested = "[" * 30 + "1" + "]" * 30
    lines = "".join(f"        v{i}: [{nested}]\n" for i in range(600))
    return fit("on: push\njobs:\n  a:\n    strategy:\n      matrix:\n" + lines)


WORST_CASES: dict[str, Callable[[], str]] = {
    "widest plan (4,096 steps)": widest_plan,
    "most YAML nodes (8,192)": most_nodes,
    "longest expressions": most_expressions,
    "most problems": most_problems,
    "deepest nesting": deepest,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="best of N runs (default 3)")
    args = parser.parse_args()
    root = corpus_root()
    run_corpus(
        "actionlint-realworld",
        sorted((root / "actionlint-realworld" / "workflows").glob("*.y*ml")),
        args.repeat,
    )
    run_corpus(
        "starter-workflows", sorted((root / "starter-workflows").rglob("*.y*ml")), args.repeat
    )
    for name, build in WORST_CASES.items():
        text = build()
        best = float("inf")
        valid = False
        for _ in range(args.repeat):
            start = time.perf_counter()
            valid = parse_once(text)
            best = min(best, time.perf_counter() - start)
        state = "valid" if valid else "refused"
        print(f"64 KiB worst case, {name}: {best * 1000:.1f} ms ({state})")


if __name__ == "__main__":
    main()
