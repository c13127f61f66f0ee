"""GITHUB_ENV / GITHUB_PATH / GITHUB_OUTPUT files, read after a step with GitHub's syntax."""

from __future__ import annotations

from pathlib import Path

import pytest

from worker.runner.environment import step_environment
from worker.runner.filecommands import (
    CommandFiles,
    FileCommandError,
    parse_assignments,
    reserved_env_name,
)


def _files(tmp_path: Path, env: str = "", path: str = "", output: str = "") -> CommandFiles:
    files = CommandFiles(str(tmp_path), 1)
    files.create()
    Path(files.env).write_text(env)
    Path(files.path).write_text(path)
    Path(files.output).write_text(output)
    return files


def test_one_line_and_heredoc_forms() -> None:
    text = "A=1\nB=x=y\n\nC<<EOF\nline 1\n\nline 3\nEOF\nD=\nE<<x=y\nv\nx=y\n"
    assert parse_assignments(text, "GITHUB_ENV") == [
        ("A", "1"),
        ("B", "x=y"),
        ("C", "line 1\n\nline 3"),
        ("D", ""),
        ("E", "v"),
    ]


def test_crlf_line_endings_are_accepted() -> None:
    assert parse_assignments("A=1\r\nB<<E\r\nv\r\nE\r\n", "GITHUB_ENV") == [("A", "1"), ("B", "v")]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("JUSTANAME\n", "line 1: expected NAME=value or NAME<<DELIMITER"),
        ("A<<\nx\n", "line 1: the delimiter after << is empty"),
        ("A=1\nB<<END\nnever ended\n", "line 2: no line 'END' ends the value of 'B'"),
    ],
)
def test_malformed_files_name_the_line(text: str, message: str) -> None:
    with pytest.raises(FileCommandError, match=message):
        parse_assignments(text, "GITHUB_ENV")


def test_read_applies_all_three_files(tmp_path: Path) -> None:
    files = _files(
        tmp_path,
        env="GREETING=hello\nMULTI<<X\na\nb\nX\n",
        path="/opt/tool/bin\n/opt/other/bin\n",
        output="result=42\nlist<<EOF\n1\n2\nEOF\n",
    )
    updates = files.read()
    assert updates.env == {"GREETING": "hello", "MULTI": "a\nb"}
    assert updates.path == ["/opt/tool/bin", "/opt/other/bin"]
    assert updates.outputs == {"result": "42", "list": "1\n2"}


def test_env_names_are_free_as_in_workflow_env(tmp_path: Path) -> None:
    """GitHub takes any name for GITHUB_ENV, as for workflow ``env``; the step's process gets
    it as written (and the step environment refuses only NUL and '=')."""
    files = _files(tmp_path, env="ruby-version=3.3\na.b=1\n1A=x\nVIRTUALCAM-GUID<<E\ny\nE\n")
    env = files.read().env
    assert env == {"ruby-version": "3.3", "a.b": "1", "1A": "x", "VIRTUALCAM-GUID": "y"}
    step = step_environment({}, [], env, {}, {}, files, "s1")
    assert step["ruby-version"] == "3.3" and step["1A"] == "x"


def test_a_removed_file_means_no_commands(tmp_path: Path) -> None:
    files = _files(tmp_path)
    files.remove()
    updates = files.read()
    assert (updates.env, updates.path, updates.outputs) == ({}, [], {})


@pytest.mark.parametrize(
    "name",
    [
        "PATH",
        "HOME",
        "TMPDIR",
        "CI",
        "GITHUB_ENV",
        "github_sha",
        "GITHUB_WORKSPACE",
        "FORGE_CI_X",
        "RUNNER_TEMP",
        "BASH_ENV",
        "ENV",
        "LD_PRELOAD",
        "DYLD_INSERT_LIBRARIES",
        "NODE_OPTIONS",
        "SHELLOPTS",
    ],
)
def test_reserved_names_cannot_be_set(tmp_path: Path, name: str) -> None:
    assert reserved_env_name(name)
    with pytest.raises(FileCommandError, match=f"{name} is reserved"):
        _files(tmp_path, env=f"{name}=x\n").read()


def test_ordinary_names_are_not_reserved() -> None:
    assert not reserved_env_name("MY_PATH")
    assert not reserved_env_name("GITHUBX")
    # GitHub's rule: GITHUB_ names the runner does not set are ordinary variables.
    assert not reserved_env_name("GITHUB_TOKEN")
    assert not reserved_env_name("GITHUB_CONTEXT")
    assert not reserved_env_name("CIRCLE")


@pytest.mark.parametrize(
    ("files", "message"),
    [
        ({"env": "A\x01B=x\n"}, "contains a control character"),
        ({"env": "N" * 256 + "=x\n"}, "is longer than 255 characters"),
        ({"output": "-bad=x\n"}, "is not an output name"),
        ({"path": "/a:/b\n"}, "contains ':'"),
    ],
)
def test_bad_names_and_paths_are_refused(
    tmp_path: Path, files: dict[str, str], message: str
) -> None:
    with pytest.raises(FileCommandError, match=message):
        _files(tmp_path, **files).read()


def test_invalid_utf8_and_nul_are_refused(tmp_path: Path) -> None:
    files = _files(tmp_path)
    Path(files.env).write_bytes(b"A=\xff\n")
    with pytest.raises(FileCommandError, match="GITHUB_ENV: not UTF-8"):
        files.read()
    Path(files.env).write_bytes(b"A=x\x00y\n")
    with pytest.raises(FileCommandError, match="NUL"):
        files.read()


def test_oversized_files_are_refused(tmp_path: Path) -> None:
    files = _files(tmp_path, output="A=" + "x" * (1024 * 1024) + "\n")
    with pytest.raises(FileCommandError, match="GITHUB_OUTPUT: larger than"):
        files.read()


def test_a_symlink_in_place_of_the_file_is_not_followed(tmp_path: Path) -> None:
    secret = tmp_path / "elsewhere"
    secret.write_text("A=1\n")
    files = _files(tmp_path)
    Path(files.env).unlink()
    Path(files.env).symlink_to(secret)
    with pytest.raises(FileCommandError, match="GITHUB_ENV: cannot read it"):
        files.read()
