"""The closed set of outcome kinds of one run, and how they count; how a run reads against
the documented message (its grade)."""

from __future__ import annotations

import enum
import functools
import re

from harness.matching import TooSlow, bounded_find, find

__all__ = [
    "GRADES",
    "NOT_COUNTED",
    "SHOWS",
    "Grade",
    "Outcome",
    "grade",
    "holds_as_documented",
    "pattern_text",
    "signature_named",
    "type_named",
    "variable_parts",
    "whole_message",
]


class Outcome(str, enum.Enum):
    REPRODUCED = "reproduced"  # the entry's documented signature was raised
    # the variant's own expected error (its ``signature`` in entry.yaml: an error the
    # document lists as related, or the failure a dead end is expected to end in) was
    # raised; kept apart from ``reproduced``, never counted as the documented error
    RELATED = "related"
    OK = "ok"  # ran to the end and every postcondition held
    OTHER_ERROR = "other_error"  # a different exception (type, message, frame kept)
    WRONG_RESULT = "wrong_result"  # ran, but a postcondition failed
    UNSUPPORTED = "unsupported"  # the API/capability the variant needs is missing here
    SKIPPED = "skipped"  # a cell axis not available here (e.g. no CUDA)
    CRASHED = "crashed"  # signal, non-zero exit without a Python exception, or out of memory
    TIMEOUT = "timeout"  # ran past the wall-clock limit; its process group was killed
    ENV_FAILED = "env_failed"  # the environment could not be built or does not import

    def __str__(self) -> str:
        return self.value


# Never a success nor a failure: they say the cell could not be measured, and why.
NOT_COUNTED = frozenset({Outcome.UNSUPPORTED, Outcome.SKIPPED, Outcome.ENV_FAILED})


def holds_as_documented(kind: str, outcome: Outcome) -> bool | None:
    """Whether a run holds what its variant stands for (the nightly's cell states, the extra
    trials of flaky cells): a baseline reproduces the documented error, a workaround or a
    control ends ``ok``, a dead end does not end ``ok``; None: it measured nothing."""
    if outcome in NOT_COUNTED:
        return None
    if kind == "baseline":
        return outcome is Outcome.REPRODUCED
    if kind == "dead_end":
        return outcome is not Outcome.OK
    return outcome is Outcome.OK  # workaround, control


def signature_named(exc_type: str, exc_message: str, sig_type: str, sig_message: str) -> bool:
    """Whether a recorded exception (its qualified type name and message) matches a
    signature, judged on the host from names alone. The child matches on the live class
    (harness/inenv/child.py, ``signature_matches``), bases included; the host sees only the
    recorded name, so a base-class match cannot be told here. Used only to re-read
    records written before "related" existed (schema 2), or before the signature was declared.
    ``Exception`` and ``BaseException`` name every recorded type, as the child's match on
    the live class's bases reads them."""
    return type_named(exc_type, sig_type) and found_in(sig_message, exc_message)


# -- how a run reads against the documented message: its grade -------------------------------
# (docs/reference/outcomes-and-verdicts.md, "Documented messages, graded")


class Grade(str, enum.Enum):
    """How close a run came to the documented message, best first. The outcome says what
    happened; the grade is how the entry's claim "this message occurs" reads that run."""

    VERBATIM = "verbatim"  # torch's text contains the document's (the documented signature)
    # the document's fixed parts appear in order, with gaps only where it dropped what torch
    # formats in: sizes, shapes, numbers, names
    VARIABLE_PARTS = "variable-parts"
    # the entry declares torch's own wording of the same error (entry.yaml signature.reworded,
    # an expert's judgement with its reason), and this run raised it, under the documented type
    REWORDED = "reworded"
    OTHER_ERROR = "other-error"  # something else was raised, or the run crashed or timed out
    NOT_RAISED = "not-raised"  # the run raised nothing (ok, or a postcondition failed)

    def __str__(self) -> str:
        return self.value


