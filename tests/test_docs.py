"""The documentation's examples and command table agree with the code (issue #12 item 14).

Every ```yaml (or ```yml) block of docs/*.md and README.md is checked: a workflow (a top-level
``on:`` or ``jobs:``) goes through the validator ``forge-ci workflow validate`` uses and must be
valid; any other YAML must parse. A block meant to be wrong says so on the line before it with a
visible marker, and must then be refused::

    <!-- invalid: why this example is wrong -->
    ```yaml
    ...
    ```

Every command of the ``forge-ci`` CLI must have a row in the operator guide's command table, and
every row must name a command that exists.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from forge_ci.cli import command_tree
from forge_ci.workflow import WorkflowInvalid, build_plan, parse_workflow

ROOT = Path(__file__).resolve().parents[1]
DOCS = sorted((ROOT / "docs").glob("*.md")) + [ROOT / "README.md"]
GUIDE = ROOT / "docs" / "operator-guide.md"

_FENCE = re.compile(r"^(\s*)```(\S*)\s*$")
_INVALID = re.compile(r"^\s*<!--\s*invalid:\s*(\S.*?)\s*-->\s*$")
_WORKFLOW = re.compile(r"^(on|jobs)\s*:", re.M)


@dataclass(frozen=True)
class Block:
    path: str
    line: int  # of the opening fence, 1-based
    text: str
    #: The reason given by a preceding ``<!-- invalid: ... -->``, else None.
    invalid: str | None

    @property
    def is_workflow(self) -> bool:
        return bool(_WORKFLOW.search(self.text))


def yaml_blocks(markdown: str, path: str = "<doc>") -> list[Block]:
    """The YAML code blocks of ``markdown``, with their marker if the line before has one."""
    lines = markdown.splitlines()
    blocks: list[Block] = []
    index = 0
    while index < len(lines):
        fence = _FENCE.match(lines[index])
        if fence is None:
            index += 1
            continue
        indent, language = fence.groups()
        end = index + 1
        while end < len(lines) and not lines[end].strip().startswith("```"):
            end += 1
        if language.lower() in ("yaml", "yml"):
            body = "\n".join(line.removeprefix(indent) for line in lines[index + 1 : end])
            before = next((lines[i] for i in range(index - 1, -1, -1) if lines[i].strip()), "")
            marker = _INVALID.match(before)
            blocks.append(Block(path, index + 1, body + "\n", marker.group(1) if marker else None))
        index = end + 1
    return blocks


def _all_blocks() -> list[Block]:
    return [
        block
        for doc in DOCS
        for block in yaml_blocks(doc.read_text(encoding="utf-8"), doc.relative_to(ROOT).as_posix())
    ]


def problems(block: Block) -> str | None:
    """Why ``block`` is refused (None when it is accepted)."""
    if block.is_workflow:
        try:
            build_plan(parse_workflow(block.text, f"{block.path}:{block.line}"))
        except WorkflowInvalid as exc:
            return "; ".join(
                f"{d.as_dict()['line']}:{d.as_dict()['column']}: {d.as_dict()['message']}"
                for d in exc.diagnostics
            )
        return None
    try:
        yaml.safe_load(block.text)
    except yaml.YAMLError as exc:
        return str(exc)
    return None


BLOCKS = _all_blocks()


def test_the_docs_have_yaml_examples_to_check() -> None:
    assert any(block.is_workflow for block in BLOCKS)


@pytest.mark.parametrize("block", BLOCKS, ids=[f"{b.path}:{b.line}" for b in BLOCKS])
def test_every_yaml_example_is_valid_unless_marked(block: Block) -> None:
    found = problems(block)
    if block.invalid is None:
        assert found is None, f"{block.path}:{block.line} is refused: {found}"
    else:
        assert found is not None, f"{block.path}:{block.line} is marked invalid but is accepted"


def test_the_extractor_sees_markers_and_the_checks_refuse_bad_examples() -> None:
    """The convention itself: markers are found, and a wrong example of each kind is refused."""
    doc = """# Doc

```yaml
on: push
jobs:
  a:
    runs-on: self-hosted
    steps:
      - run: 'echo "a: b"'
```

<!-- invalid: ": " in a plain scalar -->

```yaml
on: push
jobs:
  a:
    runs-on: self-hosted
    steps:
      - run: echo "a: b"
```

<!-- invalid: not a runner label -->
```yml
on: push
jobs:
  a:
    runs_on: self-hosted
```

  ```yaml
  key: [unclosed
  ```

