"""GitHub's shells and shell templates in the real runner, and a checkout skipped by its if."""

from __future__ import annotations

import pytest

from tests.worker.runner.conftest import Forge, workflow
from worker.runner.shells import ShellError, script_suffix, shell_argv


def test_argv_of_each_shell() -> None:
    assert shell_argv("bash -l {0}", "/s")[1:] == ["-l", "/s"]
    assert shell_argv("bash -c 'cat {0}'", "/s")[1:] == ["-c", "cat /s"]
    assert shell_argv("python", "/s.py")[1:] == ["/s.py"]
    assert script_suffix("python") == ".py" and script_suffix("bash -l {0}") == ".sh"
    with pytest.raises(ShellError, match="shell cmd runs only on Windows"):
        shell_argv("cmd", "/s")
    with pytest.raises(ShellError, match="no-such-shell is not installed in the job image"):
        shell_argv("no-such-shell {0}", "/s")
    with pytest.raises(ShellError, match="cannot be read"):
        shell_argv("bash 'unclosed {0}", "/s")


def test_shells_run_their_scripts_and_a_skipped_checkout_leaves_the_workspace_empty(
    forge: Forge,
) -> None:
    steps = """\
      - uses: actions/checkout@v4
        if: github.ref == 'refs/heads/never'
      - id: python
        shell: python
        run: |
          import os, sys
          print("python", sys.version_info[0], sorted(os.listdir(os.environ["GITHUB_WORKSPACE"])))
      - id: login
        shell: bash -e -o pipefail {0}
        run: |
          echo "template $0 ${{ runner.os }}" | sed 's|/.*/step-|step-|'
      - id: windows
        shell: powershell
        run: Write-Output never
"""
    claimed, finished = forge.run_job(workflow(steps), {"README.md": "x\n"})
    attempt = claimed.attempt_id
    states = forge.steps(attempt)
    assert states["step_1"][:2] == ("completed", "skipped")
    assert forge.log(attempt, "python", "stdout") == "python 3 ['.home', '.tmp']\n"
    assert forge.log(attempt, "login", "stdout") == "template step-2.sh Linux\n"
    assert states["windows"][:2] == ("completed", "failure")
    assert "shell powershell runs only on Windows" in forge.log(attempt, "windows")
    assert finished.report["result"] == "failure"
