"""git over OpenSSH as one person, for tests and benchmarks that push to a forge-ci server."""

from __future__ import annotations

import os
import shlex
import subprocess
from pathlib import Path


class GitClient:
    """git with OpenSSH as one person: a private HOME, that person's key, nothing global."""

    def __init__(self, home: Path, key: Path, port: int, log_level: str = "ERROR") -> None:
        self.home = home
        self.port = port
        home.mkdir(parents=True, exist_ok=True)
        ssh = (
            f"ssh -F /dev/null -i {key} -o IdentitiesOnly=yes -o BatchMode=yes "
            "-o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null "
            f"-o LogLevel={log_level} -p {port}"
        )
        self.ssh_argv = shlex.split(ssh)
        self.env = {
            "PATH": os.environ["PATH"],
            "HOME": str(home),
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_SSH_COMMAND": ssh,
            "GIT_AUTHOR_NAME": "Tester",
            "GIT_AUTHOR_EMAIL": "tester@example.com",
            "GIT_COMMITTER_NAME": "Tester",
            "GIT_COMMITTER_EMAIL": "tester@example.com",
            "LC_ALL": "C",
        }

    def ssh_command(self, *words: str) -> list[str]:
        """The argv of ``ssh git@127.0.0.1 WORDS`` (the words quoted for the server's split)."""
        return [*self.ssh_argv, "git@127.0.0.1", shlex.join(words)]

    def ssh(
        self, *words: str, stdin: bytes = b"", timeout: float = 60
    ) -> subprocess.CompletedProcess[str]:
        """Run an SSH-side command (``ssh git@HOST run list ...``) with ``stdin``; never checks."""
        result = subprocess.run(
            self.ssh_command(*words),
            env=self.env,
            input=stdin,
            capture_output=True,
            timeout=timeout,
        )
        return subprocess.CompletedProcess(
            result.args, result.returncode, result.stdout.decode(), result.stderr.decode()
        )

    def ssh_process(self, *words: str, stdin: int = subprocess.DEVNULL) -> subprocess.Popen[bytes]:
        """An SSH-side command left running (a follow), stdout and stderr piped."""
        return subprocess.Popen(
            self.ssh_command(*words),
            env=self.env,
            stdin=stdin,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )

    def url(self, path: str = "alice/demo.git") -> str:
        return f"ssh://git@127.0.0.1:{self.port}/{path}"

    def git(
        self, *args: str, cwd: Path | None = None, check: bool = True, timeout: float = 120
    ) -> subprocess.CompletedProcess[str]:
        result = subprocess.run(
            ["git", *args],
            cwd=cwd,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
        )
        if check and result.returncode != 0:
            raise AssertionError(
                f"git {' '.join(args)} failed ({result.returncode}):\n{result.stderr}"
            )
        return result

    def work_tree(self, name: str = "work") -> Path:
        """A new local repository with one commit on ``main``."""
        path = self.home / name
        self.git("init", "-q", "-b", "main", str(path))
        self.commit(path, "first")
        return path

    def commit(self, work: Path, message: str) -> str:
        (work / "file.txt").write_text(message + "\n")
        self.git("add", "file.txt", cwd=work)
        self.git("commit", "-q", "-m", message, cwd=work)
        return self.git("rev-parse", "HEAD", cwd=work).stdout.strip()

    def push(
        self, work: Path, *refspecs: str, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        return self.git("push", "--porcelain", self.url(), *refspecs, cwd=work, check=check)
