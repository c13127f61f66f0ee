"""Where expressions may appear in a workflow, and what they may reference there.

Every ``${{ }}`` template and every ``if`` condition is parsed by the expression module and then
checked against a :class:`Scope`: the contexts available at that key (following GitHub's context
availability table, narrowed to the contexts forge-ci provides), the matrix keys of the job, its
direct ``needs`` and the ids of earlier steps. A reference outside the scope is a located error
here rather than an empty string at run time. Two references GitHub evaluates to null without a
word, an id no earlier step has and a key the matrix lacks (or any matrix key in a job without a
matrix), are accepted as on GitHub with a located *notice* saying it is always empty.

Contexts forge-ci provides (docs/workflow-syntax.md, "Contexts"):

    github    the fields of ``GITHUB_FIELDS``; ``github.event`` is the event payload
    matrix    the static matrix values of one job instance
    strategy  fail-fast, max-parallel, job-index, job-total
    needs     <job>.outputs.<name> and <job>.result of direct dependencies
    steps     <id>.outputs.<name>, <id>.outcome, <id>.conclusion of earlier steps
    runner    os, arch, name, temp, tool_cache, debug (the runner's, at run time)
    env       the step's environment as the workflow set it (at run time)
    job       status; container and services (always empty)
    inputs    the dispatch's inputs ({} for other events)
    vars      repository variables (an empty object until the variable store exists)
    secrets   secrets.NAME in env, run and with values (a whole env value or a whole run
              part is delivered as it is; any other expression is evaluated by the runner)
"""

from __future__ import annotations

import functools
import re
from typing import Any

from forge_ci.records import field, record
from forge_ci.workflow.diagnostics import Diagnostic, Problems, did_you_mean
from forge_ci.workflow.expressions import (
    FILE_FUNCTIONS,
    MAX_EXPRESSION_LENGTH,
    STATUS_FUNCTIONS,
    ExpressionError,
    called_functions,
    parse_expression,
    referenced_contexts,
    referenced_paths,
    split_template,
)
from forge_ci.workflow.loader import Source
from forge_ci.workflow.nodes import Scalar

#: The github context (GitHub's "Contexts reference"; which are queue-time, claim-time and
#: run-time is in docs/workflow-syntax.md).
GITHUB_FIELDS = (
    "action",
    "action_path",
    "actor",
    "api_url",
    "base_ref",
    "event",
    "event_name",
    "head_ref",
    "job",
    "ref",
    "ref_name",
    "ref_protected",
    "ref_type",
    "repository",
    "repository_id",
    "repository_owner",
    "retention_days",
    "run_attempt",
    "run_id",
    "run_number",
    "server_url",
    "sha",
    "token",
    "triggering_actor",
    "workflow",
    "workflow_ref",
    "workflow_sha",
    "workspace",
)
STRATEGY_FIELDS = ("fail-fast", "max-parallel", "job-index", "job-total")
RUNNER_FIELDS = ("arch", "debug", "name", "os", "temp", "tool_cache")
JOB_FIELDS = ("container", "services", "status")
#: Contexts resolved while the plan is built, because they are fixed per job instance.
STATIC_CONTEXTS = frozenset({"matrix", "strategy"})
FORGE_CONTEXTS = frozenset(
    {
        "github",
        "matrix",
        "strategy",
        "needs",
        "steps",
        "secrets",
        "runner",
        "env",
        "job",
        "inputs",
        "vars",
    }
)
#: GitHub contexts forge-ci does not provide; named in messages as unsupported, not unknown.
GITHUB_ONLY_CONTEXTS = frozenset({"jobs"})
#: Contexts known when the run is queued (besides the static ones).
QUEUE_CONTEXTS = frozenset({"github", "inputs", "vars"})
#: Contexts the runner provides for step keys (GitHub's availability for steps).
STEP_CONTEXTS = frozenset(
    {"github", "needs", "matrix", "strategy", "steps", "runner", "env", "job", "inputs", "vars"}
)

