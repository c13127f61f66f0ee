"""``forge-ci web``: the browser UI and the runner API (gunicorn, or ``--dev`` for werkzeug)."""

from __future__ import annotations

import click

from forge_ci.cli.common import check_database, settings


@click.command()
@click.option(
    "--dev",
    is_flag=True,
    help="Use the threaded Flask development server (one process) instead of gunicorn.",
)
@click.option(
    "--workers",
    type=click.IntRange(1, 64),
    default=2,
    show_default=True,
    help="gunicorn worker processes.",
)
@click.option(
    "--threads",
    type=click.IntRange(1, 256),
    default=16,
    show_default=True,
    help="Threads per worker; each long-polling provider claim holds one.",
)
def web(dev: bool, workers: int, threads: int) -> None:
    """Serve the web UI and the runner API on FORGE_CI_WEB_LISTEN."""
    from web.app import read_secret_key
    from web.server import bind_address, serve_development, serve_gunicorn

    config = settings()
    # Refuse here, once, with exit status 2, rather than in every worker as it boots.
    check_database()
    read_secret_key(config)
    click.echo(f"forge-ci web on http://{bind_address(config)} (public URL {config.public_url})")
    if dev:
        serve_development(config)
    else:
        serve_gunicorn(config, workers, threads)
