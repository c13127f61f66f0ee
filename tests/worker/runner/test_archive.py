"""Source archives are inspected completely before anything is written (hostile tar files)."""

from __future__ import annotations

import io
import os
import stat
import tarfile
from collections.abc import Callable
from pathlib import Path

import pytest

from worker.runner import archive
from worker.runner.archive import ArchiveRefused, extract_archive, inspect_archive


def _tar(*entries: tarfile.TarInfo | tuple[str, bytes] | tuple[str, bytes, int]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for entry in entries:
            if isinstance(entry, tarfile.TarInfo):
                tar.addfile(entry)
                continue
            name, data, *mode = entry
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mode = mode[0] if mode else 0o644
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def _info(name: str, kind: bytes, **fields: object) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = kind
    for key, value in fields.items():
        setattr(info, key, value)
    return info


def _directory(name: str) -> tarfile.TarInfo:
    return _info(name, tarfile.DIRTYPE, mode=0o755)


def test_files_directories_and_modes_are_extracted(tmp_path: Path) -> None:
    data = _tar(
        ("README.md", b"hello\n"),
        _directory("bin"),
        ("bin/run.sh", b"#!/bin/sh\necho hi\n", 0o775),
        ("deep/er/file.bin", bytes(range(256))),
        ("data.bin", b"\x00\xff\xfe"),
    )
    result = extract_archive(data, str(tmp_path))

    assert (result.files, result.directories) == (4, 1)
    assert (tmp_path / "README.md").read_bytes() == b"hello\n"
    assert (tmp_path / "deep/er/file.bin").read_bytes() == bytes(range(256))
    assert (tmp_path / "data.bin").read_bytes() == b"\x00\xff\xfe"
    assert stat.S_IMODE((tmp_path / "bin/run.sh").stat().st_mode) == 0o755
    assert stat.S_IMODE((tmp_path / "README.md").stat().st_mode) == 0o644
    assert stat.S_IMODE((tmp_path / "bin").stat().st_mode) == 0o755


HOSTILE: list[tuple[str, Callable[[], bytes], str]] = [
    (
        "symlink escape",
        lambda: _tar(_info("escape", tarfile.SYMTYPE, linkname="/etc"), ("escape/passwd", b"x")),
        "symbolic link",
    ),
    (
        "relative symlink",
        lambda: _tar(_info("up", tarfile.SYMTYPE, linkname="../../outside")),
        "symbolic link",
    ),
    (
        "hard link",
        lambda: _tar(("a", b"x"), _info("b", tarfile.LNKTYPE, linkname="a")),
        "hard link",
    ),
    ("parent traversal", lambda: _tar(("../outside", b"x")), "'..'"),
    ("inner traversal", lambda: _tar(("a/../../outside", b"x")), "'..'"),
    ("absolute path", lambda: _tar(("/etc/cron.d/evil", b"x")), "absolute"),
    (
        "character device",
        lambda: _tar(_info("null", tarfile.CHRTYPE, devmajor=1, devminor=3)),
        "device",
    ),
    ("block device", lambda: _tar(_info("disk", tarfile.BLKTYPE, devmajor=8)), "device"),
    ("fifo", lambda: _tar(_info("pipe", tarfile.FIFOTYPE)), "FIFO"),
    ("git directory", lambda: _tar(("sub/.git/config", b"[core]")), ".git is reserved"),
    ("git in capitals", lambda: _tar((".GIT/hooks/x", b"x")), ".git is reserved"),
    ("runner home", lambda: _tar((".home/.bashrc", b"x")), "reserved for the runner"),
    ("runner tmp", lambda: _tar((".tmp", b"x")), "reserved for the runner"),
    ("duplicate", lambda: _tar(("a", b"1"), ("a", b"2")), "appears twice"),
    ("file then directory", lambda: _tar(("a", b"1"), ("a/b", b"2")), "inside a file"),
    ("directory then file", lambda: _tar(("a/b", b"1"), ("a", b"2")), "earlier entries are inside"),
    ("empty component", lambda: _tar(("a//b", b"1")), "empty"),
    ("not a tar", lambda: b"this is not a tar archive" * 40, "not a valid tar"),
    ("truncated", lambda: _tar(("big", b"x" * 5000))[:1536], "ends inside its data"),
]


@pytest.mark.parametrize(("what", "make", "message"), HOSTILE, ids=[case[0] for case in HOSTILE])
def test_hostile_archives_are_refused_before_anything_is_written(
    tmp_path: Path, what: str, make: Callable[[], bytes], message: str
) -> None:
    data = make()
    with pytest.raises(ArchiveRefused, match=message):
        inspect_archive(data)
    with pytest.raises(ArchiveRefused, match=message):
        extract_archive(data, str(tmp_path))
    assert os.listdir(tmp_path) == []


def test_a_good_member_before_a_bad_one_is_not_written_either(tmp_path: Path) -> None:
    data = _tar(("good.txt", b"fine"), ("../evil", b"x"))
    with pytest.raises(ArchiveRefused):
        extract_archive(data, str(tmp_path))
    assert os.listdir(tmp_path) == []
    assert not (tmp_path.parent / "evil").exists()


def test_too_many_files_are_refused(tmp_path: Path) -> None:
    data = _tar(*[(f"f{index}", b"") for index in range(archive.MAX_FILES + 1)])
    with pytest.raises(ArchiveRefused, match="more than 10000 files"):
        extract_archive(data, str(tmp_path))
    assert os.listdir(tmp_path) == []


def test_the_file_limit_itself_is_allowed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(archive, "MAX_FILES", 20)
    entries = [(f"f{index}", b"") for index in range(21)]
    with pytest.raises(ArchiveRefused, match="more than 20 files"):
        inspect_archive(_tar(*entries))
    extract_archive(_tar(*entries[:20]), str(tmp_path))
    assert len(os.listdir(tmp_path)) == 20


def test_too_big_archives_are_refused(tmp_path: Path) -> None:
    big = _tar(("big.bin", b"\0" * (archive.MAX_ARCHIVE_BYTES + 1)))
    with pytest.raises(ArchiveRefused, match="larger than"):
        extract_archive(big, str(tmp_path))
    assert os.listdir(tmp_path) == []


def test_declared_sizes_count_even_when_the_archive_is_small(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(archive, "MAX_ARCHIVE_BYTES", 10_000)
    data = _tar(("a", b"x" * 6000), ("b", b"y" * 6000))
    with pytest.raises(ArchiveRefused, match="larger than 10000 bytes"):
        extract_archive(data, str(tmp_path))
    assert os.listdir(tmp_path) == []


def test_a_link_planted_in_the_workspace_is_not_followed(tmp_path: Path) -> None:
    workspace = tmp_path / "workspace"
    outside = tmp_path / "outside"
    workspace.mkdir()
    outside.mkdir()
    (workspace / "src").symlink_to(outside)  # e.g. left by a background process
    with pytest.raises(ArchiveRefused, match="cannot write into the workspace"):
        extract_archive(_tar(("src/file", b"x")), str(workspace))
    assert os.listdir(outside) == []


def test_an_existing_file_is_never_overwritten(tmp_path: Path) -> None:
    (tmp_path / "a").write_text("mine")
    with pytest.raises(ArchiveRefused, match="already exists"):
        extract_archive(_tar(("a", b"theirs")), str(tmp_path))
    assert (tmp_path / "a").read_text() == "mine"


def test_a_directory_listed_after_its_contents_is_fine(tmp_path: Path) -> None:
    data = _tar(("a/b", b"1"), _info("a", tarfile.DIRTYPE))
    assert [m.parts for m in inspect_archive(data)] == [("a", "b"), ("a",)]
    extract_archive(data, str(tmp_path))
    assert (tmp_path / "a" / "b").read_bytes() == b"1"


LINKED: list[tuple[str, Callable[[], bytes], str]] = [
    (
        "a file through a link",
        lambda: _tar(_info("escape", tarfile.SYMTYPE, linkname="/etc"), ("escape/passwd", b"x")),
        "inside a file",
    ),
    (
        "a link over earlier files",
        lambda: _tar(("lib/a.js", b"x"), _info("lib", tarfile.SYMTYPE, linkname="/tmp")),
        "earlier entries are inside",
    ),
    ("an empty target", lambda: _tar(_info("l", tarfile.SYMTYPE, linkname="")), "1 to 4096"),
    ("a long target", lambda: _tar(_info("l", tarfile.SYMTYPE, linkname="x" * 4097)), "4096"),
    (
        "a hard link",
        lambda: _tar(("a", b"x"), _info("b", tarfile.LNKTYPE, linkname="a")),
        "hard link",
    ),
    (
        "a link twice",
        lambda: _tar(
            _info("l", tarfile.SYMTYPE, linkname="a"), _info("l", tarfile.SYMTYPE, linkname="b")
        ),
        "appears twice",
    ),
]


@pytest.mark.parametrize(("what", "make", "message"), LINKED, ids=[case[0] for case in LINKED])
def test_action_trees_keep_links_as_leaves_only(
    tmp_path: Path, what: str, make: Callable[[], bytes], message: str
) -> None:
    with pytest.raises(ArchiveRefused, match=message):
        extract_archive(make(), str(tmp_path), links=True)
    assert os.listdir(tmp_path) == []


def test_action_links_are_made_last_with_their_targets(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret").write_text("host file")
    tree = tmp_path / "tree"
    tree.mkdir()
    # Listed first, made last: "dist" is a link, and nothing of the archive is written below it.
    data = _tar(
        _info("current", tarfile.SYMTYPE, linkname="dist/index.js"),
        _info("host", tarfile.SYMTYPE, linkname=str(outside / "secret")),
        _info("up", tarfile.SYMTYPE, linkname="../outside"),
        ("dist/index.js", b"console.log(1)\n"),
    )
    result = extract_archive(data, str(tree), links=True)
    assert (result.files, result.directories) == (1, 0)
    assert os.readlink(tree / "current") == "dist/index.js"
    assert (tree / "current").read_bytes() == b"console.log(1)\n"
    # Kept as written: in the job's container they resolve to the container's own files.
    assert os.readlink(tree / "host") == str(outside / "secret")
    assert os.readlink(tree / "up") == "../outside"
    assert os.listdir(outside) == ["secret"]
