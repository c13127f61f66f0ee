"""``forge-ci provider run``: the Docker provider service (``worker.provider.service``).

It needs no database: only the server's URL, its provider token (a file, never argv) and a
Docker engine. Everything it must remember between runs lives in ``--state-dir``.
"""

from __future__ import annotations

import logging
import os
import signal
import stat
from pathlib import Path
from types import FrameType

import click

from forge_ci.cli.common import settings
from forge_ci.cli.providers import read_token
from forge_ci.egress import EgressLimits, EgressPolicy
from forge_ci.errors import InvalidInput


def _check_private(path: str) -> None:
    if path == "-":
        return
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return  # read_token names the problem
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise InvalidInput(
            f"token file {path} can be read by other users; make it private (chmod 600 {path})"
        )


@click.command("run")
@click.option(
    "--server",
    "server_url",
    required=True,
    help="The server's origin, e.g. "
    "https://ci.example.org (its runner API is under /-/runner-api/v1).",
)
@click.option(
    "--allow-http",
    is_flag=True,
    help="Accept a plain http:// --server (development, or a server on this machine): the "
    "token and job sources then travel unencrypted.",
)
@click.option(
    "--token-file",
    required=True,
    help="File holding this provider's token (mode 0600; - for stdin).",
)
@click.option(
    "--slots",
    type=click.IntRange(1, 64),
    default=1,
    show_default=True,
    help="Jobs run at once, each in its own container.",
)
@click.option(
    "--state-dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="Claims in flight and sockets (default: <data dir>/provider).",
)
@click.option("--runner-image", help="Job image (default: the runner_image setting).")
@click.option(
    "--egress",
    type=click.Choice(["none", "public", "allow-list"]),
    help="What jobs may reach through this provider's audited proxy: nothing, any public "
    "address, or only --egress-allow entries (default: the provider_egress setting, public).",
)
@click.option(
    "--egress-allow",
    multiple=True,
    metavar="ENTRY",
    help="Allow a host (pypi.org), a suffix (.pythonhosted.org), an IP or CIDR, each with an "
    "optional :port or :low-high, or a :port alone; repeat it. Only an IP/CIDR entry reaches "
    "a loopback, private or link-local address (a local mirror).",
)
@click.option(
    "--egress-max-connections",
    type=click.IntRange(1, 1_000_000),
    default=EgressLimits.max_connections,
    show_default=True,
    help="Proxy connections per job attempt.",
)
@click.option(
    "--egress-max-mb",
    type=click.IntRange(1, 1024 * 1024),
    default=EgressLimits.max_bytes // 1024**2,
    show_default=True,
    help="MiB through the proxy per job attempt, both ways.",
)
@click.option(
    "--egress-idle-seconds",
    type=click.FloatRange(1, 86400),
    default=EgressLimits.idle_seconds,
    show_default=True,
)
@click.option(
    "--egress-connection-seconds",
    type=click.FloatRange(1, 86400),
    default=EgressLimits.connection_seconds,
    show_default=True,
    help="Longest one proxy connection may stay open.",
)
@click.option(
    "--egress-network",
    help="Alternative to the proxy, with --egress none: let jobs reach the network through this "
    "dedicated bridge (created with enable_icc=false); no policy or audit applies there.",
)
@click.option("--cpus", type=click.FloatRange(0.01, 1024), default=2.0, show_default=True)
@click.option(
    "--memory-mb",
    type=click.IntRange(128, 1024 * 1024),
    default=2048,
    show_default=True,
    help="Memory per job, /tmp included (a quarter of it, at most 256 MiB); no swap.",
)
@click.option("--pids", type=click.IntRange(16, 1_000_000), default=512, show_default=True)
def run(
    server_url: str,
    allow_http: bool,
    token_file: str,
    slots: int,
    state_dir: Path | None,
    runner_image: str | None,
    egress: str | None,
    egress_allow: tuple[str, ...],
    egress_max_connections: int,
    egress_max_mb: int,
    egress_idle_seconds: float,
    egress_connection_seconds: float,
    egress_network: str | None,
    cpus: float,
    memory_mb: int,
    pids: int,
) -> None:
    """Claim jobs from the server and run each in a fresh job container, until SIGTERM."""
    from worker.provider.jobspec import JobLimits
    from worker.provider.service import ProviderConfig, ProviderService
    from worker.provider.upstream import Server

    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    config = settings()
    policy = EgressPolicy.parse(
        egress or config.provider_egress,
        egress_allow
        or (config.provider_egress_allow if egress in (None, config.provider_egress) else ()),
        EgressLimits(
            max_connections=egress_max_connections,
            max_bytes=egress_max_mb * 1024**2,
            idle_seconds=egress_idle_seconds,
            connection_seconds=egress_connection_seconds,
        ),
    )
    _check_private(token_file)
    token = read_token(token_file)
    service = ProviderService(
        ProviderConfig(
            server=Server.parse(server_url, allow_http=allow_http),
            token=token,
            state_dir=state_dir or config.data_dir / "provider",
            runner_image=runner_image or config.runner_image,
            slots=slots,
            egress_network=egress_network,
            egress=policy,
            limits=JobLimits.for_memory(cpus=cpus, memory_bytes=memory_mb * 1024**2, pids=pids),
            docker_url=os.environ.get("DOCKER_HOST") or None,
        )
    )
    service.prepare()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        logging.getLogger("worker.provider").info(
            "%s: stopping (no more claims; running jobs are interrupted)",
            signal.Signals(signum).name,
        )
        service.stop()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    service.run()