GRADES: tuple[Grade, ...] = tuple(Grade)
# the grades that read as the documented error: a run at one of them "shows" it
SHOWS = frozenset({Grade.VERBATIM, Grade.VARIABLE_PARTS, Grade.REWORDED})
_NOT_COUNTED_VALUES = frozenset(o.value for o in NOT_COUNTED)
_NOTHING_RAISED = frozenset({Outcome.OK.value, Outcome.WRONG_RESULT.value})
# types a document may name for "any exception": every recorded type derives from them
_ANY_TYPE = frozenset({"Exception", "BaseException"})


def grade(
    outcome: str,
    exc_type: str,
    exc_message: str,
    signature_type: str,
    signature_message: str,
    reworded: str | None = None,
    reworded_type: str = "",
    whole: str = "",
) -> Grade | None:
    """The grade of one run against the documented signature (``signature_message`` a
    regular expression; ``reworded``: the pattern of the entry's declared rewording, and
    ``reworded_type`` the subclass of the documented type it is raised as, where it names
    one: a record keeps the exception's own class, not its bases), or
    None for a run that is not counted (unsupported, skipped, env_failed). ``whole``: the
    document's whole message as a pattern (``whole_message``) where the signature holds only
    its first sentence: a run is verbatim only where torch says all of it. The one rule
    that decides a grade; docs/reference/outcomes-and-verdicts.md says it in words."""
    if outcome in _NOT_COUNTED_VALUES:
        return None
    if outcome == Outcome.REPRODUCED.value:
        return _whole(exc_message, whole)
    if outcome in _NOTHING_RAISED:
        return Grade.NOT_RAISED
    if outcome != Outcome.OTHER_ERROR.value or not exc_type or not signature_type:
        return Grade.OTHER_ERROR  # related, crashed, timeout: not the documented error
    if reworded and reworded_type and type_named(exc_type, reworded_type):
        return Grade.REWORDED if found_in(reworded, exc_message) else Grade.OTHER_ERROR
    if not type_named(exc_type, signature_type):
        return Grade.OTHER_ERROR
    if found_in(signature_message, exc_message):
        return _whole(exc_message, whole)  # a record older than the signature, read now
    if variable_parts(signature_message, exc_message):
        return Grade.VARIABLE_PARTS
    if reworded and found_in(reworded, exc_message):
        return Grade.REWORDED
    return Grade.OTHER_ERROR


def _whole(exc_message: str, whole: str) -> Grade:
    """The grade of a run whose message holds the signature (the document's first sentence):
    verbatim where it holds the document's whole message too (or the document says no more,
    or the record kept no message), variable-parts where it holds the whole message's words
    with what torch formats in, else reworded: torch said the first sentence and the rest in
    its own words."""
    if not whole or not exc_message or found_in(whole, exc_message):
        return Grade.VERBATIM
    return Grade.VARIABLE_PARTS if variable_parts(whole, exc_message) else Grade.REWORDED


def whole_message(documented: str, signature_type: str, signature_message: str) -> str:
    """The document's whole message (entry.yaml ``origin.message``, its ``Type: `` prefix
    dropped) as a pattern for ``grade``'s ``whole``, or "" where the signature already reads
    all of it (the document says one sentence, or none is kept)."""
    text = documented.strip()
    prefix = signature_type.rsplit(".", 1)[-1] + ":"
    head, _, rest = text.partition(":")
    if head.rsplit(".", 1)[-1] + ":" == prefix:
        text = rest.strip()
    found = find(signature_message, text) if text else None
    if not text or (found is not None and found.group(0).strip() == text):
        return ""
    # a format placeholder the document kept from the source ("{type(model).__name__}") is
    # a part it dropped: torch's message fills it in (variable-parts, never verbatim)
    text = _PLACEHOLDER.sub("…", text)
    return re.escape(text).replace("\\ ", " ")


_PLACEHOLDER = re.compile(r"`?\{[^{}\n]{1,200}\}`?")


def found_in(pattern: str, text: str) -> bool:
    """Whether ``pattern`` (an entry's, checked by the loader) is found in ``text`` through
    the one bounded runner (harness/matching.py): a search past its time bound finds
    nothing."""
    return find(pattern, text) is not None


