"""The ``on`` key: which events start a workflow, and whether one event does.

forge-ci fires four events: ``push`` (branch and tag updates), ``pull_request`` (opened,
reopened, synchronize; branch filters match the target branch), ``workflow_dispatch`` (manual
runs, with inputs: :mod:`forge_ci.workflow.dispatch_inputs`) and ``schedule`` (cron, UTC:
:mod:`forge_ci.workflow.cron`). ``on`` may be one event name, a list of them, or a mapping from
event to its filters. Every other event GitHub documents (``release``, ``workflow_run``,
``workflow_call``...) and the other pull_request activity types are accepted and *inert*: they
never fire, and each is a notice ("release never fires on forge-ci") wherever the file's outcome
is shown. A file whose every trigger is inert is valid; it never runs on a push.

Branch and tag filters of ``push`` combine as on GitHub: without either, every branch and tag
push matches; with only ``branches``/``branches-ignore``, tag pushes do not; with only
``tags``/``tags-ignore``, branch pushes do not. Path filters are not evaluated for tags.

Matching answers with a :class:`Match` whose ``reason`` is written for the person who wonders why a
push did or did not start a run. When the changed paths are unknown (``None``: a new branch, a
force push), path filters are treated as matching: running a workflow too often is recoverable,
silently not running a check is not.
"""

from __future__ import annotations

from typing import Any

from forge_ci.records import record
from forge_ci.workflow.cron import CronSchedule, parse_schedule
from forge_ci.workflow.diagnostics import Problems, quote_list
from forge_ci.workflow.dispatch_inputs import DispatchInput, parse_dispatch_inputs
from forge_ci.workflow.inert import check_inert_options
from forge_ci.workflow.nodes import Mapping, Node, Scalar, Sequence, describe, is_null
from forge_ci.workflow.patterns import (
    MAX_PATTERNS,
    Pattern,
    PatternError,
    compile_pattern,
    included,
    last_match,
)

EVENTS = ("push", "pull_request", "workflow_dispatch", "schedule")
PULL_REQUEST_TYPES = ("opened", "reopened", "synchronize")
#: Every event GitHub documents ("Events that trigger workflows"). Those forge-ci does not fire
#: (see :data:`INERT_EVENTS`) are accepted and never fire.
GITHUB_EVENTS = frozenset(
    """branch_protection_rule check_run check_suite create delete deployment deployment_status
    discussion discussion_comment fork gollum image_version issue_comment issues label
    merge_group milestone page_build project project_card project_column public pull_request
    pull_request_comment pull_request_review pull_request_review_comment pull_request_target push
    registry_package
    release repository_dispatch schedule status watch workflow_call workflow_dispatch
    workflow_run""".split()
)
GITHUB_PULL_REQUEST_TYPES = frozenset(
    """assigned unassigned labeled unlabeled edited closed converted_to_draft ready_for_review
    locked unlocked review_requested review_request_removed auto_merge_enabled
    auto_merge_disabled milestoned demilestoned enqueued dequeued stacked""".split()
)
FILTER_KEYS = ("branches", "branches-ignore", "paths", "paths-ignore")
TAG_KEYS = ("tags", "tags-ignore")


def inert_events() -> frozenset[str]:
    """GitHub's events that forge-ci accepts and never fires (all but :data:`EVENTS`)."""
    return GITHUB_EVENTS - frozenset(EVENTS)


def never_fires(names: tuple[str, ...] | list[str]) -> str:
    """The one-line notice for inert triggers: "release never fires on forge-ci"."""
    if len(names) == 1:
        return f"{names[0]} never fires on forge-ci"
    return f"{', '.join(names[:-1])} and {names[-1]} never fire on forge-ci"


@record(frozen=True)
class Filter:
    """The patterns of one filter key (``branches``, ``paths-ignore``...)."""

    key: str
    patterns: tuple[Pattern, ...]

    @property
    def ignore(self) -> bool:
        return self.key.endswith("-ignore")

    def written(self) -> str:
        return f"{self.key} {quote_list(p.text for p in self.patterns)}"

    def as_plan(self) -> list[str]:
        return [pattern.text for pattern in self.patterns]


@record(frozen=True)
class EventFilters:
    """The filters of a push or pull_request trigger; ``tags`` only for push, ``types`` only
    for pull_request."""

    branches: Filter | None = None
    paths: Filter | None = None
    types: tuple[str, ...] = ()
    tags: Filter | None = None

    def as_plan(self) -> dict[str, Any]:
        plan: dict[str, Any] = {}
        for item in (self.branches, self.tags, self.paths):
            if item is not None:
                plan[item.key] = item.as_plan()
        if self.types:
            plan["types"] = list(self.types)
        return plan


