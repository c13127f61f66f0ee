"""The supervisor of `forge-ci up` stops its children layer by layer and says which one it had
to kill."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from forge_ci.cli.supervisor import Child, Supervisor


def _started(supervisor: Supervisor, tmp_path: Path, name: str, script: str, layer: int) -> Child:
    ready = tmp_path / f"{name}.ready"
    argv = ["sh", "-c", f"{script}; touch {ready}; while :; do sleep 0.05; done"]
    child = Child(name, argv, tmp_path / f"{name}.log", layer=layer)
    supervisor.start(child, ready=ready, timeout=10)
    return child


@pytest.mark.usefixtures("own_signal_handlers")
def test_a_child_that_ignores_sigterm_is_killed_and_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    supervisor = Supervisor(dict(os.environ))
    polite = _started(supervisor, tmp_path, "polite", "trap 'exit 0' TERM", layer=1)
    stubborn = _started(supervisor, tmp_path, "stubborn", "trap '' TERM", layer=2)
    supervisor.stop(timeout=0.5)
    assert polite.process is not None and stubborn.process is not None
    assert polite.process.returncode == 0  # stopped by its SIGTERM, after the higher layer
    assert stubborn.process.returncode == -9
    err = capsys.readouterr().err
    assert (
        f"stubborn did not stop within 0.5 s of SIGTERM; killed it (see {stubborn.log_path})" in err
    )
    assert "polite" not in err


@pytest.mark.usefixtures("own_signal_handlers")
def test_children_that_stop_on_sigterm_stop_quietly_and_promptly(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    supervisor = Supervisor(dict(os.environ))
    children = [
        _started(supervisor, tmp_path, f"c{layer}", "trap 'exit 0' TERM", layer)
        for layer in (0, 1, 2)
    ]
    begun = time.monotonic()
    supervisor.stop(timeout=30)
    assert time.monotonic() - begun < 30  # nobody waited for the timeout
    assert [c.process.returncode for c in children if c.process] == [0, 0, 0]
    assert capsys.readouterr().err == ""
