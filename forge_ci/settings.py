"""Settings: read once at the edge (environment plus an optional TOML file), passed down typed.

Precedence, highest first: ``forge-ci up``'s options (which it passes on as environment
variables), ``FORGE_CI_*`` environment variables, the TOML file named by
``FORGE_CI_CONFIG`` (or ``<data dir>/forge-ci.toml`` when it exists), built-in defaults.
Every setting is documented in ``docs/configuration.md``; keep the two in step.
"""

from __future__ import annotations

import os
import re
import stat
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from forge_ci.egress import DEFAULT_MODE, EgressPolicy
from forge_ci.errors import ConfigurationError

DEFAULT_DATA_DIR = "/var/lib/forge-ci"
#: Runners heartbeat four times per lease when it is shorter than 20 s; below 2 s a busy
#: machine would lose healthy jobs.
MIN_LEASE_SECONDS = 2.0
MAX_LEASE_SECONDS = 3600.0


#: Fault points the code honours when testing is on (see docs/configuration.md, "Testing").
#: A fault may only delay or shorten things, making something fail sooner; none may skip or
#: weaken a check, since a deployed server with FORGE_CI_TESTING=1 would honour it too.
KNOWN_TEST_FAULTS = frozenset(
    {
        # The SSH parent pauses at these points of a push (until its marker file is removed).
        "pause-before-record",
        "pause-before-answer",
        "pause-before-confirm",
        # A job's timeout-minutes counts minutes of this many seconds (job timeout tests).
        "job-minute-seconds",
        # Key rotation pauses after re-sealing, before its commit (crash tests kill it there).
        "pause-before-reseal-commit",
    }
)


@dataclass(frozen=True)
class TestFault:
    """One fault point: a name and an optional argument (``name=argument``)."""

    __test__ = False  # not a pytest test class, despite the name

    name: str
    argument: str = ""


@dataclass(frozen=True)
class Settings:
    """Typed, immutable settings. Paths are absolute."""

    data_dir: Path
    database_url: str
    redis_url: str
    ssh_listen: tuple[str, int]
    web_listen: tuple[str, int]
    #: Public base URL shown to people (links, clone URLs). Derived from web_listen by default.
    public_url: str
    #: Secret key for browser sessions; generated into the data directory by ``forge-ci init``.
    secret_key_file: Path
    repo_lock_timeout: float
    ssh_max_connections: int
    ssh_auth_timeout: float
    #: Seconds an SSH-side command other than a follow may take, reading stdin included.
    ssh_command_timeout: float
    #: SSH-side commands one user may have running at once (follows included).
    ssh_commands_per_user: int
    #: Seconds a push waits for the worker to say which runs it started (0: it does not wait).
    push_report_wait: float
    runner_image: str
    log_cap_bytes: int
    claim_wait_seconds: float
    #: How long a claim or a heartbeat leases an attempt; a runner that stops renewing it for
    #: this long makes the job ``lost``. Shorter leases notice dead providers sooner.
    lease_seconds: float = 60.0
    #: Where ``uses: OWNER/REPO@REF`` is looked for after the forge's own repository of that
    #: name, in order (``<source>/<OWNER>/<REPO>``); empty: only the forge (``none``).
    action_sources: tuple[str, ...] = ("https://github.com",)
    #: File holding the bearer token that ``GET /-/metrics`` requires; None: metrics are off.
    metrics_token_file: Path | None = None
    #: ``forge-ci provider run``'s egress policy unless its flags say otherwise (forge_ci.egress).
    provider_egress: str = DEFAULT_MODE
    provider_egress_allow: tuple[str, ...] = ()
    #: ``ssh://USER@HOST:PORT`` people push to, when not ``ssh_listen`` (behind a published port,
    #: a proxy, or listening on 0.0.0.0); empty: derived from ``ssh_listen``.
    public_ssh_url: str = ""
    #: Fault-injection points for the test suite and the benchmark (``FORGE_CI_TEST_FAULTS``),
    #: honoured only when ``FORGE_CI_TESTING=1``; always empty in production.
    test_faults: tuple[TestFault, ...] = ()

    def test_fault(self, name: str) -> TestFault | None:
        """The configured test fault ``name``, or None (always None outside tests)."""
        for fault in self.test_faults:
            if fault.name == name:
                return fault
        return None

    @property
    def job_minute_seconds(self) -> float:
        """Seconds in a minute of a job's ``timeout-minutes``: 60, except in timeout tests."""
        fault = self.test_fault("job-minute-seconds")
        return float(fault.argument) if fault is not None else 60.0

    # Derived locations inside the data directory -------------------------------------------
    @property
    def repositories_dir(self) -> Path:
        return self.data_dir / "repositories"

    @property
    def hooks_dir(self) -> Path:
        return self.data_dir / "hooks"

    @property
    def host_key_path(self) -> Path:
        return self.data_dir / "ssh_host_ed25519_key"

    @property
    def sealing_key_path(self) -> Path:
        """The key file that seals repository secrets (outside the database; back it up apart)."""
        return self.data_dir / "secrets.key"

    @property
    def locks_dir(self) -> Path:
        return self.data_dir / "locks"

    @property
    def run_dir(self) -> Path:
        return self.data_dir / "run"

    @property
    def action_cache_dir(self) -> Path:
        """Bare repositories of actions fetched from upstream sources (and their pins)."""
        return self.data_dir / "action-cache"

    @property
    def ssh_url(self) -> str:
        """Where people push (clone URLs, ``repo create``): ``public_ssh_url`` or ssh_listen's."""
        if self.public_ssh_url:
            return self.public_ssh_url
        host, port = self.ssh_listen
        return f"ssh://git@{_url_host(host)}:{port}"


