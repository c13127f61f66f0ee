"""The egress policy (forge_ci.egress): a pure function, tested as tables and as properties
against a reference written differently (integer bounds typed in from the RFCs). Nothing here
opens a socket."""

from __future__ import annotations

import ipaddress

import pytest
from hypothesis import given
from hypothesis import strategies as st

from forge_ci.egress import (
    DEFAULT_MODE,
    EgressLimits,
    EgressPolicy,
    denied_range,
    parse_allow_entry,
)
from forge_ci.errors import ConfigurationError

ip = ipaddress.ip_address

# -- the reference: (first, last) as integers, from the RFCs, not from the module's table --------


def _v4(a: int, b: int, c: int, d: int) -> int:
    return (a << 24) | (b << 16) | (c << 8) | d


REFERENCE_V4 = [
    (_v4(0, 0, 0, 0), _v4(0, 255, 255, 255)),  # RFC 1122 "this network"
    (_v4(10, 0, 0, 0), _v4(10, 255, 255, 255)),  # RFC 1918
    (_v4(100, 64, 0, 0), _v4(100, 127, 255, 255)),  # RFC 6598
    (_v4(127, 0, 0, 0), _v4(127, 255, 255, 255)),  # loopback
    (_v4(169, 254, 0, 0), _v4(169, 254, 255, 255)),  # link-local, metadata
    (_v4(172, 16, 0, 0), _v4(172, 31, 255, 255)),  # RFC 1918
    (_v4(192, 0, 0, 0), _v4(192, 0, 0, 255)),  # IETF
    (_v4(192, 0, 2, 0), _v4(192, 0, 2, 255)),  # TEST-NET-1
    (_v4(192, 168, 0, 0), _v4(192, 168, 255, 255)),  # RFC 1918
    (_v4(198, 18, 0, 0), _v4(198, 19, 255, 255)),  # benchmarking
    (_v4(198, 51, 100, 0), _v4(198, 51, 100, 255)),  # TEST-NET-2
    (_v4(203, 0, 113, 0), _v4(203, 0, 113, 255)),  # TEST-NET-3
    (_v4(224, 0, 0, 0), _v4(255, 255, 255, 255)),  # multicast, reserved, broadcast
]
REFERENCE_V6 = [
    (0, 1),  # unspecified, loopback
    (0x0100 << 112, (0x0100 << 112) + (1 << 64) - 1),  # discard
    (0x20010000 << 96, (0x20010000 << 96) + (1 << 96) - 1),  # Teredo
    (0x20010DB8 << 96, (0x20010DB8 << 96) + (1 << 96) - 1),  # documentation
    (0xFC << 120, (0xFE << 120) - 1),  # unique-local
    (0xFE80 << 112, (0xFEC0 << 112) - 1),  # link-local
    (0xFEC0 << 112, (0xFF00 << 112) - 1),  # site-local
    (0xFF << 120, (1 << 128) - 1),  # multicast
]


