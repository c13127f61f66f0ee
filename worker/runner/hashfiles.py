"""``hashFiles()``: the SHA-256 of the workspace files that match glob patterns, as GitHub does it.

Standard library only (the runner runs under ``python -S``). GitHub's runner hands the patterns
to ``@actions/glob`` and hashes what it yields; this module follows the same rules:

- the arguments are joined by line breaks; each line is trimmed, empty lines and lines starting
  with ``#`` are skipped; a leading ``!`` excludes (each further ``!`` flips it back); the last
  pattern that matches a path decides;
- a relative pattern is rooted at the workspace; ``*``, ``?`` and ``[...]`` match within one
  path segment, ``**`` any number of segments, dot files included, case-sensitive; a pattern
  also matches everything below a directory it names (``src`` hashes every file in ``src/``);
  a trailing ``/`` names directories only;
- the tree is walked from each pattern's literal prefix, depth first, each directory's entries
  in byte order (what Node's ``readdir`` returns); symbolic links are followed only with the
  ``--follow-symbolic-links`` option (a link to a file is hashed either way, as on GitHub);
- files outside the workspace are ignored, and so are the runner's own ``.home`` and ``.tmp``
  (HOME and RUNNER_TEMP, which lie outside the workspace on GitHub); directories are skipped;
- the result is the hex SHA-256 of the concatenated binary SHA-256 digests of the files, in that
  order, or ``''`` when no file matched.
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

#: Directory entries one call may visit before it fails (GitHub's runner gives up after 120 s).
MAX_ENTRIES = 200_000
MAX_DEPTH = 256
_CHUNK = 1 << 16
_GLOB_CHARS = re.compile(r"[*?\[]")
#: The runner's HOME and RUNNER_TEMP inside the workspace (worker.runner.job.Layout).
RUNNER_DIRECTORIES = (".home", ".tmp")


class HashFilesError(Exception):
    """The files could not be hashed; the message says which and why."""


@dataclass(frozen=True)
class Pattern:
    """One line: absolute path segments, whether it excludes, and its directory-only slash."""

    negate: bool
    segments: tuple[str, ...]
    directories_only: bool = False
    #: The added ``<pattern>/**``: matches strictly below what the pattern matches.
    below: bool = False

    @property
    def search_path(self) -> tuple[str, ...]:
        """The literal segments before the first glob segment: where the walk starts."""
        literal: list[str] = []
        for segment in self.segments:
            if _GLOB_CHARS.search(segment):
                break
            literal.append(_unescape(segment))
        return tuple(literal)


def parse_patterns(arguments: Sequence[str], root: str) -> list[Pattern]:
    """The patterns of ``hashFiles(arguments...)``, rooted at ``root`` (an absolute path)."""
    patterns: list[Pattern] = []
    for raw in "\n".join(arguments).split("\n"):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        negate = False
        while line.startswith("!"):
            negate = not negate
            line = line[1:]
        if not line:
            continue
        directories_only = line.endswith("/")
        written = line if line.startswith("/") else f"{root}/{line}"
        segments: list[str] = []
        for segment in written.split("/"):
            if segment in ("", "."):
                continue
            if segment == "..":
                if segments:
                    segments.pop()
                continue
            segments.append(segment)
        pattern = Pattern(negate, tuple(segments), directories_only)
        patterns.append(pattern)
        if directories_only or not segments or segments[-1] != "**":
            patterns.append(Pattern(negate, (*segments, "**"), below=True))
    return patterns


def _unescape(segment: str) -> str:
    return re.sub(r"\\(.)", r"\1", segment)


def _segment_regex(segment: str) -> re.Pattern[str]:
    """minimatch's reading of one segment: ``*``, ``?``, ``[...]`` (``!``/``^`` negate), ``\\``."""
    out: list[str] = []
    i = 0
    while i < len(segment):
        char = segment[i]
        if char == "\\" and i + 1 < len(segment):
            out.append(re.escape(segment[i + 1]))
            i += 2
            continue
        if char == "*":
            out.append(".*")
        elif char == "?":
            out.append(".")
        elif char == "[":
            close = segment.find("]", i + 2)
            if close < 0:
                out.append(re.escape(char))
            else:
                body = segment[i + 1 : close]
                negated = body[:1] in ("!", "^")
                body = body[1:] if negated else body
                escaped = body.replace("\\", "\\\\").replace("^", "\\^").replace("[", "\\[")
                out.append(f"[{'^' if negated else ''}{escaped}]")
                i = close
        else:
            out.append(re.escape(char))
        i += 1
    return re.compile("".join(out), re.DOTALL)


_REGEX_CACHE: dict[str, re.Pattern[str]] = {}


def _segment_matches(glob: str, name: str) -> bool:
    if not _GLOB_CHARS.search(glob):
        return _unescape(glob) == name
    regex = _REGEX_CACHE.get(glob)
    if regex is None:
        regex = _REGEX_CACHE.setdefault(glob, _segment_regex(glob))
    return regex.fullmatch(name) is not None


