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
it imports nothing at all (``dataclasses`` or ``typing`` alone would cost the hook more than its
whole budget), hence the hand-written value classes below.
"""

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


class _Value:
    """A small immutable record compared by value (what a frozen dataclass would give)."""

    __slots__: tuple[str, ...] = ()

    def _fields(self) -> tuple[object, ...]:
        return tuple(getattr(self, name) for name in self.__slots__)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable")

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, _Value)
            and type(other) is type(self)
            and self._fields() == other._fields()
        )

    def __hash__(self) -> int:
        return hash(self._fields())

    def __repr__(self) -> str:
        inner = ", ".join(f"{n}={getattr(self, n)!r}" for n in self.__slots__)
        return f"{type(self).__name__}({inner})"

    def _init(self, **values: object) -> None:
        for name, value in values.items():
            object.__setattr__(self, name, value)


class Update(_Value):
    """One ref update exactly as git reports it to a hook."""

    __slots__ = ("old", "new", "ref")
    old: str
    new: str
    ref: str

    def __init__(self, old: str, new: str, ref: str) -> None:
        self._init(old=old, new=new, ref=ref)


class Request(_Value):
    """What a hook asks: its name, git's phase (``-`` for pre-receive), the push, the updates."""

    __slots__ = ("hook", "phase", "session", "updates")
    hook: str
    phase: str
    session: str
    updates: tuple[Update, ...]

    def __init__(self, hook: str, phase: str, session: str, updates: tuple[Update, ...]) -> None:
        self._init(hook=hook, phase=phase, session=session, updates=tuple(updates))


class Answer(_Value):
    """The parent's verdict; ``message`` is shown to the pusher when ``ok`` is False."""

    __slots__ = ("ok", "message")
    ok: bool
    message: str

    def __init__(self, ok: bool, message: str = "") -> None:
        self._init(ok=ok, message=message)


def is_zero(oid: str) -> bool:
    """True for git's null object id (``0000...``), meaning "no such ref" on either side."""
    return oid.strip("0") == ""


def events_in(updates: list[Update] | tuple[Update, ...]) -> list[Update]:
    """The updates that make push events: real ref moves outside forge-ci's own namespace.

    Git's ``reference-transaction`` input also carries entries that move nothing: ``HEAD`` when
    the pushed branch is HEAD's target (a reflog-only mirror of the branch update; a push *to*
    HEAD is refused by pre-receive before any transaction), and ``0000 -> 0000`` when git deletes
    a ref from packed-refs. Those are dropped, like updates of forge-ci's own pins.
    """
    return [
        u
        for u in updates
        if u.old != u.new and u.ref != "HEAD" and not u.ref.startswith(INTERNAL_REF_PREFIX)
    ]


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
