"""``forge-ci up``: every service on one machine with the embedded defaults.

init ──► private Redis (the default URL) ──► worker, ssh, web ──► ports answer
     ──► Docker reachable and the runner image built?
           yes: ``provider ensure`` (name local, labels self-hosted,linux, scope all, token
                in <data dir>/provider-token, 0600) ──► ``provider run --slots 2``
           no:  say what is missing; jobs stay queued until a provider comes
     ──► with --demo: the demo (forge_ci.cli.demo) ──► wait, or stop with --exit-after-demo
"""

from __future__ import annotations

import os
import socket
import time

import click

from forge_ci.cli.common import settings
from forge_ci.errors import Unavailable
from forge_ci.settings import Settings, load_settings

#: Services in start order; each is a ``forge-ci`` subcommand run as a child process.
SERVICES = ("worker", "ssh", "web", "provider")
#: The provider ``up`` registers for this machine.
LOCAL_PROVIDER = "local"
LOCAL_LABELS = "self-hosted,linux"
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


def _service_argv(root: click.Group, service: str) -> tuple[str, ...] | None:
    """Arguments after ``forge-ci <service>`` that run it, or None when this version has none.

    A group (``forge-ci provider`` holds the administration commands) runs its ``run``
    subcommand.
    """
    command = root.commands.get(service)
    if command is None:
        return None
    if isinstance(command, click.Group):
        return ("run",) if "run" in command.commands else None
    return ()


@click.command()
@click.option("--demo", is_flag=True, help="Also create a demo user, repository and pipeline.")
@click.option(
    "--exit-after-demo",
    is_flag=True,
    help="Stop everything once the demo has printed its result (for scripts and tests).",
)
def up(demo: bool, exit_after_demo: bool) -> None:
    """Start web, ssh, worker, a private Redis and (with Docker) a provider."""
    from forge_ci.cli import cli as root
    from forge_ci.cli.database import init
    from forge_ci.cli.supervisor import Supervisor, private_redis_socket, redis_child, service_child

    ctx = click.get_current_context()
    ctx.invoke(init)
    env = {**os.environ, "FORGE_CI_DATA_DIR": str(settings().data_dir)}
    config = _pin_ephemeral_ports(env)
    supervisor = Supervisor(env)
    try:
        socket_path = private_redis_socket(config)
        if socket_path is not None:
            socket_path.unlink(missing_ok=True)
            supervisor.start(redis_child(config, socket_path), ready=socket_path)
            click.echo(f"redis     {config.redis_url}")
        started = []
        for service in SERVICES:
            argv = _service_argv(root, service)
            if argv is None or service == "provider":
                continue
            supervisor.start(service_child(config, service, argv))
            started.append(service)
        # Port 0 ("any free port") was pinned to a concrete port above, so both can be awaited.
        if "ssh" in started and not wait_for_port(*config.ssh_listen):
            raise Unavailable(f"the SSH server did not listen on {config.ssh_listen}")
        if "web" in started and not wait_for_port(*config.web_listen):
            raise Unavailable(f"the web server did not listen on {config.web_listen}")
        problem = None
        if _service_argv(root, "provider") is not None and "web" in started:
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
            if exit_after_demo:
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
    return ["run", "--server", server, "--token-file", str(token_file), "--slots", str(LOCAL_SLOTS)]
