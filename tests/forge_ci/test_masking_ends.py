"""The end of a stream: an unresolved tail of 8 bytes or more is masked, a shorter one kept.

Issue #12 item 2: one-character job outputs ``0``..``f`` and a last line ``tidy-v1`` were
turned into ``***`` whenever they ended with the first characters of the attempt credential.
Each case here is checked against the character-level reference masker over chunkings.
"""

from __future__ import annotations

import random
import string

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from forge_ci.masking import Masker, patterns_for
from tests.forge_ci.test_masking import (
    WIDE,
    _collapse,
    reference,
    stream,
    tail_counts,
    unresolved_tail,
)

HEX = "0123456789abcdef"


def credential(first: str, seed: int = 0) -> str:
    """A 64-hex-digit attempt credential starting with ``first``."""
    rng = random.Random(seed)
    return first + "".join(rng.choice(HEX) for _ in range(63))


def chunkings(text: str, rng: random.Random, count: int = 6) -> list[list[str]]:
    """The whole text, every two-piece split, and ``count`` random multi-piece splits."""
    ways = [[text]] + [[text[:cut], text[cut:]] for cut in range(len(text) + 1)]
    for _ in range(count):
        cuts = sorted(rng.sample(range(len(text) + 1), min(len(text) + 1, rng.randint(1, 6))))
        bounds = [0, *cuts, len(text)]
        ways.append([text[a:b] for a, b in zip(bounds, bounds[1:], strict=False)])
    return ways


def agrees(masker: Masker, text: str, rng: random.Random) -> str:
    """The stored text, after checking every chunking against the reference."""
    expected = reference(masker.patterns, text, masker.mask)
    assert _collapse(masker.mask_text(text), masker.mask) == expected
    for chunks in chunkings(text, rng):
        assert _collapse(stream(masker, chunks), masker.mask) == expected, chunks
    return masker.mask_text(text)


# --- Regressions ---------------------------------------------------------------------------------


@pytest.mark.parametrize("first", HEX)
def test_one_character_outputs_are_never_masked(first: str) -> None:
    """Whatever the credential starts with, the 16 outputs 0..f come out as they went in."""
    masker = Masker(patterns_for([credential(first)]))
    rng = random.Random(first)
    for char in HEX:
        assert agrees(masker, char, rng) == char


def test_tidy_v1_is_kept_when_the_credential_starts_with_1() -> None:
    masker = Masker(patterns_for([credential("1")]))
    assert agrees(masker, "tidy-v1", random.Random(1)) == "tidy-v1"
    assert agrees(masker, "formatted by tidy-v1\n", random.Random(2)) == "formatted by tidy-v1\n"


def test_a_7_byte_credential_prefix_is_kept_and_an_8_byte_one_masked() -> None:
    token = credential("c", seed=7)
    masker = Masker(patterns_for([token]))
    rng = random.Random(7)
    assert agrees(masker, f"id {token[:7]}", rng) == f"id {token[:7]}"
    assert agrees(masker, f"id {token[:8]}", rng) == "id ***"
    # Long prefixes and the whole value stay masked, at the end and elsewhere.
    assert agrees(masker, f"id {token[:63]}", rng) == "id ***"
    assert agrees(masker, f"id {token}", rng) == "id ***"
    assert agrees(masker, f"id {token} {token[:7]}", rng) == f"id *** {token[:7]}"


def test_the_threshold_counts_utf8_bytes() -> None:
    """Four 2-byte characters are 8 bytes: masked; three and one ASCII (7 bytes) are not."""
    masker = Masker(patterns_for(["ééééééé-secret"]))
    rng = random.Random(3)
    assert agrees(masker, "x ééé", rng) == "x ééé"
    assert agrees(masker, "x éééé", rng) == "x ***"
    other = Masker(patterns_for(["éééab-secret-value"]))
    assert agrees(other, "x éééa", rng) == "x éééa"  # 3 * 2 + 1 bytes
    assert agrees(other, "x éééab", rng) == "x ***"  # 3 * 2 + 2 bytes


def test_half_of_a_short_value_at_the_end_is_masked_and_less_is_kept() -> None:
    """A short secret's prefix gives most of it away: half or more of it counts as secret."""
    rng = random.Random(3)
    masker = Masker(patterns_for(["hunter2"]))
    assert agrees(masker, "password: hunt", rng) == "password: " + masker.mask
    assert agrees(masker, "password: hunter", rng) == "password: " + masker.mask
    assert agrees(masker, "the hunter2 ran", rng) == f"the {masker.mask} ran"
    assert agrees(masker, "no: hun", rng) == "no: hun"  # 3 of 7 bytes
    assert agrees(masker, "a hu", rng) == "a hu"
    # The same rule for a value a prefix of which ends the stream among longer ones.
    both = Masker(patterns_for(["hunter2", "hunter2-and-more-secret"]))
    assert agrees(both, "x hunt", rng) == "x " + both.mask


