"""Safe extraction of the source archive into the workspace.

The whole archive is inspected before a single byte is written; anything the runner would not
create itself refuses all of it:

- it must be a plain (uncompressed) ``tar`` of at most 64 MiB;
- only regular files and directories: no hard links, devices, FIFOs, sparse files, and no
  symbolic links unless the caller allows them (``links``: action trees, see below);
- relative names only: no leading ``/``, no ``.`` or ``..`` components, no empty components,
  at most 4096 bytes (255 per component);
- no ``.git`` at any depth (in any letter case), no ``.home`` or ``.tmp`` at the top (the
  runner's HOME and TMPDIR), no name twice, nothing below a file;
- at most 10,000 regular files and 64 MiB of file data; every member's data inside the archive.

Extraction then walks directories with ``O_NOFOLLOW`` file descriptors and creates every file
with ``O_EXCL``, so even a symbolic link planted meanwhile (by a background process of an
earlier step) cannot redirect a write. Files get mode 0755 when any execute bit was set, else
0644; directories 0755; owners and times from the archive are ignored.

Symbolic links (action trees only: an action's checked-in links, e.g. setup-python's under
``__tests__``) are leaves: nothing may be below one, their target is at most 4096 bytes without
NUL, and they are created last, after every file and directory, so no write of the archive ever
goes through one. Their target is kept as written, wherever it points: the tree is unpacked in
the job's container, where a link reaches nothing the job could not read anyway (never a file
of the host; the server builds the archive from git objects and never follows a link).
"""

from __future__ import annotations

import io
import os
import tarfile
from collections.abc import Callable
from dataclasses import dataclass

MAX_ARCHIVE_BYTES = 64 * 1024 * 1024
MAX_FILES = 10_000
#: Directories and files together (every directory holds a file in a git tree, so this is loose).
MAX_ENTRIES = 2 * MAX_FILES
MAX_PATH_BYTES = 4096
MAX_NAME_BYTES = 255
RESERVED_TOP_LEVEL = frozenset({".home", ".tmp"})
_COPY_SIZE = 256 * 1024
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


class ArchiveRefused(Exception):
    """The archive breaks a rule; the message names the member and the rule."""


@dataclass(frozen=True)
class Member:
    """One checked member: its path components and what to create."""

    parts: tuple[str, ...]
    directory: bool
    size: int
    executable: bool
    info: tarfile.TarInfo
    #: The target of a symbolic link ("" for anything else).
    link: str = ""


@dataclass(frozen=True)
class Extracted:
    files: int
    directories: int
    bytes: int


def _kind(info: tarfile.TarInfo) -> str:
    if info.issym():
        return f"a symbolic link (to {info.linkname[:200]!r})"
    if info.islnk():
        return f"a hard link (to {info.linkname[:200]!r})"
    if info.ischr() or info.isblk():
        return "a device file"
    if info.isfifo():
        return "a FIFO"
    if info.issparse():
        return "a sparse file"
    return f"an entry of type {info.type!r}"


def _parts(name: str) -> tuple[str, ...]:
    shown = repr(name[:200])
    if not name:
        raise ArchiveRefused("the archive has a member without a name")
    if "\x00" in name:
        raise ArchiveRefused(f"{shown}: names cannot contain NUL")
    if name.startswith("/"):
        raise ArchiveRefused(f"{shown}: absolute paths are refused")
    raw = os.fsencode(name)
    if len(raw) > MAX_PATH_BYTES:
        raise ArchiveRefused(f"{shown}: the path is longer than {MAX_PATH_BYTES} bytes")
    parts = tuple(name.split("/"))
    for part in parts:
        if part in ("", ".", ".."):
            raise ArchiveRefused(f"{shown}: empty, '.' and '..' path components are refused")
        if len(os.fsencode(part)) > MAX_NAME_BYTES:
            raise ArchiveRefused(f"{shown}: a name is longer than {MAX_NAME_BYTES} bytes")
        if part.lower() == ".git":
            raise ArchiveRefused(f"{shown}: .git is reserved")
    if parts[0] in RESERVED_TOP_LEVEL:
        raise ArchiveRefused(f"{shown}: {parts[0]} is reserved for the runner (HOME, TMPDIR)")
    return parts


def _link_target(info: tarfile.TarInfo, shown: str) -> str:
    target = info.linkname
    if not target or "\x00" in target or len(os.fsencode(target)) > MAX_PATH_BYTES:
        raise ArchiveRefused(
            f"{shown}: a symbolic link needs a target of 1 to {MAX_PATH_BYTES} bytes without NUL"
        )
    return target


