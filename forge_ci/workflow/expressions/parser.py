"""Recursive-descent parser for GitHub's expression language.

Precedence, loosest first (each level is left-associative):

    ||    &&    == !=    < <= > >=    !    .name [index] call()    literals (grouping)

Property and index access may follow a name, a call or a parenthesised group, never a literal.
Nesting is bounded twice, both at GitHub's limit of 50: while parsing, each nested expression,
``!``, logical chain and access counts one level (this also bounds Python's recursion); after
parsing, the depth of the tree is checked as GitHub's runner checks it, which also catches long
comparison chains (``a == b == c ...``) that nest without recursion.
"""

from __future__ import annotations

import functools
from collections.abc import Collection
from typing import Final

from . import lexer
from .errors import MAX_DEPTH, ExpressionError
from .functions import FUNCTIONS, UNSUPPORTED_FUNCTIONS
from .lexer import Token
from .nodes import (
    Call,
    Compare,
    CompareOperator,
    ContextRef,
    Index,
    Literal,
    Logical,
    Node,
    Not,
    Wildcard,
    children,
)

_EQUALITY: Final[dict[int, CompareOperator]] = {lexer.EQUAL: "==", lexer.NOT_EQUAL: "!="}
_ORDERING: Final[dict[int, CompareOperator]] = {
    lexer.LESS: "<",
    lexer.LESS_EQUAL: "<=",
    lexer.GREATER: ">",
    lexer.GREATER_EQUAL: ">=",
}
_LITERALS: Final = frozenset({lexer.TRUE, lexer.FALSE, lexer.NULL, lexer.NUMBER, lexer.STRING})


#: Parsed trees are immutable, so a tree can be shared by every occurrence of its text; real
#: workflows repeat a few expressions (``runner.os``, ``secrets.GITHUB_TOKEN``) most of the time.
#: Only short texts are cached, which bounds the cache's memory.
_CACHED_TEXT_LENGTH: Final = 200
_CACHE_SIZE: Final = 4096


def parse_expression(text: str, *, allowed_contexts: Collection[str] | None = None) -> Node:
    """Parse an expression (the text between ``${{`` and ``}}``) into a tree.

    ``allowed_contexts`` names the named values that exist where the expression is used
    (case-insensitive); any other name is a parse error, as in GitHub. None allows every name.
    An empty expression is the literal ``null``.
    """
    allowed = None
    if allowed_contexts is not None:
        allowed = frozenset(name.lower() for name in allowed_contexts)
    if len(text) <= _CACHED_TEXT_LENGTH:
        return _parse_cached(text, allowed)
    return _parse(text, allowed)


def _parse(text: str, allowed: frozenset[str] | None) -> Node:
    tokens = lexer.tokenize(text)
    if tokens[0][0] == lexer.EOF:
        return Literal(0, None)
    parser = _Parser(text, tokens, allowed)
    node = parser.expression()
    if parser.kind() != lexer.EOF:
        raise parser.unexpected(parser.peek())
    # Every node has a token of its own, so a tree deeper than the limit needs more tokens.
    if len(tokens) - 1 > MAX_DEPTH:
        _check_depth(node, text)
    return node


_parse_cached = functools.lru_cache(maxsize=_CACHE_SIZE)(_parse)


