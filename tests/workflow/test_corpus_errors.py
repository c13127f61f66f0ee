"""Every problem is reported in one pass (issue #12 item 9), checked over the whole corpus.

``data/corpus_errors_before.json`` holds every corpus file's diagnostics as main reported them
before errors stopped hiding each other (see ``corpus_errors.py``). Now each file must still
report every one of those errors, and the errors that other errors used to hide are reported too.

Two changes of the same errors are intended and allowed for:

* a runner-label error is now located at the bad label itself, never before where ``runs-on``
  starts (so at the same or a later position than before);
* labels are limited to 64 characters (the longest a provider can carry), not 100;
* numbers in messages are shortened to 40 characters, like every other quoted value;
* issue #16's contexts: the refusals of contexts and fields forge-ci now provides are gone
  (``_NOW_SUPPORTED``); a github field that is still unknown is named with the new field list.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from corpus_errors import corpus_errors

BEFORE_FILE = Path(__file__).parent / "data" / "corpus_errors_before.json"
_ERROR = re.compile(r"(\d+):(\d+): (.*)\Z", re.DOTALL)
_CAPPED = re.compile(r"\d+ more problems not shown\Z")
#: Messages about runner labels: the errors that moved from ``runs-on`` to the label.
_LABEL_MESSAGES = re.compile(
    r"'.*' (is not a valid runner label|selects a Windows or macOS runner|is not a supported "
    r"image label)|the runner label '.*' is listed twice"
)
#: Files accepted before and refused now, each for a defect of issue #12 that accepted it.
NEWLY_REFUSED = {
    "actionlint/testdata/err/object_at_runner_label.yaml": "gives a mapping; a runner label is",
}


#: Refusals of contexts that issue #16 made available: losing them is the point.
_NOW_SUPPORTED = re.compile(
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
)


def _split(error: str) -> tuple[int, int, str]:
    match = _ERROR.match(error)
    assert match is not None, error
    return int(match.group(1)), int(match.group(2)), match.group(3)


_LONG_NUMBER = re.compile(r"(?:(?<=the number )|(?<=value: ))(\S{41,})(?= is too large| is not a)")


def _reworded(message: str) -> str:
    message = message.replace("at most 100 characters)", "at most 64 characters)")
    return _LONG_NUMBER.sub(lambda match: match.group(1)[:37] + "...", message)


def _kept(error: str, now: list[str]) -> bool:
    """``error`` (as main reported it) is among ``now``, allowing for the intended changes."""
    if error in now:
        return True
    line, column, message = _split(error)
    if _NOW_SUPPORTED.match(message):
        return True
    message = _reworded(message)
    for candidate in now:
        new_line, new_column, new_message = _split(candidate)
        if new_message != message:
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
    after = corpus_errors(corpus_dir)
    assert set(after) == set(before), "the corpus changed; regenerate the fixture on main"
    lost: list[str] = []
    gained_files = 0
    supported = 0  # errors gone because forge-ci now supports what they refused
    for path, old in before.items():
        new = after[path]
        if old and _CAPPED.search(old[-1]):
            # Both capped at 200 problems: which 200 are shown may change; the cap must stay.
            if not (new and _CAPPED.search(new[-1])):
                lost.append(f"{path}: was capped at 200 problems, now {len(new)}")
            continue
        lost.extend(f"{path}: {error}" for error in old if not _kept(error, new))
        supported += sum(
            1 for error in old if error not in new and _NOW_SUPPORTED.match(_split(error)[2])
        )
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
            f"{gained_files} files report errors that were hidden; {len(lost)} lost"
        )
    assert not lost, "errors no longer reported:\n" + "\n".join(lost[:50])
    # Reporting more never refuses a valid file: only the files accepted by a defect change.
    newly_refused = {p: after[p] for p, v in before.items() if not v and after[p]}
    assert set(newly_refused) == set(NEWLY_REFUSED), newly_refused
    for path, phrase in NEWLY_REFUSED.items():
        assert any(phrase in error for error in newly_refused[path]), newly_refused[path]
    assert gained_files > 0 and new_total + supported > old_total
