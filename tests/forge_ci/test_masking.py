"""Masking: what is masked, what is not, and that no chunking of any output reveals a secret."""

from __future__ import annotations

import json
import re
from collections.abc import Callable

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from forge_ci.masking import (
    EMPTY,
    MIN_TAIL_BYTES,
    Carry,
    CarryUnreadable,
    Masker,
    MaskerCache,
    _derived,
    mask_of,
    open_carry,
    patterns_for,
    seal_carry,
)


def stream(masker: Masker, chunks: list[str]) -> str:
    """What would be stored for one (step, stream) receiving ``chunks``."""
    carry = EMPTY
    stored = []
    for chunk in chunks:
        emitted, carry = masker.feed(carry, chunk)
        stored.append(emitted)
    stored.append(masker.finish(carry))
    return "".join(stored)


_ALNUM = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"


@given(st.text(alphabet=_ALNUM, min_size=1) | st.text(min_size=1))
def test_a_plain_value_s_patterns_are_what_the_full_derivation_finds(value: str) -> None:
    """patterns_for takes a one-line alphanumeric value (a credential) as its own only
    pattern without deriving; any value gives what the derivation gives."""
    expected = frozenset(p for p in _derived(value) if p)
    assert patterns_for([value]) == expected
    if value.isascii() and value.isalnum():
        assert expected == {value}


def test_values_lines_and_json_forms_are_patterns() -> None:
    value = 'first line is long\nshort\n{"token": "inner-token-value", "n": 1}'
    patterns = patterns_for([value, "", "tiny"])
    assert value in patterns
    assert "first line is long" in patterns
    assert "short" not in patterns  # a line under 8 bytes would mask ordinary output
    assert "tiny" in patterns  # a whole value is masked whatever its length
    assert json.dumps(value)[1:-1] in patterns
    assert "" not in patterns
    nested = patterns_for(['{"user": "me", "password": "hunter2-hunter2"}'])
    assert "hunter2-hunter2" in nested
    assert "me" not in nested


def test_mask_text_masks_every_occurrence_and_keeps_the_rest() -> None:
    masker = Masker(patterns_for(["s3cr3t-value", 'quote"d-secret']))
    text = 'a s3cr3t-value b s3cr3t-values3cr3t-value c {"k": "quote\\"d-secret"} d'
    assert masker.mask_text(text) == 'a *** b *** c {"k": "***"} d'
    assert masker.mask_text("nothing to hide here\n") == "nothing to hide here\n"


def test_a_secret_split_across_chunks_is_masked_and_withheld_text_is_released() -> None:
    masker = Masker(patterns_for(["s3cr3t-value"]))
    emitted, carry = masker.feed(EMPTY, "token=s3cr")
    assert emitted == "token="
    assert carry.pending == "s3cr"
    emitted, carry = masker.feed(carry, "3t-value done\n")
    assert emitted == "*** done\n"
    assert carry == EMPTY
    # A withheld prefix that turns out not to be a secret is released unchanged.
    emitted, carry = masker.feed(EMPTY, "s3cr")
    emitted2, carry = masker.feed(carry, "ets are fine\n")
    assert emitted + emitted2 == "s3crets are fine\n"


def test_an_unfinished_prefix_is_masked_when_the_stream_ends() -> None:
    masker = Masker(patterns_for(["s3cr3t-value"]))
    assert stream(masker, ["echo s3cr3t-va"]) == "echo ***"
    assert stream(masker, ["echo s3", "cr3t-va"]) == "echo ***"
    assert stream(masker, ["echo s3", "cr3t"]) == "echo ***"  # half of the value: secret
    # The refusal side: under 8 bytes and under half of the value, it ends the stream as it is.
    assert stream(masker, ["echo s3", "cr"]) == "echo s3cr"


def test_a_match_running_into_withheld_text_stays_masked() -> None:
    """The first secret ends inside a prefix of the second: nothing of either may leak."""
    masker = Masker(patterns_for(["abcdefgh12", "12abcdefghij"]))
    out = stream(masker, ["..abcdefgh12abcd", "efghij.."])
    assert "abcdefgh" not in out and "efghij" not in out
    assert out.startswith("..") and out.endswith("..")


