"""Properties of the name and version rules against simple reference implementations."""

from __future__ import annotations

import string

import pytest
from hypothesis import given
from hypothesis import strategies as st

from forge_ci.errors import InvalidInput
from forge_ci.secrets.rules import SECRET, VARIABLE, check_value, normalize_name, parse_version

ALPHABET = string.ascii_letters + string.digits + "_-. é0"


def reference_name(name: str) -> str | None:
    """The seed's rule, written plainly: the stored name, or None when refused."""
    if not name or len(name) > 100 or name[0].isdigit():
        return None
    if any(c not in string.ascii_letters + string.digits + "_" for c in name):
        return None
    upper = name.upper()
    if upper.startswith(("GITHUB_", "FORGE_CI_", "RUNNER_")):
        return None
    return upper


@given(
    st.one_of(
        st.text(ALPHABET, max_size=110),
        st.sampled_from(
            [
                "github_x",
                "GitHub_Token",
                "FORGE_CI_",
                "runner_",
                "RUNNERX",
                "_",
                "A" * 100,
                "A" * 101,
            ]
        ),
    )
)
def test_names_follow_the_reference_rule(name: str) -> None:
    expected = reference_name(name)
    for kind in (SECRET, VARIABLE):
        if expected is None:
            with pytest.raises(InvalidInput):
                normalize_name(kind, name)
        else:
            assert normalize_name(kind, name) == expected


@given(st.text(string.digits + "+- x", max_size=22))
def test_versions_are_canonical_decimals(text: str) -> None:
    canonical = text.isdigit() and (text == "0" or not text.startswith("0")) and int(text) < 2**63
    if canonical:
        assert parse_version(text) == int(text)
    else:
        with pytest.raises(InvalidInput):
            parse_version(text)


@given(st.text(max_size=40))
def test_values_are_1_to_16384_bytes_of_utf8_without_nul(value: str) -> None:
    try:
        encoded: bytes | None = value.encode("utf-8")
    except UnicodeEncodeError:
        encoded = None
    valid = encoded is not None and 1 <= len(encoded) <= 16_384 and "\x00" not in value
    if valid:
        assert check_value(SECRET, value) == value
    else:
        with pytest.raises(InvalidInput):
            check_value(SECRET, value)