@record(frozen=True)
class Triggers:
    """The events a workflow listens to; ``None`` means the event does not start it.

    ``inert`` names the triggers that are accepted but never fire, in file order: GitHub events
    forge-ci does not fire (``release``) and pull_request activity types it does not report
    (``pull_request closed``).
    """

    push: EventFilters | None = None
    pull_request: EventFilters | None = None
    workflow_dispatch: bool = False
    dispatch_inputs: tuple[DispatchInput, ...] = ()
    schedule: tuple[CronSchedule, ...] = ()
    inert: tuple[str, ...] = ()

    @property
    def fireable(self) -> bool:
        """Whether any trigger of the file can ever start a run on forge-ci."""
        return (
            self.push is not None
            or self.pull_request is not None
            or self.workflow_dispatch
            or bool(self.schedule)
        )

    def as_plan(self) -> dict[str, Any]:
        plan: dict[str, Any] = {}
        if self.push is not None:
            plan["push"] = self.push.as_plan()
        if self.pull_request is not None:
            plan["pull_request"] = self.pull_request.as_plan()
        if self.workflow_dispatch:
            plan["workflow_dispatch"] = (
                {"inputs": {spec.name: spec.as_plan() for spec in self.dispatch_inputs}}
                if self.dispatch_inputs
                else {}
            )
        if self.schedule:
            plan["schedule"] = [{"cron": entry.text} for entry in self.schedule]
        if self.inert:
            plan["never_fire"] = list(self.inert)
        return plan


@record(frozen=True)
class Match:
    """Whether an event starts the workflow, and why (for push event records and the UI)."""

    matched: bool
    reason: str

    def __bool__(self) -> bool:
        return self.matched


# -- parsing -----------------------------------------------------------------------------------


def parse_triggers(node: Node, problems: Problems) -> Triggers:
    """Check the value of ``on`` and return the triggers it declares."""
    events: list[tuple[Scalar, Node | None]] = []
    if isinstance(node, Scalar) and not is_null(node):
        events.append((node, None))
    elif isinstance(node, Sequence):
        if not node.items:
            problems.at(node, "'on' lists no event")
        for item in node.items:
            if isinstance(item, Scalar) and not is_null(item):
                events.append((item, None))
            else:
                problems.at(item, f"an event name was expected, not {describe(item)}")
    elif isinstance(node, Mapping):
        if not node.items:
            problems.at(node, "'on' lists no event")
        events.extend(node.items)
    else:
        problems.at(node, "'on' needs push, pull_request, workflow_dispatch or schedule")
    seen: set[str] = set()
    push: EventFilters | None = None
    pull_request: EventFilters | None = None
    dispatch = False
    inputs: tuple[DispatchInput, ...] = ()
    schedule: tuple[CronSchedule, ...] = ()
    inert: list[str] = []
    for name_node, config in events:
        name = name_node.value
        if name not in GITHUB_EVENTS:
            problems.at(name_node, _event_refusal(name, problems))
            continue
        if name in seen:
            problems.at(name_node, f"the event '{name}' is listed twice")
            continue
        seen.add(name)
        if name not in EVENTS:
            check_inert_options(name, config, problems)
            inert.append(name)
            problems.notice(name_node, never_fires([name]))
        elif name == "push":
            push = _event_filters(name, config, problems)
        elif name == "pull_request":
            pull_request, never = _pull_request(name_node, config, problems)
            inert.extend(f"pull_request {kind}" for kind in never)
        elif name == "schedule":
            if config is None:
                problems.at(
                    name_node, "schedule needs a list of cron entries (- cron: '0 5 * * *')"
                )
            else:
                schedule = parse_schedule(config, problems)
        else:
            dispatch = True
            if config is not None:
                inputs = _dispatch_config(config, problems)
    return Triggers(push, pull_request, dispatch, inputs, schedule, tuple(inert))


def _event_refusal(name: str, problems: Problems) -> str:
    fired = "forge-ci fires push, pull_request, workflow_dispatch and schedule"
    return f"'{name}' is not a workflow event{problems.hint(name, GITHUB_EVENTS)} ({fired})"


def _pull_request(
    name_node: Scalar, config: Node | None, problems: Problems
) -> tuple[EventFilters | None, list[str]]:
    """The pull_request filters, and the activity types it lists that never fire here.

    A trigger whose every type is one forge-ci does not report never fires: it is inert.
    """
    filters = _event_filters("pull_request", config, problems)
    types_node = config.get("types") if isinstance(config, Mapping) else None
    never: list[str] = []
    for item in _strings(types_node, "pull_request types", Problems()) if types_node else []:
        if item.value in GITHUB_PULL_REQUEST_TYPES and item.value not in never:
            never.append(item.value)
            problems.notice(item, never_fires([f"pull_request {item.value}"]))
    if types_node is not None and never and not filters.types:
        return None, never
    return filters, never


