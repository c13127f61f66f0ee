"""What git may ask to run: ``git-upload-pack`` or ``git-receive-pack`` on one repository.

Any other first word is an SSH-side command (``ssh.console``), parsed there.

Git sends the command as one string, the path single-quoted by its ``sq_quote`` rules::

    git-receive-pack 'alice/demo.git'
    git-upload-pack '/alice/demo'
    git upload-pack 'alice/demo.git'      (older clients, and people typing it)

The path may have a leading ``/`` and a trailing ``.git``; both are optional, nothing else is
rewritten. Anything that is not exactly one of these forms is refused: the command string never
reaches a shell, and no argument other than the repository is ever passed on to git.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass

from forge_ci.authz import Role
from forge_ci.errors import InvalidInput, NotFound
from forge_ci.names import split_full_name

MAX_COMMAND_BYTES = 1024

#: service -> the role it needs.
SERVICES = {"git-upload-pack": Role.READ, "git-receive-pack": Role.WRITE}


@dataclass(frozen=True)
class GitCommand:
    service: str
    #: ``owner/name`` as stored (without ``.git``).
    full_name: str

    @property
    def needed_role(self) -> Role:
        return SERVICES[self.service]

    @property
    def git_subcommand(self) -> str:
        """``upload-pack`` or ``receive-pack``, for ``git <subcommand> <path>``."""
        return self.service.removeprefix("git-")


def is_git_command(words: list[str]) -> bool:
    """Whether ``words`` ask for git (see :func:`parse_command`), not for ``ssh.console``."""
    return bool(words) and (words[0].startswith("git-") or words[0] == "git")


def parse_command(raw: bytes) -> GitCommand:
    """Parse an exec request; InvalidInput for an unknown command, NotFound for a bad path."""
    if len(raw) > MAX_COMMAND_BYTES:
        raise InvalidInput("the command is too long")
    try:
        text = raw.decode()
        words = shlex.split(text)
    except (UnicodeDecodeError, ValueError):
        raise InvalidInput(
            "the command is not valid: expected git-upload-pack or git-receive-pack"
        ) from None
    if len(words) == 3 and words[0] == "git":
        words = [f"git-{words[1]}", words[2]]
    if len(words) != 2 or words[0] not in SERVICES:
        raise InvalidInput(
            "only git-upload-pack and git-receive-pack are served here; "
            "use git clone, fetch or push with ssh://git@HOST:PORT/OWNER/NAME.git"
        )
    return GitCommand(words[0], repository_name(words[1]))


def repository_name(path: str) -> str:
    """``/alice/demo.git`` -> ``alice/demo``; NotFound (never a hint why) for anything else."""
    name = path.removeprefix("/").removesuffix(".git")
    try:
        owner, repo = split_full_name(name)
    except InvalidInput:
        raise NotFound(f"repository {path} not found") from None
    return f"{owner}/{repo}"
