"""Carrying out one SSH-side command on a channel: slot, deadline, errors, exit status."""

from __future__ import annotations

import importlib
import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import paramiko
from sqlalchemy.orm import Session

from forge_ci.authz import Actor, current_actor
from forge_ci.db import unavailable_on_failure
from forge_ci.errors import ForgeCIError
from ssh.auth import Pusher
from ssh.console.catalog import COMMANDS
from ssh.console.parser import Parsed, Usage, help_lines, parse
from ssh.console.terminal import ClientGone, Terminal, TimedOut
from ssh.context import ServerContext

log = logging.getLogger(__name__)

EXIT_OK = 0
EXIT_UNSUCCESSFUL = 1
EXIT_REFUSED = 2


@dataclass
class Call:
    """What a handler gets: the server, the caller, the parsed arguments and the terminal."""

    ctx: ServerContext
    pusher: Pusher
    args: Any
    term: Terminal

    @contextmanager
    def session(self, *, read_only: bool = False) -> Iterator[tuple[Session, Actor]]:
        """A session and the caller as an Actor read from it now (admin status included).

        Commits when the block ends without an error (read-only blocks have nothing to commit).
        """
        with unavailable_on_failure(), self.ctx.database.session(read_only=read_only) as session:
            actor = current_actor(
                session, Actor(user_id=self.pusher.user_id, name=self.pusher.name)
            )
            yield session, actor
            if not read_only:
                session.commit()

    def print(self, value: Any, text: Callable[[], None]) -> int:
        """``value`` as JSON with ``--json``, else ``text()``; exit status 0."""
        if getattr(self.args, "json", False):
            self.term.json(value)
        else:
            text()
        return EXIT_OK


def run_console_command(
    ctx: ServerContext, channel: paramiko.Channel, pusher: Pusher, words: list[str]
) -> int:
    """Run ``words`` as ``pusher``; returns the exit status (output already sent)."""
    term = Terminal(channel, ctx.command_timeout)
    try:
        try:
            parsed = parse(words, COMMANDS)
        except Usage as exc:
            term.err(f"forge-ci: {exc.message}")
            for line in exc.usage:
                term.err(f"usage: {line.strip().removeprefix('usage: ')}")
            return EXIT_REFUSED
        if parsed.wants_help:
            for line in help_lines(COMMANDS, parsed.command.words):
                term.out(line)
            return EXIT_OK
        with ctx.command_slots.hold(pusher.user_id):
            log.info("%s: %s", pusher.name, parsed.command.name)
            return _handle(ctx, pusher, parsed, term)
    except ForgeCIError as exc:
        return _refuse(term, exc.message)
    except TimedOut:
        return _refuse(term, f"the command did not finish within {ctx.command_timeout:.0f} s")
    except ClientGone:
        log.info("%s went away during %s", pusher.name, " ".join(words[:2]))
        return EXIT_REFUSED


def _handle(ctx: ServerContext, pusher: Pusher, parsed: Parsed, term: Terminal) -> int:
    module, function = parsed.command.handler.split(".")
    handler = getattr(importlib.import_module(f"ssh.console.{module}"), function)
    status: int = handler(Call(ctx, pusher, parsed.arguments, term))
    return status


def _refuse(term: Terminal, message: str) -> int:
    term.last_words()
    try:
        term.err(f"forge-ci: {message}")
    except (ClientGone, TimedOut):
        pass
    return EXIT_REFUSED


def shell_greeting(pusher: Pusher) -> list[str]:
    """What an interactive session (``ssh git@HOST``) prints before it ends."""
    return [
        f"Hi {pusher.name}! You are authenticated, but forge-ci does not provide shell access; "
        "use git clone, fetch and push, and these commands:",
        *help_lines(COMMANDS),
    ]