@pytest.mark.parametrize("joint", ["12", "€😀"])
def test_covered_text_stays_covered_when_the_whole_text_is_withheld_again(joint: str) -> None:
    """The covered start of the pending text outlives a chunk that keeps all of it pending.

    ``joint`` ends the first secret (already masked) and starts a prefix of the second; after
    "ef" the whole text is still a prefix, and "gh--" then ends it without a match: the joint
    must not come out. (Multibyte, the carry still counts characters, not bytes.)
    """
    masker = Masker(patterns_for([f"abcdefgh{joint}", f"{joint}abcdefghij"]))
    emitted, carry = masker.feed(EMPTY, f"..abcdefgh{joint}abcd")
    assert (emitted, carry) == ("..***", Carry(f"{joint}abcd", 2))
    out = stream(masker, [f"..abcdefgh{joint}abcd", "ef", "gh--"])
    assert out == "..***abcdefgh--" == masker.mask_text(f"..abcdefgh{joint}abcdefgh--")
    # The refusal side: what follows the covered text and is not a secret is released.
    more = stream(masker, [f"..abcdefgh{joint}abcd", "ef", "gh--", "more\n"])
    assert more == "..***abcdefgh--more\n"


def test_the_mask_character_is_never_part_of_a_secret() -> None:
    masker = Masker(patterns_for(["pa**word-1", "x#y#z#w#"]))
    assert masker.mask == "~~~"
    # With "*" as the mask, "pa" + mask + "word-1"-like neighbours could spell a secret.
    assert masker.mask_text("pa**word-1") == "~~~"


def test_many_secrets_cost_one_scan() -> None:
    secrets = [f"secret-number-{i:03d}-{'x' * 20}" for i in range(64)]
    masker = Masker(patterns_for(secrets))
    text = " ".join(secrets) + " tail"
    assert masker.mask_text(text) == " ".join(["***"] * 64) + " tail"


def test_non_ascii_text_around_matches_is_kept_exactly() -> None:
    masker = Masker(patterns_for(["пароль-секрет", "tok\u00e9n-\U0001f511-value"]))
    text = "Ünïcødé → пароль-секрет ← 😀 tokén-🔑-value€\n"
    assert masker.mask_text(text) == "Ünïcødé → *** ← 😀 ***€\n"
    # The JSON-escaped (ASCII) form is masked too; its neighbours are kept.
    escaped = json.dumps({"k": "пароль-секрет"})
    assert masker.mask_text(f"ß{escaped}ß") == 'ß{"k": "***"}ß'
    # The refusal side: near misses in non-ASCII text come out unchanged.
    near = "Ünïcødé пароль-секре 😀 tokén-🔑-valu€ пароль_секрет\n"
    assert masker.mask_text(near) == near
    assert stream(masker, [near[:9], near[9:20], near[20:]]) == near


def test_a_secret_split_inside_multibyte_text_is_masked() -> None:
    masker = Masker(patterns_for(["ключ-€-😀-значение"]))
    before = "вывод сборки: ключ-€-😀"
    emitted, carry = masker.feed(EMPTY, before)
    assert emitted == "вывод сборки: "  # the start of the secret, in characters, is withheld
    assert carry == Carry("ключ-€-😀", 0)
    emitted, carry = masker.feed(carry, "-значение готово\n")
    assert (emitted, carry) == ("*** готово\n", EMPTY)
    # Every split of the text gives the same stored log.
    text = "ß ключ-€-😀-значение ß"
    for cut in range(len(text) + 1):
        assert stream(masker, [text[:cut], text[cut:]]) == "ß *** ß"
    # The refusal side: a withheld multibyte prefix that does not continue is released whole.
    assert stream(masker, ["вывод: ключ-€", "-😀 другой\n"]) == "вывод: ключ-€-😀 другой\n"


def test_lone_surrogates_in_secrets_and_output() -> None:
    secret = "a\ud800b-surrogate-\udfff"
    masker = Masker(patterns_for([secret]))
    for cut in range(len(secret) + 1):
        chunks = ["x\udc00 ", f"{secret[:cut]}", f"{secret[cut:]} \ud83d"]
        assert stream(masker, chunks) == "x\udc00 *** \ud83d"
    # The refusal side: a surrogate pair spelled differently is another text.
    other = "a\ud800b-surrogate-\U0001f600"
    assert masker.mask_text(other) == other