#: Matrix keys of a job whose strategy is invalid: every key is accepted to avoid noise.
ANY_MATRIX_KEY = frozenset({"*"})

_SECRET_REF = re.compile(r"\s*secrets\s*\.\s*([A-Za-z_][A-Za-z0-9_]*)\s*\Z", re.IGNORECASE)


@record(frozen=True)
class Scope:
    """What an expression at one key may use; ``where`` names the key in messages."""

    where: str
    contexts: frozenset[str]
    conditions: bool = False
    whole_secret: bool = False
    #: In run: each ``${{ secrets.NAME }}`` part is allowed (passed through the environment).
    secret_parts: bool = False
    #: In env, run and with: any expression may read ``secrets.NAME`` (the runner evaluates it
    #: with the values delivered to the step).
    any_secret: bool = False
    #: A step key: hashFiles() may read the workspace (the runner evaluates it).
    files: bool = False
    matrix_keys: frozenset[str] | None = None
    needs: frozenset[str] = frozenset()
    steps: frozenset[str] = frozenset()

    def narrowed(self, where: str, contexts: frozenset[str], **changes: Any) -> Scope:
        """The same job facts (matrix keys, needs, steps) at another key."""
        return self._copy(
            where=where,
            contexts=contexts,
            conditions=changes.get("conditions", False),
            whole_secret=changes.get("whole_secret", False),
            secret_parts=changes.get("secret_parts", False),
            any_secret=changes.get("any_secret", False),
            files=changes.get("files", False),
            matrix_keys=self.matrix_keys,
            needs=self.needs,
            steps=changes.get("steps", self.steps),
        )

    def at(self, where: str) -> Scope:
        """This scope at another key (a copy with ``where`` changed)."""
        return self._copy(**{**self.__dict__, "where": where})

    def _copy(self, **fields: Any) -> Scope:
        # Scopes are made for nearly every key of every step: a frozen record's __init__
        # sets its ten fields one object.__setattr__ at a time, this fills the dict at once.
        # ``fields`` names every field (a test holds narrowed and at to the constructor).
        scope = object.__new__(Scope)
        scope.__dict__.update(fields)
        return scope


@record(frozen=True)
class Expr:
    """One parsed expression: its text, its tree, and the contexts it reads (lowercase)."""

    source: str
    node: Any
    contexts: frozenset[str]

    @functools.cached_property
    def static(self) -> bool:
        """Fixed per job instance: it reads only matrix and strategy (or nothing), no files."""
        if not self.contexts <= STATIC_CONTEXTS:
            return False
        return not {name.lower() for name in called_functions(self.node)} & FILE_FUNCTIONS


@record(frozen=True)
class Template:
    """A string value with its ``${{ }}`` parts parsed; ``parts`` alternate text and Expr."""

    parts: tuple[str | Expr, ...]
    node: Scalar = field(compare=False)

    @property
    def literal(self) -> str | None:
        """The text when the template holds no expression at all."""
        parts = self.parts
        if len(parts) == 1 and type(parts[0]) is str:  # most values: one text, no expression
            return parts[0]
        if all(isinstance(part, str) for part in parts):
            return "".join(part for part in self.parts if isinstance(part, str))
        return None

    @property
    def whole(self) -> Expr | None:
        """The expression when the value is exactly one ``${{ }}`` and nothing else."""
        if len(self.parts) == 1 and isinstance(self.parts[0], Expr):
            return self.parts[0]
        return None


@record(frozen=True)
class SecretRef:
    """A whole env value ``${{ secrets.NAME }}``: kept by name, never by value."""

    name: str
    node: Scalar = field(compare=False)


