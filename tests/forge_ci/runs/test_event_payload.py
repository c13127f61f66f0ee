"""Event payloads (github.event): built from real git history, bounded as GitHub bounds them."""

from __future__ import annotations

import json
from pathlib import Path

import pygit2
import pytest

from forge_ci.runs.event_payload import (
    MAX_COMMITS,
    MAX_MESSAGE_CHARS,
    ZERO_SHA,
    EventFacts,
    RepositoryFacts,
    build_event_payload,
    event_inputs,
    push_facts,
    queue_contexts,
    run_inputs,
)

REPO = RepositoryFacts("alice/demo", 7, "main")


class History:
    """A bare repository with commits made through pygit2 (real objects, real diffs)."""

    def __init__(self, path: Path) -> None:
        self.git = pygit2.init_repository(str(path), bare=True)
        self.files: dict[str, str] = {}

    def commit(self, message: str, parent: str | None, **changes: str | None) -> str:
        files = dict(self.files)
        for name, text in changes.items():
            path = name.replace("__", "/")
            if text is None:
                files.pop(path, None)
            else:
                files[path] = text
        self.files = files
        builder = self.git.TreeBuilder()
        trees: dict[str, dict[str, str]] = {}
        for path, text in files.items():
            folder, _, leaf = path.rpartition("/")
            trees.setdefault(folder, {})[leaf] = text
        for leaf, text in trees.pop("", {}).items():
            builder.insert(leaf, self.git.create_blob(text.encode()), pygit2.GIT_FILEMODE_BLOB)
        for folder, entries in trees.items():
            sub = self.git.TreeBuilder()
            for leaf, text in entries.items():
                sub.insert(leaf, self.git.create_blob(text.encode()), pygit2.GIT_FILEMODE_BLOB)
            builder.insert(folder, sub.write(), pygit2.GIT_FILEMODE_TREE)
        author = pygit2.Signature("Ada", "ada@example.org", 1_700_000_000, 120)
        parents = [pygit2.Oid(hex=parent)] if parent else []
        oid = self.git.create_commit(None, author, author, message, builder.write(), parents)
        return str(oid)

    def branch(self, name: str, sha: str) -> None:
        self.git.references.create(f"refs/heads/{name}", pygit2.Oid(hex=sha), force=True)


@pytest.fixture
def history(tmp_path: Path) -> History:
    return History(tmp_path / "repo.git")


def test_a_fast_forward_lists_its_commits_oldest_first(history: History) -> None:
    base = history.commit("base\n", None, a="1", b="1")
    one = history.commit("one\n", base, a="2", c="new")
    two = history.commit('two: "; rm -rf / # $(id)\n', one, b=None, d__e="deep")
    facts = push_facts(history.git, "refs/heads/main", base, two, "main")
    assert (facts.created, facts.deleted, facts.forced) == (False, False, False)
    assert [c.id for c in facts.commits] == [one, two]
    first, second = facts.commits
    assert (first.added, first.modified, first.removed) == (("c",), ("a",), ())
    assert (second.added, second.modified, second.removed) == (("d/e",), (), ("b",))
    assert second.message == 'two: "; rm -rf / # $(id)\n'  # data, kept exactly
    assert second.timestamp == "2023-11-15T00:13:20+02:00"  # 2023-11-14T22:13:20Z
    payload = build_event_payload(
        "push", EventFacts(REPO, "refs/heads/main", two, "alice", push=facts)
    )
    assert payload["before"] == base and payload["after"] == two
    assert payload["head_commit"]["id"] == two and payload["head_commit"]["tree_id"]
    assert payload["commits"][1]["author"] == {
        "email": "ada@example.org",
        "name": "Ada",
        "username": None,
    }
    assert payload["pusher"] == {"name": "alice", "email": None}
    assert payload["sender"] == {"login": "alice", "type": "User"}
    assert payload["repository"]["full_name"] == "alice/demo"
    assert payload["repository"]["owner"]["login"] == "alice"
    assert payload["repository"]["id"] == 7
    assert payload["ref"] == "refs/heads/main" and payload["base_ref"] is None
    json.dumps(payload)  # plain JSON, storable in the snapshot


def test_a_force_push_is_forced_and_lists_only_the_new_side(history: History) -> None:
    base = history.commit("base\n", None, a="1")
    old = history.commit("old\n", base, a="2")
    new = history.commit("new\n", base, a="3")
    facts = push_facts(history.git, "refs/heads/main", old, new, "main")
    assert facts.forced is True
    assert [c.id for c in facts.commits] == [new]
    # Not forced: a fast-forward and a push of the same commit.
    assert push_facts(history.git, "refs/heads/main", base, new, "main").forced is False


