"""Bounded YAML loading: limits, refused YAML features, encodings and positions."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from wf_support import MINIMAL, messages

from forge_ci.workflow import Diagnostic, Workflow
from forge_ci.workflow.diagnostics import Problems
from forge_ci.workflow.loader import MAX_DEPTH, MAX_INPUT_BYTES, MAX_NODES, decode, load
from forge_ci.workflow.nodes import Mapping, Node, Scalar, Sequence

Refuse = Callable[[str | bytes], list[Diagnostic]]
Accept = Callable[[str], Workflow]


def tree(text: str) -> tuple[Node | None, list[Diagnostic]]:
    problems = Problems()
    source = decode(text, problems)
    root = load(source, problems) if source is not None else None
    return root, problems.sorted()


def test_nodes_keep_one_based_positions() -> None:
    root, problems = tree("a:\n  - b: 'x'\n  - [c, d]\n")
    assert problems == []
    assert isinstance(root, Mapping) and (root.line, root.column) == (1, 1)
    sequence = root["a"]
    assert isinstance(sequence, Sequence) and (sequence.line, sequence.column) == (2, 3)
    first = sequence.items[0]
    assert isinstance(first, Mapping)
    value = first["b"]
    assert isinstance(value, Scalar) and (value.line, value.column, value.style) == (2, 8, "'")
    flow = sequence.items[1]
    assert isinstance(flow, Sequence) and (flow.line, flow.column) == (3, 5)


def test_input_of_exactly_64_kib_is_read_and_one_byte_more_is_refused(
    accept: Accept, refuse: Refuse
) -> None:
    padding = MAX_INPUT_BYTES - len(MINIMAL.encode()) - 2
    exact = MINIMAL + "#" + "x" * padding + "\n"
    assert len(exact.encode()) == MAX_INPUT_BYTES
    accept(exact)
    diagnostics = refuse((exact + " ").encode())
    assert diagnostics == [Diagnostic(1, 1, "the file is 65537 bytes; the limit is 65536 (64 KiB)")]


def test_size_is_counted_in_utf8_bytes_for_text(refuse: Refuse) -> None:
    text = MINIMAL + "# " + "é" * (MAX_INPUT_BYTES // 2) + "\n"
    assert len(text) < MAX_INPUT_BYTES
    assert "the limit is 65536" in messages(refuse(text))


def test_one_document_only(accept: Accept, refuse: Refuse) -> None:
    accept("---\n" + MINIMAL)
    diagnostics = refuse("---\n" + MINIMAL + "---\n" + MINIMAL)
    assert diagnostics == [Diagnostic(8, 1, "a workflow file holds exactly one YAML document")]


def test_collections_nest_at_most_32_levels() -> None:
    # The root mapping is level 1, so 31 nested sequences reach exactly 32.
    _, problems = tree("a: " + "[" * (MAX_DEPTH - 1) + "]" * (MAX_DEPTH - 1))
    assert problems == []
    root, problems = tree("a: " + "[" * MAX_DEPTH + "]" * MAX_DEPTH)
    assert root is None
    assert problems == [Diagnostic(1, 35, "collections are nested more than 32 levels deep")]


def test_at_most_8192_nodes() -> None:
    # Root mapping, key and sequence are three nodes; the rest are scalars.
    _, problems = tree("a: [" + "1," * (MAX_NODES - 3) + "]")
    assert problems == []
    root, problems = tree("a: [" + "1," * (MAX_NODES - 2) + "]")
    assert root is None
    assert [p.message for p in problems] == ["the file has more than 8192 YAML nodes"]


@pytest.mark.parametrize(
    ("yaml_text", "line", "column", "phrase"),
    [
        ("a: &x 1\n", 1, 4, "YAML anchors (&x) are not supported; repeat the value instead"),
        ("a: !!str 1\n", 1, 4, "explicit YAML tags (!!str) are not supported"),
        ("a: !custom 1\n", 1, 4, "explicit YAML tags (!custom) are not supported"),
        ("a: ! 1\n", 1, 4, "explicit YAML tags (!) are not supported"),
        ("<<: {a: 1}\n", 1, 1, "YAML merge keys (<<) are not supported; write the keys out"),
        ('"": 1\n', 1, 1, "empty mapping keys are not allowed"),
        ("~: 1\n", 1, 1, "empty mapping keys are not allowed"),
        ("null: 1\n", 1, 1, "empty mapping keys are not allowed"),
        ("a: 1\na: 2\n", 2, 1, "duplicate key 'a' (first defined at line 1)"),
        ("? [a]\n: 1\n", 1, 3, "mapping keys must be strings, not a sequence"),
        ('a: "\\0"\n', 1, 4, "a NUL character (written as an escape) is not allowed"),
        ("%YAML 1.1\n---\na: 1\n", 1, 1, "YAML directives (%YAML, %TAG) are not supported"),
        ("a: 1\nb: *x\n", 2, 4, "YAML aliases (*x) are not supported"),
    ],
)
def test_refused_yaml_features(yaml_text: str, line: int, column: int, phrase: str) -> None:
    _, problems = tree(yaml_text)
    assert len(problems) == 1
    assert (problems[0].line, problems[0].column) == (line, column)
    assert phrase in problems[0].message


def test_alias_is_refused_at_its_position() -> None:
    _, problems = tree("a: &x 1\nb: *x\n")
    assert Diagnostic(2, 4, "YAML aliases (*x) are not supported; repeat the value instead") in (
        problems
    )


def test_quoted_keys_that_look_empty_or_null_are_keys() -> None:
    root, problems = tree('"null": 1\n"~": 2\n')
    assert problems == []
    assert isinstance(root, Mapping) and [k.value for k, _ in root.items] == ["null", "~"]


def test_every_problem_is_reported_in_one_pass() -> None:
    _, problems = tree("a: &x 1\nb: !!str 2\nb: 3\n<<: {}\n")
    assert [p.line for p in problems] == [1, 2, 3, 4]


def test_invalid_utf8_is_located(refuse: Refuse) -> None:
    data = MINIMAL.encode().replace(b"echo hi", b"echo h\xffi \xc3")
    diagnostics = refuse(data)
    assert diagnostics == [
        Diagnostic(6, 20, "the file is not valid UTF-8 here"),
        Diagnostic(6, 23, "the file is not valid UTF-8 here"),
    ]


def test_unpaired_surrogates_in_text_are_refused(refuse: Refuse) -> None:
    diagnostics = refuse(MINIMAL.replace("echo hi", "echo \ud800"))
    assert "unpaired surrogate" in messages(diagnostics)


@pytest.mark.parametrize("char", ["\x00", "\x01", "\x1b", "\x7f", "\x85\x86"[1], "\ufffe"])
def test_control_characters_are_refused_with_their_position(refuse: Refuse, char: str) -> None:
    diagnostics = refuse(MINIMAL.replace("echo hi", f"echo {char}hi"))
    assert [(d.line, d.column) for d in diagnostics] == [(6, 19)]
    assert "which YAML does not allow" in diagnostics[0].message


def test_tabs_and_newlines_are_ordinary(accept: Accept) -> None:
    accept(MINIMAL.replace("echo hi", '"echo\\thi\\r\\n"') + "\r\n")


def test_byte_order_mark_is_accepted_and_positions_are_unchanged(refuse: Refuse) -> None:
    diagnostics = refuse(b"\xef\xbb\xbf" + MINIMAL.encode().replace(b"runs-on", b"runs_on"))
    assert (diagnostics[0].line, diagnostics[0].column) == (4, 5)


def test_syntax_errors_are_located(refuse: Refuse) -> None:
    diagnostics = refuse("on: push\njobs:\n  build: [a,\n")
    assert len(diagnostics) == 1
    assert diagnostics[0].line == 4
    assert diagnostics[0].message.startswith("YAML syntax error:")


@pytest.mark.parametrize("text", ["", "# only a comment\n", "---\n"])
def test_empty_files_are_refused(refuse: Refuse, text: str) -> None:
    assert len(refuse(text)) == 1


@pytest.mark.parametrize("text", ["push\n", "- on\n- jobs\n"])
def test_root_must_be_a_mapping(refuse: Refuse, text: str) -> None:
    assert "must be a mapping" in messages(refuse(text))


def test_on_is_the_key_on_not_a_boolean(accept: Accept) -> None:
    workflow = accept(MINIMAL.replace("on: push", "on: [push]"))
    assert workflow.triggers.push is not None


def test_yaml11_spellings_stay_text_where_text_is_expected(plan_of: Callable[..., dict]) -> None:
    plan = plan_of(
        MINIMAL + "env:\n  A: yes\n  B: on\n  C: 1.0\n  D: 0x10\n  E: True\n  F: 012\n  G: '5'\n"
    )
    assert plan["jobs"][0]["steps"][0]["env"] == {
        "A": "yes",
        "B": "on",
        "C": "1.0",
        "D": "0x10",
        "E": "True",
        "F": "012",
        "G": "5",
    }


@pytest.mark.parametrize("spelling", ["yes", "on", "Off", "y"])
def test_yaml11_booleans_are_refused_where_a_boolean_is_expected(
    refuse: Refuse, spelling: str
) -> None:
    diagnostics = refuse(MINIMAL + f"concurrency:\n  group: g\n  cancel-in-progress: {spelling}\n")
    assert "YAML 1.1 spellings" in messages(diagnostics)


@pytest.mark.parametrize("spelling", ["true", "True", "TRUE", "false"])
def test_yaml12_booleans_are_booleans(accept: Accept, spelling: str) -> None:
    accept(MINIMAL + f"concurrency:\n  group: g\n  cancel-in-progress: {spelling}\n")