```yaml
plain: mapping
```
"""
    blocks = yaml_blocks(doc)
    assert [(b.line, b.invalid, b.is_workflow) for b in blocks] == [
        (3, None, True),
        (14, '": " in a plain scalar', True),
        (24, "not a runner label", True),
        (31, None, False),
        (35, None, False),
    ]
    assert [problems(b) is None for b in blocks] == [True, False, False, False, True]


# --- The operator guide's command table ----------------------------------------------------------


def cli_commands() -> set[tuple[str, ...]]:
    """Every leaf command of the CLI, as its words: ("events", "resolve")."""
    return set(command_tree())


_WORD = re.compile(r"[a-z][a-z0-9-]*(\\?\|[a-z][a-z0-9-]*)*")


def documented_commands(markdown: str) -> set[tuple[str, ...]]:
    """Commands named in the first column of the table under "## Commands".

    ``forge-ci provider pause\\|resume\\|revoke NAME`` names three commands; the words after
    ``forge-ci`` are taken up to the first argument or option.
    """
    section = markdown.split("\n## Commands\n", 1)[1].split("\n## ", 1)[0]
    found: set[tuple[str, ...]] = set()
    for row in section.splitlines():
        cell = re.match(r"\|\s*`forge-ci ([^`]*)`", row)
        if cell is None:
            continue
        words = list(itertools.takewhile(_WORD.fullmatch, cell.group(1).split()))
        choices = [re.split(r"\\?\|", word) for word in words]
        found.update(itertools.product(*choices))
    return found


def test_every_cli_command_is_in_the_operator_guide_table() -> None:
    documented = documented_commands(GUIDE.read_text(encoding="utf-8"))
    commands = cli_commands()
    assert ("events", "resolve") in commands  # (the command the table once missed)
    missing = sorted(" ".join(c) for c in commands - documented)
    assert not missing, f"commands missing from the table in docs/operator-guide.md: {missing}"
    unknown = sorted(" ".join(c) for c in documented - commands)
    assert not unknown, f"docs/operator-guide.md documents commands that do not exist: {unknown}"


# --- SSH-side commands ---------------------------------------------------------------------------

SSH_DOC = ROOT / "docs" / "ssh.md"
_SSH_EXAMPLE = re.compile(r"(?:^|&&\s*)ssh git@HOST ([^#\n]*)")


def ssh_examples() -> list[tuple[str, str]]:
    """``(where, command)`` of every ``ssh git@HOST ...`` line of the docs' ``sh`` blocks."""
    found = []
    for doc in DOCS:
        in_block = False
        for number, line in enumerate(doc.read_text(encoding="utf-8").splitlines(), 1):
            if line.strip().startswith("```"):
                in_block = line.strip() == "```sh"
                continue
            if in_block:
                for match in _SSH_EXAMPLE.finditer(line):
                    command = match.group(1).split(" < ")[0].strip()
                    found.append((f"{doc.name}:{number}", command))
    return found


def test_every_ssh_example_parses() -> None:
    """Each example in the docs is a command the SSH server accepts as written."""
    import shlex

    from ssh.console.catalog import COMMANDS
    from ssh.console.parser import parse

    examples = ssh_examples()
    assert len(examples) >= 5, examples
    for _where, command in examples:
        parse(shlex.split(command), COMMANDS)  # raises Usage, naming the problem
    with pytest.raises(Exception, match="unknown command"):
        parse(["run", "watchh", "alice/demo"], COMMANDS)


def test_every_ssh_command_is_in_the_reference_and_back() -> None:
    from ssh.console.catalog import COMMANDS

    section = SSH_DOC.read_text(encoding="utf-8").split("\n## SSH-side commands\n", 1)[1]
    section = section.split("\n## ", 1)[0]
    rows = re.findall(r"^\|\s*`ssh git@HOST ([^`]*)`", section, re.M)
    documented = {tuple(itertools.takewhile(_WORD.fullmatch, row.split())) for row in rows}
    commands = {c.words for c in COMMANDS}
    assert commands - documented == set(), "SSH commands missing from docs/ssh.md"
    assert documented - commands == set(), "docs/ssh.md documents SSH commands that do not exist"
    # The reference's synopsis is the one the server's help prints.
    usages = {c.words: c.usage().removeprefix("ssh git@HOST ") for c in COMMANDS}
    for row in rows:
        words = tuple(itertools.takewhile(_WORD.fullmatch, row.split()))
        expected = usages[words].replace(" [--json]", "").replace("|", "\\|")
        assert row == expected, f"docs/ssh.md: {row!r} != the server's usage {expected!r}"


# --- Headings and leftovers -----------------------------------------------------------------------

_HEADING = re.compile(r"^(#{1,6}) (.+?)\s*$", re.M)


@pytest.mark.parametrize("doc", DOCS, ids=[d.name for d in DOCS])
def test_no_two_sections_of_a_page_share_a_title(doc: Path) -> None:
    """Not "Testing" and "Testing only" either: one topic, one section (and one anchor)."""
    headings = [(level, title.lower()) for level, title in _HEADING.findall(doc.read_text())]
    clashes = [
        (a, b)
        for (level_a, a), (level_b, b) in itertools.permutations(headings, 2)
        if level_a == level_b and (a == b or b.startswith(a + " "))
    ]
    assert not clashes, f"{doc.name}: sections that overlap: {clashes}"


@pytest.mark.parametrize("doc", DOCS, ids=[d.name for d in DOCS])
def test_docs_describe_the_code_not_the_plan(doc: Path) -> None:
    """User documentation speaks of what forge-ci does, not of work items still to come."""
    leftovers = re.findall(
        r"[^.\n]*\b(?:issue's part|the \w+ issue|TODO|TBD)\b[^.\n]*", doc.read_text()
    )
    assert not leftovers, f"{doc.name}: {leftovers}"
