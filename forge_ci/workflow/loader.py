"""Bounded YAML loading: workflow text in, a located node tree (or located problems) out.

Workflow files come from pushed repositories, so the loader is the first line of defence: it
bounds the input (64 KiB, one document, 32 collection levels, 8,192 nodes) before anything walks
the tree, and it refuses the YAML features that make a small file mean something large or
surprising: anchors, aliases and merge keys (one line expanding into many), explicit tags and
directives (a second type system), empty and duplicate keys (which value wins?), NUL characters and
invalid UTF-8 (strings the executor cannot pass on faithfully).

It reads libyaml's event stream (PyYAML's C parser when it is available) rather than PyYAML's
constructed objects, so no scalar is ever resolved by YAML 1.1 rules: ``on`` stays the key "on",
``yes`` stays the text "yes", and every node keeps its line and column.
"""

from __future__ import annotations

import bisect
import re
from typing import Any, NoReturn

import yaml

from forge_ci.workflow.diagnostics import Problems
from forge_ci.workflow.nodes import NULL_SPELLINGS, Mapping, Node, Scalar, Sequence

MAX_INPUT_BYTES = 64 * 1024
MAX_DEPTH = 32
MAX_NODES = 8192

_BOM = "\ufeff"
# Characters YAML 1.2 does not allow in a stream (outside escapes): C0 and C1 controls except
# tab, line feed, carriage return and NEL; DEL; surrogates; U+FFFE and U+FFFF.
_FORBIDDEN = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x84\x86-\x9f\ud800-\udfff\ufffe\uffff]")
_SURROGATE_ESCAPES = re.compile("[\udc80-\udcff]+")
# YAML 1.1 line breaks that YAML 1.2 (and GitHub) read as ordinary characters. libyaml follows
# 1.1, so the same bytes would mean something else here; they are refused (written as escapes in
# a double-quoted string they are fine).
_YAML11_BREAKS = re.compile("[\x85\u2028\u2029]")
_BREAK_NAMES = {"\x85": "NEXT LINE", "\u2028": "LINE SEPARATOR", "\u2029": "PARAGRAPH SEPARATOR"}
# The line breaks of YAML 1.2 and of editors: positions are reported as people count lines.
_LINE_BREAK = re.compile("\r\n|[\r\n]")

try:
    _Loader: type = yaml.CSafeLoader
except AttributeError:  # PyYAML built without libyaml: same events, slower.
    _Loader = yaml.SafeLoader


class Source:
    """The decoded text of a workflow and a map from character offsets to lines and columns."""

    def __init__(self, text: str) -> None:
        self.text = text
        #: Offsets where lines start, found on the first :meth:`position` (most files need none).
        self._line_starts: list[int] | None = None

    def position(self, index: int) -> tuple[int, int]:
        """The 1-based (line, column) of a 0-based character offset."""
        starts = self._line_starts
        if starts is None:
            # Text with other breaks libyaml would count is refused before loading, so both agree.
            starts = self._line_starts = [0]
            starts.extend(match.end() for match in _LINE_BREAK.finditer(self.text))
        index = max(0, min(index, len(self.text)))
        line = bisect.bisect_right(starts, index) - 1
        return line + 1, index - starts[line] + 1


