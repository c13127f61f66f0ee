"""Static analysis: contexts, property paths and functions an expression uses."""

from __future__ import annotations

import pytest

from forge_ci.workflow.expressions import (
    as_property_path,
    called_functions,
    parse_expression,
    referenced_contexts,
    referenced_paths,
)


def test_referenced_contexts_are_lowercased_and_exclude_property_names() -> None:
    node = parse_expression("GitHub.env == env.X && contains(matrix.*, needs.build.result)")
    assert referenced_contexts(node) == {"github", "env", "matrix", "needs"}
    assert referenced_contexts(parse_expression("1 == 1")) == set()


@pytest.mark.parametrize(
    ("text", "paths"),
    [
        ("github.sha", [("github", "sha")]),
        ("github['SHA']", [("github", "SHA")]),
        ("github.sha || GitHub.sha", [("github", "sha"), ("GitHub", "sha")]),
        (
            "GITHUB.Event.Pull_Request.head.sha",
            [("GITHUB", "Event", "Pull_Request", "head", "sha")],
        ),
        ("github", [("github",)]),
        ("github.sha == github.sha || github.ref", [("github", "sha"), ("github", "ref")]),
        ("steps[x].outputs", [("steps",), ("x",)]),
        ("steps[x.y].outputs.z", [("steps",), ("x", "y")]),
        ("labels.*.name", [("labels",)]),
        ("a[0].b", [("a",)]),
        ("fromJSON(env.J).x", [("env", "J")]),
        ("(github).sha", [("github", "sha")]),
        ("1 == 2", []),
        ("format('{0}', matrix.os, github.sha)", [("matrix", "os"), ("github", "sha")]),
    ],
)
def test_referenced_paths(text: str, paths: list[tuple[str, ...]]) -> None:
    assert referenced_paths(parse_expression(text)) == paths


@pytest.mark.parametrize(
    ("text", "path"),
    [
        ("github.sha", ("github", "sha")),
        ("github['head_ref']", ("github", "head_ref")),
        ("Github", ("Github",)),
        ("GitHub['Head_Ref']", ("GitHub", "Head_Ref")),
        ("github.sha == 'x'", None),
        ("github[0]", None),
        ("github.*", None),
        ("github[github.x]", None),
        ("'github'", None),
        ("toJSON(github)", None),
    ],
)
def test_as_property_path(text: str, path: tuple[str, ...] | None) -> None:
    assert as_property_path(parse_expression(text)) == path


def test_called_functions_use_github_spelling() -> None:
    node = parse_expression("success() && STARTSWITH(tojson(fromjson(x)), 'a') || always()")
    assert called_functions(node) == {"success", "startsWith", "toJSON", "fromJSON", "always"}
    assert called_functions(parse_expression("github.sha")) == set()
