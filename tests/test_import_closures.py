"""What a process really loads: the import-linter contracts, checked against ``sys.modules``.

The contracts read import statements; these tests run the code and list every module loaded,
so a lazy import that crept to module level (or a heavy dependency pulled in by a light one)
shows up as well.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]

#: What no hook-side module and no plain operator command may load.
HEAVY = ("flask", "werkzeug", "paramiko", "docker", "gunicorn", "rq")

#: What ``forge-ci workflow validate`` may not load either: it reads files, never the database,
#: git, passwords or Redis (importing SQLAlchemy alone once cost it 0.4 s of start-up).
STORAGE = ("sqlalchemy", "alembic", "pygit2", "argon2", "redis")

#: Runs ``forge_ci.cli.main(argv[2:])`` and writes the loaded module names to ``argv[1]``.
_CLI_PROBE = """
import json, sys
from forge_ci.cli import main
code = main(sys.argv[2:])
with open(sys.argv[1], "w") as out:
    json.dump(sorted(sys.modules), out)
sys.exit(code)
"""


def _roots(modules: list[str]) -> set[str]:
    return {name.split(".")[0] for name in modules}


def test_the_hook_side_loads_only_the_standard_library() -> None:
    """Everything the hooks' side imports (install, wire format, ref rules) runs under ``-S``.

    ``python -S`` has no site-packages: an import of anything outside the standard library,
    forge_ci and hooks fails here, however indirect.
    """
    code = (
        "import json, sys\n"
        "import hooks.install, forge_ci.hookwire, forge_ci.refs, forge_ci.hookchecks\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    result = subprocess.run(
        [sys.executable, "-S", "-c", code],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO_ROOT)},
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    extra = _roots(json.loads(result.stdout)) - set(sys.stdlib_module_names)
    assert extra <= {"forge_ci", "hooks", "__main__"}, sorted(extra)


def _cli_modules(tmp_path: Path, env: dict[str, str], *argv: str) -> set[str]:
    listing = tmp_path / f"modules-{argv[0]}-{argv[1]}.json"
    result = subprocess.run(
        [sys.executable, "-c", _CLI_PROBE, str(listing), *argv],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    return _roots(json.loads(listing.read_text()))


@pytest.mark.parametrize(
    "argv",
    [("user", "list"), ("workflow", "validate", "ci.yml")],
    ids=["user-list", "workflow-validate"],
)
def test_operator_commands_load_no_front_door_dependency(
    tmp_path: Path, sqlite_db_url: str, argv: tuple[str, ...]
) -> None:
    """``forge-ci user list`` and ``forge-ci workflow validate`` load no Flask, paramiko, Docker.

    (Nor RQ or gunicorn.) Only the command that starts a front door may import it.
    """
    (tmp_path / "ci.yml").write_text(
        "on: push\njobs:\n  build:\n    runs-on: linux\n    steps:\n      - run: make\n"
    )
    (tmp_path / "data").mkdir()
    env = {
        "PATH": "/usr/bin:/bin",
        "PYTHONPATH": str(REPO_ROOT),
        "FORGE_CI_DATA_DIR": str(tmp_path / "data"),
        "FORGE_CI_DATABASE_URL": sqlite_db_url,
    }
    loaded = _cli_modules(tmp_path, env, *argv)
    assert "forge_ci" in loaded  # the probe really ran the command
    # Plain ``workflow validate FILES`` runs without click (forge_ci.cli.validating).
    assert ("click" in loaded) is (argv[0] != "workflow"), argv
    assert not loaded & set(HEAVY), sorted(loaded & set(HEAVY))


def test_workflow_validate_loads_no_storage_dependency(tmp_path: Path) -> None:
    """``forge-ci workflow validate`` loads no database, git, password or Redis library.

    No settings either: it runs where no installation is (a developer's laptop, CI).
    """
    (tmp_path / "ci.yml").write_text(
        "on: push\njobs:\n  build:\n    runs-on: linux\n    steps:\n      - run: make\n"
    )
    (tmp_path / "bad.yml").write_text("on: push\njobs: {}\n")
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO_ROOT)}
    listing = tmp_path / "modules.json"
    result = subprocess.run(
        [
            sys.executable,
            "-c",
            _CLI_PROBE,
            str(listing),
            "workflow",
            "validate",
            "ci.yml",
            "bad.yml",
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=120,
    )
    assert result.returncode == 1, result.stderr  # bad.yml is invalid: the parser really ran
    assert "ci.yml: valid" in result.stdout and "bad.yml:" in result.stdout
    loaded = _roots(json.loads(listing.read_text()))
    assert "yaml" in loaded
    assert not loaded & set(STORAGE + HEAVY), sorted(loaded & set(STORAGE + HEAVY))


def test_user_list_still_loads_the_database_layer(tmp_path: Path, sqlite_db_url: str) -> None:
    """The refusal side: a command that uses the database gets it (the probe sees real loads)."""
    (tmp_path / "data").mkdir()
    env = {
        "PATH": "/usr/bin:/bin",
        "PYTHONPATH": str(REPO_ROOT),
        "FORGE_CI_DATA_DIR": str(tmp_path / "data"),
        "FORGE_CI_DATABASE_URL": sqlite_db_url,
    }
    loaded = _cli_modules(tmp_path, env, "user", "list")
    assert "sqlalchemy" in loaded
    assert "yaml" not in loaded  # nor the workflow parser it does not use


#: What ``forge-ci workflow validate FILE`` of one valid file may not load either (issue #21,
#: start-up under 0.1 s): click (the command runs without it), ``dataclasses`` and ``inspect``
#: (the engine's classes are ``forge_ci.records``; importing them cost a quarter of the command),
#: the worker pool of many files, and ``difflib``, which only a typo's "did you mean" needs.
ONE_FILE_VALIDATE = (
    "click",
    "dataclasses",
    "inspect",
    "difflib",
    "forge_ci.cli.validating_workers",
)


def _validate_modules(tmp_path: Path, text: str) -> tuple[int, set[str]]:
    (tmp_path / "ci.yml").write_text(text)
    listing = tmp_path / "modules.json"
    result = subprocess.run(
        [sys.executable, "-c", _CLI_PROBE, str(listing), "workflow", "validate", "ci.yml"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO_ROOT)},
        timeout=120,
    )
    return result.returncode, set(json.loads(listing.read_text()))


def test_one_file_validate_defines_no_dataclass_and_loads_no_click(tmp_path: Path) -> None:
    """The closure of the start-up people wait for, pinned by module name, and its refusal.

    A valid file with a step of every kind (run, uses, checkout) loads the whole engine and
    none of ``ONE_FILE_VALIDATE``; a typo of a key loads ``difflib`` (the probe sees real loads).
    """
    status, loaded = _validate_modules(
        tmp_path,
        "on: push\njobs:\n  build:\n    runs-on: linux\n    steps:\n"
        "      - uses: actions/checkout@v4\n      - uses: actions/setup-python@v5\n"
        "        with: {python-version: '3.12'}\n      - run: make ${{ matrix.x }}\n"
        "    strategy: {matrix: {x: [a, b]}}\n",
    )
    assert status == 0
    assert {"forge_ci.workflow.parser", "forge_ci.workflow.steps", "yaml"} <= loaded
    assert not loaded & set(ONE_FILE_VALIDATE), sorted(loaded & set(ONE_FILE_VALIDATE))

    status, loaded = _validate_modules(
        tmp_path, "on: push\njobs:\n  build:\n    runs-on: linux\n    stpes: []\n"
    )
    assert status == 1
    assert "difflib" in loaded
