"""The deployment's git hooks: one program, run by git as ``pre-receive`` or
``reference-transaction`` (it dispatches on the name it was started as, like Pagure's hookrunner).

Every push waits for these at the terminal, three times per ref update, so they must start in a
few milliseconds: they run as ``python -S -I`` (see hooks/install.py) and import only the
built-in ``posix`` and ``_socket`` modules and ``forge_ci.hookwire``, never SQLAlchemy (importing
it alone costs ~100 ms; even ``os`` or ``socket`` would add several ms per hook).

They hold no database connection: each hook hands what git told it to the SSH parent over the
push's Unix socket (``forge_ci.hookwire``) and obeys the answer. Without a push session (an
operator's ``git gc`` or ``pack-refs``), ``reference-transaction`` records nothing and exits 0,
while ``pre-receive`` refuses: every push must come through forge-ci.
"""

import posix  # built in; os would load collections.abc & co. for one environment lookup
import sys

from forge_ci import hookwire

#: Longest wait for the SSH parent's answer. It answers within the database's own timeouts; this
#: only ends a hook whose parent hangs, so that receive-pack (and the repository lock) is freed.
ANSWER_TIMEOUT = 120.0


def main(argv: list[str]) -> int:
    """Run the hook named by ``argv[0]``; return its exit status."""
    name = argv[0].rsplit("/", 1)[-1]
    try:
        if name == "pre-receive":
            return pre_receive()
        if name == "reference-transaction":
            return reference_transaction(argv[1] if len(argv) > 1 else "")
    except hookwire.WireError as exc:
        return _refuse(f"forge-ci: {exc}; the push is refused")
    return _refuse(f"forge-ci: {name!r} is not a forge-ci hook")


def pre_receive() -> int:
    """Ask the SSH parent whether these refs may move; refuse the whole push otherwise."""
    data = sys.stdin.buffer.read()
    session, socket_path = _push_session()
    if not session or not socket_path:
        return _refuse(
            "forge-ci: pushes are accepted only through forge-ci's SSH server; "
            "this push has no forge-ci session and is refused"
        )
    updates = hookwire.parse_updates(_text(data))
    return _ask(socket_path, hookwire.Request("pre-receive", "-", session, updates))


def reference_transaction(phase: str) -> int:
    """Record (``prepared``), confirm (``committed``) or cancel (``aborted``) this push's updates.

    Git refuses the transaction when ``prepared`` exits non-zero, which is what makes an
    unrecorded ref update impossible. The exit status of the other phases is ignored by git;
    the SSH parent settles anything they fail to report against the refs afterwards.
    """
    data = sys.stdin.buffer.read()
    if phase not in ("prepared", "committed", "aborted"):
        return 0  # "preparing" (git 2.46+) comes before locks are taken: nothing to record yet
    session, socket_path = _push_session()
    if not session:
        return 0  # not a push (gc, pack-refs, an operator's update-ref): nothing to record
    updates = hookwire.events_in(hookwire.parse_updates(_text(data)))
    if not updates:
        return 0
    if not socket_path:
        return _refuse("forge-ci: this push has no forge-ci hook socket; it cannot be recorded")
    return _ask(socket_path, hookwire.Request("reference-transaction", phase, session, updates))


def _push_session() -> tuple[str, str]:
    """The push session id and socket path the SSH parent put in receive-pack's environment."""
    environ = posix.environ
    session = environ.get(hookwire.ENV_SESSION.encode(), b"")
    socket_path = environ.get(hookwire.ENV_SOCKET.encode(), b"")
    return session.decode(errors="replace"), socket_path.decode(errors="surrogateescape")


def _text(data: bytes) -> str:
    try:
        return data.decode()
    except UnicodeDecodeError:
        raise hookwire.WireError("git sent ref names that are not UTF-8") from None


def _ask(socket_path: str, request: hookwire.Request) -> int:
    # _socket, not socket: the socket module pulls in enum and selectors, which would double
    # this program's start-up time for nothing it uses.
    import _socket

    connection = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        connection.settimeout(ANSWER_TIMEOUT)
        connection.connect(socket_path)
        connection.sendall(hookwire.encode_request(request))
        connection.shutdown(_socket.SHUT_WR)
        chunks = []
        while True:
            chunk = connection.recv(65536)
            if not chunk:
                break
            chunks.append(chunk)
    except OSError as exc:
        return _refuse(
            f"forge-ci: cannot reach the forge-ci server for this push ({exc.strerror or exc}); "
            "the update is refused"
        )
    finally:
        connection.close()
    if not chunks:
        return _refuse("forge-ci: the forge-ci server ended this push without an answer")
    answer = hookwire.decode_answer(b"".join(chunks))
    if answer.ok:
        return 0
    return _refuse(answer.message)


def _refuse(message: str) -> int:
    sys.stderr.write(message.rstrip("\n") + "\n")
    sys.stderr.flush()
    return 1
