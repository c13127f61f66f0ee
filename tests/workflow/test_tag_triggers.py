"""Tag pushes: ``on: push: tags`` / ``tags-ignore``, and how they combine with branch filters.

GitHub's rule ("Using filters to target specific branches or tags for push events"): a push
trigger without branch and tag filters runs for every branch and tag; with only branch filters
it does not run for tags, with only tag filters it does not run for branches; path filters are
not evaluated for tags. The table is checked case by case and against a small reference model.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from forge_ci.workflow import Workflow, build_plan, match_push

Accept = Callable[[str], Workflow]

JOBS = """
jobs:
  build:
    runs-on: self-hosted
    steps:
      - run: echo hi
"""


def push(accept: Accept, filters: str) -> Workflow:
    return accept("on:\n  push:\n" + filters + JOBS)


@pytest.mark.parametrize(
    ("filters", "ref", "matched", "reason"),
    [
        ("    tags: ['v*']\n", "refs/tags/v1.0", True, "tag 'v1.0' matches 'v*' in tags [v*]"),
        ("    tags: ['v*']\n", "refs/tags/release-1", False, "tag 'release-1' is not in tags"),
        ("    tags: ['v*']\n", "refs/heads/main", False, "the push trigger filters only tags"),
        ("    tags: ['v*', '!v*-rc']\n", "refs/tags/v2-rc", False, "is excluded by '!v*-rc'"),
        ("    tags-ignore: ['*-rc']\n", "refs/tags/v2-rc", False, "matches '*-rc' in tags-ignore"),
        ("    tags-ignore: ['*-rc']\n", "refs/tags/v2", True, "tag 'v2' is not in tags-ignore"),
        ("    tags-ignore: ['*-rc']\n", "refs/heads/main", False, "filters only tags"),
        ("    branches: [main]\n", "refs/tags/v1", False, "the push trigger filters only branches"),
        ("    branches: [main]\n", "refs/heads/main", True, "branch 'main' matches 'main'"),
        ("    branches-ignore: [dev]\n", "refs/tags/v1", False, "filters only branches"),
        ("    branches: [main]\n    tags: ['v*']\n", "refs/heads/main", True, "branch 'main'"),
        ("    branches: [main]\n    tags: ['v*']\n", "refs/tags/v3", True, "tag 'v3' matches"),
        ("    branches: [main]\n    tags: ['v*']\n", "refs/tags/x", False, "tag 'x' is not in"),
        ("    branches: [main]\n    tags: ['v*']\n", "refs/heads/dev", False, "'dev' is not in"),
        ("    paths: [src/**]\n", "refs/tags/v1", True, "path filters are not evaluated for tags"),
        ("    paths: [src/**]\n", "refs/heads/main", False, "no changed path matches"),
        ("    tags: ['**']\n", "refs/tags/a/b", True, "tag 'a/b' matches '**'"),
        ("    tags: ['*']\n", "refs/tags/a/b", False, "tag 'a/b' is not in tags [*]"),
    ],
)
def test_branch_and_tag_filters_combine_as_on_github(
    accept: Accept, filters: str, ref: str, matched: bool, reason: str
) -> None:
    result = match_push(push(accept, filters), ref, ["docs/x.md"])
    assert result.matched is matched, result.reason
    assert reason in result.reason


def test_tag_filters_are_kept_in_the_plan(accept: Accept) -> None:
    plan = build_plan(push(accept, "    branches: [main]\n    tags-ignore: ['*-rc']\n"))
    assert plan["on"]["push"] == {"branches": ["main"], "tags-ignore": ["*-rc"]}


# -- against a reference model ------------------------------------------------------------------

NAMES = st.sampled_from(["main", "dev", "v1", "v2", "x"])
FILTER = st.one_of(
    st.none(), st.tuples(st.booleans(), st.lists(NAMES, min_size=1, max_size=3, unique=True))
)


def reference(branches: object, tags: object, kind: str, name: str) -> bool:
    """GitHub's documented rule, with literal patterns only."""
    own, other = (branches, tags) if kind == "branch" else (tags, branches)
    if own is None:
        return other is None
    ignore, names = own  # type: ignore[misc]
    return (name in names) != ignore


def written(key: str, value: object) -> str:
    if value is None:
        return ""
    ignore, names = value  # type: ignore[misc]
    return f"    {key}{'-ignore' if ignore else ''}: [{', '.join(names)}]\n"


@settings(max_examples=300, deadline=None)
@given(FILTER, FILTER, st.sampled_from(["branch", "tag"]), NAMES)
def test_matching_agrees_with_the_reference(
    branches: object, tags: object, kind: str, name: str
) -> None:
    from forge_ci.workflow import parse_workflow

    filters = written("branches", branches) + written("tags", tags)
    text = ("on:\n  push:\n" + filters if filters else "on: push\n") + JOBS
    workflow = parse_workflow(text, "test.yml")
    ref = f"refs/{'heads' if kind == 'branch' else 'tags'}/{name}"
    assert match_push(workflow, ref, None).matched is reference(branches, tags, kind, name)
