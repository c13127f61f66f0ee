"""Every problem is reported in one pass (issue #12 item 9), checked over the whole corpus.

``data/corpus_errors_before.json`` holds every corpus file's diagnostics as main reported them
before errors stopped hiding each other (see ``corpus_errors.py``). Now each file must still
report every one of those errors, and the errors that other errors used to hide are reported too.

Two changes of the same errors are intended and allowed for:

* a runner-label error is now located at the bad label itself, never before where ``runs-on``
  starts (so at the same or a later position than before);
* labels are limited to 64 characters (the longest a provider can carry), not 100;
* numbers in messages are shortened to 40 characters, like every other quoted value;
* ``schedule`` and ``workflow_dispatch`` inputs are supported (issue #16): their refusals are gone,
  and the list of supported events names schedule.
* the built-in checkout takes inputs now (issue #15 item 5): "takes no inputs" refusals are gone,
  and the inputs it does not support are refused with their own message (test_checkout_inputs).
* ``uses: OWNER/REPO@REF`` actions are accepted since issue #15: the old refusal of a reference
  that is valid now is gone, and a reference that is still refused (``docker://``, bad syntax)
  is refused at the same position with the new reason.
* ``hashFiles()`` is evaluated by the runner in step keys (issue #16): those refusals are gone;
  in job keys it is refused on the same line with the new wording.
* secrets may be read by any expression of an env, run or with value (issue #16): those
  refusals are gone; elsewhere the refusal is reworded on the same line.
* GitHub's shells and ``{0}`` shell templates, and an ``if`` on the checkout, are accepted
  (issue #16).
* issue #16's contexts: the refusals of contexts and fields forge-ci now provides are gone
  (``_NOW_SUPPORTED``); a github field that is still unknown is named with the new field list.

Issue #16 made some refusals acceptances, each listed in ``TRANSITIONS`` (the fixture stays the
record of what main refused then): an error that became a *notice* must now be a notice of the
same file ("release never fires on forge-ci"; each is given once per file); one that became an
ordinary acceptance (as on GitHub: tag filters, a strategy without a matrix, a null step name,
``GITHUB_*`` names the runner does not set) must be gone; one that was *reworded* must be an
error at the same position with the new wording. Every other error must still be reported.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from corpus_errors import corpus_diagnostics

from forge_ci.protocol.envnames import RUNNER_GITHUB_VARIABLES
from forge_ci.workflow.actions import ReferenceInvalid, parse_reference
from forge_ci.workflow.defaults import SHELLS
from forge_ci.workflow.triggers import EVENTS

BEFORE_FILE = Path(__file__).parent / "data" / "corpus_errors_before.json"
_ERROR = re.compile(r"(\d+):(\d+): (.*)\Z", re.DOTALL)
_CAPPED = re.compile(r"\d+ more problems not shown\Z")
#: Messages about runner labels: the errors that moved from ``runs-on`` to the label.
_LABEL_MESSAGES = re.compile(
    r"'.*' (is not a valid runner label|selects a Windows or macOS runner|is not a supported "
    r"image label)|the runner label '.*' is listed twice"
)
#: Refusals of checkout inputs from before the checkout took any.
_CHECKOUT_NO_INPUTS = re.compile(r".*the built-in checkout \(.*\) takes no inputs")
#: Files accepted before and refused now, each for a defect of issue #12 that accepted it.
NEWLY_REFUSED = {
    "actionlint/testdata/err/object_at_runner_label.yaml": "gives a mapping; a runner label is",
}


_OLD_ACTION_REFUSAL = re.compile(
    r"uses: (.*) is not supported; forge-ci runs only run steps and the built-in .*\Z"
)


def _action_now_accepted(error: str, now: list[str]) -> bool:
    line, column, message = _split(error)
    match = _OLD_ACTION_REFUSAL.match(message)
    if match is None:
        return False
    try:
        parse_reference(match.group(1))
    except ReferenceInvalid:
        return any(_split(candidate)[:2] == (line, column) for candidate in now)
    return True


#: Refusals of contexts that issue #16 made available: losing them is the point.
_CONTEXTS_NOW_SUPPORTED = re.compile(
    r"github\.\S+ is not available; forge-ci provides github\.repository, github\.sha, "
    r"github\.event_name, github\.head_ref, github\.base_ref\Z"
    r"|the (env|runner|job|inputs|vars) context is not supported by forge-ci\Z"
    r"|the (github|steps|needs|env|runner|job|inputs|vars) context is not available in a step name"
    r"|secrets can only be used as a whole env value, like NAME: \$\{\{ secrets\.NAME \}\} "
    r"\(not in run\)\Z"
    r"|use one github field \(github\.repository, github\.sha, github\.event_name, "
    r"github\.head_ref, github\.base_ref\), not the whole github context\Z"
    r"|the secret name GITHUB_TOKEN uses the reserved prefix GITHUB_\Z"
    r"|expressions are not allowed in working-directory; write the value literally\Z"
    r"|the (github|inputs|vars) context is not available in a job name\Z"
    r"|cancel-in-progress must be true or false, not .*\Z"
)


def _split(error: str) -> tuple[int, int, str]:
    match = _ERROR.match(error)
    assert match is not None, error
    return int(match.group(1)), int(match.group(2)), match.group(3)


_LONG_NUMBER = re.compile(r"(?:(?<=the number )|(?<=value: ))(\S{41,})(?= is too large| is not a)")


#: Refusals of what issue #16 made supported: no longer reported, on purpose.
_NOW_SUPPORTED = re.compile(
    r"the 'schedule' event is not supported|workflow_dispatch inputs are not supported"
)


def _reworded(message: str) -> str:
    message = message.replace("at most 100 characters)", "at most 64 characters)")
    for old, new in _ISSUE_16_WORDING:
        message = message.replace(old, new)
    return _LONG_NUMBER.sub(lambda match: match.group(1)[:37] + "...", message)


#: Messages that name the supported events now name schedule too (issue #16).
_ISSUE_16_WORDING = (
    (
        "forge-ci supports push, pull_request and workflow_dispatch",
        "forge-ci supports push, pull_request, workflow_dispatch and schedule",
    ),
    (
        "'on' needs push, pull_request or workflow_dispatch",
        "'on' needs push, pull_request, workflow_dispatch or schedule",
    ),
    ("workflow_dispatch takes no value here", "workflow_dispatch takes inputs or nothing"),
)


def _unhinted(message: str) -> str:
    """A message without the typo hint that "schedule", now an event, adds to some."""
    return _HINT.sub("", message)


_HINT = re.compile(r'; did you mean "[^"]*"\?')


#: (old message, what became of it): "notice" + the notice's pattern, "accepted", or
#: "reworded" + the new message's pattern (the groups of the old message fill both).
TRANSITIONS: list[tuple[str, str, str | None]] = [
    (r"the '(\w+)' event is not supported; .*", "notice", r"\1 never fires on forge-ci"),
    # Events and types GitHub added since (image_version, pull_request_comment, stacked).
    (r"'(image_version|pull_request_comment)' is not a workflow event.*", "notice", r"\1 never"),
    (r"'(stacked)' is not a pull_request type", "notice", r"pull_request \1 never fires"),
    # A permission becomes a notice, or nothing (pages: none), or a sharper error (pages: READ).
    (r"'(.+)' is a GitHub permission forge-ci does not grant; .*", "notice+", r"asked for \1: "),
    (r"contents: write is not supported; .*", "notice", r"asked for contents: write;"),
    (r"permissions: (read-all|write-all) is not supported; .*", "notice", r"asked for .*\1"),
    (r"'(.+)' selects a Windows or macOS runner; .*", "notice", r"runs-on: \1: no forge-ci"),
    (r"pull_request type '(\w+)' is not supported; .*", "notice", r"pull_request \1 never fires"),
    # Kept with a notice, or refused for what is inside it (a context it may not use).
    (r"deployment environments are not supported", "notice+", r"environment '.*' is kept"),
    (r"run-name is not supported; .*", "notice", r"run-name is not used"),
    (r"tags(-ignore)?: tag pushes are not supported; .*", "accepted", None),
    (r"continue-on-error: true is not supported for jobs .*", "accepted", None),
    (r"continue-on-error must be true or false, not [\"']\$\{\{.*", "accepted", None),
    (r"strategy needs a matrix", "accepted", None),
    (r"(working-directory|a step name) must be a string, not null .*", "accepted", None),
    (r"env names starting with GITHUB_ are reserved for the executor \((\w+)\)", "env", None),
    (r"(.*) is not a workflow event(.*)\(forge-ci supports (.*)", "reworded", r"\1 is not a "),
    (r"'(.+)' is not a permission scope; only contents can be set", "reworded", r"'\1' is not a "),
    (r"contents must be read or none, not (.*)", "reworded", r"contents must be read, write or "),
    (r"permissions: .* is not supported; use .*", "reworded", r"permissions must be read-all, "),
    (r"'(\w+)' is not a pull_request type.*", "reworded", r"'\1' is not a pull_request type"),
    # hashFiles() (issue #16): the runner evaluates it in step keys; elsewhere a sharper refusal.
    (r"invalid expression in (.*): hashFiles\(\) is not supported by forge-ci: .*", "files", None),
    # Secrets in any env, run or with expression (issue #16); elsewhere reworded on that line.
    (r"secrets can only be used as a whole env value, like NAME: \S+ \S+ \S+(.*)", "secrets", None),
    # GitHub's shells and {0} templates (issue #16); other shells keep a (longer) refusal.
    (r"shell '(.*)' is not supported; use bash or sh", "shells", None),
    (r"the built-in checkout step cannot have 'if'", "accepted", None),
    # As on GitHub: any env name and empty path components; an unknown step id or matrix key
    # reads null (a notice says where). GitHub's default variables: see "env" above.
    (r"'(.*)' is not a valid env name \(letters, .*", "env name", None),
    (r"working-directory must not have empty components \('.*'\)", "accepted", None),
    # A job's timeout-minutes may be one expression over the matrix (the plan evaluates it).
    (
        r"timeout-minutes must be a whole number of minutes from 1 through 360, not "
        r"['\"](\$\{\{.*\}\})['\"]",
        "timeout",
        None,
    ),
    (r"no (?:earlier )?step in this job has the id '(.*)'", "notice", r"steps.\1 is always empty"),
    (
        r"the matrix context is only available in a job with strategy.matrix \((.*)\)",
        "notice",
        r"is always empty in \1: the job has no strategy.matrix",
    ),
    (
        r"the matrix has no key '(.*?)'(?:; did you mean .*)?",
        "notice",
        r"is always empty in .*: the matrix has no key '\1'",
    ),
]
#: Where hashFiles() is evaluated (the step keys; GitHub's availability table).
_STEP_KEYS = re.compile(r"run|a step name|a step's if|step env|continue-on-error|with\..*")


def _transition(message: str) -> tuple[str, str | None] | None:
    """What became of a refusal of main's, or None when it must still be reported."""
    for pattern, kind, result in TRANSITIONS:
        match = re.fullmatch(pattern, message, re.DOTALL)
        if match is None:
            continue
        if kind == "env":
            name = match.group(1)
            if name.upper() in RUNNER_GITHUB_VARIABLES:
                return "notice", re.escape(f"env {name} is ignored: the runner sets it")
            return "accepted", None
        if kind == "timeout":
            static = not re.search(r"github|env|inputs|vars|needs|steps|NaN", match.group(1))
            return ("accepted" if static else "line"), r".*timeout-minutes"
        if kind == "env name":
            if "${{" in match.group(1):
                return "reworded", re.escape(f"'{match.group(1)}': an expression (like")
            return "accepted", None
        if kind == "files":
            if _STEP_KEYS.fullmatch(match.group(1)):
                return "accepted", None
            where = re.escape(match.group(1))
            return "line", rf"hashFiles\(\) reads the job's workspace, .*\(not {where}\)"
        if kind == "secrets":
            where = re.fullmatch(r" \(not in (.*)\)", match.group(1))
            if where is None or re.fullmatch(r"run|with\..*|.*env", where.group(1)):
                return "accepted", None
            return "line", r"secrets can only be used in env, run and with values"
        if kind == "shells":
            if match.group(1).lower() in SHELLS or "{0}" in match.group(1):
                return "accepted", None
            return "reworded", re.escape(f"shell '{match.group(1)}' is not supported; use bash, ")
        if kind == "notice" and pattern.startswith("the '") and match.group(1) in EVENTS:
            return "accepted", None  # an event forge-ci has learnt to fire since
        if result is None:
            return kind, None
        escaped = [re.escape(group or "") for group in match.groups()]
        return kind, re.sub(r"\\(\d)", lambda g, e=escaped: e[int(g.group(1)) - 1], result)
    return None