def _dispatch_config(config: Node, problems: Problems) -> tuple[DispatchInput, ...]:
    if is_null(config):
        return ()
    if not isinstance(config, Mapping):
        problems.at(config, f"workflow_dispatch takes inputs or nothing, not {describe(config)}")
        return ()
    inputs: tuple[DispatchInput, ...] = ()
    for key, value in config.items:
        if key.value == "inputs":
            inputs = parse_dispatch_inputs(value, problems)
        else:
            problems.at(key, f"'{key.value}' is not a workflow_dispatch key")
    return inputs


def _event_filters(event: str, config: Node | None, problems: Problems) -> EventFilters:
    if config is None or is_null(config):
        return EventFilters(types=PULL_REQUEST_TYPES if event == "pull_request" else ())
    if not isinstance(config, Mapping):
        problems.at(config, f"{event} takes a mapping of filters, not {describe(config)}")
        return EventFilters()
    allowed = FILTER_KEYS + (("types",) if event == "pull_request" else TAG_KEYS)
    found: dict[str, Filter] = {}
    types: tuple[str, ...] = PULL_REQUEST_TYPES if event == "pull_request" else ()
    for key, value in config.items:
        name = key.value
        if name not in allowed:
            problems.at(key, f"'{name}' is not a {event} filter{problems.hint(name, allowed)}")
        elif name == "types":
            types = _types(value, problems)
        else:
            parsed = _filter(name, value, problems)
            kind = name.removesuffix("-ignore")
            previous = found.get(kind)
            if previous is not None:
                problems.at(
                    key,
                    f"{previous.key} and {name} cannot be used together in one event; "
                    f"use {kind} with '!' patterns instead",
                )
            else:
                found[kind] = parsed
    return EventFilters(found.get("branches"), found.get("paths"), types, found.get("tags"))


def _strings(node: Node, what: str, problems: Problems) -> list[Scalar]:
    items = node.items if isinstance(node, Sequence) else [node]
    strings: list[Scalar] = []
    for item in items:
        if isinstance(item, Scalar) and not is_null(item):
            strings.append(item)
        else:
            problems.at(item, f"{what} must be strings, not {describe(item)}")
    if not items:
        problems.at(node, f"{what} must not be empty")
    return strings


def _types(node: Node, problems: Problems) -> tuple[str, ...]:
    types: list[str] = []
    for item in _strings(node, "pull_request types", problems):
        if item.value in PULL_REQUEST_TYPES:
            if item.value in types:
                problems.at(item, f"the type '{item.value}' is listed twice")
            types.append(item.value)
        elif item.value not in GITHUB_PULL_REQUEST_TYPES:
            # GitHub's other types are inert (see _pull_request), so no refusal for them.
            hint = problems.hint(item.value, PULL_REQUEST_TYPES + tuple(GITHUB_PULL_REQUEST_TYPES))
            problems.at(item, f"'{item.value}' is not a pull_request type{hint}")
    return tuple(types)


def _filter(key: str, node: Node, problems: Problems) -> Filter:
    items = _strings(node, key, problems)
    if len(items) > MAX_PATTERNS:
        problems.at(items[MAX_PATTERNS], f"{key} has more than {MAX_PATTERNS} patterns")
    patterns: list[Pattern] = []
    for item in items[:MAX_PATTERNS]:
        if "${{" in item.value:
            problems.at(item, f"expressions are not allowed in {key}")
            continue
        try:
            pattern = compile_pattern(item.value)
        except PatternError as exc:
            problems.at(item, f"invalid pattern '{item.value}' in {key}: {exc}")
            continue
        if pattern.negated and key.endswith("-ignore"):
            base = key.removesuffix("-ignore")
            problems.at(item, f"'!' patterns belong in {base}, not {key} ('{item.value}')")
            continue
        patterns.append(pattern)
    if patterns and not key.endswith("-ignore") and all(p.negated for p in patterns):
        problems.at(
            node,
            f"{key} needs at least one pattern without '!'; '!' only excludes what an "
            "earlier pattern included",
        )
    return Filter(key, tuple(patterns))


# -- matching ----------------------------------------------------------------------------------


