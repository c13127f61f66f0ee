"""The options of events forge-ci never fires: checked as GitHub defines them, then kept inert.

An inert event (``release``, ``workflow_run``...) is accepted so that real files stay valid, but
its options are still checked against GitHub's "Events that trigger workflows" page: a
misspelt activity type (``issue_comment: types: [opened]``) is a mistake on GitHub too, and a
file that would be refused there is refused here. An option the event does not have is ignored
by GitHub, so it is a notice here. Nothing of it reaches the plan but its name.
The table follows GitHub's own schema (actions/languageservices ``workflow-v1.0.json``; a corpus
test compares them).
"""

from __future__ import annotations

from forge_ci.workflow.diagnostics import Problems
from forge_ci.workflow.nodes import Mapping, Node, Scalar, Sequence, describe, is_null

_PR_TYPES = """assigned unassigned labeled unlabeled opened edited closed reopened synchronize
converted_to_draft ready_for_review locked unlocked review_requested review_request_removed
auto_merge_enabled auto_merge_disabled milestoned demilestoned enqueued dequeued stacked"""
_FILTERS = ("branches", "branches-ignore", "paths", "paths-ignore")

#: event -> (its option keys, its activity types; None: any type, as repository_dispatch).
OPTIONS: dict[str, tuple[tuple[str, ...], frozenset[str] | None]] = {
    name: (keys, frozenset(types.split()) if types is not None else None)
    for name, keys, types in [
        ("branch_protection_rule", ("types",), "created edited deleted"),
        ("check_run", ("types",), "created rerequested completed requested_action"),
        ("check_suite", ("types",), "completed"),
        ("create", (), ""),
        ("delete", (), ""),
        ("deployment", (), ""),
        ("deployment_status", (), ""),
        (
            "discussion",
            ("types",),
            "created edited deleted transferred pinned unpinned labeled unlabeled locked "
            "unlocked category_changed answered unanswered",
        ),
        ("discussion_comment", ("types",), "created edited deleted"),
        ("fork", (), ""),
        ("gollum", (), ""),
        ("image_version", ("types", "names", "versions"), "created ready deleted"),
        ("issue_comment", ("types",), "created edited deleted"),
        (
            "issues",
            ("types",),
            "opened edited deleted transferred pinned unpinned closed reopened assigned "
            "unassigned labeled unlabeled locked unlocked milestoned demilestoned field_added "
            "field_removed typed untyped",
        ),
        ("label", ("types",), "created edited deleted"),
        ("merge_group", ("types", "branches", "branches-ignore"), "checks_requested"),
        ("milestone", ("types",), "created closed opened edited deleted"),
        ("page_build", (), ""),
        ("project", ("types",), "created closed reopened edited deleted"),
        ("project_card", ("types",), "created moved converted edited deleted"),
        ("project_column", ("types",), "created updated moved deleted"),
        ("public", (), ""),
        ("pull_request_comment", ("types",), "created edited deleted"),
        ("pull_request_review", ("types",), "submitted edited dismissed"),
        ("pull_request_review_comment", ("types",), "created edited deleted"),
        ("pull_request_target", ("types", *_FILTERS), _PR_TYPES),
        ("registry_package", ("types",), "published updated"),
        (
            "release",
            ("types",),
            "published unpublished created edited deleted prereleased released",
        ),
        ("repository_dispatch", ("types",), None),
        ("status", (), ""),
        ("watch", ("types",), "started"),
        ("workflow_call", ("inputs", "outputs", "secrets"), ""),
        (
            "workflow_run",
            ("types", "workflows", "branches", "branches-ignore"),
            "completed requested in_progress",
        ),
    ]
}


def check_inert_options(name: str, config: Node | None, problems: Problems) -> None:
    """Report options of the inert event ``name`` that GitHub would refuse."""
    if config is None or is_null(config):
        return
    if name == "workflow_call" and isinstance(config, Mapping):
        _workflow_call(config, problems)
    if not isinstance(config, Mapping):
        problems.at(config, f"{name} takes a mapping of options, not {describe(config)}")
        return
    keys, types = OPTIONS.get(name, ((), None))
    for key, value in config.items:
        if key.value not in keys:
            # GitHub ignores options an event does not have (its reader's
            # "unknown-keys-ignored" case), so this is a notice, never a refusal.
            hint = problems.hint(key.value, keys)
            known = f"; {name} takes {', '.join(keys)}" if keys else f"; {name} takes no options"
            problems.notice(
                key, f"'{key.value}' is not an option of {name} and is ignored{hint or known}"
            )
        elif key.value == "types" and types is not None:
            for item in _items(value):
                if not isinstance(item, Scalar) or is_null(item):
                    problems.at(item, f"{name} types must be strings, not {describe(item)}")
                elif item.value not in types:
                    hint = problems.hint(item.value, types)
                    problems.at(item, f"'{item.value}' is not a {name} activity type{hint}")


#: workflow_call: section -> (the keys of one entry, the keys an entry must have).
_CALL_SECTIONS = {
    "inputs": (("description", "required", "type", "default"), ("type",)),
    "outputs": (("description", "value"), ("value",)),
    "secrets": (("description", "required"), ()),
}
_CALL_INPUT_TYPES = ("boolean", "number", "string")


def _workflow_call(config: Mapping, problems: Problems) -> None:
    """The declarations of a reusable workflow, as GitHub's schema requires them."""
    for section, value in config.items:
        shape = _CALL_SECTIONS.get(section.value)
        if shape is None or is_null(value):
            continue
        if not isinstance(value, Mapping):
            problems.at(value, f"workflow_call {section.value} must be a mapping of names")
            continue
        keys, required = shape
        for entry_name, entry in value.items:
            where = f"workflow_call {section.value}.{entry_name.value}"
            if is_null(entry) and not required:
                continue
            if not isinstance(entry, Mapping):
                problems.at(entry, f"{where} must be a mapping, not {describe(entry)}")
                continue
            for key, item in entry.items:
                if key.value not in keys:
                    hint = problems.hint(key.value, keys)
                    problems.at(key, f"'{key.value}' is not a key of {where}{hint}")
                elif key.value == "type" and (
                    not isinstance(item, Scalar) or item.value not in _CALL_INPUT_TYPES
                ):
                    problems.at(
                        item,
                        f"{where}.type must be boolean, number or string, not {describe(item)}",
                    )
            for key_name in required:
                if key_name not in entry:
                    problems.at(entry, f"{where} needs {key_name}")


def _items(node: Node) -> list[Node]:
    return list(node.items) if isinstance(node, Sequence) else [node]
