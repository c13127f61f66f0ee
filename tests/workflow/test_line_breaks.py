"""U+0085, U+2028 and U+2029 (issue #12 item 7).

YAML 1.1 (and so libyaml) reads them as line breaks; YAML 1.2 and GitHub read them as ordinary
characters. forge-ci turned ``run: 'echo a<U+0085>b'`` silently into ``echo a b``, and in a plain
scalar or a comment gave an error located past the last line. Raw, they are now refused where
they are (the line and column an editor shows); written as escapes they are ordinary characters.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from wf_support import messages

from forge_ci.workflow import Diagnostic

Refuse = Callable[[str | bytes], list[Diagnostic]]
NAMES = {"\x85": "NEXT LINE", "\u2028": "LINE SEPARATOR", "\u2029": "PARAGRAPH SEPARATOR"}


def workflow(run: str, head: str = "on: push") -> str:
    return f"{head}\njobs:\n  build:\n    runs-on: self-hosted\n    steps:\n      - run: {run}\n"


def refusal(char: str, line: int, column: int) -> str:
    code = ord(char)
    return (
        f"{line}:{column}: the file contains U+{code:04X} ({NAMES[char]}), a line break in YAML "
        f"1.1 but an ordinary character in YAML 1.2 (GitHub); write it as the escape "
        f"\\u{code:04x} in a double-quoted string"
    )


@pytest.mark.parametrize("char", sorted(NAMES))
@pytest.mark.parametrize(
    ("where", "line", "column"),
    [
        ("quoted", 6, 21),
        ("plain", 6, 20),
        ("block", 7, 17),
        ("comment", 1, 13),
    ],
)
def test_raw_yaml11_line_breaks_are_refused_where_they_are(
    refuse: Refuse, char: str, where: str, line: int, column: int
) -> None:
    text = {
        "quoted": workflow(f"'echo a{char}b'"),
        "plain": workflow(f"echo a{char}b"),
        "block": workflow(f"|\n          echo a{char}b"),
        "comment": workflow("echo hi", head=f"on: push # a{char}b"),
    }[where]
    assert messages(refuse(text.encode())) == refusal(char, line, column)
    assert line <= text.count("\n")


@pytest.mark.parametrize("char", sorted(NAMES))
def test_escaped_they_are_ordinary_characters(
    plan_of: Callable[[str], dict[str, Any]], char: str
) -> None:
    step = plan_of(workflow(f'"echo a\\u{ord(char):04x}b"'))["jobs"][0]["steps"][0]
    assert step["run"] == f"echo a{char}b"
    # The default name is the first line, and these characters do not end a line.
    assert step["name"] == f"Run echo a{char}b"
