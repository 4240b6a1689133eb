"""Catastrophic backtracking in a signature regex, found without running it.

A backtracking engine (Python's ``re``, the browser's ``RegExp``) takes time exponential in
the text only where a repetition can consume one string in more than one way: ``(a+)+``,
``(a|a)*``, ``(a|ab)*``, ``(\\w+\\s?)+``. This module reads the pattern's parse tree
(``re._parser``, what ``re.compile`` itself builds) and refuses a pattern where, inside a
repeated part, the next character does not decide the way:

- a repeated part that can match nothing (``(a*)*``);
- inside a repeated part, a variable repeat (``+``, ``*``, ``?``, ``{m,n}``) whose first
  characters overlap what may follow it there, the next iteration included (``(a+)+``,
  ``(a?a)+``; ``(?:[A-Za-z_]\\w*\\.)*`` is fine: ``\\w`` never matches the ``.``);
- inside a repeated part, alternatives that can start with the same character or match
  nothing (``(a|ab)*``, ``(ab|ab)*``, ``(a|\\w)*``; a class whose members overlap, as
  ``re`` folds single-character alternatives into one class and the browser does not).

The check is sound for exponential backtracking (every such pattern has a repetition
ambiguous in that way) and conservative (``(ab|ac)*`` is refused though each iteration is
decided by its second character). Overlap is decided over a probe alphabet: the first
0x300 code points, the pattern's own literal characters and a few from further on, with
case folded.

Polynomial backtracking (``a.*b.*c`` on a long text without ``c``) is counted: on one path
through the pattern, the unbounded repetitions each followed by what they match themselves
(``x.*x.*x.*x.*y`` has four; a search tries every start, so it takes the text's length to
the fifth power). More than ``POLYNOMIAL_MOST`` is refused (such a signature passed
and one stored message of 2,000 characters made ``report`` run past 120 s); what remains is
bounded where text is matched, by the text's size and a time per match (harness/matching.py).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any

try:  # Python 3.11+: the parser re.compile uses
    from re import _parser as _sre  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover - Python 3.10
    import sre_parse as _sre  # type: ignore[no-redef]

__all__ = ["POLYNOMIAL_MOST", "backtracking_problem", "polynomial_degree"]

POLYNOMIAL_MOST = 2

_C = _sre  # the opcode names live on the parser module (re._constants re-exported)
_MAXREPEAT = _C.MAXREPEAT
_REPEATS = {_C.MAX_REPEAT, _C.MIN_REPEAT}
_EXTRA = "\u00e9\u0130\u0660\u1680\u2028\u3000\u4e00\uff10\U0001d7ce"
_CATEGORY = {
    "CATEGORY_DIGIT": r"\d",
    "CATEGORY_NOT_DIGIT": r"\D",
    "CATEGORY_SPACE": r"\s",
    "CATEGORY_NOT_SPACE": r"\S",
    "CATEGORY_WORD": r"\w",
    "CATEGORY_NOT_WORD": r"\W",
    "CATEGORY_LINEBREAK": r"\n",
    "CATEGORY_NOT_LINEBREAK": r"[^\n]",
}


class _Ambiguous(Exception):
    pass


class _Reader:
    def __init__(self, pattern: str) -> None:
        self.pattern = pattern
        self.alphabet = frozenset(chr(c) for c in range(0x300)) | frozenset(_EXTRA) | set(pattern)

    # -- the characters a node may start with ----------------------------------------------
    def item_set(self, op: Any, av: Any) -> frozenset[str]:
        if op is _C.LITERAL:
            return frozenset({chr(av)})
        if op is _C.NOT_LITERAL:
            return self.alphabet - {chr(av)}
        if op is _C.ANY:
            return self.alphabet
        if op is _C.RANGE or str(op).startswith("RANGE"):
            lo, hi = av
            return frozenset(c for c in self.alphabet if lo <= ord(c) <= hi)
        if op is _C.CATEGORY:
            rx = re.compile(_CATEGORY.get(str(av), r"[\s\S]"))
            return frozenset(c for c in self.alphabet if rx.fullmatch(c))
        if op is _C.IN:
            return self.class_set(av)
        return self.alphabet  # anything unforeseen: it may start with anything

    def class_set(self, items: Sequence[tuple[Any, Any]]) -> frozenset[str]:
        negate = any(op is _C.NEGATE for op, _ in items)
        chars: set[str] = set()
        for op, av in items:
            if op is not _C.NEGATE:
                chars |= self.item_set(op, av)
        return self.alphabet - chars if negate else frozenset(chars)

    def first(self, items: Sequence[tuple[Any, Any]]) -> frozenset[str]:
        out: set[str] = set()
        for op, av in items:
            out |= self.node_first(op, av)
            if not self.node_nullable(op, av):
                break
        return frozenset(out)

    def node_first(self, op: Any, av: Any) -> frozenset[str]:
        if op in _REPEATS or op is getattr(_C, "POSSESSIVE_REPEAT", None):
            return self.first(av[2]) if av[1] else frozenset()
        if op is _C.SUBPATTERN:
            return self.first(av[3])
        if op is getattr(_C, "ATOMIC_GROUP", None):
            return self.first(av)
        if op is _C.BRANCH:
            return frozenset().union(*(self.first(alt) for alt in av[1]))
        if op is _C.GROUPREF_EXISTS:
            return self.first(av[1]) | (self.first(av[2]) if av[2] else frozenset())
        if op in (_C.AT, _C.ASSERT, _C.ASSERT_NOT):
            return frozenset()
        if op is _C.GROUPREF:
            return self.alphabet
        return self.item_set(op, av)

    def nullable(self, items: Iterable[tuple[Any, Any]]) -> bool:
        return all(self.node_nullable(op, av) for op, av in items)

    def node_nullable(self, op: Any, av: Any) -> bool:
        if op in _REPEATS or op is getattr(_C, "POSSESSIVE_REPEAT", None):
            return av[0] == 0 or self.nullable(av[2])
        if op is _C.SUBPATTERN:
            return self.nullable(av[3])
        if op is getattr(_C, "ATOMIC_GROUP", None):
            return self.nullable(av)
        if op is _C.BRANCH:
            return any(self.nullable(alt) for alt in av[1])
        if op is _C.GROUPREF_EXISTS:
            return self.nullable(av[1]) or av[2] is None or self.nullable(av[2])
        return op in (_C.AT, _C.ASSERT, _C.ASSERT_NOT, _C.GROUPREF)

    # -- the walk ------------------------------------------------------------------------------
    def seq(self, items: Sequence[tuple[Any, Any]], after: frozenset[str], in_loop: bool) -> None:
        for i, (op, av) in enumerate(items):
            rest = items[i + 1 :]
            follow = self.first(rest) | (after if self.nullable(rest) else frozenset())
            self.node(op, av, follow, in_loop)

    def node(self, op: Any, av: Any, follow: frozenset[str], in_loop: bool) -> None:
        if op in _REPEATS:
            lo, hi, body = av
            start = self.first(body)
            if hi >= 2 or hi == _MAXREPEAT:
                if self.nullable(body):
                    raise _Ambiguous(
                        "a repeated part can match nothing, so it repeats any number of ways"
                    )
                if in_loop and lo != hi and _overlap(start, follow):
                    raise _Ambiguous("a repetition inside a repetition (nested quantifiers)")
                self.seq(body, start | follow, True)
            else:
                if in_loop and lo != hi and _overlap(start, follow):
                    raise _Ambiguous(
                        "an optional part inside a repetition, followed by what it matches itself"
                    )
                self.seq(body, follow, in_loop)
        elif op is _C.SUBPATTERN:
            self.seq(av[3], follow, in_loop)
        elif op is _C.BRANCH:
            alts = av[1]
            if in_loop:
                if any(self.nullable(a) for a in alts):
                    raise _Ambiguous(
                        "alternatives where one matches the start of another (or nothing) "
                        "inside a repetition"
                    )
                firsts = [self.first(a) for a in alts]
                for i, a in enumerate(firsts):
                    for b in firsts[i + 1 :]:
                        if _overlap(a, b):
                            raise _Ambiguous(
                                "alternatives that start with the same character inside a "
                                "repetition"
                            )
            for alt in alts:
                self.seq(alt, follow, in_loop)
        elif op is _C.IN and in_loop:
            members = [self.item_set(o, a) for o, a in av if o is not _C.NEGATE]
            if not any(o is _C.NEGATE for o, _ in av):
                for i, a in enumerate(members):
                    for b in members[i + 1 :]:
                        if a & b:  # case folded by re itself where it ignores case
                            raise _Ambiguous(
                                "alternatives (or class members) that match the same character "
                                "inside a repetition"
                            )
        elif op in (_C.ASSERT, _C.ASSERT_NOT):
            self.seq(av[1], frozenset(), in_loop)
        elif op is _C.GROUPREF_EXISTS:
            self.seq(av[1], follow, in_loop)
            if av[2]:
                self.seq(av[2], follow, in_loop)
        # ATOMIC_GROUP and possessive repeats never backtrack into themselves


def _overlap(a: frozenset[str], b: frozenset[str]) -> bool:
    if a & b:
        return True
    fold = {c.casefold() for c in a}
    return any(c.casefold() in fold for c in b)


def _degree(r: _Reader, items: Sequence[tuple[Any, Any]], after: frozenset[str]) -> int:
    total = 0
    for i, (op, av) in enumerate(items):
        rest = items[i + 1 :]
        follow = r.first(rest) | (after if r.nullable(rest) else frozenset())
        total += _node_degree(r, op, av, follow)
    return total


def _node_degree(r: _Reader, op: Any, av: Any, follow: frozenset[str]) -> int:
    if op in _REPEATS:
        lo, hi, body = av
        own = hi == _MAXREPEAT and lo != hi and _overlap(r.first(body), follow)
        return int(own) + _degree(r, body, follow)
    if op is _C.SUBPATTERN:
        return _degree(r, av[3], follow)
    if op is _C.BRANCH:
        return max((_degree(r, alt, follow) for alt in av[1]), default=0)
    return 0


def polynomial_degree(pattern: str) -> int:
    """On the worst path through ``pattern``, how many unbounded repetitions are each
    followed by what they match themselves (the pattern compiles)."""
    reader = _Reader(pattern)
    return _degree(reader, list(_sre.parse(pattern)), frozenset())


def backtracking_problem(pattern: str, polynomial_most: int | None = POLYNOMIAL_MOST) -> str | None:
    """Why ``pattern`` may backtrack catastrophically, or None. The pattern compiles.
    ``polynomial_most=None``: exponential backtracking alone (a knowledge base's own regex,
    kept as its data and run only through harness/matching.py's bound)."""
    reader = _Reader(pattern)
    try:
        reader.seq(list(_sre.parse(pattern)), frozenset(), False)
    except _Ambiguous as exc:
        return str(exc)
    if polynomial_most is None:
        return None
    degree = _degree(reader, list(_sre.parse(pattern)), frozenset())
    if degree > polynomial_most:
        return (
            f"{degree} unbounded repetitions in a row, each followed by what it matches itself "
            f"(polynomial backtracking: a search takes the text's length to the power "
            f"{degree + 1}); at most {polynomial_most}: make a repeated part stop where the "
            "next one starts (e.g. [^x]* before x)"
        )
    return None