def _became(error: str, now: list[str], notices: list[str], source: list[str]) -> str | None:
    """``notice``, ``accepted`` or ``reworded`` when ``error`` legitimately left ``now``."""
    line, column, message = _split(error)
    transition = _transition(message)
    if transition is None:
        return None
    kind, pattern = transition
    if kind == "accepted" and pattern is not None:
        # Accepted unless the same line still refuses it (a step's timeout stays literal).
        same_line = any(_split(c)[0] == line and re.match(pattern, _split(c)[2]) for c in now)
        return "reworded" if same_line else kind
    if kind == "accepted":
        return kind
    assert pattern is not None
    if kind in ("reworded", "line"):
        found = [_split(c) for c in now]
        ok = any(
            (at, c if kind == "reworded" else column) == (line, column) and re.match(pattern, m)
            for at, c, m in found
        )
        return "reworded" if ok else None
    # A notice is given once per file (once per run): the first place that asks for it.
    if any(re.search(pattern, _split(n)[2]) for n in notices):
        return "notice"
    if kind == "notice+":
        # ... or what it asked for grants nothing (none), or a sharper error close to it.
        near = any(0 <= _split(c)[0] - line <= 3 for c in now)
        if near:
            return "notice"
        written = source[line - 1] if line <= len(source) else ""
        asks_nothing = re.fullmatch(r"\s*[\w-]+:\s*none\s*(#.*)?", written) is not None
        return "accepted" if asks_nothing and "GitHub permission" in message else None
    return None


