"""The conversation between a git hook and the SSH parent that started the push.

A push runs ``git receive-pack`` as a child of the SSH server. Git runs the deployment's hooks as
children of receive-pack; they cannot reach the server's database session, so each hook sends
what git told it to the SSH parent over a Unix socket that exists for this one push, and waits
for the answer::

    forge-ci ssh (parent, owns the DB session) <-- per-push Unix socket --+
        |                                                                 |
        +-- git receive-pack                                              |
              +-- hooks/pre-receive ............ "may these refs move?" --+
              +-- hooks/reference-transaction .. "record / confirm / cancel these updates"

Request (hook -> parent), UTF-8, then the hook shuts down its sending side::

    forge-ci-hook 1
    <hook> <phase> <push session id>
    <old oid> <new oid> <ref name>        one line per update (git's own hook input format)

Answer (parent -> hook), then the parent closes the connection::

    ok
    refuse
    <message for the pusher, any number of lines>

Ref names cannot contain spaces or newlines (git-check-ref-format), so the line format needs no
quoting. This module is imported by the hook programs, which must start in a few milliseconds:
it uses the standard library only and imports nothing at module level.
"""

from __future__ import annotations

from dataclasses import dataclass

MAGIC = "forge-ci-hook 1"
#: The most a request may hold: pushes of tens of thousands of refs still fit.
MAX_REQUEST_BYTES = 16 * 1024 * 1024

# Environment of ``git receive-pack`` (inherited by its hooks), set only by the SSH parent.
ENV_SOCKET = "FORGE_CI_PUSH_SOCKET"
ENV_SESSION = "FORGE_CI_PUSH_SESSION"
ENV_PUSHER = "FORGE_CI_PUSHER"
ENV_REPOSITORY = "FORGE_CI_REPOSITORY"

#: Refs forge-ci writes itself; updates to them are never recorded as push events.
INTERNAL_REF_PREFIX = "refs/forge-ci/"


class WireError(ValueError):
    """A request or answer that does not follow this format."""


@dataclass(frozen=True)
class Update:
    """One ref update exactly as git reports it to a hook."""

    old: str
    new: str
    ref: str


@dataclass(frozen=True)
class Request:
    hook: str
    phase: str
    session: str
    updates: tuple[Update, ...]


@dataclass(frozen=True)
class Answer:
    ok: bool
    message: str = ""


def is_zero(oid: str) -> bool:
    """True for git's null object id (``0000...``), meaning "no such ref" on either side."""
    return oid.strip("0") == ""


def parse_updates(text: str) -> tuple[Update, ...]:
    """Parse git's hook input lines ``<old> <new> <ref>``."""
    updates = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line:
            continue
        fields = line.split(" ")
        if len(fields) != 3 or not all(fields):
            raise WireError(f"update line {number} is not '<old> <new> <ref>': {line[:200]!r}")
        old, new, ref = fields
        if not (_is_oid(old) and _is_oid(new)):
            raise WireError(f"update line {number} has a malformed object id: {line[:200]!r}")
        updates.append(Update(old, new, ref))
    return tuple(updates)


def _is_oid(text: str) -> bool:
    return len(text) in (40, 64) and all(c in "0123456789abcdef" for c in text)


def encode_request(request: Request) -> bytes:
    lines = [MAGIC, f"{request.hook} {request.phase} {request.session}"]
    lines += [f"{u.old} {u.new} {u.ref}" for u in request.updates]
    return ("\n".join(lines) + "\n").encode()


def decode_request(data: bytes) -> Request:
    try:
        text = data.decode()
    except UnicodeDecodeError:
        raise WireError("the request is not UTF-8") from None
    head, _, rest = text.partition("\n")
    if head != MAGIC:
        raise WireError("the request does not start with the forge-ci hook header")
    line, _, body = rest.partition("\n")
    fields = line.split(" ")
    if len(fields) != 3 or not all(fields):
        raise WireError("the request's second line is not '<hook> <phase> <session>'")
    return Request(fields[0], fields[1], fields[2], parse_updates(body))


def encode_answer(answer: Answer) -> bytes:
    if answer.ok:
        return b"ok\n"
    return ("refuse\n" + answer.message.rstrip("\n") + "\n").encode()


def decode_answer(data: bytes) -> Answer:
    text = data.decode(errors="replace")
    head, _, message = text.partition("\n")
    if head == "ok":
        return Answer(True)
    if head == "refuse":
        return Answer(False, message.rstrip("\n"))
    raise WireError("the answer is neither 'ok' nor 'refuse'")