def test_a_new_branch_lists_the_commits_not_on_the_default_branch(history: History) -> None:
    base = history.commit("base\n", None, a="1")
    history.branch("main", base)
    feature = history.commit("feature\n", base, f="1")
    facts = push_facts(history.git, "refs/heads/topic", ZERO_SHA, feature, "main")
    assert (facts.created, facts.forced) == (True, False)
    assert [c.id for c in facts.commits] == [feature]
    # The first push of the default branch lists its history (bounded).
    root = push_facts(history.git, "refs/heads/main", ZERO_SHA, base, "main")
    assert [c.id for c in root.commits] == [base] and root.commits[0].added == ("a",)


def test_commits_are_bounded_to_the_newest_twenty(history: History) -> None:
    shas = [history.commit("c0\n", None, a="0")]
    for n in range(1, 30):
        shas.append(history.commit(f"c{n}\n", shas[-1], a=str(n)))
    facts = push_facts(history.git, "refs/heads/main", shas[0], shas[-1], "main")
    assert len(facts.commits) == MAX_COMMITS == 20
    assert [c.id for c in facts.commits] == shas[-20:]
    assert facts.head_commit is not None and facts.head_commit.id == shas[-1]


def test_long_messages_are_cut(history: History) -> None:
    sha = history.commit("x" * (MAX_MESSAGE_CHARS + 10), None, a="1")
    facts = push_facts(history.git, "refs/heads/main", ZERO_SHA, sha, "main")
    message = facts.commits[0].message
    assert len(message) == MAX_MESSAGE_CHARS and message.endswith("...")


def test_a_deletion_has_no_commits(history: History) -> None:
    sha = history.commit("x\n", None, a="1")
    facts = push_facts(history.git, "refs/heads/gone", sha, ZERO_SHA, "main")
    assert (facts.deleted, facts.commits, facts.head_commit) == (True, (), None)


def test_dispatch_and_schedule_payloads() -> None:
    facts = EventFacts(
        REPO,
        "refs/heads/main",
        "a" * 40,
        "bob",
        inputs={"level": "3", "dry": True, "n": 2},
        workflow_path=".github/workflows/ci.yml",
    )
    payload = build_event_payload("workflow_dispatch", facts)
    assert payload["inputs"] == {"level": "3", "dry": True, "n": 2}
    assert payload["workflow"] == ".github/workflows/ci.yml"
    assert payload["ref"] == "refs/heads/main"
    assert event_inputs("workflow_dispatch", payload) == {"level": "3", "dry": True, "n": 2}
    assert event_inputs("push", payload) == {}
    none = build_event_payload("workflow_dispatch", EventFacts(REPO, "refs/heads/x", "a" * 40, "b"))
    assert none["inputs"] == {}
    scheduled = build_event_payload(
        "schedule", EventFacts(REPO, "refs/heads/main", "a" * 40, "bob", schedule="*/5 * * * *")
    )
    assert scheduled["schedule"] == "*/5 * * * *" and "inputs" not in scheduled
    contexts = queue_contexts({"event_name": "workflow_dispatch", "event": payload})
    assert contexts["inputs"]["dry"] is True and contexts["vars"] == {}
    # The typed inputs stored beside the github fields win over the payload's text.
    typed = {
        "event_name": "workflow_dispatch",
        "event": {"inputs": {"dry": "true"}},
        "inputs": {"dry": True},
    }
    assert run_inputs(typed) == {"dry": True}
    assert queue_contexts(typed, {"V": "1"}) == {
        "github": {"event_name": "workflow_dispatch", "event": {"inputs": {"dry": "true"}}},
        "inputs": {"dry": True},
        "vars": {"V": "1"},
    }
    assert run_inputs({"event_name": "push", "event": {}}) == {}


@pytest.mark.parametrize(
    ("event", "facts", "reason"),
    [
        ("release", EventFacts(REPO, "r", "a" * 40, "b"), "no payload for the 'release' event"),
        ("push", EventFacts(REPO, "r", "a" * 40, "b"), "needs PushFacts"),
        ("schedule", EventFacts(REPO, "r", "a" * 40, "b"), "needs the cron text"),
        (
            "workflow_dispatch",
            EventFacts(REPO, "r", "a" * 40, "b", inputs={"x": [1]}),  # type: ignore[dict-item]
            "must be text, a boolean or a number",
        ),
    ],
)
def test_facts_that_do_not_fit_are_refused(event: str, facts: EventFacts, reason: str) -> None:
    with pytest.raises(ValueError, match=reason.replace("(", r"\(").replace(")", r"\)")):
        build_event_payload(event, facts)
