"""The conversation between a git hook and the SSH parent that started the push.

A push runs ``git receive-pack`` as a child of the SSH server. Git runs the deployment's hook as
a child of receive-pack; it holds no database session, so it hands what git told it to the SSH
parent over a loopback TCP listener that exists for this one push, and obeys the answer::

    forge-ci ssh (parent, owns the DB session) <-- 127.0.0.1:<port of this push> --+
        |                                                                          |
        +-- git receive-pack                                                       |
              +-- hooks/pre-receive .... "may these refs move? record them" -------+

One request per push: git runs pre-receive once, with every update, before any ref moves. The
parent checks the ref policy, records each update that makes an event as an intent and commits
before it answers ``ok``; after receive-pack has ended it settles the intents against the refs
(``forge_ci.pushes.settling``). The hook is a bash program (hooks/hook.bash): a Python
interpreter costs ~15-20 ms of CPU to start, bash ~3 ms. bash speaks TCP (``/dev/tcp``) but not
Unix sockets, hence loopback TCP. Any local user can connect to loopback, so both directions
carry a secret from receive-pack's environment:

- the request names the push session (128 random bits): a stranger cannot submit updates;
- ``ok`` carries the answer key (another 128 bits): should the parent die and a stranger bind
  its port, the stranger cannot approve an update that was never recorded.

Request (hook -> parent), UTF-8, ended by a line holding only ``.`` (bash cannot half-close a
socket, so the end is marked in-band)::

    forge-ci-hook 1
    <hook> <phase> <push session id>
    <old oid> <new oid> <ref name>        one line per update (git's own hook input format)
    .

Answer (parent -> hook), then the parent closes the connection::

    ok <answer key>
    refuse
    <message for the pusher, any number of lines>

Ref names cannot contain spaces or newlines (git-check-ref-format), and no update line is ``.``,
so the format needs no quoting.
"""

from __future__ import annotations

from dataclasses import dataclass

from forge_ci.refs import Update

MAGIC = "forge-ci-hook 1"
END = "."
#: The most a request may hold: pushes of tens of thousands of refs still fit.
MAX_REQUEST_BYTES = 16 * 1024 * 1024

# Environment of ``git receive-pack`` (inherited by its hooks), set only by the SSH parent.
ENV_SESSION = "FORGE_CI_PUSH_SESSION"
ENV_PORT = "FORGE_CI_PUSH_PORT"
ENV_ANSWER_KEY = "FORGE_CI_PUSH_ANSWER_KEY"
ENV_PUSHER = "FORGE_CI_PUSHER"
ENV_REPOSITORY = "FORGE_CI_REPOSITORY"


class WireError(ValueError):
    """A request or answer that does not follow this format."""


@dataclass(frozen=True)
class Request:
    """What a hook asks: its name, git's phase (``-`` for pre-receive), the push, the updates.

    ``updates`` are all of git's lines: the parent must see (and refuse) pushes into
    ``refs/forge-ci/``; it records only those that make events (:func:`forge_ci.refs.events_in`).
    """

    hook: str
    phase: str
    session: str
    updates: tuple[Update, ...]


@dataclass(frozen=True)
class Answer:
    """The parent's verdict; ``message`` is shown to the pusher when ``ok`` is False."""

    ok: bool
    message: str = ""


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
    lines.append(END)
    return ("\n".join(lines) + "\n").encode()


def request_complete(data: bytes) -> bool:
    """Whether ``data`` holds a whole request (its end line has arrived)."""
    return data.endswith(f"\n{END}\n".encode())


def decode_request(data: bytes) -> Request:
    try:
        text = data.decode()
    except UnicodeDecodeError:
        raise WireError("the request is not UTF-8") from None
    if not text.endswith(f"\n{END}\n"):
        raise WireError("the request is incomplete: its end line is missing")
    head, _, rest = text[: -len(END) - 1].partition("\n")
    if head != MAGIC:
        raise WireError("the request does not start with the forge-ci hook header")
    line, _, body = rest.partition("\n")
    fields = line.split(" ")
    if len(fields) != 3 or not all(fields):
        raise WireError("the request's second line is not '<hook> <phase> <session>'")
    return Request(fields[0], fields[1], fields[2], parse_updates(body))


def encode_answer(answer: Answer, answer_key: str) -> bytes:
    if answer.ok:
        return f"ok {answer_key}\n".encode()
    return ("refuse\n" + answer.message.rstrip("\n") + "\n").encode()


def decode_answer(data: bytes, answer_key: str) -> Answer:
    """What the hook concludes from an answer; an ``ok`` without the right key is a refusal."""
    text = data.decode(errors="replace")
    head, _, message = text.partition("\n")
    if head == f"ok {answer_key}":
        return Answer(True)
    if head == "refuse":
        return Answer(False, message.rstrip("\n"))
    raise WireError("the answer is neither 'ok' with this push's key nor 'refuse'")
