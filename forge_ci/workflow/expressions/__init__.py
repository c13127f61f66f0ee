"""GitHub Actions' expression language (``${{ ... }}``), in pure Python.

Parse once, evaluate many times::

    node = parse_expression("startsWith(github.ref, 'refs/tags/') && success()")
    evaluate(node, {"github": {"ref": "refs/tags/v1"}}, status=JobStatus.for_step("success"))

The semantics are GitHub's, checked against GitHub's own cross-language test data (see
``tests/workflow/expressions``). The modules, in dependency order:

    errors      ExpressionError and the limits (length, depth, memory)
    coercion    kinds, truthiness, number/string conversion, loose comparison
    lexer       text -> tokens
    nodes       the syntax tree
    status      JobStatus for success()/failure()/cancelled()/always()
    jsonvalues  toJSON / fromJSON
    functions   the callable functions and their arity
    parser      tokens -> tree
    evaluator   tree + contexts -> value
    templates   strings with embedded ${{ }}
    analysis    contexts, paths and functions an expression uses
    conditions  if: conditions, with GitHub's implicit success()

Everything here is standard library only, does no I/O and raises nothing but ExpressionError for
bad input.
"""

from .analysis import as_property_path, called_functions, referenced_contexts, referenced_paths
from .coercion import is_truthy, number_to_string, to_string
from .conditions import parse_condition
from .errors import MAX_DEPTH, MAX_EXPRESSION_LENGTH, MAX_MEMORY_BYTES, ExpressionError
from .evaluator import FilteredArray, evaluate
from .functions import (
    FILE_FUNCTIONS,
    FOLLOW_LINKS_OPTION,
    STATUS_FUNCTIONS,
    SUPPORTED_FUNCTIONS,
    UNSUPPORTED_FUNCTIONS,
    FileHasher,
)
from .nodes import (
    Call,
    Compare,
    ContextRef,
    Index,
    Literal,
    Logical,
    Node,
    Not,
    Wildcard,
)
from .parser import parse_expression
from .status import JobStatus
from .templates import TemplateExpr, render_template, split_template

__all__ = [
    "FILE_FUNCTIONS",
    "FOLLOW_LINKS_OPTION",
    "MAX_DEPTH",
    "MAX_EXPRESSION_LENGTH",
    "MAX_MEMORY_BYTES",
    "STATUS_FUNCTIONS",
    "SUPPORTED_FUNCTIONS",
    "UNSUPPORTED_FUNCTIONS",
    "Call",
    "Compare",
    "ContextRef",
    "ExpressionError",
    "FileHasher",
    "FilteredArray",
    "Index",
    "JobStatus",
    "Literal",
    "Logical",
    "Node",
    "Not",
    "TemplateExpr",
    "Wildcard",
    "as_property_path",
    "called_functions",
    "evaluate",
    "is_truthy",
    "number_to_string",
    "parse_condition",
    "parse_expression",
    "referenced_contexts",
    "referenced_paths",
    "render_template",
    "split_template",
    "to_string",
]
