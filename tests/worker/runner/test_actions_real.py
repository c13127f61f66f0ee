"""Real third-party actions (exact upstream trees from /work/shared/actions) in the runner.

They run on the host's ``node`` (deploy/setup-host installs Debian's ``nodejs`` with
``--tests``) against a tool cache made for the test, laid out as GitHub's
(``<tool>/<version>/x64`` with ``x64.complete``), so nothing is downloaded.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.worker.runner.actions_world import bundle_tree, from_action_yml, install
from tests.worker.runner.conftest import Forge, workflow


def _node() -> str:
    found = shutil.which("node")
    if found is None:
        pytest.fail("node is missing: deploy/setup-host --tests installs Debian's nodejs")
    return found


def tool_cache(root: Path, tool: str, version: str, binaries: dict[str, str]) -> Path:
    """``root/<tool>/<version>/x64`` with ``bin/<name>`` links and its ``.complete`` marker."""
    base = root / tool / version
    bin_dir = base / "x64" / "bin"
    bin_dir.mkdir(parents=True)
    for name, target in binaries.items():
        (bin_dir / name).symlink_to(target)
    (base / "x64.complete").write_text("")
    return base / "x64"


@pytest.mark.parametrize("tag", ["v7", "v8"])
def test_github_script_sets_outputs_exports_and_masks(
    forge: Forge, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, tag: str
) -> None:
    _node()
    action = from_action_yml(bundle_tree("github-script", tag, tmp_path))
    script = (
        "core.setOutput('answer', 'forty-two');\n"
        "core.exportVariable('FROM_SCRIPT', 'exported');\n"
        "core.setSecret('s3cret-from-script');\n"
        "console.log('printed: s3cret-from-script');\n"
        "return 'done';\n"
    )
    install(
        forge,
        monkeypatch,
        {"github-script": action},
        {"script": ("github-script", {"script": script, "result-encoding": "string"})},
    )
    steps = """\
      - id: script
        run: placeholder
      - id: after
        run: |
          echo "answer=${{ steps.script.outputs.answer }} result=${{ steps.script.outputs.result }}"
          echo "from_script=$FROM_SCRIPT"
          echo "again: s3cret-from-script"
"""
    claimed, finished = forge.run_job(workflow(steps))
    attempt = claimed.attempt_id
    assert finished.returncode == 0, (finished, forge.log(attempt))
    assert forge.steps(attempt)["script"][:2] == ("completed", "success")
    log = forge.log(attempt, "script")
    assert "printed: " in log and "s3cret-from-script" not in log
    after = forge.log(attempt, "after")
    assert "answer=forty-two result=done\n" in after
    assert "from_script=exported\n" in after
    assert "again: " in after and "s3cret-from-script" not in after


def test_github_script_failure_fails_the_step_with_an_annotation(
    forge: Forge, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from tests.worker.runner.test_actions_commands import stored_annotations

    _node()
    action = from_action_yml(bundle_tree("github-script", "v7", tmp_path))
    install(
        forge,
        monkeypatch,
        {"github-script": action},
        {"script": ("github-script", {"script": "core.setFailed('it did not work')"})},
    )
    claimed, finished = forge.run_job(workflow("      - id: script\n        run: placeholder\n"))
    assert finished.returncode == 1, finished
    assert forge.steps(claimed.attempt_id)["script"][:2] == ("completed", "failure")
    assert ("script", "error", "it did not work") in [
        item[:3] for item in stored_annotations(forge, claimed.attempt_id)
    ]


def test_github_script_without_its_required_script_input_does_not_start(
    forge: Forge, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    action = from_action_yml(bundle_tree("github-script", "v7", tmp_path))
    install(forge, monkeypatch, {"github-script": action}, {"script": ("github-script", {})})
    claimed, finished = forge.run_job(workflow("      - id: script\n        run: placeholder\n"))
    assert finished.returncode == 1
    assert "requires input 'script'" in forge.log(claimed.attempt_id, "script")


def _python_version() -> str:
    return ".".join(map(str, sys.version_info[:3]))


@pytest.mark.parametrize("tag", ["v5", "v6"])
def test_setup_python_finds_the_tool_cache_python(
    forge: Forge, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, tag: str
) -> None:
    _node()
    python = os.path.realpath("/usr/bin/python3")
    version = subprocess.run(
        [python, "-c", "import sys; print('.'.join(map(str, sys.version_info[:3])))"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    cache = tmp_path / "toolcache"
    installed = tool_cache(cache, "Python", version, {"python3": python, "python": python})
    forge.runner_env["RUNNER_TOOL_CACHE"] = str(cache)
    action = from_action_yml(bundle_tree("setup-python", tag, tmp_path))
    minor = ".".join(version.split(".")[:2])
    install(
        forge,
        monkeypatch,
        {"setup-python": action},
        {"py": ("setup-python", {"python-version": minor})},
    )
    steps = """\
      - id: py
        run: placeholder
      - id: after
        run: |
          echo "version=${{ steps.py.outputs.python-version }}"
          echo "path=${{ steps.py.outputs.python-path }}"
          echo "which=$(command -v python3)"
          echo "location=$pythonLocation"
"""
    claimed, finished = forge.run_job(workflow(steps))
    attempt = claimed.attempt_id
    assert finished.returncode == 0, (finished, forge.log(attempt))
    seen = forge.steps(attempt)
    assert seen["py"][:2] == ("completed", "success")
    assert seen["post-py"][:2] == ("completed", "success")  # cache-save: a no-op without cache
    after = forge.log(attempt, "after")
    assert f"version={version}\n" in after
    assert f"which={installed}/bin/python3\n" in after
    assert f"location={installed}\n" in after
    log = forge.log(attempt, "py")
    assert f"Successfully set up CPython ({version})" in log
    assert "::add-matcher:: accepted" in forge.log(attempt, "py", "stderr")


@pytest.mark.parametrize("tag", ["v4", "v6"])
def test_setup_node_finds_the_tool_cache_node(
    forge: Forge, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, tag: str
) -> None:
    node = os.path.realpath(_node())
    version = (
        subprocess.run([node, "--version"], capture_output=True, text=True, check=True)
        .stdout.strip()
        .lstrip("v")
    )
    cache = tmp_path / "toolcache"
    binaries = {"node": node}
    npm = shutil.which("npm")
    if npm:
        binaries["npm"] = os.path.realpath(npm)
    installed = tool_cache(cache, "node", version, binaries)
    forge.runner_env["RUNNER_TOOL_CACHE"] = str(cache)
    action = from_action_yml(bundle_tree("setup-node", tag, tmp_path))
    major = version.split(".")[0]
    install(
        forge,
        monkeypatch,
        {"setup-node": action},
        {"node": ("setup-node", {"node-version": major})},
    )
    steps = """\
      - id: node
        run: placeholder
      - id: after
        run: |
          echo "version=${{ steps.node.outputs.node-version }}"
          echo "which=$(command -v node)"
"""
    claimed, finished = forge.run_job(workflow(steps))
    attempt = claimed.attempt_id
    assert finished.returncode == 0, (finished, forge.log(attempt))
    assert forge.steps(attempt)["node"][:2] == ("completed", "success")
    after = forge.log(attempt, "after")
    assert f"version=v{version}\n" in after
    assert f"which={installed}/bin/node\n" in after
    assert f"Found in cache @ {installed}" in forge.log(attempt, "node")