# name -> (env var, TOML key, parser). Defaults are computed in load_settings.
_ENV = {
    "data_dir": "FORGE_CI_DATA_DIR",
    "database_url": "FORGE_CI_DATABASE_URL",
    "redis_url": "FORGE_CI_REDIS_URL",
    "ssh_listen": "FORGE_CI_SSH_LISTEN",
    "web_listen": "FORGE_CI_WEB_LISTEN",
    "public_url": "FORGE_CI_PUBLIC_URL",
    "public_ssh_url": "FORGE_CI_PUBLIC_SSH_URL",
    "secret_key_file": "FORGE_CI_SECRET_KEY_FILE",
    "repo_lock_timeout": "FORGE_CI_REPO_LOCK_TIMEOUT",
    "ssh_max_connections": "FORGE_CI_SSH_MAX_CONNECTIONS",
    "ssh_auth_timeout": "FORGE_CI_SSH_AUTH_TIMEOUT",
    "ssh_command_timeout": "FORGE_CI_SSH_COMMAND_TIMEOUT",
    "ssh_commands_per_user": "FORGE_CI_SSH_COMMANDS_PER_USER",
    "push_report_wait": "FORGE_CI_PUSH_REPORT_WAIT",
    "runner_image": "FORGE_CI_RUNNER_IMAGE",
    "log_cap_bytes": "FORGE_CI_LOG_CAP_BYTES",
    "claim_wait_seconds": "FORGE_CI_CLAIM_WAIT_SECONDS",
    "lease_seconds": "FORGE_CI_LEASE_SECONDS",
    "action_sources": "FORGE_CI_ACTION_SOURCES",
    "metrics_token_file": "FORGE_CI_METRICS_TOKEN_FILE",
    "provider_egress": "FORGE_CI_PROVIDER_EGRESS",
    "provider_egress_allow": "FORGE_CI_PROVIDER_EGRESS_ALLOW",
}
#: Every environment variable that chooses a setting, the configuration file's first.
SETTING_VARIABLES = ("FORGE_CI_CONFIG", *_ENV.values())
# Read from the environment only (never from the TOML file): a deployment's configuration file
# must not be able to switch fault injection on.
_TESTING_VAR = "FORGE_CI_TESTING"
_TEST_FAULTS_VAR = "FORGE_CI_TEST_FAULTS"