def test_a_short_value_inside_a_short_tail_is_still_masked() -> None:
    """A tail released for being short is masked like any text: "ab" is a secret itself."""
    masker = Masker(patterns_for(["ab", "abcdefghij"]))
    rng = random.Random(4)
    assert agrees(masker, "x ab", rng) == "x ***"
    assert agrees(masker, "x abc", rng) == "x ***c"
    assert agrees(masker, "x a", rng) == "x ***"  # half of "ab"
    assert agrees(Masker(patterns_for(["abcdefghij"])), "x a", rng) == "x a"


def test_a_short_tail_after_a_covered_start_releases_only_the_rest() -> None:
    """The first secret ends inside a prefix of the second; the short rest is released."""
    masker = Masker(patterns_for(["abcdefgh12", "12abcdefghij"]))
    rng = random.Random(5)
    assert agrees(masker, "..abcdefgh12ab", rng) == "..***ab"
    # 8 bytes of the second: a mask of its own (after the first one, as always).
    assert agrees(masker, "..abcdefgh12abcdef", rng) == "..******"


# --- Properties ----------------------------------------------------------------------------------


def test_every_prefix_of_every_pattern_at_the_end_of_a_stream() -> None:
    """Seeded: each pattern cut at every length ends a stream; the rule decides by its bytes."""
    rng = random.Random(12)
    values = [
        credential("a", seed=1),
        "ключ-€-😀-значение",
        'line one of the key\nshort\n{"token": "nested-token-value"}',
        "tiny",
    ]
    masker = Masker(patterns_for(values))
    for pattern in sorted(masker.patterns):
        for length in range(len(pattern) + 1):
            text = "out: " + pattern[:length]
            stored = agrees(masker, text, rng)
            tail = unresolved_tail(masker.patterns, text)
            if tail_counts(masker.patterns, tail):
                assert stored.endswith(masker.mask)
                assert pattern[:length] not in stored
            elif not any(p in text for p in masker.patterns):
                assert stored == text


SECRETS = st.lists(st.text(WIDE, min_size=1, max_size=20), max_size=3)


@st.composite
def ended_outputs(draw: st.DrawFn) -> tuple[list[str], str, list[str]]:
    """Random output that ends with a prefix, of any length, of one of the patterns."""
    token = draw(st.text(st.sampled_from(HEX), min_size=64, max_size=64))
    secrets = [token, *draw(SECRETS)]
    forms = sorted(patterns_for(secrets))
    pieces = draw(st.lists(st.one_of(st.text(WIDE, max_size=10), st.sampled_from(forms))))
    last = draw(st.sampled_from(forms))
    output = "".join(pieces) + last[: draw(st.integers(0, len(last)))]
    cuts = sorted(draw(st.sets(st.integers(0, len(output)), max_size=10)))
    bounds = [0, *cuts, len(output)]
    return secrets, output, [output[a:b] for a, b in zip(bounds, bounds[1:], strict=False)]


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ended_outputs())
def test_any_chunking_of_any_ending_agrees_with_the_reference(
    case: tuple[list[str], str, list[str]],
) -> None:
    secrets, output, chunks = case
    masker = Masker(patterns_for(secrets))
    expected = reference(masker.patterns, output, masker.mask)
    stored = stream(masker, chunks)
    assert _collapse(stored, masker.mask) == expected
    assert _collapse(masker.mask_text(output), masker.mask) == expected
    # Full values are never stored; a long unfinished prefix at the end is not either.
    for secret in secrets:
        assert secret not in stored
    tail = unresolved_tail(masker.patterns, output)
    if tail_counts(masker.patterns, tail):
        assert stored.endswith(masker.mask)


@settings(max_examples=200, deadline=None)
@given(st.text(st.sampled_from(string.ascii_letters + string.digits + "-. \n"), max_size=40))
def test_ordinary_outputs_lose_nothing_to_the_credential(text: str) -> None:
    """The refusal side: with only a random credential, no output without 8 bytes of it
    in a row is changed, however it is chunked."""
    token = credential(random.Random(text).choice(HEX), seed=len(text))
    masker = Masker(patterns_for([token]))
    if any(token[i : i + 8] in text for i in range(57)):
        return
    rng = random.Random(text)
    for chunks in chunkings(text, rng, count=3):
        assert stream(masker, chunks) == text
