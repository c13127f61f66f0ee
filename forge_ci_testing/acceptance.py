"""How much of the real-world corpus forge-ci accepts, and why it refuses the rest (issue #16).

The measure the issue sets: of the workflow files whose jobs are not all Windows/macOS, the share
that is accepted (every Linux job planned; Windows/macOS jobs are planned too and wait, with a
notice). Three figures: *today*; *counting uses:* — a file refused only for its ``uses:``
steps (actions, checkout inputs: issue #15's work) counted as accepted; and *projected* — also
counting the refusals the rest of issue #16 removes (contexts, the job token, dispatch inputs).
Reasons are the refusal messages with their quoted values replaced, counted in files affected.

Used by ``bench/corpus_acceptance.py`` (the report) and ``tests/workflow/test_corpus_acceptance.py``
(a floor that keeps the figure from sliding back).
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from forge_ci.workflow import WorkflowInvalid, parse_workflow
from forge_ci.workflow.labels import other_os

#: The real-world folders the issue names: actionlint's 1,503 files and GitHub's starters.
FOLDERS = ("actionlint-realworld/workflows", "starter-workflows")
GOAL = 0.85
#: Refusals that are about ``uses:`` steps (issue #15): actions and the checkout's inputs.
USES_MESSAGES = re.compile(
    r"uses: .* is not supported; forge-ci runs only run steps"
    r"|the built-in checkout \(.*\) takes no inputs"
    r"|is not supported: the built-in checkout \(.*\) takes no inputs"
    r"|is not a checkout version|needs a ref, like actions/checkout"
    r"|the built-in checkout step cannot have|a job has at most one checkout step"
)
#: Refusals that the other parts of issue #16 remove (contexts and GITHUB_* values, the job
#: token, dispatch inputs, schedule): a third, projected figure counts them as accepted too.
ISSUE16_MESSAGES = re.compile(
    r"github\.[\w.*-]+ is not available; forge-ci provides"
    r"|the (env|runner|job|vars|inputs|github|steps|strategy) context is not (supported by "
    r"forge-ci|available in)"
    r"|the secret name GITHUB_TOKEN uses the reserved prefix"
    r"|workflow_dispatch inputs are not supported"
    r"|use one github field|expressions are not allowed in working-directory"
    # Item 1's injection rule passes secrets to run scripts through generated variables.
    r"|secrets can only be used as a whole env value"
)
_QUOTED = re.compile(r"'[^']*'|\"[^\"]*\"|\$\{\{.*?\}\}")


@dataclass
class FileResult:
    path: str
    accepted: bool
    only_uses: bool
    all_foreign: bool
    reasons: tuple[str, ...]
    notices: tuple[str, ...] = ()


@dataclass
class Tally:
    """The figures of one set of files."""

    files: int = 0
    foreign: int = 0
    accepted: int = 0
    accepted_with_uses: int = 0
    accepted_projected: int = 0
    reasons: Counter[str] = field(default_factory=Counter)
    reasons_after_uses: Counter[str] = field(default_factory=Counter)
    reasons_projected: Counter[str] = field(default_factory=Counter)
    notices: Counter[str] = field(default_factory=Counter)

    @property
    def measured(self) -> int:
        return self.files - self.foreign

    def share(self, accepted: int) -> float:
        return accepted / self.measured if self.measured else 0.0

    def add(self, result: FileResult) -> None:
        self.files += 1
        self.notices.update(set(result.notices))
        if result.all_foreign:
            self.foreign += 1
            return
        self.accepted += result.accepted
        self.accepted_with_uses += result.accepted or result.only_uses
        self.reasons.update(set(result.reasons))
        if result.accepted or result.only_uses:
            self.accepted_projected += 1
            return
        rest = {r for r in result.reasons if not USES_MESSAGES.search(r)}
        self.reasons_after_uses.update(rest)
        left = {r for r in rest if not ISSUE16_MESSAGES.search(r)}
        self.reasons_projected.update(left)
        self.accepted_projected += not left


def reason(message: str) -> str:
    """A refusal message with its values replaced, so files with the same cause count together."""
    return _QUOTED.sub("X", message)


def judge(data: bytes, path: str) -> FileResult:
    """Parse one file and classify it."""
    try:
        workflow = parse_workflow(data, path)
    except WorkflowInvalid as exc:
        messages = [d.message for d in exc.diagnostics]
        reasons = tuple(dict.fromkeys(reason(m) for m in messages))
        only_uses = bool(messages) and all(USES_MESSAGES.search(m) for m in messages)
        notices = tuple(reason(n.message) for n in exc.notices)
        return FileResult(path, False, only_uses, _all_foreign(data), reasons, notices)
    foreign = bool(workflow.jobs) and all(
        any(other_os(label) for label in instance.runs_on)
        for job in workflow.jobs
        for instance in job.instances
    )
    notices = tuple(reason(n.message) for n in workflow.notices)
    return FileResult(path, True, False, foreign, (), notices)


def _all_foreign(data: bytes) -> bool:
    """Whether every job of a refused file runs on Windows/macOS only (read from plain YAML)."""
    try:
        document = yaml.safe_load(data)
    except yaml.YAMLError:
        return False
    jobs = document.get("jobs") if isinstance(document, dict) else None
    if not isinstance(jobs, dict) or not jobs:
        return False
    return all(_job_foreign(job) for job in jobs.values())


def _job_foreign(job: Any) -> bool:
    if not isinstance(job, dict):
        return False
    labels = _labels(job.get("runs-on"), job.get("strategy"))
    return bool(labels) and all(any(other_os(label) for label in leg) for leg in labels)


def _labels(runs_on: Any, strategy: Any) -> list[list[str]]:
    """The label lists a job's legs ask for; a ``${{ matrix.K }}`` is expanded from the matrix."""
    written = runs_on if isinstance(runs_on, list) else [runs_on]
    texts = [str(item) for item in written if item is not None]
    match = [re.fullmatch(r"\$\{\{\s*matrix\.([\w-]+)\s*\}\}", text.strip()) for text in texts]
    if len(texts) == 1 and match[0] is not None:
        matrix = strategy.get("matrix") if isinstance(strategy, dict) else None
        if not isinstance(matrix, dict):
            return []
        values = matrix.get(match[0].group(1))
        found = [v for v in values if isinstance(v, str)] if isinstance(values, list) else []
        for entry in matrix.get("include") or []:
            if isinstance(entry, dict) and isinstance(entry.get(match[0].group(1)), str):
                found.append(entry[match[0].group(1)])
        return [[value] for value in found]
    return [texts] if texts else []


#: Placeholders GitHub fills in when someone creates a workflow from a starter template
#: (``$cron-weekly`` becomes a weekly schedule at a random time): the files people push have them
#: filled in, so the measure does the same.
STARTER_PLACEHOLDERS = {b"$cron-daily": b"'17 4 * * *'", b"$cron-weekly": b"'17 4 * * 3'"}


def instantiated(data: bytes) -> bytes:
    """A starter workflow as GitHub writes it into a repository (its cron placeholders filled)."""
    for placeholder, value in STARTER_PLACEHOLDERS.items():
        data = data.replace(placeholder, value)
    return data


def measure(root: Path, folders: tuple[str, ...] = FOLDERS) -> dict[str, Tally]:
    """One tally per folder and ``all``."""
    tallies = {folder: Tally() for folder in folders}
    tallies["all"] = Tally()
    for folder in folders:
        for path in sorted((root / folder).rglob("*")):
            if path.suffix not in (".yml", ".yaml") or not path.is_file():
                continue
            data = instantiated(path.read_bytes()) if "starter" in folder else path.read_bytes()
            result = judge(data, path.relative_to(root).as_posix())
            tallies[folder].add(result)
            tallies["all"].add(result)
    return tallies