def match_push(workflow: Any, ref: str, changed_paths: list[str] | None) -> Match:
    """Whether a push of ``ref`` (``refs/heads/<branch>`` or ``refs/tags/<tag>``) starts it.

    ``workflow`` is a parsed :class:`~forge_ci.workflow.Workflow` (anything with ``triggers``).
    """
    triggers: Triggers = workflow.triggers
    if triggers.push is None:
        if not triggers.fireable and triggers.inert:
            return Match(False, f"inert: {never_fires(list(triggers.inert))}")
        return Match(False, "the workflow has no push trigger")
    push = triggers.push
    if ref.startswith("refs/tags/") and ref != "refs/tags/":
        tag = ref.removeprefix("refs/tags/")
        if push.tags is None and push.branches is not None:
            return _filters_only("tag", tag, push.branches)
        outcome = _match_name(push.tags, "tag", tag, "push")
        if outcome.matched and push.paths is not None:
            return Match(True, f"{outcome.reason}; path filters are not evaluated for tags")
        return outcome
    if not ref.startswith("refs/heads/") or ref == "refs/heads/":
        return Match(False, f"'{ref}' is not a branch or a tag")
    branch = ref.removeprefix("refs/heads/")
    if push.branches is None and push.tags is not None:
        return _filters_only("branch", branch, push.tags)
    return _match_filters(push, "push", branch, changed_paths)


def _filters_only(kind: str, name: str, other: Filter) -> Match:
    """A branch push to a trigger with only tag filters, or the other way round (GitHub's rule)."""
    return Match(
        False,
        f"{kind} '{name}' was pushed, and the push trigger filters only "
        f"{other.key.removesuffix('-ignore')} "
        f"({other.written()})",
    )


def match_pull_request(
    workflow: Any, action: str, base_ref: str, changed_paths: list[str] | None
) -> Match:
    """Whether a pull request event (``action`` such as "opened") starts ``workflow``.

    Branch filters match ``base_ref``, the target branch (with or without ``refs/heads/``).
    """
    triggers: Triggers = workflow.triggers
    if triggers.pull_request is None:
        never = [name for name in triggers.inert if name.startswith("pull_request ")]
        if never:
            return Match(False, f"inert: {never_fires(never)}")
        return Match(False, "the workflow has no pull_request trigger")
    filters = triggers.pull_request
    if action not in filters.types:
        return Match(
            False, f"pull_request action '{action}' is not in types {quote_list(filters.types)}"
        )
    if base_ref.startswith("refs/tags/"):
        return Match(False, f"'{base_ref}' is a tag, not a target branch")
    branch = base_ref.removeprefix("refs/heads/")
    return _match_filters(filters, f"pull_request ({action})", branch, changed_paths)


def _match_filters(
    filters: EventFilters, event: str, branch: str, changed_paths: list[str] | None
) -> Match:
    reasons: list[str] = []
    outcome = _match_name(filters.branches, "branch", branch, event)
    if not outcome.matched:
        return outcome
    reasons.append(outcome.reason)
    path_filter = filters.paths
    if path_filter is not None:
        outcome = _match_paths(path_filter, changed_paths)
        if not outcome.matched:
            return outcome
        reasons.append(outcome.reason)
    return Match(True, "; ".join(reasons))


def _match_name(name_filter: Filter | None, kind: str, name: str, event: str) -> Match:
    """Whether a branch or tag ``name`` passes its filter (``None``: no filter, it passes)."""
    if name_filter is None:
        return Match(True, f"{event} on {kind} '{name}' (no {kind} filter)")
    written = name_filter.written()
    hit = last_match(name_filter.patterns, name)
    if name_filter.ignore:
        if hit is not None:
            return Match(False, f"{kind} '{name}' matches '{hit.text}' in {written}")
        return Match(True, f"{kind} '{name}' is not in {written}")
    if hit is None:
        return Match(False, f"{kind} '{name}' is not in {written}")
    if hit.negated:
        return Match(False, f"{kind} '{name}' is excluded by '{hit.text}' in {written}")
    return Match(True, f"{kind} '{name}' matches '{hit.text}' in {written}")


def _match_paths(path_filter: Filter, changed_paths: list[str] | None) -> Match:
    written = path_filter.written()
    if changed_paths is None:
        return Match(True, f"changed paths are unknown, so {path_filter.key} cannot exclude it")
    if path_filter.ignore:
        for path in changed_paths:
            if last_match(path_filter.patterns, path) is None:
                return Match(True, f"'{path}' is not in {written}")
        return Match(
            False,
            f"every changed path matches {written}"
            if changed_paths
            else f"no path changed, and {written} needs one outside it",
        )
    for path in changed_paths:
        if included(path_filter.patterns, path):
            hit = last_match(path_filter.patterns, path)
            assert hit is not None
            return Match(True, f"'{path}' matches '{hit.text}' in {written}")
    if not changed_paths:
        return Match(False, f"no path changed, and {written} needs one")
    return Match(False, f"no changed path matches {written}")
