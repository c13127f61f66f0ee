"""The job's node compile cache: the compile-only script, on the runner image's node, compiles a
CommonJS file into the cache without running any of it, the real ``node file`` then takes the
cached code and behaves as without it, a file that is not CommonJS is left alone; which actions
are not compiled ahead."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from forge_ci.protocol import AssignmentStep
from worker.runner.actions.codecache import COMPILE_ONLY_JS, opted_out

EFFECT = """\
require('fs').appendFileSync('/tmp/marker', 'ran\\n');
console.log(`effect ran main=${require.main === module} file=${__filename}`);
"""
ESM = "import fs from 'fs';\nfs.appendFileSync('/tmp/marker', 'esm\\n');\nconsole.log('esm ran');\n"
SCRIPT = """\
cd /tmp
node /a/compile-only.js /tmp/cc /a/effect.js; echo "compile-only effect.js: $?"
node /a/compile-only.js /tmp/cc /a/esm.js; echo "compile-only esm.js: $?"
echo "marker after compiling: [$(cat /tmp/marker 2>/dev/null)]"
echo "cache files: $(find /tmp/cc -type f | wc -l)"
NODE_COMPILE_CACHE=/tmp/cc NODE_DEBUG_NATIVE=COMPILE_CACHE node /a/effect.js 2>&1 \\
  | grep -E 'effect ran|effect.js was (accepted|rejected)'
NODE_COMPILE_CACHE=/tmp/cc node /a/esm.js
echo "marker at the end: [$(tr '\\n' ' ' < /tmp/marker)]"
"""


@pytest.mark.docker
def test_compiled_without_running_and_taken_by_the_real_run(
    runner_image: str, tmp_path: Path
) -> None:
    files = tmp_path / "a"
    files.mkdir()
    for name, text in {
        "compile-only.js": COMPILE_ONLY_JS,
        "effect.js": EFFECT,
        "esm.js": ESM,
    }.items():
        (files / name).write_text(text)
        (files / name).chmod(0o644)
    files.chmod(0o755)
    done = subprocess.run(
        ["docker", "run", "--rm", "--read-only", "--tmpfs", "/tmp", "--network", "none"]
        + ["-v", f"{files}:/a:ro", runner_image, "bash", "-c", SCRIPT],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "compile-only effect.js: 0",
        "compile-only esm.js: 1",  # not CommonJS: refused, not run
        "marker after compiling: []",  # nothing ran
        "cache files: 1",
        "[compile cache] V8 code cache for CommonJS /a/effect.js was accepted, keeping the "
        "in-memory entry",
        "effect ran main=true file=/a/effect.js",
        "esm ran",
        "marker at the end: [ran esm ]",
    ], done.stdout


def _step(action: str, **env: str) -> AssignmentStep:
    return AssignmentStep(
        "s", "s", "x@v1" if action else "", "", "", "", dict(env), "", False, 0, action
    )


def test_an_action_is_left_cold_only_when_every_step_using_it_sets_its_own_cache() -> None:
    steps = [
        _step("own", NODE_COMPILE_CACHE=""),
        _step("mixed", NODE_COMPILE_CACHE="/tmp/mine"),
        _step("mixed"),
        _step("plain", OTHER="1"),
        _step("", NODE_COMPILE_CACHE=""),  # a run step
    ]
    assert opted_out(steps) == {"own"}
    assert opted_out([]) == set()