@pytest.mark.parametrize("count", [64, 300])
def test_many_secrets_are_all_masked_and_nothing_else(count: int) -> None:
    """64 secrets take the detector path, 300 the single scan: both mask the same."""
    secrets = [f"s{i:03d}-{'k' * (i % 7)}-secret-€" for i in range(count)]
    masker = Masker(patterns_for(secrets))
    text = "\n".join(f"line {i}: {s} ok" for i, s in enumerate(secrets))
    assert masker.mask_text(text) == "\n".join(f"line {i}: *** ok" for i in range(count))
    # Split every secret across chunks.
    chunks = [text[i : i + 13] for i in range(0, len(text), 13)]
    assert stream(masker, chunks) == masker.mask_text(text)
    # The refusal side: every secret one character short, or with one more in the middle.
    near = "\n".join(f"{s[:-1]} {s[:5]}x{s[5:]}" for s in secrets)
    assert masker.mask_text(near) == near
    assert stream(masker, [near[i : i + 13] for i in range(0, len(near), 13)]) == near


def test_long_secrets_are_masked_across_small_chunks() -> None:
    """A long multi-line secret (past the DFA budget): every line and the whole are masked."""
    lines = [f"{i:02d}" + "Zm9vYmFyYmF6" * 5 for i in range(400)]
    key = "-----BEGIN KEY-----\n" + "\n".join(lines) + "\n-----END KEY-----\n"
    masker = Masker(patterns_for([key, "a" * 64]))
    text = f"cat key:\n{key}and one line: {lines[7]}.\n{json.dumps(key)}\n"
    chunks = [text[i : i + 4096] for i in range(0, len(text), 4096)]
    out = stream(masker, chunks)
    assert out == 'cat key:\n***and one line: ***.\n"***"\n'
    # The refusal side: a line of the key that differs in its last character is kept.
    changed = lines[7][:-1] + "!"
    assert stream(masker, ["x ", changed[:30], changed[30:] + "\n"]) == f"x {changed}\n"


def test_carry_is_sealed_under_the_credential() -> None:
    carry = Carry("s3cr", 2)
    sealed = seal_carry("a" * 64, "1/build/stdout", carry)
    assert b"s3cr" not in sealed
    assert open_carry("a" * 64, "1/build/stdout", sealed) == carry
    with pytest.raises(CarryUnreadable):
        open_carry("b" * 64, "1/build/stdout", sealed)
    with pytest.raises(CarryUnreadable):
        open_carry("a" * 64, "1/build/stderr", sealed)


def test_masker_cache_reuses_automata() -> None:
    cache = MaskerCache(size=2)
    first = cache.get(["one-secret"])
    assert cache.get(["one-secret"]) is first
    cache.get(["two-secret"])
    cache.get(["three-secret"])
    assert cache.get(["one-secret"]) is not first


def test_masker_cache_finds_keyed_maskers_without_their_values() -> None:
    cache = MaskerCache(size=4)
    asked: list[str] = []

    def values(*items: str) -> Callable[[], list[str]]:
        return lambda: asked.append(items[0]) or list(items)

    first = cache.get_for("attempt/1/h1", values("one-secret", "token-1"))
    assert cache.get_for("attempt/1/h1", values("never-read")) is first
    assert asked == ["one-secret"]
    assert cache.get(["token-1", "one-secret"]) is first  # the same values, the same masker
    # The refusal side: another key reads its own values; an evicted key reads them again.
    second = cache.get_for("attempt/2/h2", values("two-secret"))
    assert second is not first and second.mask_text("one-secret\n") == "one-secret\n"
    for n in range(4):
        cache.get([f"filler-{n}"])
    assert cache.get_for("attempt/1/h1", values("one-secret", "token-1")) is not first
    assert asked == ["one-secret", "two-secret", "one-secret"]


# --- The property: no chunking of any output ever stores a secret -----------------------------

ALPHABET = st.sampled_from(list('ab01*#~"\\\n\r\t é€/{}:'))
SECRET = st.text(ALPHABET, min_size=1, max_size=24)


def _collapse(text: str, mask: str) -> str:
    char = re.escape(mask[0])
    return re.sub(f"{char}{{3,}}", mask, text)


@st.composite
def outputs(draw: st.DrawFn) -> tuple[list[str], str, list[str]]:
    secrets = draw(st.lists(SECRET, min_size=1, max_size=5))
    forms = sorted(patterns_for(secrets))
    pieces = draw(st.lists(st.one_of(st.text(ALPHABET, max_size=12), st.sampled_from(forms))))
    output = "".join(pieces)
    cuts = sorted(draw(st.sets(st.integers(0, len(output)), max_size=8)))
    bounds = [0, *cuts, len(output)]
    chunks = [output[a:b] for a, b in zip(bounds, bounds[1:], strict=False)]
    return secrets, output, chunks


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(outputs())
def test_no_chunking_of_any_output_reveals_a_secret(
    case: tuple[list[str], str, list[str]],
) -> None:
    secrets, output, chunks = case
    masker = Masker(patterns_for(secrets))
    stored = stream(masker, chunks)
    for secret in secrets:
        assert secret not in stored
        escaped = json.dumps(secret)[1:-1]
        assert escaped not in stored
        for line in re.split(r"\r\n|\n|\r", secret):
            if len(line.encode()) >= 8:
                assert line not in stored
    # Chunking changes where masks split, never what is masked.
    assert _collapse(stored, masker.mask) == _collapse(stream(masker, [output]), masker.mask)