def type_named(exc_type: str, sig_type: str) -> bool:
    """Whether a recorded type is the documented one, by name (as ``signature_named``), or
    the document names the base of every exception."""
    return (
        sig_type in _ANY_TYPE
        or exc_type == sig_type
        or exc_type.rsplit(".", 1)[-1] == sig_type.rsplit(".", 1)[-1]
    )


# What torch formats into a message at run time, and a document drops: one such part in a
# gap between two of the document's words. Plain words are never one (other words are a
# rewording, not a dropped part), except a class name after its preposition ("for Net").
_VARIABLE_PART = r"""(?:
      '[^'\n]{0,200}' | "[^"\n]{0,200}" | `[^`\n]{0,200}`           # quoted names, values
    | \([^()\n]{0,200}\) | \[[^\[\]\n]{0,200}\] | <[^<>\n]{0,200}>    # sizes, shapes, reprs
    | [-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?                           # numbers
    | [A-Za-z_]\w*(?:(?:\.|::)\w+)+                                 # torch.Size, aten::add
    | (?=[A-Za-z_]*[\d_])[A-Za-z_]\w*                                # layer1, Addmm0, _x
    | [A-Za-z][a-z]+[A-Z]\w*                                         # AdamW, ReLU, getItem
    | (?:cuda|cpu|mps|meta|xla)(?::\d+)?                             # devices
    | (?:for|of|in|at|on|named|called|from|to|with)\s+[A-Z]\w*       # for Net, of Linear
)"""
_GAP = rf"\s*(?:{_VARIABLE_PART}[\s,=:]*){{0,8}}"
_TOKEN = re.compile(r"\w+|[^\w\s…]")
_MAX_CHARS = 10_000  # a traceback-sized message is read from its start


_QUANTIFIER = re.compile(r"(?:[*+?]|\{\d*,?\d*\})\??")


def pattern_text(pattern: str) -> str:
    """A signature's message pattern (a regular expression) as a reader would write the
    message: escapes dropped ('unscale_\\(\\)' -> 'unscale_()'), anchors dropped, and
    every part that stands for varying text ('\\w+', '.*', '[a-z]+') shown as '…'."""
    out: list[str] = []
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        varying = False
        if c == "\\" and i + 1 < n:
            nxt = pattern[i + 1]
            i += 2
            if nxt.isalnum():  # a class (\w, \d, \s) or an assertion (\b, \A)
                if nxt in "bBAZz":
                    continue
                varying = True
            else:
                out.append(nxt)
                continue
        elif c == "[":
            end = pattern.find("]", i + 2)
            i = n if end < 0 else end + 1
            varying = True
        elif c == "." and i + 1 < n and _QUANTIFIER.match(pattern, i + 1):
            i += 1
            varying = True
        elif c in "^$" and (i == 0 or i == n - 1):
            i += 1
            continue
        else:
            out.append(c)
            i += 1
            continue
        m = _QUANTIFIER.match(pattern, i)
        if m:
            i = m.end()
        if varying and not (out and out[-1] == "…"):
            out.append("…")
    return "".join(out)


def variable_parts(signature_message: str, exc_message: str) -> bool:
    """Whether ``exc_message`` holds the documented message's fixed parts in order, with
    gaps only where the document dropped a variable part (``_VARIABLE_PART``); where the
    signature itself allows anything (``.*``: '…' in its text) any gap is allowed."""
    pattern = _variable_parts_pattern(signature_message)
    if pattern is None:
        return False
    try:
        return bounded_find(pattern, exc_message, chars=_MAX_CHARS) is not None
    except TooSlow:
        return False


@functools.lru_cache(maxsize=4096)
def _variable_parts_pattern(signature_message: str) -> re.Pattern[str] | None:
    segments = []
    for segment in pattern_text(signature_message).split("…"):
        tokens = _TOKEN.findall(segment)
        if tokens:
            segments.append(_GAP.join(_literal(t) for t in tokens))
    if not segments:
        return None
    return re.compile("(?s:.*?)".join(segments), re.VERBOSE)


def _literal(token: str) -> str:
    # a word matches a whole word: "a" is not the start of "ab"
    text = re.escape(token).replace(" ", r"\ ")
    return rf"(?<!\w){text}(?!\w)" if token[0].isalnum() or token[0] == "_" else text
