"""``forge-ci up``: every service on one machine with the embedded defaults.

init ──► private Redis (the default URL) ──► worker, ssh, web ──► ports answer
     ──► Docker reachable and the runner image built?
           yes: ``provider ensure`` (name local, labels self-hosted,linux,x64,ubuntu-latest,
                ubuntu-24.04,ubuntu-22.04 - a Debian image offered for those labels - scope
                all, token in <data dir>/provider-token, 0600) ──► ``provider run --slots 2``
           no:  say what is missing; jobs stay queued until a provider comes
     ──► with --demo: the demo (forge_ci.cli.demo) ──► the ``export`` lines for the CLI
     ──► wait, or stop with --exit-after-demo ──► stop: provider, web/ssh/worker, Redis last

``--data-dir``, ``--host``, ``--web-port`` and ``--ssh-port`` become the ``FORGE_CI_*``
variables of ``up`` and its children (options win over the environment).
"""

from __future__ import annotations

import os
import shlex
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from urllib.parse import urlsplit

import click

from forge_ci.cli.common import use_settings
from forge_ci.errors import Unavailable
from forge_ci.settings import DEFAULT_DATA_DIR, SETTING_VARIABLES, Settings, load_settings

#: Services in start order; each is a ``forge-ci`` subcommand run as a child process.
SERVICES = ("worker", "ssh", "web", "provider")
#: The provider ``up`` registers for this machine.
LOCAL_PROVIDER = "local"
#: The standard image (Debian bookworm, deploy/runner.Dockerfile) is offered for GitHub's
#: standard Ubuntu x64 labels, so ``runs-on: ubuntu-latest`` finds this provider.
LOCAL_LABELS = "self-hosted,linux,x64,ubuntu-latest,ubuntu-24.04,ubuntu-22.04"
LOCAL_SLOTS = 2


def wait_for_port(host: str, port: int, timeout: float = 30) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with socket.create_connection((host, port), timeout=0.5):
                return True
        except OSError:
            time.sleep(0.05)
    return False


def wait_for_line(
    path: Path, offset: int, text: str, process: subprocess.Popen[bytes], timeout: float = 30
) -> bool:
    """Wait until ``text`` appears in the log ``path`` after ``offset``, while ``process`` runs.

    For the SSH server, which prints where it listens once it does: probing its port instead
    makes it log a failed handshake (with paramiko's traceback) at every start.
    """
    needle = text.encode()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with open(path, "rb") as handle:
                handle.seek(offset)
                if needle in handle.read():
                    return True
        except FileNotFoundError:
            pass  # the service has not created its log yet: look again below
        if process.poll() is not None:
            return False
        time.sleep(0.05)
    return False