def decode(data: str | bytes, problems: Problems) -> Source | None:
    """Check size and encoding and return the text to parse, or ``None`` after reporting why not."""
    if isinstance(data, bytes):
        if len(data) > MAX_INPUT_BYTES:
            problems.add(1, 1, f"the file is {len(data)} bytes; the limit is 65536 (64 KiB)")
            return None
        text = data.decode("utf-8", errors="surrogateescape")
        # ASCII (most files) decodes without escapes and holds none of the 1.1 breaks.
        bad = [] if data.isascii() else list(_SURROGATE_ESCAPES.finditer(text))
        if bad:
            source = Source(text)
            for match in bad:
                line, column = source.position(match.start())
                problems.add(line, column, "the file is not valid UTF-8 here")
            return None
    else:
        # A str cannot be longer in UTF-8 than 4 bytes a character, nor shorter than 1.
        if len(data) > MAX_INPUT_BYTES or len(data.encode("utf-8", "surrogatepass")) > (
            MAX_INPUT_BYTES
        ):
            size = len(data.encode("utf-8", "surrogatepass"))
            problems.add(1, 1, f"the file is {size} bytes; the limit is 65536 (64 KiB)")
            return None
        text = data
    if text.startswith(_BOM):
        text = text[1:]
    source = Source(text)
    forbidden = list(_FORBIDDEN.finditer(text))
    for match in forbidden:
        line, column = source.position(match.start())
        char = match.group()
        if char == "\x00":
            what = "a NUL character"
        elif "\ud800" <= char <= "\udfff":
            what = "an unpaired surrogate (not valid UTF-8)"
        else:
            what = f"the control character U+{ord(char):04X}"
        problems.add(line, column, f"the file contains {what}, which YAML does not allow")
    breaks = [] if text.isascii() else list(_YAML11_BREAKS.finditer(text))
    for match in breaks:
        line, column = source.position(match.start())
        char = match.group()
        problems.add(
            line,
            column,
            f"the file contains U+{ord(char):04X} ({_BREAK_NAMES[char]}), a line break in YAML "
            "1.1 but an ordinary character in YAML 1.2 (GitHub); write it as the escape "
            f"\\u{ord(char):04x} in a double-quoted string",
        )
    return None if forbidden or breaks else source


class _Frame:
    """An open collection while events stream in; ``key`` is the pending key of a mapping."""

    __slots__ = ("node", "mapping", "key", "drop")

    def __init__(self, node: Mapping | Sequence, mapping: bool) -> None:
        self.node = node
        self.mapping = mapping
        self.key: Scalar | None = None
        # The pending entry has a bad key (already reported): parse its value, then drop it.
        self.drop = False


class _Stop(Exception):
    """A bound was exceeded: stop reading events, the problem is already recorded."""


def load(source: Source, problems: Problems) -> Node | None:
    """Parse ``source`` into a located tree; ``None`` when it could not be read as one document.

    Problems that leave the structure usable (a tag, an anchor, a duplicate key) are recorded and
    loading goes on; a syntax error or an exceeded bound stops it.
    """
    parser: Any = _Loader(source.text)
    try:
        root = _build(parser, problems)
    except _Stop:
        return None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line, column = (mark.line + 1, mark.column + 1) if mark is not None else (1, 1)
        problem = exc.problem or "invalid YAML"
        context = f" ({exc.context})" if exc.context else ""
        problems.add(line, column, f"YAML syntax error: {problem}{context}")
        return None
    except yaml.YAMLError as exc:
        problems.add(1, 1, f"YAML error: {exc}")
        return None
    finally:
        parser.dispose()
    if root is None:
        problems.add(1, 1, "the file is empty; a workflow needs at least 'on' and 'jobs'")
    return root


