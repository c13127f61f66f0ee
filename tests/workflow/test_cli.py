"""``forge-ci workflow validate`` and ``forge-ci workflow plan``: output and exit status."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from wf_support import MINIMAL

from forge_ci.cli import main
from forge_ci.workflow import build_plan, parse_workflow, plan_digest


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    valid = tmp_path / "valid.yml"
    valid.write_text(MINIMAL)
    invalid = tmp_path / "invalid.yml"
    invalid.write_text(MINIMAL.replace("runs-on", "runs_on"))
    return {"valid": valid, "invalid": invalid, "missing": tmp_path / "missing.yml"}


def test_validate_valid_file(files: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["workflow", "validate", str(files["valid"])]) == 0
    digest = plan_digest(build_plan(parse_workflow(MINIMAL)))
    assert capsys.readouterr().out == f"{files['valid']}: valid (plan {digest})\n"


def test_validate_invalid_file(files: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["workflow", "validate", str(files["valid"]), str(files["invalid"])]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines[1:] == [
        f"{files['invalid']}:4:5: 'runs_on' is not a job key; did you mean \"runs-on\"?",
        f"{files['invalid']}:4:5: job 'build' needs runs-on",
    ]


def test_validate_unreadable_file(
    files: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["workflow", "validate", str(files["valid"]), str(files["missing"])]) == 2
    captured = capsys.readouterr()
    assert captured.err == f"forge-ci: cannot read {files['missing']}: No such file or directory\n"
    assert "valid (plan" in captured.out


def test_validate_json(files: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["workflow", "validate", "--json", str(files["valid"]), str(files["invalid"])]) == 1
    result = json.loads(capsys.readouterr().out)
    assert result == [
        {
            "path": str(files["valid"]),
            "valid": True,
            "errors": [],
            "notices": [],
            "plan_digest": plan_digest(build_plan(parse_workflow(MINIMAL))),
        },
        {
            "path": str(files["invalid"]),
            "valid": False,
            "errors": [
                {
                    "line": 4,
                    "column": 5,
                    "message": "'runs_on' is not a job key; did you mean \"runs-on\"?",
                },
                {"line": 4, "column": 5, "message": "job 'build' needs runs-on"},
            ],
            "notices": [],
            "plan_digest": None,
        },
    ]


INERT = MINIMAL.replace("on: push", "on: [push, release]\npermissions:\n  id-token: write")


def test_validate_lists_notices_and_stays_valid(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "inert.yml"
    path.write_text(INERT)
    assert main(["workflow", "validate", str(path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[1:] == [
        f"{path}:1:12: notice: release never fires on forge-ci",
        f"{path}:3:3: notice: this workflow asked for id-token: write; forge-ci grants no such "
        "token",
    ]
    assert main(["workflow", "validate", "--json", str(path)]) == 0
    (result,) = json.loads(capsys.readouterr().out)
    assert result["valid"] and result["errors"] == []
    assert [n["message"] for n in result["notices"]] == [
        "release never fires on forge-ci",
        "this workflow asked for id-token: write; forge-ci grants no such token",
    ]


def test_notices_do_not_hide_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "both.yml"
    path.write_text(INERT.replace("runs-on", "runs_on"))
    assert main(["workflow", "validate", "--json", str(path)]) == 1
    (result,) = json.loads(capsys.readouterr().out)
    assert not result["valid"] and result["notices"] == []
    assert "'runs_on' is not a job key" in result["errors"][0]["message"]


def test_validate_needs_a_file(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["workflow", "validate"]) == 2
    assert "Missing argument" in capsys.readouterr().err


def test_plan(files: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["workflow", "plan", str(files["valid"])]) == 0
    assert json.loads(capsys.readouterr().out) == build_plan(parse_workflow(MINIMAL))


def test_plan_of_invalid_and_missing_files(
    files: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["workflow", "plan", str(files["invalid"])]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert f"{files['invalid']}:4:5: 'runs_on' is not a job key" in captured.err
    assert main(["workflow", "plan", str(files["missing"])]) == 2
    assert "cannot read" in capsys.readouterr().err


def test_validate_checks_local_actions_offline(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "checkout"
    (root / ".github" / "workflows").mkdir(parents=True)
    (root / ".github" / "actions" / "greet").mkdir(parents=True)
    (root / ".github" / "actions" / "greet" / "action.yml").write_text(
        "name: Greet\ninputs:\n  greeting: {}\nruns: {using: node20, main: index.js}\n"
    )
    (root / ".github" / "actions" / "bad").mkdir(parents=True)
    (root / ".github" / "actions" / "bad" / "action.yml").write_text(
        "name: Bad\nruns: {using: docker, image: Dockerfile}\n"
    )
    text = (
        "on: push\njobs:\n  build:\n    runs-on: self-hosted\n    steps:\n"
        "      - uses: ./.github/actions/greet\n        with:\n          greting: hi\n"
        "      - uses: ./.github/actions/bad\n"
        "      - uses: actions/setup-python@v5\n        with:\n          anything: 1\n"
    )
    path = root / ".github" / "workflows" / "ci.yml"
    path.write_text(text)
    assert main(["workflow", "validate", str(path)]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == (
        f"{path}:8:11: with.greting: ./.github/actions/greet has no input 'greting'; did you "
        'mean "greeting"? (its inputs: greeting)'
    )
    assert lines[1].startswith(f"{path}:9:15: action ./.github/actions/bad: action.yml cannot")
    assert "runs.using: docker is not supported" in lines[1]
    assert len(lines) == 2  # remote actions are checked when a run is created
    path.write_text(
        text.replace("greting", "greeting").replace("      - uses: ./.github/actions/bad\n", "")
    )
    assert main(["workflow", "validate", str(path)]) == 0


@pytest.mark.parametrize(
    "words",
    [
        ["valid"],
        ["valid", "invalid"],
        ["valid", "missing", "invalid"],
        ["--json", "valid", "invalid"],
        ["valid", "--json", "missing", "--json"],
        ["ansi", "invalid"],
    ],
)
def test_validate_without_click_is_validate_through_click(
    files: dict[str, Path], capsys: pytest.CaptureFixture[str], words: list[str]
) -> None:
    """``main`` runs plain ``workflow validate`` without click; the result is click's, exactly.

    (Output, stderr and exit status; an ANSI escape in a path is stripped as click strips it.)
    """
    from forge_ci.cli.common import run_cli
    from forge_ci.cli.root import cli

    ansi = files["valid"].with_name("e\x1b[31mred.yml")
    ansi.write_text(MINIMAL)
    paths = dict(files, ansi=ansi)
    args = ["workflow", "validate", *(w if w.startswith("-") else str(paths[w]) for w in words)]
    fast = main(args), capsys.readouterr()
    assert "Usage" not in fast[1].err  # the command did run (not a usage error)
    through_click = run_cli(cli, args), capsys.readouterr()
    assert fast == through_click
    assert fast[0] == (2 if "missing" in words else 1 if "invalid" in words else 0)


@pytest.mark.parametrize(
    "args", [[], ["--json"], ["-h"], ["--help"], ["--", "a.yml"], ["--jso", "a.yml"], ["-"]]
)
def test_validate_leaves_everything_else_to_click(args: list[str]) -> None:
    from forge_ci.cli import common, validating

    assert validating.fast_validate(args) is None
    assert (validating.EXIT_REFUSED, validating.EXIT_INVALID) == (common.EXIT_REFUSED, 1)


def test_validate_leaves_shell_completion_to_click(monkeypatch: pytest.MonkeyPatch) -> None:
    from forge_ci.cli import validating

    monkeypatch.setenv("_FORGE_CI_COMPLETE", "bash_complete")
    assert validating.fast_validate(["a.yml"]) is None


def test_validate_into_a_closed_pipe_ends_quietly(files: dict[str, Path]) -> None:
    """`forge-ci workflow validate ... | head -1`: exit 1, no traceback, as click's commands."""
    import subprocess
    import sys

    many = [str(files["valid"])] * 2000  # far more output than a pipe buffer holds
    process = subprocess.Popen(
        [sys.executable, "-m", "forge_ci", "workflow", "validate", *many],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert process.stdout is not None and process.stderr is not None
    process.stdout.read(10)
    process.stdout.close()  # the reader goes away
    err = process.stderr.read().decode()
    process.stderr.close()
    assert process.wait(timeout=60) == 1
    assert "Traceback" not in err and "Broken pipe" not in err, err