def parse_listen(value: str, name: str) -> tuple[str, int]:
    """Parse ``HOST:PORT`` (``[::1]:2222`` for IPv6)."""
    text = value.strip()
    if text.startswith("["):
        host, sep, port = text[1:].partition("]:")
    else:
        host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ConfigurationError(
            f"{name} must be HOST:PORT (for example 127.0.0.1:2222), got {value!r}"
        )
    return host, int(port)


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host


_SSH_ORIGIN = re.compile(r"ssh://[A-Za-z0-9._-]+@(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+)(:[0-9]{1,5})?")


def _public_ssh_url(value: Any) -> str:
    """``ssh://USER@HOST[:PORT]`` (no path, no trailing slash: repositories are appended)."""
    text = str(value or "").strip().rstrip("/")
    if text and not _SSH_ORIGIN.fullmatch(text):
        raise ConfigurationError(
            "FORGE_CI_PUBLIC_SSH_URL must be ssh://USER@HOST[:PORT] (for example "
            f"ssh://git@forge.example.com:2222), got {value!r}"
        )
    return text


def _positive_float(value: Any, name: str) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ConfigurationError(f"{name} must be a number, got {value!r}") from None
    if number <= 0:
        raise ConfigurationError(f"{name} must be greater than 0, got {value!r}")
    return number


def _seconds_at_most(value: Any, name: str, most: float) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ConfigurationError(f"{name} must be a number of seconds, got {value!r}") from None
    if not 0 <= number <= most:
        raise ConfigurationError(f"{name} must be from 0 through {most:g} seconds, got {value!r}")
    return number


def _positive_int(value: Any, name: str) -> int:
    if isinstance(value, bool) or not str(value).strip().isdigit() or int(value) <= 0:
        raise ConfigurationError(f"{name} must be a positive whole number, got {value!r}")
    return int(value)


def parse_test_faults(environ: Mapping[str, str]) -> tuple[TestFault, ...]:
    """Parse ``FORGE_CI_TEST_FAULTS`` (comma-separated ``name[=argument]``), only when testing."""
    text = environ.get(_TEST_FAULTS_VAR, "").strip()
    if not text:
        return ()
    if environ.get(_TESTING_VAR) != "1":
        raise ConfigurationError(
            f"{_TEST_FAULTS_VAR} is set but {_TESTING_VAR} is not 1; fault injection is for the "
            "test suite only"
        )
    faults = []
    for item in text.split(","):
        name, _, argument = item.strip().partition("=")
        if name not in KNOWN_TEST_FAULTS:
            raise ConfigurationError(
                f"{_TEST_FAULTS_VAR}: unknown fault {name!r}; known: "
                + ", ".join(sorted(KNOWN_TEST_FAULTS))
            )
        if name == "job-minute-seconds":
            try:
                valid = 0.5 <= float(argument) <= 60
            except ValueError:
                valid = False
            if not valid:
                raise ConfigurationError(
                    f"{_TEST_FAULTS_VAR}: job-minute-seconds needs seconds between 0.5 and 60,"
                    f" got {argument!r}"
                )
        faults.append(TestFault(name, argument))
    return tuple(faults)


