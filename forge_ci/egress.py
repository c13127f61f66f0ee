"""The egress policy: which addresses a job's connections may reach through the provider's proxy.

A pure function of (policy, requested host, port, the addresses the proxy resolved): no I/O.
The provider's proxy (``worker.provider.egress``) resolves the target itself, asks
:meth:`EgressPolicy.decide` about *every* address of the name, and connects only to the
addresses that were checked, so a name cannot be re-resolved to something else in between
(no DNS rebinding)::

    mode        public address          non-public address (loopback, private, ...)
    none        denied (no proxy)       denied
    public      allowed                 denied, unless an address entry covers it
    allow-list  allowed if an entry     denied, unless an address entry covers it
                matches host or port

A name is allowed only when every one of its addresses is: one bad answer among good ones is
the shape of a rebinding attack, so the whole name is refused. Allow entries (``--egress-allow``)::

    pypi.org              a host name (exactly; any port)
    .pythonhosted.org     its subdomains (``*.pythonhosted.org`` is the same)
    pypi.org:443          a host name on one port; ports may be a range: ``:8000-8099``
    203.0.113.0/24        addresses: an IP or CIDR (IPv6 with a port: ``[fd00::/8]:443``)
    :443                  any public address on this port (allow-list mode)

Only an address entry (IP or CIDR) reaches a non-public address: it names the address itself,
so no DNS answer can widen it. Such a connection is recorded as explicitly allow-listed.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from forge_ci.errors import ConfigurationError

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

MODES = ("none", "public", "allow-list")
DEFAULT_MODE = "public"

#: Never reached unless an address entry names them, with the name a denial gives.
ALWAYS_DENIED: tuple[tuple[str, str], ...] = (
    ("0.0.0.0/8", "'this network'"),
    ("127.0.0.0/8", "loopback"),
    ("10.0.0.0/8", "private (RFC 1918)"),
    ("172.16.0.0/12", "private (RFC 1918)"),
    ("192.168.0.0/16", "private (RFC 1918)"),
    ("100.64.0.0/10", "shared address space (RFC 6598)"),
    ("169.254.0.0/16", "link-local (cloud metadata)"),
    ("192.0.0.0/24", "IETF protocol assignment"),
    ("192.0.2.0/24", "documentation"),
    ("198.18.0.0/15", "benchmarking"),
    ("198.51.100.0/24", "documentation"),
    ("203.0.113.0/24", "documentation"),
    ("224.0.0.0/4", "multicast"),
    ("240.0.0.0/4", "reserved"),
    ("::/128", "unspecified"),
    ("::1/128", "loopback"),
    ("100::/64", "discard"),
    ("2001::/32", "Teredo tunnel"),
    ("2001:db8::/32", "documentation"),
    ("fc00::/7", "unique-local"),
    ("fe80::/10", "link-local"),
    ("fec0::/10", "site-local"),
    ("ff00::/8", "multicast"),
)
_DENIED = tuple((ipaddress.ip_network(net), name) for net, name in ALWAYS_DENIED)
#: IPv6 forms that carry an IPv4 address: the IPv4 address decides.
_IPV4_MAPPED = ipaddress.ip_network("::ffff:0:0/96")
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_SIX_TO_FOUR = ipaddress.ip_network("2002::/16")

_HOST_LABEL = re.compile(r"(?!-)[a-z0-9_-]{1,63}(?<!-)")
_PORTS = re.compile(r"([0-9]{1,5})(?:-([0-9]{1,5}))?")


@dataclass(frozen=True)
class EgressLimits:
    """What one attempt's connections may use; past a limit a connection is refused or closed."""

    max_connections: int = 512
    max_bytes: int = 8 * 1024**3
    idle_seconds: float = 120.0
    connection_seconds: float = 1800.0

    def __post_init__(self) -> None:
        for name in ("max_connections", "max_bytes"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigurationError(f"egress limit {name} must be a whole number >= 1")
        for name in ("idle_seconds", "connection_seconds"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
                raise ConfigurationError(f"egress limit {name} must be a number of seconds > 0")


@dataclass(frozen=True)
class AllowEntry:
    """One ``--egress-allow`` entry: a host, a suffix, a network or nothing, and a port range."""

    text: str
    host: str = ""
    suffix: str = ""
    network: IPNetwork | None = None
    low_port: int = 1
    high_port: int = 65535

    def port_matches(self, port: int) -> bool:
        return self.low_port <= port <= self.high_port

    def name_matches(self, host: str) -> bool:
        if self.host:
            return host == self.host
        if self.suffix:
            return host.endswith("." + self.suffix)
        return False

    @property
    def port_only(self) -> bool:
        return not self.host and not self.suffix and self.network is None


@dataclass(frozen=True)
class Decision:
    """The policy's answer for one target; ``reason`` is what the audit and the job log say."""

    allowed: bool
    reason: str
    #: Allowed to a non-public address because an address entry names it.
    explicit: bool = False


def parse_allow_entry(text: str) -> AllowEntry:
    """Parse one allow entry (see the module docstring); raises ConfigurationError naming it."""
    raw = text.strip()

    def bad(why: str) -> ConfigurationError:
        return ConfigurationError(f"--egress-allow {text!r}: {why}")

    if not raw:
        raise bad("an entry must not be empty")
    target, ports = raw, ""
    if raw.startswith("["):
        inside, bracket, rest = raw[1:].partition("]")
        if not bracket or (rest and not rest.startswith(":")):
            raise bad("write an IPv6 address as [address] or [address]:port")
        target, ports = inside, rest[1:]
        if not target:
            raise bad("the brackets hold no address")
    elif raw.count(":") == 1:
        target, _, ports = raw.partition(":")
        if not ports:
            raise bad("a ':' must be followed by a port or a port range")
    low, high = 1, 65535
    if ports:
        match = _PORTS.fullmatch(ports)
        if not match:
            raise bad(f"{ports!r} is not a port or a port range like 8000-8099")
        low = int(match.group(1))
        high = int(match.group(2) or low)
        if not 1 <= low <= high <= 65535:
            raise bad("ports are 1-65535, and a range goes from low to high")
    if not target:
        if not ports:
            raise bad("an entry needs a host, a network or a port")
        return AllowEntry(raw, low_port=low, high_port=high)
    try:
        network = ipaddress.ip_network(target, strict=False)
    except ValueError:
        network = None
    if network is not None:
        try:
            ipaddress.ip_network(target)
        except ValueError:
            raise bad(f"{target} has host bits set; write {network}") from None
        return AllowEntry(raw, network=network, low_port=low, high_port=high)
    if raw.startswith("[") or ":" in target or "/" in target:
        raise bad(f"{target!r} is not an IP address or network")
    name = target.lower().rstrip(".")
    suffix = ""
    if name.startswith("*."):
        suffix = name[2:]
    elif name.startswith("."):
        suffix = name[1:]
    checked = suffix or name
    if len(checked) > 253 or not all(_HOST_LABEL.fullmatch(p) for p in checked.split(".")):
        raise bad(f"{target!r} is not a host name (letters, digits, '-', '_' and dots)")
    if suffix:
        return AllowEntry(raw, suffix=suffix, low_port=low, high_port=high)
    return AllowEntry(raw, host=name, low_port=low, high_port=high)


def denied_range(address: IPAddress) -> str | None:
    """The name of the always-denied range ``address`` lies in, or None for a public address."""
    if isinstance(address, ipaddress.IPv6Address):
        embedded = _embedded_ipv4(address)
        if embedded is not None:
            inner = denied_range(embedded)
            return f"{inner} (inside {address})" if inner else None
    for network, name in _DENIED:
        if address.version == network.version and address in network:
            return name
    return None


def _embedded_ipv4(address: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    if address in _IPV4_MAPPED or address in _NAT64:
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    if address in _SIX_TO_FOUR:
        return ipaddress.IPv4Address((int(address) >> 80) & 0xFFFFFFFF)
    return None


def _is_literal(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def normalize_host(host: str) -> str:
    """The form names are compared in: lowercase, no trailing dot, no IPv6 brackets."""
    host = host.strip().lower().rstrip(".")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    return host


@dataclass(frozen=True)
class EgressPolicy:
    """One provider's egress policy, with the provider's and server's own addresses."""

    mode: str = DEFAULT_MODE
    allow: tuple[AllowEntry, ...] = ()
    limits: EgressLimits = field(default_factory=EgressLimits)
    own_addresses: frozenset[IPAddress] = frozenset()

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ConfigurationError(
                f"--egress {self.mode!r} is not a policy; use one of {', '.join(MODES)}"
            )
        if self.mode == "allow-list" and not self.allow:
            raise ConfigurationError("--egress allow-list needs at least one --egress-allow entry")
        if self.mode == "none" and self.allow:
            raise ConfigurationError("--egress none takes no --egress-allow entries")

    @classmethod
    def parse(
        cls, mode: str, allow: Iterable[str] = (), limits: EgressLimits | None = None
    ) -> EgressPolicy:
        entries = tuple(parse_allow_entry(text) for text in allow)
        return cls(mode, entries, limits or EgressLimits())

    def with_own_addresses(self, addresses: Iterable[IPAddress]) -> EgressPolicy:
        return EgressPolicy(self.mode, self.allow, self.limits, frozenset(addresses))

    @property
    def enabled(self) -> bool:
        return self.mode != "none"

    def describe(self) -> str:
        """One line for the provider's log and the admin page."""
        if self.mode == "none":
            return "none (jobs have no network)"
        listed = ", ".join(entry.text for entry in self.allow)
        if self.mode == "public":
            text = "public (any public address)"
            if listed:
                text += f"; also allowed: {listed}"
        else:
            text = f"allow-list: {listed}"
        limits = self.limits
        return (
            f"{text}; loopback, private, link-local and metadata addresses denied unless"
            f" listed; at most {limits.max_connections} connections and"
            f" {limits.max_bytes // 1024**2} MiB per attempt, {limits.idle_seconds:g} s idle"
            f" and {limits.connection_seconds:g} s per connection"
        )

    def decide_before_lookup(self, host: str, port: int) -> Decision | None:
        """A denial that needs no DNS answer, so a name that cannot be allowed is never even
        looked up; None when only its addresses can tell."""
        name = normalize_host(host)
        if self.mode == "none":
            return Decision(False, "egress is off on this provider")
        if not 1 <= port <= 65535:
            return Decision(False, f"port {port} is not a port")
        if self.mode == "public" or _is_literal(name):
            return None
        for entry in self.allow:
            if entry.port_matches(port) and (entry.network is not None or entry.port_only):
                return None
            if entry.port_matches(port) and entry.name_matches(name):
                return None
        if any(entry.name_matches(name) for entry in self.allow):
            return Decision(False, f"port {port} of {name} is not on the allow-list")
        return Decision(False, f"{name}:{port} is not on the allow-list")

    def decide(self, host: str, port: int, addresses: Sequence[IPAddress]) -> Decision:
        """May a job connect to ``host``:``port``, resolved to ``addresses``? Every address must
        be allowed; the reason names the first that is not."""
        name = normalize_host(host)
        if self.mode == "none":
            return Decision(False, "egress is off on this provider")
        if not 1 <= port <= 65535:
            return Decision(False, f"port {port} is not a port")
        if not addresses:
            return Decision(False, f"{name} has no address")
        decisions = [self._decide_address(name, port, address) for address in addresses]
        for decision in decisions:
            if not decision.allowed:
                return decision
        explicit = [d for d in decisions if d.explicit]
        return explicit[0] if explicit else decisions[0]

    def _decide_address(self, name: str, port: int, address: IPAddress) -> Decision:
        covering = [
            entry
            for entry in self.allow
            if entry.network is not None
            and entry.network.version == address.version
            and address in entry.network
        ]
        by_address = [entry for entry in covering if entry.port_matches(port)]
        special = denied_range(address)
        if special is None and address in self.own_addresses:
            special = "the provider's or server's own address"
        if special is not None:
            if by_address:
                return Decision(
                    True,
                    f"{address} ({special}) explicitly allow-listed by {by_address[0].text}",
                    explicit=True,
                )
            if covering:
                return Decision(
                    False,
                    f"port {port} of {address} ({special}) is not on the allow-list"
                    f" ({covering[0].text})",
                )
            return Decision(False, f"{address} is {special}: always denied unless allow-listed")
        if self.mode == "public":
            return Decision(True, f"{address} is a public address")
        if by_address:
            return Decision(True, f"{address} allow-listed by {by_address[0].text}")
        by_name = [entry for entry in self.allow if entry.name_matches(name)]
        for entry in by_name:
            if entry.port_matches(port):
                return Decision(True, f"{name} allow-listed by {entry.text}")
        for entry in self.allow:
            if entry.port_only and entry.port_matches(port):
                return Decision(True, f"port {port} of a public address allowed by {entry.text}")
        if by_name or covering:
            return Decision(False, f"port {port} of {name} is not on the allow-list")
        return Decision(False, f"{name}:{port} is not on the allow-list")
