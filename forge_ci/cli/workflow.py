"""``forge-ci workflow``: validate workflow files and print normalized plans."""

from __future__ import annotations

import click


@click.group()
def workflow() -> None:
    """Validate workflow files and show their normalized plans."""