def load_settings(
    env: Mapping[str, str] | None = None, config_file: Path | None = None
) -> Settings:
    """Build the settings from ``env`` (default: ``os.environ``) and an optional TOML file."""
    environ = dict(os.environ if env is None else env)
    raw: dict[str, Any] = {}

    data_dir = Path(environ.get("FORGE_CI_DATA_DIR") or DEFAULT_DATA_DIR).expanduser().absolute()
    path = config_file or (
        Path(environ["FORGE_CI_CONFIG"]) if environ.get("FORGE_CI_CONFIG") else None
    )
    if path is None and _is_file(data_dir / "forge-ci.toml"):
        path = data_dir / "forge-ci.toml"
    if path is not None:
        try:
            with open(path, "rb") as handle:
                table = tomllib.load(handle)
        except FileNotFoundError:
            raise ConfigurationError(f"configuration file {path} does not exist") from None
        except tomllib.TOMLDecodeError as exc:
            raise ConfigurationError(
                f"configuration file {path} is not valid TOML: {exc}"
            ) from None
        except OSError as exc:
            raise ConfigurationError(
                f"cannot read the configuration file {path}: {exc.strerror}"
            ) from None
        known = {f.name for f in fields(Settings)} - {"test_faults"}
        for key, value in table.items():
            if key not in known:
                raise ConfigurationError(f"configuration file {path}: unknown setting {key!r}")
            raw[key] = value
    for name, var in _ENV.items():
        if environ.get(var):
            raw[name] = environ[var]
    if "data_dir" in raw:
        data_dir = Path(str(raw["data_dir"])).expanduser().absolute()

    ssh_listen = parse_listen(str(raw.get("ssh_listen", "127.0.0.1:2222")), "FORGE_CI_SSH_LISTEN")
    web_listen = parse_listen(str(raw.get("web_listen", "127.0.0.1:8080")), "FORGE_CI_WEB_LISTEN")
    database_url = str(raw.get("database_url") or f"sqlite:///{data_dir / 'forge-ci.db'}")
    if not database_url.startswith(("sqlite:", "postgresql")):
        raise ConfigurationError(
            "FORGE_CI_DATABASE_URL must be a sqlite:/// or postgresql+psycopg:// URL"
        )
    redis_url = str(raw.get("redis_url") or f"unix://{data_dir / 'run' / 'redis.sock'}")
    public_url = str(
        raw.get("public_url") or f"http://{_url_host(web_listen[0])}:{web_listen[1]}"
    ).rstrip("/")
    return Settings(
        data_dir=data_dir,
        database_url=database_url,
        redis_url=redis_url,
        ssh_listen=ssh_listen,
        web_listen=web_listen,
        public_url=public_url,
        secret_key_file=Path(str(raw.get("secret_key_file") or data_dir / "secret_key")),
        repo_lock_timeout=_positive_float(
            raw.get("repo_lock_timeout", 30), "FORGE_CI_REPO_LOCK_TIMEOUT"
        ),
        ssh_max_connections=_positive_int(
            raw.get("ssh_max_connections", 64), "FORGE_CI_SSH_MAX_CONNECTIONS"
        ),
        ssh_auth_timeout=_positive_float(
            raw.get("ssh_auth_timeout", 30), "FORGE_CI_SSH_AUTH_TIMEOUT"
        ),
        ssh_command_timeout=_positive_float(
            raw.get("ssh_command_timeout", 60), "FORGE_CI_SSH_COMMAND_TIMEOUT"
        ),
        ssh_commands_per_user=_positive_int(
            raw.get("ssh_commands_per_user", 4), "FORGE_CI_SSH_COMMANDS_PER_USER"
        ),
        push_report_wait=_seconds_at_most(
            raw.get("push_report_wait", 1.5), "FORGE_CI_PUSH_REPORT_WAIT", 60
        ),
        runner_image=str(raw.get("runner_image") or "forge-ci-runner:latest"),
        log_cap_bytes=_positive_int(
            raw.get("log_cap_bytes", 64 * 1024 * 1024), "FORGE_CI_LOG_CAP_BYTES"
        ),
        claim_wait_seconds=_positive_float(
            raw.get("claim_wait_seconds", 20), "FORGE_CI_CLAIM_WAIT_SECONDS"
        ),
        lease_seconds=_lease_seconds(raw.get("lease_seconds", 60)),
        action_sources=parse_action_sources(raw.get("action_sources", "https://github.com")),
        metrics_token_file=(
            Path(str(raw["metrics_token_file"])) if raw.get("metrics_token_file") else None
        ),
        **_egress(raw),
        public_ssh_url=_public_ssh_url(raw.get("public_ssh_url")),
        test_faults=parse_test_faults(environ),
    )