class _Parser:
    """The state of one parse: the tokens, the position in them and the nesting depth."""

    def __init__(self, text: str, tokens: list[Token], allowed: frozenset[str] | None) -> None:
        self.text = text
        self.tokens = tokens
        self.allowed = allowed
        self.position = 0
        self.depth = 0

    # -- token access -------------------------------------------------------------------

    def peek(self) -> Token:
        return self.tokens[self.position]

    def kind(self) -> int:
        return self.tokens[self.position][0]

    def match(self, kind: int) -> bool:
        if self.tokens[self.position][0] == kind and kind != lexer.EOF:
            self.position += 1
            return True
        return False

    def previous(self) -> Token:
        return self.tokens[self.position - 1]

    def expect(self, kind: int) -> None:
        if self.match(kind):
            return
        if self.kind() == lexer.EOF:
            raise self.unexpected_end()
        raise self.unexpected(self.peek())

    # -- errors -------------------------------------------------------------------------

    def error(self, message: str, offset: int) -> ExpressionError:
        return ExpressionError("parsing", message, offset, self.text)

    def unexpected(self, token: Token) -> ExpressionError:
        return self.error(f"Unexpected symbol: '{_describe(token)}'", token[1])

    def unexpected_end(self) -> ExpressionError:
        token = self.previous()
        return self.error(f"Unexpected end of expression: '{_describe(token)}'", token[1])

    def enter(self) -> None:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise self.error(f"Exceeded max expression depth {MAX_DEPTH}", self.peek()[1])

    # -- grammar ------------------------------------------------------------------------

    # Hot path: the methods below read self.tokens directly rather than through the helpers
    # above, because every operand passes through all of them.

    def expression(self) -> Node:
        self.enter()
        node = self.logical_or()
        self.depth -= 1
        return node

    def logical_or(self) -> Node:
        node = self.logical_and()
        if self.tokens[self.position][0] != lexer.OR:
            return node
        self.enter()
        offset = self.tokens[self.position][1]
        operands: list[Node] = []
        _append_flattened(operands, node, "||")
        while self.match(lexer.OR):
            _append_flattened(operands, self.logical_and(), "||")
        self.depth -= 1
        return Logical(offset, "||", tuple(operands))

    def logical_and(self) -> Node:
        node = self.equality()
        if self.tokens[self.position][0] != lexer.AND:
            return node
        self.enter()
        offset = self.tokens[self.position][1]
        operands: list[Node] = []
        _append_flattened(operands, node, "&&")
        while self.match(lexer.AND):
            _append_flattened(operands, self.equality(), "&&")
        self.depth -= 1
        return Logical(offset, "&&", tuple(operands))

    def equality(self) -> Node:
        node = self.comparison()
        tokens = self.tokens
        while tokens[self.position][0] in _EQUALITY:
            token = tokens[self.position]
            self.position += 1
            node = Compare(token[1], _EQUALITY[token[0]], node, self.comparison())
        return node

    def comparison(self) -> Node:
        node = self.unary()
        tokens = self.tokens
        while tokens[self.position][0] in _ORDERING:
            token = tokens[self.position]
            self.position += 1
            node = Compare(token[1], _ORDERING[token[0]], node, self.unary())
        return node

    def unary(self) -> Node:
        token = self.tokens[self.position]
        if token[0] != lexer.BANG:
            return self.postfix()
        self.position += 1
        self.enter()
        operand = self.unary()
        self.depth -= 1
        return Not(token[1], operand)

    def postfix(self) -> Node:
        node, accessible = self.operand()
        if not accessible:
            return node
        tokens = self.tokens
        entered = 0
        while True:
            token = tokens[self.position]
            if token[0] == lexer.DOT:
                self.position += 1
                self.enter()
                entered += 1
                name = tokens[self.position]
                if name[0] == lexer.IDENTIFIER:
                    index: Node | Wildcard = Literal(name[1], name[2])
                elif name[0] == lexer.STAR:
                    index = Wildcard(name[1])
                elif name[0] == lexer.EOF:
                    raise self.unexpected_end()
                else:
                    raise self.unexpected(name)
                self.position += 1
                node = Index(token[1], node, index, dotted=True)
            elif token[0] == lexer.LBRACKET:
                self.position += 1
                if self.match(lexer.STAR):
                    index = Wildcard(self.previous()[1])
                else:
                    index = self.expression()
                self.expect(lexer.RBRACKET)
                self.enter()
                entered += 1
                node = Index(token[1], node, index)
            else:
                break
        self.depth -= entered
        return node

    def operand(self) -> tuple[Node, bool]:
        """A name, call, literal or group, and whether ``.``/``[`` may follow it."""
        token = self.tokens[self.position]
        kind = token[0]
        if kind == lexer.IDENTIFIER:
            self.position += 1
            if self.match(lexer.LPAREN):
                return self.call(token), True
            if self.allowed is not None and token[2].lower() not in self.allowed:
                raise self.error(f"Unrecognized named-value: '{token[2]}'", token[1])
            return ContextRef(token[1], token[2]), True
        if kind in _LITERALS:
            self.position += 1
            value = token[3]
            assert value is None or isinstance(value, bool | float | str)
            return Literal(token[1], value), False
        if kind == lexer.LPAREN:
            self.position += 1
            node = self.expression()
            self.expect(lexer.RPAREN)
            return node, True
        if kind == lexer.EOF:
            raise self.unexpected_end()
        raise self.unexpected(token)

    def call(self, name: Token) -> Call:
        args: list[Node] = []
        while not self.match(lexer.RPAREN):
            args.append(self.expression())
            if self.kind() != lexer.RPAREN:
                self.expect(lexer.COMMA)
                if self.kind() == lexer.RPAREN:
                    # GitHub refuses a trailing comma: f(a,) is not f(a).
                    raise self.unexpected(self.peek())
        lowered = name[2].lower()
        spec = FUNCTIONS.get(lowered)
        if spec is None:
            unsupported = UNSUPPORTED_FUNCTIONS.get(lowered)
            if unsupported is not None:
                spelling, reason = unsupported
                raise self.error(f"{spelling}() is not supported by forge-ci: {reason}", name[1])
            raise self.error(f"Unrecognized function: '{name[2]}'", name[1])
        if len(args) < spec.min_args:
            raise self.error(f"Too few parameters supplied: '{name[2]}'", name[1])
        if len(args) > spec.max_args:
            raise self.error(f"Too many parameters supplied: '{name[2]}'", name[1])
        if spec.odd_args and len(args) % 2 == 0:
            raise self.error(
                "Even number of parameters supplied, requires an odd number of parameters: "
                f"'{name[2]}'",
                name[1],
            )
        return Call(name[1], spec.name, tuple(args))


def _describe(token: Token) -> str:
    if token[0] == lexer.EOF:
        return "EOF"
    if token[0] == lexer.STRING:
        return str(token[3])
    return token[2]


def _append_flattened(operands: list[Node], node: Node, operator: str) -> None:
    # (a || b) || c is one chain, as GitHub's runner builds it; evaluation order is unchanged.
    if isinstance(node, Logical) and node.operator == operator:
        operands.extend(node.operands)
    else:
        operands.append(node)


def _check_depth(root: Node, text: str) -> None:
    stack: list[tuple[Node | Wildcard, int]] = [(root, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise ExpressionError(
                "parsing", f"Exceeded max expression depth {MAX_DEPTH}", node.offset, text
            )
        stack.extend((child, depth + 1) for child in children(node))