def _kept(error: str, now: list[str]) -> bool:
    """``error`` (as main reported it) is among ``now``, allowing for the intended changes."""
    if error in now or _action_now_accepted(error, now):
        return True
    line, column, message = _split(error)
    if (
        _NOW_SUPPORTED.match(message)
        or _CHECKOUT_NO_INPUTS.match(message)
        or _CONTEXTS_NOW_SUPPORTED.match(message)
    ):
        return True
    message = _unhinted(_reworded(message))
    for candidate in now:
        new_line, new_column, new_message = _split(candidate)
        if _unhinted(new_message) != message:
            continue
        if (new_line, new_column) == (line, column):
            return True
        if _LABEL_MESSAGES.match(message) and (new_line, new_column) >= (line, column):
            return True
    return False


def test_no_error_is_lost_and_hidden_errors_are_reported(
    corpus_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before: dict[str, list[str]] = json.loads(BEFORE_FILE.read_text())
    diagnostics = corpus_diagnostics(corpus_dir)
    after = {path: errors for path, (errors, _) in diagnostics.items()}
    assert set(after) == set(before), "the corpus changed; regenerate the fixture on main"
    lost: list[str] = []
    became: dict[str, int] = {"notice": 0, "accepted": 0, "reworded": 0}
    gained_files = 0
    for path, old in before.items():
        new = after[path]
        if old and _CAPPED.search(old[-1]):
            # Both capped at 200 problems: which 200 are shown may change; the cap must stay.
            if not (new and _CAPPED.search(new[-1])):
                lost.append(f"{path}: was capped at 200 problems, now {len(new)}")
            continue
        if any(_CAPPED.search(error) for error in new):
            # Checking action inputs (issue #15) found more problems than the 200 shown; the
            # cap line says so, and the first 200 are a different, equally true selection.
            continue
        for error in old:
            if _kept(error, new):
                continue
            source = (corpus_dir / path).read_text("utf-8", "replace").split("\n")
            kind = _became(error, new, diagnostics[path][1], source)
            if kind is None:
                lost.append(f"{path}: {error}")
            else:
                became[kind] += 1
        if len(new) > len(old):
            gained_files += 1
    old_total = sum(len(v) for v in before.values())
    new_total = sum(len(v) for v in after.values())
    refused_before = sum(1 for v in before.values() if v)
    refused_after = sum(1 for v in after.values() if v)
    with capsys.disabled():
        print(
            f"\ncorpus errors: {len(before)} files; refused {refused_before} before, "
            f"{refused_after} after; {old_total} errors before, {new_total} after; "
            f"{gained_files} files report errors that were hidden; {len(lost)} lost; "
            f"became notices {became['notice']}, accepted {became['accepted']}, "
            f"reworded {became['reworded']}"
        )
    assert not lost, "errors no longer reported:\n" + "\n".join(lost[:50])
    # Reporting more never refuses a valid file: only the files accepted by a defect change.
    newly_refused = {p: after[p] for p, v in before.items() if not v and after[p]}
    assert set(newly_refused) == set(NEWLY_REFUSED), newly_refused
    for path, phrase in NEWLY_REFUSED.items():
        assert any(phrase in error for error in newly_refused[path]), newly_refused[path]
    assert gained_files > 0
    assert became["notice"] > 1000 and became["accepted"] > 100 and became["reworded"] > 10
