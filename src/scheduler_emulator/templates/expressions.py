"""Template expressions: ``"[concat('a', parameters('b'))]"`` parsed into a tree.

A JSON string is an expression when it starts with ``[`` and ends with ``]``; ``[[`` escapes a literal
string that starts with ``[`` (the first ``[`` is dropped). Grammar::

    expression := primary ( '.' name | '[' expression ']' )*
    primary    := string | number | name '(' [ expression ( ',' expression )* ] ')'
    string     := "'" ( any but "'" | "''" )* "'"
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from scheduler_emulator.templates.errors import TemplateError

MAX_EXPRESSION_LENGTH = 24_576  # ARM's limit on one expression
MAX_DEPTH = 64


@dataclass(frozen=True, slots=True)
class Literal:
    value: Any


@dataclass(frozen=True, slots=True)
class Call:
    name: str
    args: tuple[Node, ...]


@dataclass(frozen=True, slots=True)
class Member:
    target: Node
    name: str


@dataclass(frozen=True, slots=True)
class Index:
    target: Node
    index: Node


Node = Literal | Call | Member | Index


def is_expression(text: str) -> bool:
    """Whether the JSON string ``text`` is an expression (not a literal, not ``[[``-escaped)."""
    return len(text) >= 2 and text[0] == "[" and text[-1] == "]" and not text.startswith("[[")


def unescape(text: str) -> str:
    """A literal string as the template means it: ``[[x]`` → ``[x]``."""
    return text[1:] if text.startswith("[[") else text


def parse_string(text: str) -> Node:
    """The tree of a JSON string value: its expression, or a Literal of the (unescaped) string."""
    if not is_expression(text):
        return Literal(unescape(text))
    return parse(text[1:-1])


def parse(source: str) -> Node:
    """The tree of the expression ``source`` (without its brackets); TemplateError naming the position."""
    if len(source) > MAX_EXPRESSION_LENGTH:
        raise TemplateError(f"The template language expression is longer than {MAX_EXPRESSION_LENGTH} characters.")
    parser = _Parser(source)
    node = parser.expression(0)
    parser.skip_space()
    if parser.pos != len(source):
        parser.fail("unexpected text after the expression")
    return node


def calls_in(node: Node) -> list[Call]:
    """Every function call in the tree (for the static checks: unknown functions, arity)."""
    found: list[Call] = []
    stack: list[Node] = [node]
    while stack:
        current = stack.pop()
        if isinstance(current, Call):
            found.append(current)
            stack.extend(current.args)
        elif isinstance(current, Member):
            stack.append(current.target)
        elif isinstance(current, Index):
            stack.extend((current.target, current.index))
    return found


class _Parser:
    def __init__(self, source: str) -> None:
        self.source = source
        self.pos = 0

    def fail(self, problem: str) -> None:
        shown = self.source[:200].encode("unicode_escape").decode("ascii")
        raise TemplateError(
            f"The template language expression '{shown}' is not valid: {problem} at position {self.pos + 1}."
        )

    def skip_space(self) -> None:
        while self.pos < len(self.source) and self.source[self.pos] in " \t\r\n":
            self.pos += 1

    def peek(self) -> str:
        self.skip_space()
        return self.source[self.pos] if self.pos < len(self.source) else ""

    def expect(self, char: str) -> None:
        if self.peek() != char:
            self.fail(f"'{char}' expected")
        self.pos += 1

    def expression(self, depth: int) -> Node:
        if depth > MAX_DEPTH:
            self.fail("the expression is nested too deeply")
        node = self.primary(depth)
        while True:
            char = self.peek()
            if char == ".":
                self.pos += 1
                self.skip_space()
                node = Member(node, self.name())
            elif char == "[":
                self.pos += 1
                index = self.expression(depth + 1)
                self.expect("]")
                node = Index(node, index)
            else:
                return node

    def primary(self, depth: int) -> Node:
        char = self.peek()
        if char == "'":
            return Literal(self.string())
        if char.isdigit() or char == "-":
            return Literal(self.number())
        if char.isalpha() or char == "_":
            name = self.name(dotted=True)
            self.expect("(")
            args: list[Node] = []
            if self.peek() != ")":
                args.append(self.expression(depth + 1))
                while self.peek() == ",":
                    self.pos += 1
                    args.append(self.expression(depth + 1))
            self.expect(")")
            return Call(name, tuple(args))
        if char == "":
            self.fail("the expression ends too early")
        self.fail(f"unexpected character '{char}'")
        raise AssertionError  # fail raised

    def name(self, dotted: bool = False) -> str:
        start = self.pos
        while self.pos < len(self.source) and (
            self.source[self.pos].isalnum()
            or self.source[self.pos] in "_$"
            or (dotted and self.source[self.pos] == ".")
        ):
            self.pos += 1
        if start == self.pos:
            self.fail("a name expected")
        return self.source[start : self.pos]

    def string(self) -> str:
        self.pos += 1  # the opening quote
        parts: list[str] = []
        while True:
            end = self.source.find("'", self.pos)
            if end < 0:
                self.fail("the string is not closed")
            parts.append(self.source[self.pos : end])
            self.pos = end + 1
            if self.pos < len(self.source) and self.source[self.pos] == "'":
                parts.append("'")
                self.pos += 1
                continue
            return "".join(parts)

    def number(self) -> int | float:
        start = self.pos
        if self.source[self.pos] == "-":
            self.pos += 1
        while self.pos < len(self.source) and (self.source[self.pos].isdigit() or self.source[self.pos] == "."):
            self.pos += 1
        text = self.source[start : self.pos]
        try:
            return float(text) if "." in text else int(text)
        except ValueError:
            self.fail(f"'{text}' is not a number")
            raise AssertionError from None