#: Multibyte characters, an astral one and lone surrogates, beside the characters JSON escapes.
WIDE = st.sampled_from(list('ab01*"\\\n\r\t é€😀ß/{}:') + ["\ud83d", "\ude00", "\udcff"])


def unresolved_tail(patterns: frozenset[str], text: str) -> str:
    """The longest suffix of ``text`` that is a proper prefix of a pattern (else "")."""
    for start in range(len(text)):
        tail = text[start:]
        if any(p.startswith(tail) and p != tail for p in patterns):
            return tail
    return ""


def tail_counts(patterns: frozenset[str], tail: str) -> bool:
    """The end-of-stream rule, spelt out: 8 bytes or more, or half of a pattern it begins."""
    size = len(tail.encode("utf-8", "surrogatepass"))
    if not tail:
        return False
    return size >= MIN_TAIL_BYTES or any(
        p.startswith(tail) and 2 * size >= len(p.encode("utf-8", "surrogatepass")) for p in patterns
    )


def reference(patterns: frozenset[str], text: str, mask: str) -> str:
    """The whole text masked the slow, obvious way: every occurrence, and at the end an
    unfinished prefix of a pattern when it counts as secret (:func:`tail_counts`)."""
    covered = [False] * len(text)
    for pattern in patterns:
        at = text.find(pattern)
        while at >= 0:
            covered[at : at + len(pattern)] = [True] * len(pattern)
            at = text.find(pattern, at + 1)
    tail = unresolved_tail(patterns, text)
    if tail_counts(patterns, tail):
        covered[len(text) - len(tail) :] = [True] * len(tail)
    return _collapse(
        "".join(mask if hidden else ch for ch, hidden in zip(text, covered, strict=True)), mask
    )


@st.composite
def wide_outputs(draw: st.DrawFn) -> tuple[list[str], str, list[str]]:
    secrets = draw(st.lists(st.text(WIDE, min_size=1, max_size=20), min_size=1, max_size=5))
    forms = sorted(patterns_for(secrets))
    pieces = draw(st.lists(st.one_of(st.text(WIDE, max_size=10), st.sampled_from(forms))))
    output = "".join(pieces)
    cuts = sorted(draw(st.sets(st.integers(0, len(output)), max_size=10)))
    bounds = [0, *cuts, len(output)]
    return secrets, output, [output[a:b] for a, b in zip(bounds, bounds[1:], strict=False)]


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(wide_outputs())
def test_any_chunking_masks_exactly_what_a_plain_search_finds(
    case: tuple[list[str], str, list[str]],
) -> None:
    """Byte-level scanning of non-ASCII text agrees with a character-level reference."""
    secrets, output, chunks = case
    masker = Masker(patterns_for(secrets))
    expected = reference(masker.patterns, output, masker.mask)
    assert _collapse(stream(masker, chunks), masker.mask) == expected
    assert _collapse(masker.mask_text(output), masker.mask) == expected


@settings(max_examples=200, deadline=None)
@given(st.lists(SECRET, min_size=1, max_size=4), st.text(max_size=200))
def test_output_without_secret_characters_is_stored_unchanged(
    secrets: list[str], text: str
) -> None:
    """The refusal side: masking does not eat ordinary output."""
    masker = Masker(patterns_for(secrets))
    used = set("".join(masker.patterns))
    plain = "".join(ch for ch in text if ch not in used)
    assert stream(masker, [plain[: len(plain) // 2], plain[len(plain) // 2 :]]) == plain


@pytest.mark.parametrize(
    "values",
    [["a" * 64, "b" * 64], ["with*star-and#hash", "x"], ["*#~\u2022\u2588\u25a0 all taken"], []],
)
def test_mask_of_is_the_mask_a_masker_of_the_values_writes(values: list[str]) -> None:
    """A claim stores the attempt's mask without building its masker: the same string."""
    assert mask_of(values) == MaskerCache().get(values).mask
