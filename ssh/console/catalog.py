"""Every SSH-side command, in the order ``help`` lists them.

The names follow the operator CLI (``forge-ci run list`` / ``ssh git@HOST run list``) where
both have a command; the SSH side acts as the key's user, the CLI as the operator.
"""

from __future__ import annotations

import argparse

from ssh.console.parser import AddArguments, Command


def _repo(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("full_name", metavar="OWNER/NAME")


def _run(parser: argparse.ArgumentParser) -> None:
    _repo(parser)
    parser.add_argument("number", metavar="NUMBER", type=int)


def _run_list(parser: argparse.ArgumentParser) -> None:
    _repo(parser)
    parser.add_argument("--limit", type=int, default=20, metavar="N")
    parser.add_argument("--branch", metavar="BRANCH")
    parser.add_argument("--workflow", metavar="PATH")


def _run_logs(parser: argparse.ArgumentParser) -> None:
    _run(parser)
    parser.add_argument("--job", metavar="KEY")
    parser.add_argument("--follow", action="store_true")


def _dispatch(parser: argparse.ArgumentParser) -> None:
    _repo(parser)
    parser.add_argument("--branch", required=True, metavar="BRANCH")
    parser.add_argument("--workflow", required=True, metavar="PATH")
    parser.add_argument("--input", action="append", default=[], metavar="NAME=VALUE")


def _rerun(parser: argparse.ArgumentParser) -> None:
    _run(parser)
    parser.add_argument("--failed", action="store_true")


def _switch(parser: argparse.ArgumentParser) -> None:
    _repo(parser)
    parser.add_argument("which", choices=["push", "schedule"])
    parser.add_argument("switch", choices=["on", "off"])


def _entry(kind: str, *, repo_only: bool = False, scope: bool | None = None) -> AddArguments:
    """``NAME --repo R [--branch B --workflow W] --version V`` of secret and var commands.

    ``scope``: None leaves the scope out, else whether it is required; ``repo_only``: only
    ``--repo`` (``list``).
    """

    def add(parser: argparse.ArgumentParser) -> None:
        parser.set_defaults(kind=kind)
        if not repo_only:
            parser.add_argument("name", metavar="NAME")
        parser.add_argument("--repo", required=True, metavar="OWNER/NAME")
        if repo_only:
            return
        if scope is not None:
            parser.add_argument("--branch", required=scope, metavar="BRANCH")
            parser.add_argument("--workflow", required=scope, metavar="PATH")
        parser.add_argument("--version", required=True, metavar="VERSION")

    return add


def _key_ref(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("key_ref", metavar="ID|FINGERPRINT")


def _provider(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("name", metavar="NAME")


def _provider_create(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--name", required=True, metavar="NAME")
    parser.add_argument("--labels", required=True, metavar="LABEL,...")
    parser.add_argument("--scope", choices=["selected", "all"], default="selected")
    parser.add_argument("--repositories", default="", metavar="OWNER/NAME,...")


def _provider_labels(parser: argparse.ArgumentParser) -> None:
    _provider(parser)
    parser.add_argument("--labels", required=True, metavar="LABEL,...")


def _provider_access(parser: argparse.ArgumentParser) -> None:
    _provider(parser)
    parser.add_argument("--scope", choices=["selected", "all"], required=True)
    parser.add_argument("--repositories", default="", metavar="OWNER/NAME,...")


def _help(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("topic", nargs="*", metavar="COMMAND")


def _entries(kind: str, scope_required: bool) -> list[Command]:
    noun = "secrets (values are never shown)" if kind == "secret" else "variables"
    return [
        Command(
            (kind, "list"),
            f"List the repository's {noun}.",
            "entries.entry_list",
            _entry(kind, repo_only=True),
        ),
        Command(
            (kind, "set"),
            f"Create (--version 0) or update a {'secret' if kind == 'secret' else 'variable'}; "
            "the value is read from standard input (empty on an update: keep it).",
            "entries.entry_set",
            _entry(kind, scope=scope_required),
        ),
        Command(
            (kind, "delete"),
            f"Delete a {'secret' if kind == 'secret' else 'variable'} at the listed version.",
            "entries.entry_delete",
            _entry(kind),
        ),
    ]


COMMANDS: tuple[Command, ...] = (
    Command(
        ("help",),
        "Show this reference (or that of COMMAND).",
        "account.show_help",
        _help,
        json=False,
    ),
    Command(
        ("whoami",),
        "Who this key belongs to, and whether that is a site administrator.",
        "account.whoami",
    ),
    Command(
        ("repo", "list"),
        "List the repositories you can read, with your role.",
        "repositories.repo_list",
    ),
    Command(
        ("repo", "show"),
        "Show a repository: your role and its workflow switches.",
        "repositories.repo_show",
        _repo,
    ),
    Command(
        ("workflows",),
        "Switch push workflows or scheduled workflows on or off (admins).",
        "repositories.workflows",
        _switch,
    ),
    Command(("run", "list"), "List a repository's runs, newest first.", "runs.run_list", _run_list),
    Command(
        ("run", "show"),
        "Show a run with its jobs, and why each queued job waits.",
        "runs.run_show",
        _run,
    ),
    Command(
        ("run", "logs"),
        "Print a run's logs; --follow streams them until the run ends and exits 0 only on success.",
        "following.run_logs",
        _run_logs,
        json=False,
    ),
    Command(
        ("run", "watch"),
        "Follow the run your latest push started (waiting for it), or the newest run.",
        "following.run_watch",
        _repo,
        json=False,
    ),
    Command(
        ("run", "dispatch"),
        "Run a workflow that declares workflow_dispatch.",
        "runs.run_dispatch",
        _dispatch,
    ),
    Command(("run", "cancel"), "Cancel a run.", "runs.run_cancel", _run),
    Command(
        ("run", "rerun"),
        "Rerun a completed run from its snapshot (--failed: its failed jobs).",
        "runs.run_rerun",
        _rerun,
    ),
    *_entries("secret", scope_required=True),
    *_entries("var", scope_required=False),
    Command(("key", "list"), "List your SSH keys.", "account.key_list"),
    Command(
        ("key", "add"),
        "Add the public key read from standard input to your account.",
        "account.key_add",
    ),
    Command(
        ("key", "remove"),
        "Remove one of your keys (not the one this connection uses).",
        "account.key_remove",
        _key_ref,
    ),
    Command(("provider", "list"), "List providers.", "admin.provider_list", admin=True),
    Command(
        ("provider", "create"),
        "Register a provider; its new token is printed once, to you only.",
        "admin.provider_create",
        _provider_create,
        admin=True,
    ),
    Command(
        ("provider", "pause"),
        "Stop a provider from claiming new jobs.",
        "admin.provider_pause",
        _provider,
        admin=True,
    ),
    Command(
        ("provider", "resume"),
        "Let a paused provider claim jobs again.",
        "admin.provider_resume",
        _provider,
        admin=True,
    ),
    Command(
        ("provider", "revoke"),
        "Revoke a provider for good (its running jobs are cancelled).",
        "admin.provider_revoke",
        _provider,
        admin=True,
    ),
    Command(
        ("provider", "labels"),
        "Replace a provider's labels.",
        "admin.provider_labels",
        _provider_labels,
        admin=True,
    ),
    Command(
        ("provider", "access"),
        "Replace a provider's repository scope.",
        "admin.provider_access",
        _provider_access,
        admin=True,
    ),
    Command(("user", "list"), "List users.", "admin.user_list", admin=True),
)
