"""The dependency rule of ARCHITECTURE.md, enforced by import-linter's contracts."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]


def test_import_linter_contracts_hold() -> None:
    lint_imports = shutil.which("lint-imports") or str(Path(sys.executable).parent / "lint-imports")
    result = subprocess.run(
        [lint_imports, "--no-cache"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout, result.stdout


@pytest.mark.parametrize(
    ("path", "source", "reported"),
    [
        # A core module importing a front door.
        ("forge_ci/bad_import.py", "import web\n", "forge_ci.bad_import -> web"),
        # A floor importing one above it: the workflow engine knows nothing of the database...
        (
            "forge_ci/workflow/bad_import.py",
            "import forge_ci.models\n",
            "forge_ci.workflow.bad_import -> forge_ci.models",
        ),
        # ...and runs know nothing of the coordinator that claims their jobs.
        (
            "forge_ci/runs/bad_import.py",
            "import forge_ci.coordinator.claims\n",
            "forge_ci.runs.bad_import -> forge_ci.coordinator.claims",
        ),
        # A new module of the core that is on no floor (the layers contract is exhaustive).
        (
            "forge_ci/settings_extra.py",
            "",
            "forge_ci.settings_extra",
        ),
    ],
    ids=["front-door", "workflow-models", "runs-coordinator", "module-without-a-floor"],
)
def test_a_forbidden_import_is_caught(
    tmp_path: Path, path: str, source: str, reported: str
) -> None:
    """The contracts are not vacuous: each of these changes breaks one of them.

    A new module of the core that is on no floor breaks the layers contract too (it is
    exhaustive): it must be placed in pyproject.toml, and so in the drawing of the floors.
    """
    copy = tmp_path / "tree"
    shutil.copytree(
        REPO_ROOT,
        copy,
        ignore=shutil.ignore_patterns(".venv", ".git", "__pycache__", "*.egg-info", "tests"),
    )
    (copy / path).write_text(source)
    lint_imports = shutil.which("lint-imports") or str(Path(sys.executable).parent / "lint-imports")
    result = subprocess.run(
        [lint_imports, "--no-cache"],
        cwd=copy,
        capture_output=True,
        text=True,
        timeout=300,
        env={"PYTHONPATH": str(copy), "PATH": "/usr/bin:/bin"},
    )
    assert result.returncode != 0, result.stdout
    assert reported in result.stdout, result.stdout


def test_the_core_never_imports_rq_worker_internals() -> None:
    """Only ``forge_ci.queueing`` imports RQ, and only to enqueue (``rq.Queue``).

    import-linter sees external packages as a whole (``rq``), so this reads the imports.
    """
    import ast

    for path in (REPO_ROOT / "forge_ci").rglob("*.py"):
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                found = [(alias.name, "") for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                found = [(node.module, alias.name) for alias in node.names]
            else:
                continue
            for module, name in found:
                if module.split(".")[0] != "rq":
                    continue
                where = path.relative_to(REPO_ROOT)
                assert where == Path("forge_ci/queueing.py"), f"{where} imports {module}"
                assert (module, name) == ("rq", "Queue"), f"{where} imports {module} {name}"


#: What the runner may import from the core: the wire types and the expression language (both
#: standard library only), the lazy package modules above them and the records the expression
#: tree is made of.
RUNNER_CORE_IMPORTS = ("forge_ci", "forge_ci.protocol", "forge_ci.workflow", "forge_ci.records")
RUNNER_CORE_PREFIXES = ("forge_ci.protocol.", "forge_ci.workflow.expressions")


def _runner_files() -> list[Path]:
    files = list((REPO_ROOT / "worker" / "runner").rglob("*.py"))
    files += list((REPO_ROOT / "forge_ci" / "workflow" / "expressions").rglob("*.py"))
    files += list((REPO_ROOT / "forge_ci" / "protocol").rglob("*.py"))
    files.append(REPO_ROOT / "forge_ci" / "__init__.py")
    files.append(REPO_ROOT / "forge_ci" / "records.py")
    files.append(REPO_ROOT / "forge_ci" / "workflow" / "__init__.py")
    return files


def test_runner_and_protocol_use_only_the_standard_library() -> None:
    """worker/runner and what it imports of forge_ci run under ``python -S`` in job images."""
    import ast

    stdlib = set(sys.stdlib_module_names)
    for path in _runner_files():
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            for name in names:
                root = name.split(".")[0]
                if root == "forge_ci":
                    ok = name in RUNNER_CORE_IMPORTS or name.startswith(RUNNER_CORE_PREFIXES)
                elif root == "worker":
                    ok = name == "worker" or name.startswith("worker.runner")
                else:
                    ok = root in stdlib
                # forge_ci/workflow/__init__.py names its modules for type checkers only.
                if path.name == "__init__.py" and path.parent.name == "workflow":
                    ok = ok or _type_checking_only(tree, node)
                assert ok, f"{path.relative_to(REPO_ROOT)} imports {name}: stdlib only"


def _type_checking_only(tree: object, target: object) -> bool:
    import ast

    assert isinstance(tree, ast.Module)
    for node in tree.body:
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING":
            if any(child is target for child in ast.walk(node)):
                return True
    return False


def _image_files(staging: Path) -> Path:
    """Copy what deploy/runner.Dockerfile copies into the image; return its /opt/forge-ci."""
    root = staging / "opt" / "forge-ci"
    for line in (REPO_ROOT / "deploy" / "runner.Dockerfile").read_text().splitlines():
        if not line.startswith("COPY "):
            continue
        *sources, destination = line.split()[1:]
        assert destination.startswith("/opt/forge-ci/"), line
        target = staging / destination.lstrip("/")
        target.mkdir(parents=True, exist_ok=True)
        for source in sources:
            origin = REPO_ROOT / source
            if origin.is_dir():
                shutil.copytree(
                    origin, target, dirs_exist_ok=True, ignore=shutil.ignore_patterns("__pycache__")
                )
            else:
                shutil.copy(origin, target / origin.name)
    return root


def test_the_runner_starts_with_only_the_files_of_the_image(tmp_path: Path) -> None:
    """Every module the runner imports is copied into the job image, and nothing else is needed.

    With empty standard input the runner must report a configuration error (exit 2, JSON),
    which it can only do after importing every module it uses (they are all imported at
    start-up).
    """
    code = _image_files(tmp_path)
    result = subprocess.run(
        [sys.executable, "-S", "-m", "worker.runner", "--unsafe-local"],
        input=b"",
        capture_output=True,
        cwd=code,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(code), "PYTHONSAFEPATH": "1"},
        timeout=60,
    )
    assert result.returncode == 2, result.stderr.decode()
    report = json.loads(result.stdout)
    assert report["result"] == "error"
    assert "the runner input is empty" in report["reason"]