def _egress(raw: Mapping[str, Any]) -> dict[str, Any]:
    """The provider's egress policy settings, checked now (the message names the variable)."""
    mode = str(raw.get("provider_egress") or DEFAULT_MODE).strip()
    value = raw.get("provider_egress_allow", "")
    items = [str(v) for v in value] if isinstance(value, list | tuple) else str(value).split()
    allow = tuple(item for chunk in items for item in chunk.split(",") if item.strip())
    try:
        EgressPolicy.parse(mode, allow)
    except ConfigurationError as exc:
        raise ConfigurationError(
            f"FORGE_CI_PROVIDER_EGRESS / FORGE_CI_PROVIDER_EGRESS_ALLOW: {exc.message}"
        ) from None
    return {"provider_egress": mode, "provider_egress_allow": allow}


#: URL schemes an action source may use (git fetches them; file:// and loopback serve tests).
ACTION_SOURCE_SCHEMES = ("https://", "http://", "git://", "ssh://", "file://")


def parse_action_sources(value: Any) -> tuple[str, ...]:
    """``FORGE_CI_ACTION_SOURCES``: URLs separated by commas or spaces (a TOML list too), or
    ``none``. Each is a base URL such as ``https://github.com``; order is lookup order."""
    name = "FORGE_CI_ACTION_SOURCES"
    if isinstance(value, list | tuple):
        items = [str(item) for item in value]
    else:
        items = str(value).replace(",", " ").split()
    if [item.lower() for item in items] == ["none"] or not items:
        return ()
    sources: list[str] = []
    for item in items:
        url = item.rstrip("/")
        if item.lower() == "none":
            raise ConfigurationError(f"{name}: 'none' cannot be combined with sources")
        if not url.startswith(ACTION_SOURCE_SCHEMES) or len(url) <= len("file://"):
            raise ConfigurationError(
                f"{name}: {item!r} is not a source URL (use {', '.join(ACTION_SOURCE_SCHEMES)}"
                " or none)"
            )
        if any(char.isspace() or char in "?#" for char in url):
            raise ConfigurationError(f"{name}: {item!r} may not hold a query or fragment")
        if url not in sources:
            sources.append(url)
    return tuple(sources)


def _is_file(path: Path) -> bool:
    """Whether ``path`` is a file; a data directory that cannot be read has none (the commands
    that need the directory then say what is wrong with it, see :func:`require_data_dir`)."""
    try:
        return stat.S_ISREG(path.stat().st_mode)
    except OSError:
        return False


def require_data_dir(settings: Settings) -> None:
    """Refuse, naming the directory and the fix, unless the data directory can be used.

    For commands that need an installation (the database, repositories, hooks): without this
    they would fail deep inside SQLite or git with a message that names neither.
    """
    path = settings.data_dir
    fix = (
        f"set FORGE_CI_DATA_DIR to your forge-ci data directory (default {DEFAULT_DATA_DIR}),"
        " or create one with `forge-ci init`"
    )
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        raise ConfigurationError(f"the data directory {path} does not exist; {fix}") from None
    except OSError as exc:
        raise ConfigurationError(
            f"cannot read the data directory {path} ({exc.strerror}); {fix}"
        ) from None
    if not stat.S_ISDIR(mode):
        raise ConfigurationError(f"the data directory {path} is not a directory; {fix}")
    if not os.access(path, os.R_OK | os.W_OK | os.X_OK):
        raise ConfigurationError(
            f"the data directory {path} is not readable and writable by this user; run as the"
            " user that owns it, or " + fix
        )


def _lease_seconds(value: Any) -> float:
    seconds = _positive_float(value, "FORGE_CI_LEASE_SECONDS")
    if not MIN_LEASE_SECONDS <= seconds <= MAX_LEASE_SECONDS:
        raise ConfigurationError(
            f"FORGE_CI_LEASE_SECONDS must be between {MIN_LEASE_SECONDS:g} and"
            f" {MAX_LEASE_SECONDS:g}, got {value!r}"
        )
    return seconds