def _build(parser: Any, problems: Problems) -> Node | None:
    """Consume the event stream; one loop with local names, because it runs per YAML node."""
    scalar_event, alias_event = yaml.ScalarEvent, yaml.AliasEvent
    mapping_start, sequence_start = yaml.MappingStartEvent, yaml.SequenceStartEvent
    mapping_end, sequence_end = yaml.MappingEndEvent, yaml.SequenceEndEvent
    document_start = yaml.DocumentStartEvent
    get_event = parser.get_event
    stack: list[_Frame] = []
    root: Node | None = None
    count = 0
    documents = 0
    node: Node
    while True:
        event = get_event()
        if event is None:
            return root
        kind = type(event)
        start = event.start_mark
        if kind is scalar_event:
            count += 1
            if count > MAX_NODES:
                _stop(problems, start, f"the file has more than {MAX_NODES} YAML nodes")
            if event.anchor is not None or event.tag is not None:
                _properties(problems, event)
            value = event.value
            node = Scalar(
                value,
                event.style or "",
                start.line + 1,
                start.column + 1,
                start.index,
                event.end_mark.index,
            )
            if "\x00" in value:
                problems.at(node, "a NUL character (written as an escape) is not allowed")
        elif kind is mapping_start or kind is sequence_start:
            count += 1
            if count > MAX_NODES:
                _stop(problems, start, f"the file has more than {MAX_NODES} YAML nodes")
            if event.anchor is not None or event.tag is not None:
                _properties(problems, event)
            if len(stack) >= MAX_DEPTH:
                _stop(problems, start, f"collections are nested more than {MAX_DEPTH} levels deep")
            is_mapping = kind is mapping_start
            collection: Mapping | Sequence = (Mapping if is_mapping else Sequence)(
                start.line + 1, start.column + 1, start.index
            )
            stack.append(_Frame(collection, is_mapping))
            continue
        elif kind is mapping_end or kind is sequence_end:
            node = stack.pop().node
            node.end_index = event.end_mark.index
        elif kind is alias_event:
            count += 1
            node = Scalar("", "", start.line + 1, start.column + 1, start.index, start.index)
            problems.at(
                node, f"YAML aliases (*{event.anchor}) are not supported; repeat the value instead"
            )
        elif kind is document_start:
            documents += 1
            if documents > 1:
                _stop(problems, start, "a workflow file holds exactly one YAML document")
            if event.version or event.tags:
                problems.add(
                    start.line + 1,
                    start.column + 1,
                    "YAML directives (%YAML, %TAG) are not supported",
                )
            continue
        else:
            continue
        if not stack:
            root = node
            continue
        frame = stack[-1]
        parent = frame.node
        if not frame.mapping:
            parent.items.append(node)  # type: ignore[arg-type]
        elif frame.key is not None:
            parent.add(frame.key, node)  # type: ignore[union-attr]
            frame.key = None
        elif frame.drop:
            frame.drop = False
        else:
            _take_key(frame, node, problems)


def _take_key(frame: _Frame, node: Node, problems: Problems) -> None:
    """Check a mapping key; after a bad key the value is parsed and then dropped."""
    frame.drop = True
    if not isinstance(node, Scalar):
        problems.at(node, f"mapping keys must be strings, not a {node.kind}")
        return
    value = node.value
    if value == "" or (node.style == "" and value in NULL_SPELLINGS):
        problems.at(node, "empty mapping keys are not allowed")
        return
    if value == "<<":
        problems.at(node, "YAML merge keys (<<) are not supported; write the keys out")
        return
    mapping = frame.node
    assert isinstance(mapping, Mapping)
    if value in mapping:
        first = mapping.key_node(value)
        line = first.line if first is not None else node.line
        problems.at(node, f"duplicate key '{value}' (first defined at line {line})")
        return
    frame.key = node
    frame.drop = False


def _stop(problems: Problems, mark: Any, message: str) -> NoReturn:
    problems.add(mark.line + 1, mark.column + 1, message)
    raise _Stop


def _properties(problems: Problems, event: Any) -> None:
    """Report the anchor and the explicit tag of a node."""
    mark = event.start_mark
    if event.anchor is not None:
        problems.add(
            mark.line + 1,
            mark.column + 1,
            f"YAML anchors (&{event.anchor}) are not supported; repeat the value instead",
        )
    tag = event.tag
    if tag is not None:
        if tag.startswith("tag:yaml.org,2002:"):
            tag = "!!" + tag[len("tag:yaml.org,2002:") :]
        problems.add(
            mark.line + 1,
            mark.column + 1,
            f"explicit YAML tags ({tag}) are not supported; write the value without a tag",
        )