def _listen(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def up_environment(
    environ: Mapping[str, str],
    *,
    data_dir: Path | None = None,
    host: str | None = None,
    web_port: int | None = None,
    ssh_port: int | None = None,
) -> dict[str, str]:
    """The environment of ``up`` and its children: ``environ`` with the options applied.

    Options win over the environment (and the configuration file), and are handed to the
    children as the same ``FORGE_CI_*`` variables, so every process agrees on one Settings.
    ``--host`` and a port replace their half of ``ssh_listen`` / ``web_listen`` only.
    """
    env = dict(environ)
    if data_dir is not None:
        env["FORGE_CI_DATA_DIR"] = str(data_dir.expanduser().absolute())
    current = load_settings(env)
    env["FORGE_CI_DATA_DIR"] = str(current.data_dir)
    for var, (old_host, old_port), port in (
        ("FORGE_CI_SSH_LISTEN", current.ssh_listen, ssh_port),
        ("FORGE_CI_WEB_LISTEN", current.web_listen, web_port),
    ):
        if host is not None or port is not None:
            env[var] = _listen(
                old_host if host is None else host, old_port if port is None else port
            )
    return env


def cli_hint(env: Mapping[str, str]) -> list[str]:
    """How to reach this installation with ``forge-ci`` from another shell: every setting
    variable ``up`` was given (the data directory always), then a command to try."""
    lines = []
    for var in ("FORGE_CI_DATA_DIR", *(v for v in SETTING_VARIABLES if v != "FORGE_CI_DATA_DIR")):
        value = env.get(var)
        if not value:
            continue
        parts = urlsplit(value) if "://" in value else None
        if parts is not None and parts.password:
            value = value.replace(f":{parts.password}@", ":***@", 1)
            lines.append(f"  export {var}={shlex.quote(value)}  # with your password for ***")
        else:
            lines.append(f"  export {var}={shlex.quote(value)}")
    return ["use it from another shell:", *lines, f"  {_forge_ci_command()} user list"]


def _forge_ci_command() -> str:
    """How this ``forge-ci`` is run: its name when it is on PATH, else its full path."""
    script = Path(sys.executable).parent / "forge-ci"
    if not script.exists():
        return f"{shlex.quote(sys.executable)} -m forge_ci"
    found = shutil.which("forge-ci")
    if found is not None and Path(found).resolve() == script.resolve():
        return "forge-ci"
    return shlex.quote(str(script))


def _free_port(host: str) -> int:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.bind((host, 0))
        port: int = probe.getsockname()[1]
        return port


def _pin_ephemeral_ports(env: dict[str, str]) -> Settings:
    """Replace a listen port 0 ("any free port") by a concrete free port in ``env``.

    The children must agree with this process on where to find each other, and ``up`` waits
    for the ports to answer, so "any port" is chosen here once.
    """
    config = load_settings(env)
    for var, (host, port) in (
        ("FORGE_CI_SSH_LISTEN", config.ssh_listen),
        ("FORGE_CI_WEB_LISTEN", config.web_listen),
    ):
        if port == 0:
            port = _free_port(host)
            env[var] = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    return load_settings(env)


def _service_argv(ctx: click.Context, root: click.Group, service: str) -> tuple[str, ...] | None:
    """Arguments after ``forge-ci <service>`` that run it, or None when this version has none.

    A group (``forge-ci provider`` holds the administration commands) runs its ``run``
    subcommand.
    """
    command = root.get_command(ctx, service)
    if command is None:
        return None
    if isinstance(command, click.Group):
        return ("run",) if command.get_command(ctx, "run") is not None else None
    return ()


@click.command()
@click.option(
    "--data-dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="Data directory, created when missing."
    f" [env: FORGE_CI_DATA_DIR; default: {DEFAULT_DATA_DIR}]",
)
@click.option(
    "--host",
    metavar="HOST",
    help="Address the web and SSH servers listen on (0.0.0.0: every interface)."
    " [env: the HOST of FORGE_CI_WEB_LISTEN and FORGE_CI_SSH_LISTEN; default: 127.0.0.1]",
)
@click.option(
    "--web-port",
    type=click.IntRange(0, 65535),
    metavar="PORT",
    help="Port of the web UI and runner API (0: any free port)."
    " [env: the PORT of FORGE_CI_WEB_LISTEN; default: 8080]",
)
@click.option(
    "--ssh-port",
    type=click.IntRange(0, 65535),
    metavar="PORT",
    help="Port of the git SSH server (0: any free port)."
    " [env: the PORT of FORGE_CI_SSH_LISTEN; default: 2222]",
)
@click.option("--demo", is_flag=True, help="Also create a demo user, repository and pipeline.")
@click.option(
    "--exit-after-demo",
    is_flag=True,
    help="Stop everything once the demo has printed its result (for scripts and tests).",
)
def up(
    data_dir: Path | None,
    host: str | None,
    web_port: int | None,
    ssh_port: int | None,
    demo: bool,
    exit_after_demo: bool,
) -> None:
    """Start web, ssh, worker, a private Redis and (with Docker) a provider.

    Options win over the environment variables and the configuration file (see
    docs/configuration.md); Ctrl-C stops every service, Redis last.
    """
    from forge_ci.cli.database import init
    from forge_ci.cli.root import cli as root
    from forge_ci.cli.supervisor import Supervisor, private_redis_socket, redis_child, service_child

    ctx = click.get_current_context()
    env = up_environment(
        os.environ, data_dir=data_dir, host=host, web_port=web_port, ssh_port=ssh_port
    )
    config = _pin_ephemeral_ports(env)
    use_settings(config)
    ctx.invoke(init)
    supervisor = Supervisor(env)
    try:
        socket_path = private_redis_socket(config)
        if socket_path is not None:
            socket_path.unlink(missing_ok=True)
            supervisor.start(redis_child(config, socket_path), ready=socket_path)
            click.echo(f"redis     {config.redis_url}")
        started = []
        for service in SERVICES:
            argv = _service_argv(ctx, root, service)
            if argv is None or service == "provider":
                continue
            child = service_child(config, service, argv)
            offset = child.log_path.stat().st_size if child.log_path.exists() else 0
            supervisor.start(child)
            started.append(service)
            if service == "ssh":
                ssh = (child, offset)
        # Port 0 ("any free port") was pinned to a concrete port above, so both can be awaited.
        if "ssh" in started:
            child, offset = ssh
            assert child.process is not None
            if not wait_for_line(
                child.log_path, offset, "forge-ci ssh listening on", child.process
            ):
                raise Unavailable(f"the SSH server did not listen on {config.ssh_listen}")
        if "web" in started and not wait_for_port(*config.web_listen):
            raise Unavailable(f"the web server did not listen on {config.web_listen}")
        problem = None
        if _service_argv(ctx, root, "provider") is not None and "web" in started:
            problem = docker_problem(config)
            if problem is None:
                provider_argv = local_provider(ctx, config)
                supervisor.start(service_child(config, "provider", provider_argv))
                started.append("provider")
        for service in started:
            click.echo(f"{service:<9} started (log: {config.run_dir / (service + '.log')})")
        if problem is not None:
            click.echo(f"provider  not started: {problem}")
        missing = [s for s in SERVICES if s not in started and (s != "provider" or not problem)]
        if missing:
            click.echo(f"not available in this version: {', '.join(missing)}")
        if demo:
            from forge_ci.cli.demo import run_demo

            run_demo(config, started, echo=click.echo)
        for line in cli_hint(env):
            click.echo(line)
        if demo and exit_after_demo:
            return
        click.echo("forge-ci is up; press Ctrl-C to stop")
        dead = supervisor.wait()
        if dead is not None:
            raise Unavailable(
                f"{dead.name} stopped unexpectedly; see {dead.log_path}. Stopped the rest."
            )
    finally:
        supervisor.stop()


def docker_problem(config: Settings) -> str | None:
    """Why this machine cannot run jobs now (Docker, the runner image), or None."""
    from worker.provider.containers import DockerDriver

    try:
        with DockerDriver("up", runner_image=config.runner_image, timeout=10) as driver:
            driver.ping()
            if not driver.image_exists():
                return (
                    f"the runner image {config.runner_image} is not built: jobs will stay queued;"
                    " build it with deploy/build-runner-image"
                )
    except Unavailable as exc:
        return f"Docker is not reachable ({exc}): jobs will stay queued; run deploy/start-dockerd"
    return None


def local_provider(ctx: click.Context, config: Settings) -> list[str]:
    """Register (or refresh) this machine's provider; return the arguments that run it."""
    from forge_ci.cli.providers import provider_ensure
    from forge_ci.coordinator.credentials import new_token

    token_file = config.data_dir / "provider-token"
    if not token_file.exists():
        fd = os.open(token_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "w") as handle:
            handle.write(new_token() + "\n")
    ctx.invoke(
        provider_ensure,
        name=LOCAL_PROVIDER,
        token_file=str(token_file),
        labels=LOCAL_LABELS,
        scope="all",
        repositories=None,
    )
    host, port = config.web_listen
    if host in ("0.0.0.0", "::", ""):
        host = "127.0.0.1"
    server = f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"
    # The provider of `forge-ci up` talks to the web server on this machine, over loopback.
    return [
        "run",
        "--server",
        server,
        "--allow-http",
        "--token-file",
        str(token_file),
        "--slots",
        str(LOCAL_SLOTS),
    ]
