"""The dependency rule of ARCHITECTURE.md, enforced by import-linter's contracts."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

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


def test_a_forbidden_import_is_caught(tmp_path: Path) -> None:
    """The contracts are not vacuous: a core module importing a front door breaks them."""
    copy = tmp_path / "tree"
    shutil.copytree(
        REPO_ROOT,
        copy,
        ignore=shutil.ignore_patterns(".venv", ".git", "__pycache__", "*.egg-info", "tests"),
    )
    (copy / "forge_ci" / "bad_import.py").write_text("import web\n")
    lint_imports = shutil.which("lint-imports") or str(Path(sys.executable).parent / "lint-imports")
    result = subprocess.run(
        [lint_imports, "--no-cache"],
        cwd=copy,
        capture_output=True,
        text=True,
        timeout=300,
        env={"PYTHONPATH": str(copy), "PATH": "/usr/bin:/bin"},
    )
    assert result.returncode != 0
    assert "forge_ci.bad_import -> web" in result.stdout


def test_runner_and_protocol_use_only_the_standard_library() -> None:
    """worker/runner and forge_ci/protocol.py run under ``python -S`` in job images."""
    allowed_prefixes = ("worker.runner", "forge_ci.protocol", "forge_ci")
    files = list((REPO_ROOT / "worker" / "runner").rglob("*.py"))
    protocol = REPO_ROOT / "forge_ci" / "protocol.py"
    if protocol.exists():
        files.append(protocol)
    stdlib = set(sys.stdlib_module_names)
    import ast

    for path in files:
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            for name in names:
                root = name.split(".")[0]
                ok = root in stdlib or name.startswith(allowed_prefixes)
                if name.startswith("forge_ci") and not name.startswith("forge_ci.protocol"):
                    ok = name == "forge_ci"
                assert ok, f"{path.relative_to(REPO_ROOT)} imports {name}: stdlib only"
