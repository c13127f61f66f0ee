"""The provider's persisted state: its identity and every claim it has sent but not finished.

A claim's ``request_id`` and ``attempt_token`` are written (fsync'd, mode 0600) *before* the
claim request leaves, so that a response lost in flight, or the provider's own crash, can be
replayed with exactly the same pair: the server answers a replay with the same attempt instead
of leasing a second one (runner protocol, "claims"). Once an assignment is known, the record
says so, again before any container exists; a record that names an attempt means "a container
may have run this", and a restarted provider never starts such an attempt again::

    <state dir>/                 0700
      provider-id                this provider's label on Docker objects (random, kept forever)
      claims/                    0700
        <request_id>.json        0600  {"request_id", "attempt_token", "attempt_id"}
      sockets/                   0700  per-attempt runner API sockets (see socket_dirs)

    new claim ──► pending (attempt_id "") ──► assigned (attempt_id "42") ──► deleted
                    │  lost response: replay         │  restart: never started again
                    └─ null answer: deleted          └─ container and volume removed first

The attempt token is a credential: the files are private to the provider's user, written
through a temporary file and renamed, so a crash leaves the old record or the new one.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import secrets
import stat
from dataclasses import dataclass, replace
from pathlib import Path

from forge_ci.errors import ConfigurationError
from forge_ci.protocol import ProtocolError, parse_token

_REQUEST_ID = re.compile(r"[0-9a-f]{32}")
_ATTEMPT_ID = re.compile(r"|[1-9][0-9]{0,18}")
_PROVIDER_ID = re.compile(r"p[0-9a-f]{16}")


@dataclass(frozen=True)
class ClaimRecord:
    """One claim: its replay identity and, once known, the attempt it was answered with."""

    request_id: str
    attempt_token: str
    #: ``""`` until the server answered with an assignment.
    attempt_id: str = ""

    @classmethod
    def fresh(cls) -> ClaimRecord:
        return cls(secrets.token_hex(16), secrets.token_hex(32))

    def assigned(self, attempt_id: int) -> ClaimRecord:
        return replace(self, attempt_id=str(attempt_id))

    def __repr__(self) -> str:  # never show the credential
        return f"ClaimRecord(request_id={self.request_id!r}, attempt_id={self.attempt_id!r})"


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _private_dir(path: Path) -> Path:
    """Create ``path`` (0700) or check that an existing one is the provider's and private."""
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    info = os.lstat(path)
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid():
        raise ConfigurationError(f"{path} must be a directory owned by the provider's user")
    if info.st_mode & 0o077:
        raise ConfigurationError(
            f"{path} must be private to the provider (mode 0700), not"
            f" {stat.S_IMODE(info.st_mode):04o}; fix it with chmod 700 {path}"
        )
    return path


class ProviderState:
    """The state directory of one provider process (one at a time: see ``lock``)."""

    def __init__(self, directory: Path) -> None:
        self.directory = Path(os.path.abspath(directory))

    def prepare(self) -> None:
        """Create the layout, or check an existing one."""
        _private_dir(self.directory)
        _private_dir(self.claims_dir)
        _private_dir(self.sockets_dir)

    @property
    def claims_dir(self) -> Path:
        return self.directory / "claims"

    @property
    def sockets_dir(self) -> Path:
        return self.directory / "sockets"

    def lock(self) -> int:
        """Hold the directory for this process (until it exits); two providers sharing one
        state directory would replay each other's claims. Returns the lock's descriptor."""
        path = self.directory / "provider.lock"
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise ConfigurationError(
                f"another provider is running with the state directory {self.directory}"
            ) from None
        return fd

    # -- identity -----------------------------------------------------------------------------

    def provider_id(self) -> str:
        """This provider's ID on Docker objects, made once and kept (a restart finds its own
        leftovers by it, and never anything of another provider on the same engine)."""
        path = self.directory / "provider-id"
        try:
            value = path.read_text(encoding="ascii").strip()
        except FileNotFoundError:
            value = "p" + secrets.token_hex(8)
            self._write(path, value + "\n")
            return value
        if not _PROVIDER_ID.fullmatch(value):
            raise ConfigurationError(
                f"{path} does not hold a provider id (p + 16 hex digits); remove it only after"
                " removing this provider's leftover containers and volumes by hand"
            )
        return value

    # -- claims -------------------------------------------------------------------------------

    def _claim_path(self, request_id: str) -> Path:
        if not _REQUEST_ID.fullmatch(request_id):
            raise ValueError(f"not a request id: {request_id!r}")
        return self.claims_dir / f"{request_id}.json"

    def save(self, record: ClaimRecord) -> None:
        """Durably record ``record`` (before the request it describes is sent)."""
        body = json.dumps(
            {
                "request_id": record.request_id,
                "attempt_token": record.attempt_token,
                "attempt_id": record.attempt_id,
            },
            sort_keys=True,
        )
        self._write(self._claim_path(record.request_id), body + "\n")

    def forget(self, record: ClaimRecord) -> None:
        """The claim is over (null answer, or its attempt cleaned up)."""
        try:
            os.unlink(self._claim_path(record.request_id))
        except FileNotFoundError:
            return
        _fsync_dir(self.claims_dir)

    def records(self) -> list[ClaimRecord]:
        """Every claim a previous run left unfinished, oldest file first."""
        found: list[tuple[float, ClaimRecord]] = []
        for path in self.claims_dir.iterdir():
            if path.name.endswith(".tmp"):
                path.unlink()  # a write that never completed; the claim was never sent
                continue
            found.append((path.stat().st_mtime, self._read(path)))
        return [record for _, record in sorted(found, key=lambda item: item[0])]

    def _read(self, path: Path) -> ClaimRecord:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            record = ClaimRecord(
                str(data["request_id"]), str(data["attempt_token"]), str(data["attempt_id"])
            )
            parse_token(record.attempt_token, "attempt_token")
        except (OSError, ValueError, KeyError, TypeError, ProtocolError) as exc:
            raise ConfigurationError(f"claim record {path} is unreadable: {exc}") from None
        if (
            not _REQUEST_ID.fullmatch(record.request_id)
            or path.name != f"{record.request_id}.json"
            or not _ATTEMPT_ID.fullmatch(record.attempt_id)
        ):
            raise ConfigurationError(f"claim record {path} is malformed")
        return record

    def _write(self, path: Path, text: str) -> None:
        temporary = path.with_name(path.name + ".tmp")
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        try:
            os.fchmod(fd, 0o600)
            os.write(fd, text.encode("utf-8"))
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(temporary, path)
        _fsync_dir(path.parent)