def _matches(globs: tuple[str, ...], path: tuple[str, ...]) -> bool:
    """Whether ``path`` matches every segment of ``globs`` (``**``: zero or more segments)."""
    memo: dict[tuple[int, int], bool] = {}

    def at(g: int, p: int) -> bool:
        key = (g, p)
        if key in memo:
            return memo[key]
        if g == len(globs):
            result = p == len(path)
        elif globs[g] == "**":
            result = at(g + 1, p) or (p < len(path) and at(g, p + 1))
        else:
            result = p < len(path) and _segment_matches(globs[g], path[p]) and at(g + 1, p + 1)
        memo[key] = result
        return result

    return at(0, 0)


def pattern_matches(pattern: Pattern, path: tuple[str, ...], is_directory: bool) -> bool:
    """Whether one pattern matches the item at ``path`` (absolute segments)."""
    if pattern.below:
        base = pattern.segments[:-1]
        return any(_matches(base, path[:end]) for end in range(len(path)))
    if pattern.directories_only and not is_directory:
        return False
    return _matches(pattern.segments, path)


def selected(patterns: Sequence[Pattern], path: tuple[str, ...], is_directory: bool) -> bool:
    """Whether the patterns select ``path``: the last one that matches decides."""
    chosen = False
    for pattern in patterns:
        if pattern.negate:
            chosen = chosen and not pattern_matches(pattern, path, is_directory)
        elif not chosen:
            chosen = pattern_matches(pattern, path, is_directory)
    return chosen


def search_paths(patterns: Sequence[Pattern]) -> list[tuple[str, ...]]:
    """Where the walks start: each include pattern's literal prefix, ancestors only, in order."""
    candidates = {p.search_path for p in patterns if not p.negate}
    result: list[tuple[str, ...]] = []
    for pattern in patterns:
        path = pattern.search_path
        if pattern.negate or path in result:
            continue
        if not any(path[:end] in candidates for end in range(len(path))):
            result.append(path)
    return result


def _path(segments: tuple[str, ...]) -> str:
    return "/" + "/".join(segments)


class _Walk:
    """One depth-first walk over the tree (see the module docstring for the rules)."""

    def __init__(self, root: str, patterns: list[Pattern], follow: bool) -> None:
        self.root = tuple(part for part in root.split("/") if part)
        self.excluded = {(*self.root, name) for name in RUNNER_DIRECTORIES}
        self.patterns = patterns
        self.follow = follow
        self.visited = 0

    def _relevant(self, path: tuple[str, ...]) -> bool:
        """Inside the workspace (not the runner's folders), or on the way to it."""
        if len(path) <= len(self.root):
            return path == self.root[: len(path)]
        return path[: len(self.root)] == self.root and path[: len(self.root) + 1] not in (
            self.excluded
        )

    def files(self) -> Iterator[str]:
        for start in search_paths(self.patterns):
            yield from self._visit(start, (), 0)

    def _visit(self, path: tuple[str, ...], chain: tuple[str, ...], depth: int) -> Iterator[str]:
        self.visited += 1
        if self.visited > MAX_ENTRIES:
            raise HashFilesError(f"more than {MAX_ENTRIES} files and folders to look at")
        if depth > MAX_DEPTH or not self._relevant(path):
            return
        text = _path(path)
        try:
            info = os.stat(text) if self.follow else os.lstat(text)
        except (FileNotFoundError, NotADirectoryError):
            return  # the start of a walk that does not exist, or a broken link (followed)
        except OSError as exc:
            raise HashFilesError(f"cannot read {text}: {exc.strerror}") from None
        if stat.S_ISDIR(info.st_mode):
            real = os.path.realpath(text) if self.follow else text
            if real in chain:
                return  # a cycle of links
            try:
                names = sorted(os.listdir(text), key=os.fsencode)
            except OSError as exc:
                raise HashFilesError(f"cannot list {text}: {exc.strerror}") from None
            for name in names:
                yield from self._visit((*path, name), (*chain, real), depth + 1)
        elif len(path) > len(self.root) and selected(self.patterns, path, False):
            yield text


def hash_files(root: str, arguments: Sequence[str], follow_links: bool = False) -> str:
    """``hashFiles(arguments...)`` over the workspace ``root``: hex SHA-256, or ``''``."""
    root = os.path.realpath(root)
    walk = _Walk(root, parse_patterns(arguments, root), follow_links)
    total = hashlib.sha256()
    matched = False
    for path in walk.files():
        digest = hashlib.sha256()
        try:
            if os.path.isdir(path):
                continue  # a link to a folder, not followed
            with open(path, "rb") as handle:
                while chunk := handle.read(_CHUNK):
                    digest.update(chunk)
        except OSError as exc:
            raise HashFilesError(f"cannot hash {path}: {exc.strerror}") from None
        total.update(digest.digest())
        matched = True
    return total.hexdigest() if matched else ""
