"""``runs-on``: the labels a provider must have to run a job.

Every forge-ci runner is self-hosted and runs Linux containers, so labels are normalised to say
so explicitly and providers are matched on the full list (a provider must have every label):

    runs-on: [self-hosted, gpu]       -> [self-hosted, linux, gpu]
    runs-on: linux                    -> [self-hosted, linux]
    runs-on: ubuntu-24.04             -> [self-hosted, linux, x64, ubuntu-24.04]
    runs-on: ubuntu-24.04-arm         -> refused: only the x64 images have standard names
    runs-on: ubuntu-latest            -> [self-hosted, linux, x64, ubuntu-latest]
    runs-on: windows-latest / macos   -> refused: forge-ci has no Windows or macOS runners

The standard Ubuntu names keep the image name as an exact capability label, so a provider
advertises which image it really runs. Labels are compared without regard to case and stored in
lowercase; a job lists at most 8 of them (before normalisation).
"""

from __future__ import annotations

import re

MAX_LABELS = 8
MAX_LABEL_LENGTH = 100
#: GitHub's standard x64 Ubuntu images: ``ubuntu-latest`` and ``ubuntu-YY.MM``.
STANDARD_UBUNTU = re.compile(r"ubuntu-(latest|[0-9]{2}\.[0-9]{2})\Z")

_LABEL = re.compile(r"[a-z0-9][a-z0-9._-]*\Z")
_OTHER_OS = re.compile(r"(windows|macos|osx|win)(-.*)?\Z")


def normalize_labels(labels: list[str]) -> tuple[list[str], str | None]:
    """The normalised labels of a job, or an empty list and the reason they are refused."""
    if not labels:
        return [], "runs-on needs at least one label"
    if len(labels) > MAX_LABELS:
        return [], f"runs-on lists {len(labels)} labels; the limit is {MAX_LABELS}"
    seen: list[str] = []
    for label in labels:
        lowered = label.lower()
        if len(lowered) > MAX_LABEL_LENGTH or not _LABEL.match(lowered):
            return [], (
                f"'{label}' is not a valid runner label (letters, digits, '.', '_' and '-', "
                f"at most {MAX_LABEL_LENGTH} characters)"
            )
        if _OTHER_OS.match(lowered):
            return [], f"'{label}' selects a Windows or macOS runner; forge-ci runs Linux jobs only"
        if lowered in seen:
            return [], f"the runner label '{label}' is listed twice"
        seen.append(lowered)
    images = [label for label in seen if STANDARD_UBUNTU.match(label)]
    if any(label.startswith("ubuntu-") for label in seen) and not images:
        unknown = next(label for label in seen if label.startswith("ubuntu-"))
        return [], (
            f"'{unknown}' is not a supported image label; use ubuntu-latest or ubuntu-YY.MM "
            "(x64 images)"
        )
    head = ["self-hosted", "linux"] + (["x64"] if images else [])
    return head + [label for label in seen if label not in head], None