def inspect_archive(data: bytes, links: bool = False) -> list[Member]:
    """Every member of ``data``, checked; ArchiveRefused for the first rule broken
    (``links``: symbolic links are allowed, as leaves)."""
    if len(data) > MAX_ARCHIVE_BYTES:
        raise ArchiveRefused(f"the archive is larger than {MAX_ARCHIVE_BYTES} bytes (64 MiB)")
    members: list[Member] = []
    seen: dict[tuple[str, ...], bool] = {}  # path -> is a directory
    implied: set[tuple[str, ...]] = set()  # parents of members, listed or not
    files = 0
    total = 0
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as tar:
            for info in tar:
                if len(members) >= MAX_ENTRIES:
                    raise ArchiveRefused(f"the archive has more than {MAX_ENTRIES} entries")
                # Directory names end in "/" in the archive; tarfile removes it.
                parts = _parts(info.name)
                shown = repr(info.name[:200])
                directory = info.isdir()
                link = _link_target(info, shown) if links and info.issym() else ""
                if not directory and not link and not (info.isreg() and not info.issparse()):
                    raise ArchiveRefused(f"{shown} is {_kind(info)}; only files and directories")
                if parts in seen:
                    raise ArchiveRefused(f"{shown} appears twice")
                if not directory and parts in implied:
                    raise ArchiveRefused(f"{shown} is a file, but earlier entries are inside it")
                for depth in range(1, len(parts)):
                    if seen.get(parts[:depth]) is False:
                        raise ArchiveRefused(f"{shown} is inside a file")
                    implied.add(parts[:depth])
                size = 0
                if not directory and not link:
                    files += 1
                    if files > MAX_FILES:
                        raise ArchiveRefused(f"the archive has more than {MAX_FILES} files")
                    size = info.size
                    total += size
                    if total > MAX_ARCHIVE_BYTES:
                        raise ArchiveRefused(
                            f"the files are larger than {MAX_ARCHIVE_BYTES} bytes together"
                        )
                    if info.offset_data + size > len(data):
                        raise ArchiveRefused(f"{shown}: the archive ends inside its data")
                seen[parts] = directory
                members.append(Member(parts, directory, size, bool(info.mode & 0o111), info, link))
    except tarfile.TarError as exc:
        raise ArchiveRefused(f"not a valid tar archive: {exc}") from None
    return members


def _open_directory(root: int, parts: tuple[str, ...]) -> int:
    """A descriptor of ``parts`` below ``root``, creating missing directories, never following
    a symbolic link."""
    fd = os.dup(root)
    try:
        for part in parts:
            try:
                os.mkdir(part, 0o755, dir_fd=fd)
            except FileExistsError:
                pass
            child = os.open(part, _DIR_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = child
    except BaseException:
        os.close(fd)
        raise
    return fd


def _make_link(root: int, member: Member) -> None:
    parent = _open_directory(root, member.parts[:-1])
    try:
        os.symlink(member.link, member.parts[-1], dir_fd=parent)
    except FileExistsError:
        raise ArchiveRefused(f"{'/'.join(member.parts)!r} already exists") from None
    finally:
        os.close(parent)


def extract_archive(
    data: bytes,
    destination: str,
    should_stop: Callable[[], bool] | None = None,
    links: bool = False,
) -> Extracted:
    """Inspect ``data``, then write it below ``destination`` (which must exist); ``links``:
    symbolic links are allowed and made last."""
    members = inspect_archive(data, links)
    # Links last: no file or directory of the archive is ever written through one.
    members.sort(key=lambda member: bool(member.link))
    root = os.open(destination, _DIR_FLAGS)
    files = directories = written = 0
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as tar:
            for member in members:
                if should_stop is not None and should_stop():
                    raise ArchiveRefused("extraction was interrupted")
                if member.link:
                    _make_link(root, member)
                    continue
                if member.directory:
                    fd = _open_directory(root, member.parts)
                    os.fchmod(fd, 0o755)
                    os.close(fd)
                    directories += 1
                    continue
                parent = _open_directory(root, member.parts[:-1])
                try:
                    mode = 0o755 if member.executable else 0o644
                    try:
                        fd = os.open(member.parts[-1], _FILE_FLAGS, mode, dir_fd=parent)
                    except FileExistsError:
                        raise ArchiveRefused(
                            f"{'/'.join(member.parts)!r} already exists in the workspace"
                        ) from None
                finally:
                    os.close(parent)
                with os.fdopen(fd, "wb") as out:
                    source = tar.extractfile(member.info)
                    assert source is not None
                    remaining = member.size
                    while remaining:
                        chunk = source.read(min(_COPY_SIZE, remaining))
                        if not chunk:
                            raise ArchiveRefused(
                                f"{'/'.join(member.parts)!r}: the archive ends inside its data"
                            )
                        out.write(chunk)
                        remaining -= len(chunk)
                    os.fchmod(out.fileno(), mode)
                files += 1
                written += member.size
    except tarfile.TarError as exc:
        raise ArchiveRefused(f"not a valid tar archive: {exc}") from None
    except OSError as exc:
        # ELOOP: a symbolic link appeared where a directory was expected.
        raise ArchiveRefused(f"cannot write into the workspace: {exc.strerror}") from None
    finally:
        os.close(root)
    return Extracted(files, directories, written)
