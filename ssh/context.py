"""What every connection of one ``forge-ci ssh`` process shares."""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from forge_ci.db import Database
from forge_ci.queueing import JobQueue
from forge_ci.settings import Settings
from ssh.console.slots import CommandSlots


@dataclass(frozen=True)
class ServerContext:
    settings: Settings
    database: Database
    queue: JobQueue
    #: Repositories (``owner/name``) whose pushes run without hooks and record nothing: the
    #: push benchmark's baseline only, which builds its server in Python
    #: (``forge_ci_testing.unhooked_ssh``). ``forge-ci ssh`` never sets it, and no setting or
    #: environment variable reaches it, so a deployed server always requires its hooks.
    unhooked: frozenset[str] = field(default=frozenset())
    #: The SSH-side commands running now, per user (``ssh_commands_per_user`` each).
    command_slots: CommandSlots = field(default_factory=CommandSlots)

    @property
    def command_timeout(self) -> float:
        return self.settings.ssh_command_timeout

    def git_environment(self, **extra: str) -> dict[str, str]:
        """The environment of a git child: a clean minimum, never the server's own.

        The server's environment may hold database credentials; git and the hooks need none.
        """
        env = {"PATH": os.environ.get("PATH", os.defpath), "LC_ALL": "C"}
        if "HOME" in os.environ:
            env["HOME"] = os.environ["HOME"]
        env.update(extra)
        return env
