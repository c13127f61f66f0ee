"""Installing the deployment's hooks into ``settings.hooks_dir`` (``forge-ci hooks install``).

Every managed repository's ``core.hooksPath`` points at that one directory (set at creation,
re-asserted before each push), so hooks never come from a pushed repository. The one hook,
``pre-receive``, is the bash program ``hook.bash`` beside this file, written with the absolute
path of bash and the wire constants of ``forge_ci.hookwire`` filled in, so that the two ends of
the conversation cannot drift apart. A ``reference-transaction`` hook an earlier version
installed is removed (see ``forge_ci.hookchecks``).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
from pathlib import Path

from forge_ci import hookwire
from forge_ci.errors import ConfigurationError
from forge_ci.hookchecks import REQUIRED_HOOKS, RETIRED_HOOKS
from forge_ci.settings import Settings

TEMPLATE = Path(__file__).with_name("hook.bash")
#: Seconds a hook waits for the SSH parent's answer before refusing.
ANSWER_TIMEOUT = 120


def find_bash() -> str:
    bash = shutil.which("bash")
    if bash is None:
        raise ConfigurationError("bash is required to run forge-ci's git hooks; install it")
    return os.path.realpath(bash)


def hook_program(bash: str) -> str:
    """The text of the hook program, ready to run."""
    text = TEMPLATE.read_text()
    values = {
        "@BASH@": bash,
        "@ENV_SESSION@": hookwire.ENV_SESSION,
        "@ENV_PORT@": hookwire.ENV_PORT,
        "@ENV_ANSWER_KEY@": hookwire.ENV_ANSWER_KEY,
        "@MAGIC@": hookwire.MAGIC,
        "@ANSWER_TIMEOUT@": str(ANSWER_TIMEOUT),
    }
    for placeholder, value in values.items():
        text = text.replace(placeholder, value)
    if any(placeholder in text for placeholder in values):
        raise ConfigurationError("hook.bash has a placeholder install.py does not fill")
    return text


def check_bash_tcp(bash: str) -> None:
    """Refuse a bash built without ``/dev/tcp``: its hooks could never reach the server.

    (They would fail closed, refusing every push; saying so at install time is kinder.)
    """
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        port = listener.getsockname()[1]
        result = subprocess.run(
            [bash, "-c", f'exec 3<>"/dev/tcp/127.0.0.1/{port}"'],
            capture_output=True,
            text=True,
            timeout=30,
        )
    if result.returncode != 0:
        raise ConfigurationError(
            f"{bash} cannot open /dev/tcp connections (built without network redirections); "
            "forge-ci's hooks need that"
        )


def install_hooks(settings: Settings) -> list[Path]:
    """(Re)write every hook into the hooks directory, atomically; return the paths written.

    Retired hooks are removed after the new ones are in place.
    """
    bash = find_bash()
    check_bash_tcp(bash)
    text = hook_program(bash)
    directory = settings.hooks_dir
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for name in REQUIRED_HOOKS:
        path = directory / name
        temporary = directory / f".{name}.tmp-{os.getpid()}"
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o755)
        with os.fdopen(fd, "w") as handle:
            handle.write(text)
        os.chmod(temporary, 0o755)  # whatever the umask was
        os.replace(temporary, path)
        written.append(path)
    for name in RETIRED_HOOKS:
        (directory / name).unlink(missing_ok=True)
    return written