class ExpressionChecker:
    """Parses and checks the expressions of one file, locating problems in its source."""

    def __init__(self, source: Source, problems: Problems) -> None:
        self.source = source
        self.problems = problems

    # -- locating -------------------------------------------------------------------------------

    def locate(self, scalar: Scalar, offset: int) -> tuple[int, int]:
        """The source (line, column) of ``offset`` in a scalar's decoded value.

        Exact when the value is its source text (plain and quoted scalars without escapes);
        otherwise anchored on the nearest preceding ``${{``, which decoding never creates.
        """
        text = self.source.text
        start, end = scalar.index, scalar.end_index
        if scalar.style in ("'", '"'):
            start, end = start + 1, end - 1
        value = scalar.value
        if scalar.style in ("", "'", '"') and text[start:end] == value:
            return self.source.position(start + offset)
        anchor = value.rfind("${{", 0, offset + 1)
        if anchor >= 0:
            nth = value.count("${{", 0, anchor)
            raw = start - 1
            for _ in range(nth + 1):
                raw = text.find("${{", raw + 1, end)
                if raw < 0:
                    break
            if raw >= 0:
                return self.source.position(raw + offset - anchor)
        return scalar.line, scalar.column

    def _error(self, scalar: Scalar, offset: int, message: str) -> None:
        line, column = self.locate(scalar, offset)
        self.problems.add(line, column, message)

    # -- parsing --------------------------------------------------------------------------------

    def template(self, scalar: Scalar, scope: Scope) -> Template | None:
        """Parse and check a string that may hold ``${{ }}`` templates; ``None`` if invalid."""
        value = scalar.value
        if "${{" not in value:
            return Template((value,), scalar)
        if len(value) > MAX_EXPRESSION_LENGTH:
            # GitHub turns a template into one format() expression, so its limit covers the
            # whole value; refusing it here keeps forge-ci workflows valid on GitHub too.
            self.problems.at(
                scalar,
                f"a value with expressions is at most {MAX_EXPRESSION_LENGTH} characters long "
                f"(this one has {len(value)})",
            )
            return None
        try:
            pieces = split_template(value)
        except ExpressionError as exc:
            self._error(scalar, exc.offset, f"invalid expression in {scope.where}: {exc.message}")
            return None
        parts: list[str | Expr] = []
        ok = True
        for piece in pieces:
            if isinstance(piece, str):
                parts.append(piece)
                continue
            expr = Expr(piece.source, piece.node, _contexts(piece.node))
            if not self._check(expr, scalar, piece.offset, scope, len(pieces) == 1):
                ok = False
            parts.append(expr)
        return Template(tuple(parts), scalar) if ok else None

    def literal(self, scalar: Scalar, where: str) -> str | None:
        """A string where GitHub allows no expression (ids, shells, working directories)."""
        if "${{" in scalar.value:
            self._error(
                scalar,
                scalar.value.index("${{"),
                f"expressions are not allowed in {where}; write the value literally",
            )
            return None
        return scalar.value

    def condition(self, scalar: Scalar, scope: Scope) -> str | None:
        """The expression an ``if`` will evaluate, or ``None`` if invalid.

        A condition without a status function gets GitHub's implicit ``success() && (...)``.
        """
        text = scalar.value
        shift = 0
        stripped = text.strip()
        if stripped.startswith("${{") and stripped.endswith("}}") and stripped.count("${{") == 1:
            if stripped != text:
                # GitHub makes `${{ x }}` plus any other text, even a line break, a string: it
                # is never empty, so the condition would always hold whatever x is (issue #12).
                spaces = text.strip(" \t") == stripped
                around, fix = (
                    ("spaces", "remove them")
                    if spaces
                    else ("a line break", "use |- or >- to drop the final line break")
                )
                self.problems.at(
                    scalar,
                    f"{scope.where} has {around} around its ${{{{ }}}}, so GitHub reads it as "
                    f"text, which is always true; write only the expression ({fix})",
                )
                return None
            shift = text.index("${{") + 3
            text = stripped[3:-2]
        elif "${{" in text:
            self._error(
                scalar,
                text.index("${{"),
                f"{scope.where} is one expression: write it without ${{{{ }}}}, or wrap all of it",
            )
            return None
        if not text.strip():
            self.problems.at(scalar, f"{scope.where} needs an expression")
            return None
        try:
            node = parse_expression(text)
        except ExpressionError as exc:
            message = f"invalid expression in {scope.where}: {exc.message}"
            self._error(scalar, shift + exc.offset, message)
            return None
        expr = Expr(text, node, _contexts(node))
        if not self._check(expr, scalar, shift, scope, False):
            return None
        functions = {name.lower() for name in called_functions(node)}
        if functions & set(STATUS_FUNCTIONS):
            return text.strip()
        return f"success() && ({text.strip()})"

    # -- checking -------------------------------------------------------------------------------

    def _check(self, expr: Expr, scalar: Scalar, offset: int, scope: Scope, whole: bool) -> bool:
        """Report every reference ``expr`` makes outside ``scope``; True when there is none."""
        before = len(self.problems)
        where = scope.where
        # Unknown and unsupported functions are parse errors of the expression module already.
        for name in sorted(called_functions(expr.node)):
            if name.lower() in STATUS_FUNCTIONS and not scope.conditions:
                self._error(scalar, offset, f"{name}() can only be used in an if condition")
            if name.lower() in FILE_FUNCTIONS and not scope.files:
                self._error(
                    scalar,
                    offset,
                    f"{name}() reads the job's workspace, so only step keys can use it "
                    f"(not {where})",
                )
        for context in sorted(expr.contexts):
            if context == "secrets":
                self._check_secret(expr, scalar, offset, scope, whole)
            elif context not in scope.contexts:
                self._error(scalar, offset, _context_refusal(context, where))
        for path in referenced_paths(expr.node):
            lowered_path = tuple(str(part).lower() for part in path)
            if lowered_path and lowered_path[0] in scope.contexts:
                problem = _path_problem(lowered_path, path, scope)
                if problem:
                    self._error(scalar, offset, problem)
                notice = _path_notice(lowered_path, path, scope)
                if notice:
                    line, column = self.locate(scalar, offset)
                    self.problems.notice(Diagnostic(line, column, notice), notice)
        return len(self.problems) == before

    def _check_secret(
        self, expr: Expr, scalar: Scalar, offset: int, scope: Scope, whole: bool
    ) -> None:
        if (scope.whole_secret and whole or scope.secret_parts) and _SECRET_REF.match(expr.source):
            return
        if scope.any_secret:
            for path in referenced_paths(expr.node):
                if path[0].lower() != "secrets":
                    continue
                if len(path) != 2:
                    written = ".".join(path)
                    self._error(
                        scalar,
                        offset,
                        f"name one secret, like secrets.NAME, not {written} ({scope.where})",
                    )
                    continue
                problem = secret_name_problem(path[1])
                if problem:
                    self._error(scalar, offset, problem)
            return
        self._error(
            scalar,
            offset,
            "secrets can only be used in env, run and with values, like "
            f"NAME: ${{{{ secrets.NAME }}}} (not in {scope.where})",
        )

    def secret(self, template: Template) -> SecretRef | None:
        """The secret a whole env value names, when it is ``${{ secrets.NAME }}``."""
        whole = template.whole
        if whole is None or "secrets" not in whole.contexts:
            return None
        match = _SECRET_REF.match(whole.source)
        if match is None:
            return None  # another expression over secrets: the runner evaluates it
        name = match.group(1)
        problem = secret_name_problem(name)
        if problem:
            self._error(template.node, 0, problem)
        return SecretRef(name.upper(), template.node)


