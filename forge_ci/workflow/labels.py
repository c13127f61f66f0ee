"""``runs-on``: the labels a provider must have to run a job.

Every forge-ci runner is self-hosted and runs Linux containers, so labels are normalised to say
so explicitly and providers are matched on the full list (a provider must have every label):

    runs-on: [self-hosted, gpu]       -> [self-hosted, linux, gpu]
    runs-on: linux                    -> [self-hosted, linux]
    runs-on: ubuntu-24.04             -> [self-hosted, linux, x64, ubuntu-24.04]
    runs-on: ubuntu-24.04-arm         -> refused: only the x64 images have standard names
    runs-on: ubuntu-latest            -> [self-hosted, linux, x64, ubuntu-latest]
    runs-on: windows-latest           -> [windows-latest]: kept as written, with a notice
    runs-on: [macos-14, arm64]        -> [macos-14, arm64]

forge-ci's own providers run Linux containers, so a Windows or macOS job is planned with its
labels as written and waits for a provider that has them; the run page and ``run show`` say
that none does (``forge_ci.coordinator.blockers``), while the run's Linux jobs run.

The standard Ubuntu names keep the image name as an exact capability label, so a provider
advertises which image it really runs. Labels are compared without regard to case and stored in
lowercase; a job lists at most 8 of them (before normalisation).
"""

from __future__ import annotations

import re

MAX_LABELS = 8
#: The longest label a provider can carry (``forge_ci.coordinator.providers.LABEL_RE``, which the
#: workflow engine may not import): a longer label in ``runs-on`` would queue forever.
MAX_LABEL_LENGTH = 64
#: GitHub's standard x64 Ubuntu images: ``ubuntu-latest`` and ``ubuntu-YY.MM``.
STANDARD_UBUNTU = re.compile(r"ubuntu-(latest|[0-9]{2}\.[0-9]{2})\Z")

_LABEL = re.compile(r"[a-z0-9][a-z0-9._-]*\Z")
_OTHER_OS = re.compile(r"(windows|macos|osx|win)(-.*)?\Z")


def other_os(label: str) -> bool:
    """Whether ``label`` selects a Windows or macOS runner (``windows-2022``, ``macOS-latest``)."""
    return _OTHER_OS.match(label.lower()) is not None


#: A refusal: the index of the label it is about in the written list (``None``: the whole list).
LabelProblem = tuple[int | None, str]


def normalize_labels(labels: list[str]) -> tuple[list[str], list[LabelProblem]]:
    """The normalised labels of a job, or an empty list and every reason they are refused.

    Each label is checked on its own, so that a file with three bad labels hears of all three,
    each at its own position.
    """
    if not labels:
        return [], [(None, "runs-on needs at least one label")]
    problems: list[LabelProblem] = []
    if len(labels) > MAX_LABELS:
        problems.append((None, f"runs-on lists {len(labels)} labels; the limit is {MAX_LABELS}"))
    seen: list[str] = []
    first: list[int] = []
    for index, label in enumerate(labels):
        lowered = label.lower()
        if len(lowered) > MAX_LABEL_LENGTH or not _LABEL.match(lowered):
            problems.append(
                (
                    index,
                    f"'{label}' is not a valid runner label (letters, digits, '.', '_' and '-', "
                    f"at most {MAX_LABEL_LENGTH} characters)",
                )
            )
        elif lowered in seen:
            problems.append((index, f"the runner label '{label}' is listed twice"))
        else:
            seen.append(lowered)
            first.append(index)
    images = [label for label in seen if STANDARD_UBUNTU.match(label)]
    foreign = any(other_os(label) for label in seen)
    if not images and not foreign:
        # Without a standard image, an ubuntu-* label is a GitHub image forge-ci does not name.
        for index, lowered in zip(first, seen, strict=True):
            if lowered.startswith("ubuntu-"):
                problems.append(
                    (
                        index,
                        f"'{labels[index]}' is not a supported image label; use ubuntu-latest or "
                        "ubuntu-YY.MM (x64 images)",
                    )
                )
    if problems:
        problems.sort(key=lambda item: -1 if item[0] is None else item[0])
        return [], problems
    if foreign:
        return seen, []
    head = ["self-hosted", "linux"] + (["x64"] if images else [])
    return head + [label for label in seen if label not in head], []