def reference_denied(address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    value = int(address)
    if address.version == 4:
        return any(low <= value <= high for low, high in REFERENCE_V4)
    if value >> 32 == 0xFFFF or value >> 32 == 0x0064FF9B << 64:  # mapped, NAT64
        return reference_denied(ipaddress.IPv4Address(value & 0xFFFFFFFF))
    if value >> 112 == 0x2002:  # 6to4
        return reference_denied(ipaddress.IPv4Address((value >> 80) & 0xFFFFFFFF))
    return any(low <= value <= high for low, high in REFERENCE_V6)


addresses_v4 = st.integers(0, 2**32 - 1).map(ipaddress.IPv4Address)
addresses_v6 = st.integers(0, 2**128 - 1).map(ipaddress.IPv6Address)
# Values near the ranges' edges, where off-by-one errors live.
edges_v4 = (
    st.sampled_from([b for pair in REFERENCE_V4 for b in pair])
    .flatmap(lambda b: st.integers(max(0, b - 2), min(2**32 - 1, b + 2)))
    .map(ipaddress.IPv4Address)
)
embedded = st.one_of(
    addresses_v4.map(lambda a: ipaddress.IPv6Address((0xFFFF << 32) | int(a))),
    addresses_v4.map(lambda a: ipaddress.IPv6Address((0x0064FF9B << 96) | int(a))),
    addresses_v4.map(lambda a: ipaddress.IPv6Address((0x2002 << 112) | (int(a) << 80))),
)
any_address = st.one_of(addresses_v4, addresses_v6, edges_v4, embedded)


@given(any_address)
def test_the_denied_ranges_are_the_reference_ranges(address):
    assert (denied_range(address) is not None) == reference_denied(address)


@given(any_address)
def test_whatever_python_calls_not_global_is_denied(address):
    if address.version == 6 and (address.ipv4_mapped or address.sixtofour):
        return  # judged by the IPv4 address inside (covered above)
    if not address.is_global and not (address.version == 6 and address in _NAT64):
        assert denied_range(address) is not None


_NAT64 = ipaddress.ip_network("64:ff9b::/96")


@given(any_address, st.integers(1, 65535))
def test_public_mode_allows_exactly_the_public_addresses(address, port):
    decision = EgressPolicy().decide("example.org", port, [address])
    assert decision.allowed == (not reference_denied(address))
    assert not decision.explicit


@given(st.lists(any_address, min_size=1, max_size=4), st.integers(1, 65535))
def test_a_name_is_allowed_only_when_every_address_is(addresses, port):
    decision = EgressPolicy().decide("rebind.example", port, addresses)
    assert decision.allowed == all(not reference_denied(a) for a in addresses)


# -- tables ---------------------------------------------------------------------------------------

NEVER_WITHOUT_ENTRY = [
    ("127.0.0.1", "loopback"),
    ("127.1.2.3", "loopback"),
    ("::1", "loopback"),
    ("10.0.0.1", "private"),
    ("10.0.0.5", "private"),
    ("172.17.0.1", "private"),
    ("192.168.1.1", "private"),
    ("100.64.0.1", "RFC 6598"),
    ("169.254.169.254", "metadata"),
    ("fd00::1", "unique-local"),
    ("fe80::1", "link-local"),
    ("ff02::1", "multicast"),
    ("224.0.0.251", "multicast"),
    ("0.0.0.0", "this network"),
    ("::ffff:127.0.0.1", "loopback"),
    ("::ffff:169.254.169.254", "metadata"),
    ("64:ff9b::a00:1", "private"),
    ("2002:7f00:1::", "loopback"),
    ("::", "unspecified"),
]


@pytest.mark.parametrize(("address", "word"), NEVER_WITHOUT_ENTRY)
@pytest.mark.parametrize("mode", ["public", "allow-list"])
def test_non_public_addresses_are_denied_in_every_mode(address, word, mode):
    policy = EgressPolicy.parse(
        mode, ["pypi.org", ":443", "203.0.113.0/24"] if mode != "public" else []
    )
    decision = policy.decide("pypi.org", 443, [ip(address)])
    assert not decision.allowed
    assert word in decision.reason
    assert "always denied" in decision.reason


def test_public_addresses_are_allowed_in_public_mode():
    policy = EgressPolicy()
    assert policy.mode == DEFAULT_MODE == "public"
    for address in ("151.101.0.223", "8.8.8.8", "2a04:4e42::223", "::ffff:8.8.8.8"):
        decision = policy.decide("pypi.org", 443, [ip(address)])
        assert decision.allowed, address
        assert "public address" in decision.reason


def test_none_mode_denies_everything():
    policy = EgressPolicy.parse("none")
    assert not policy.enabled
    decision = policy.decide("pypi.org", 443, [ip("151.101.0.223")])
    assert not decision.allowed
    assert "off" in decision.reason


def test_own_addresses_are_denied_even_when_public():
    policy = EgressPolicy().with_own_addresses([ip("198.2.3.4")])
    assert not policy.decide("ci.example.org", 443, [ip("198.2.3.4")]).allowed
    assert "own address" in policy.decide("x", 443, [ip("198.2.3.4")]).reason
    assert policy.decide("x", 443, [ip("198.2.3.5")]).allowed


def test_one_bad_address_among_good_ones_refuses_the_name():
    decision = EgressPolicy().decide(
        "rebind.example", 443, [ip("151.101.0.223"), ip("169.254.169.254")]
    )
    assert not decision.allowed
    assert "169.254.169.254" in decision.reason
    assert not EgressPolicy().decide("nothing.example", 443, []).allowed


ALLOW = ["pypi.org:443", ".pythonhosted.org", "127.0.0.1:8000-8001", "[fd00::/64]:3141", ":22"]
ALLOW_LIST_TABLE = [
    # host, port, address, allowed, words in the reason
    ("pypi.org", 443, "151.101.0.223", True, "allow-listed by pypi.org:443"),
    ("PyPI.org.", 443, "151.101.0.223", True, "allow-listed by pypi.org:443"),
    ("pypi.org", 80, "151.101.0.223", False, "port 80 of pypi.org is not on the allow-list"),
    ("files.pythonhosted.org", 8443, "151.101.0.223", True, "allow-listed by .pythonhosted.org"),
    ("pythonhosted.org", 443, "151.101.0.223", False, "not on the allow-list"),
    ("evilpythonhosted.org", 443, "151.101.0.223", False, "not on the allow-list"),
    ("example.org", 443, "93.184.215.14", False, "example.org:443 is not on the allow-list"),
    ("example.org", 22, "93.184.215.14", True, "port 22 of a public address allowed by :22"),
    ("127.0.0.1", 8000, "127.0.0.1", True, "explicitly allow-listed by 127.0.0.1:8000-8001"),
    ("localhost", 8001, "127.0.0.1", True, "explicitly allow-listed"),
    ("127.0.0.1", 8002, "127.0.0.1", False, "port 8002 of 127.0.0.1 (loopback) is not on"),
    ("127.0.0.2", 8000, "127.0.0.2", False, "loopback: always denied"),
    ("pypi.org", 443, "127.0.0.1", False, "(loopback) is not on the allow-list"),  # rebound
    ("pypi.org", 443, "127.0.0.2", False, "loopback: always denied"),
    ("mirror", 3141, "fd00::5", True, "explicitly allow-listed by [fd00::/64]:3141"),
    ("mirror", 3141, "fd00:0:0:1::5", False, "unique-local: always denied"),
    ("mirror", 22, "10.0.0.1", False, "private (RFC 1918): always denied"),  # :22 is public only
]


@pytest.mark.parametrize(("host", "port", "address", "allowed", "words"), ALLOW_LIST_TABLE)
def test_allow_list_mode(host, port, address, allowed, words):
    decision = EgressPolicy.parse("allow-list", ALLOW).decide(host, port, [ip(address)])
    assert decision.allowed == allowed, decision.reason
    assert words in decision.reason
    assert decision.explicit == (allowed and "explicitly" in words)


def test_public_mode_with_an_address_entry_reaches_a_local_mirror():
    policy = EgressPolicy.parse("public", ["10.1.2.3:3141"])
    assert policy.decide("mirror", 3141, [ip("10.1.2.3")]).explicit
    assert not policy.decide("mirror", 3141, [ip("10.1.2.4")]).allowed
    assert policy.decide("pypi.org", 443, [ip("151.101.0.223")]).allowed


PARSED = [
    ("pypi.org", {"host": "pypi.org"}),
    ("PyPI.Org.", {"host": "pypi.org"}),
    ("*.example.org:443", {"suffix": "example.org", "low_port": 443, "high_port": 443}),
    (".example.org", {"suffix": "example.org", "low_port": 1, "high_port": 65535}),
    ("10.0.0.0/8", {"network": ipaddress.ip_network("10.0.0.0/8")}),
    ("10.1.2.3:80", {"network": ipaddress.ip_network("10.1.2.3/32"), "low_port": 80}),
    ("::1", {"network": ipaddress.ip_network("::1/128")}),
    ("[::1]:8080", {"network": ipaddress.ip_network("::1/128"), "high_port": 8080}),
    ("[fd00::/8]", {"network": ipaddress.ip_network("fd00::/8")}),
    (":8000-8099", {"low_port": 8000, "high_port": 8099}),
]


@pytest.mark.parametrize(("text", "fields"), PARSED)
def test_allow_entries_parse(text, fields):
    entry = parse_allow_entry(text)
    for name, value in fields.items():
        assert getattr(entry, name) == value


REFUSED = [
    ("", "must not be empty"),
    ("pypi.org:", "followed by a port"),
    ("pypi.org:https", "not a port"),
    ("pypi.org:0", "ports are 1-65535"),
    ("pypi.org:70000", "ports are 1-65535"),
    (":9-8", "low to high"),
    ("10.0.0.1/8", "host bits set; write 10.0.0.0/8"),
    ("[::1", "[address]"),
    ("[]:80", "no address"),
    ("[pypi.org]:80", "not an IP address"),
    ("bad host", "not a host name"),
    ("-bad.org", "not a host name"),
    ("10.0.0.0/33", "not an IP address"),
]


@pytest.mark.parametrize(("text", "words"), REFUSED)
def test_bad_allow_entries_are_refused_by_name(text, words):
    with pytest.raises(ConfigurationError) as caught:
        parse_allow_entry(text)
    assert words in caught.value.message
    assert repr(text) in caught.value.message


def test_bad_policies_are_refused():
    with pytest.raises(ConfigurationError, match="one of none, public, allow-list"):
        EgressPolicy.parse("open")
    with pytest.raises(ConfigurationError, match="at least one --egress-allow"):
        EgressPolicy.parse("allow-list")
    with pytest.raises(ConfigurationError, match="takes no --egress-allow"):
        EgressPolicy.parse("none", ["pypi.org"])
    with pytest.raises(ConfigurationError, match="max_bytes"):
        EgressLimits(max_bytes=0)
    with pytest.raises(ConfigurationError, match="idle_seconds"):
        EgressLimits(idle_seconds=-1)


def test_descriptions_name_the_policy():
    assert EgressPolicy.parse("none").describe() == "none (jobs have no network)"
    assert EgressPolicy().describe().startswith("public (any public address); loopback")
    text = EgressPolicy.parse("allow-list", ["pypi.org", "10.0.0.0/8:3141"]).describe()
    assert text.startswith("allow-list: pypi.org, 10.0.0.0/8:3141;")
    assert "512 connections" in text


hosts = st.sampled_from(
    ["pypi.org", "files.pythonhosted.org", "example.org", "localhost", "mirror", "127.0.0.1", "::1"]
)


@given(hosts, st.sampled_from([22, 80, 443, 3141, 8000, 8002]), st.lists(any_address, max_size=3))
def test_a_denial_before_the_lookup_holds_for_every_answer(host, port, addresses):
    for policy in (EgressPolicy(), EgressPolicy.parse("allow-list", ALLOW)):
        early = policy.decide_before_lookup(host, port)
        if early is not None:
            assert not early.allowed
            assert not policy.decide(host, port, addresses).allowed


def test_names_off_the_allow_list_are_denied_before_any_lookup():
    names_only = EgressPolicy.parse("allow-list", ["pypi.org:443"])
    assert names_only.decide_before_lookup("pypi.org", 443) is None
    assert "port 80 of pypi.org" in names_only.decide_before_lookup("pypi.org", 80).reason
    assert "evil.example:443 is not" in names_only.decide_before_lookup("evil.example", 443).reason
    assert names_only.decide_before_lookup("127.0.0.1", 443) is None  # a literal: no lookup
    with_network = EgressPolicy.parse("allow-list", ["127.0.0.1:8000"])
    assert with_network.decide_before_lookup("anything.example", 8000) is None
    assert not with_network.decide_before_lookup("anything.example", 8001).allowed
    assert not EgressPolicy.parse("none").decide_before_lookup("pypi.org", 443).allowed