def secret_name_problem(name: str) -> str | None:
    """Why ``name`` cannot be a secret name (seed: "Repository Secrets"), or ``None``."""
    if len(name) > 100:
        return f"the secret name {name[:20]}... is longer than 100 characters"
    upper = name.upper()
    if upper == "GITHUB_TOKEN":
        return None  # the job token (github.token), not a stored secret
    for prefix in ("GITHUB_", "FORGE_CI_", "RUNNER_"):
        if upper.startswith(prefix):
            return f"the secret name {name} uses the reserved prefix {prefix}"
    return None


def _contexts(node: Any) -> frozenset[str]:
    return frozenset(name.lower() for name in referenced_contexts(node))


def _context_refusal(context: str, where: str) -> str:
    if context in FORGE_CONTEXTS:
        return f"the {context} context is not available in {where}"
    if context in GITHUB_ONLY_CONTEXTS:
        return f"the {context} context is not supported by forge-ci"
    hint = did_you_mean(context, sorted(FORGE_CONTEXTS))
    return f"unrecognized named-value '{context}'{hint}"


#: Contexts with a fixed set of fields, checked by name.
_FIXED_FIELDS = {"runner": RUNNER_FIELDS, "job": JOB_FIELDS}


def _path_problem(path: tuple[str, ...], written: tuple[Any, ...], scope: Scope) -> str | None:
    """What is wrong with one context path such as ('needs', 'build', 'outputs', 'x')."""
    root = path[0]
    if root == "github":
        fields = ", ".join(f"github.{name}" for name in GITHUB_FIELDS)
        if len(path) < 2:
            # The whole context (toJSON(github), github[name]): as on GitHub; the runner gives
            # such an expression the token masked (worker/runner/evaluation.py).
            return None
        if path[1] not in GITHUB_FIELDS:
            hint = did_you_mean(str(written[1]), GITHUB_FIELDS)
            return f"github.{written[1]} is not available{hint}; forge-ci provides {fields}"
        if len(path) > 2 and path[1] != "event":
            return f"github.{written[1]} is text; it has no field {written[2]!r}"
    elif root in _FIXED_FIELDS:
        known = _FIXED_FIELDS[root]
        if len(path) >= 2 and path[1] not in known:
            hint = did_you_mean(str(written[1]), known)
            return f"{root}.{written[1]} does not exist{hint}; use {', '.join(known)}"
    elif root == "strategy":
        if len(path) >= 2 and path[1] not in STRATEGY_FIELDS:
            hint = did_you_mean(str(written[1]), STRATEGY_FIELDS)
            return f"strategy.{written[1]} does not exist{hint}"
    elif root == "needs":
        if len(path) >= 2 and path[1] not in scope.needs:
            return f"job '{written[1]}' is not listed in this job's needs"
        if len(path) >= 3 and path[2] not in ("outputs", "result"):
            return f"needs.{written[1]}.{written[2]} does not exist; use outputs or result"
    elif root == "steps":
        if len(path) >= 3 and path[2] not in ("outputs", "outcome", "conclusion"):
            return (
                f"steps.{written[1]}.{written[2]} does not exist; "
                "use outputs, outcome or conclusion"
            )
    return None


def _path_notice(path: tuple[str, ...], written: tuple[Any, ...], scope: Scope) -> str | None:
    """What a context path reads that is always empty, as GitHub evaluates it (null): the
    steps of an id no earlier step has (a typo, a later or removed step), the matrix of a job
    without one, a key the matrix does not have. Accepted, but never silently."""
    where = scope.where
    named = ".".join(str(part) for part in written[:2])
    keys = scope.matrix_keys
    if path[0] == "steps" and len(path) >= 2 and path[1] not in scope.steps:
        which = "no step in this job" if where == "job outputs" else "no earlier step"
        reason = f"{which} has the id '{written[1]}'"
    elif path[0] == "matrix" and keys is None:
        reason = "the job has no strategy.matrix"
    elif path[0] == "matrix" and len(path) >= 2 and keys != ANY_MATRIX_KEY:
        if keys is None or path[1] in keys:
            return None
        hint = did_you_mean(str(written[1]), sorted(keys))
        reason = f"the matrix has no key '{written[1]}'{hint}"
    else:
        return None
    return f"{named} is always empty in {where}: {reason} (GitHub reads it as null too)"
