"""`harness new DOC`: an error document -> a scaffolded entry folder repros/<id>/.

Three document formats (docs/reference/entry-yaml.md, /work/shared/KB-FORMATS.md):
  markdown       "# Type: message", **ID:** bullets, ## Version Compatibility, ## Workarounds,
                 ## Dead Ends
  scraped        "<org>/<repo> · error · <Type>", Error message, Solutions, Example fix,
                 Related errors
  deadends-json  the deadends.dev JSON record (fix_success_rate, workarounds[].success_rate,
                 dead_ends[].fail_rate)

Parsing is pure (text in, Scaffold out); writing refuses to touch an existing folder. A
Markdown or scraped document is kept verbatim (source.md, document.md). A JSON record's
prose is NOT copied: entry.yaml keeps its facts (id, link, signature, regex, version range,
rates, review status), document.md the link and the marker blocks, and each variant's
description is a TODO for whoever writes the reproducer, in their own words.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.errors import HarnessError
from harness.jsonin import JsonRefused, strict_loads
from harness.paths import part_problem
from harness.report.writeback import BLOCKS, OPTIONAL_BLOCKS
from harness.spec.backtracking import backtracking_problem
from harness.spec.yaml_nodes import MAX_DEPTH

__all__ = [
    "Claimed",
    "DocumentError",
    "FORMATS",
    "PLACEHOLDER",
    "Scaffold",
    "detect_format",
    "message_pattern",
    "split_type",
    "parse_document",
    "write_scaffold",
]

FORMATS = ("markdown", "scraped", "deadends-json")
TODO = "TODO"
KEPT_RECORD = "kb-record.json"  # a JSON record, byte for byte, beside entry.yaml
_TYPE_RE = re.compile(r"^(?:[A-Za-z_][\w]*\.)*[A-Z]\w*(?:Error|Exception|Warning|Exit|Interrupt)$")
_SPECIAL = set("\\.^$*+?{}[]|()")
_SLUG_RE = re.compile(r"[^a-z0-9]+")


class DocumentError(HarnessError):
    """A document `new` cannot read: names the file and the section it could not find."""

    def __init__(self, path: str | Path, message: str, line: int | None = None) -> None:
        super().__init__(path, line, message)


@dataclass(frozen=True)
class Claimed:
    """One recommendation of the document: a variant to write."""

    name: str  # variant name, e.g. "workaround1"
    kind: str  # workaround | dead_end
    ref: str  # "workaround 1", "dead end 2", "solution 3", "example fix"
    rate: float | None  # claimed success (workaround) or failure (dead end) rate
    text: str  # the document's words (Markdown, scraped) or a TODO (JSON)
    # what the claim means, proposed from the document's words (propose_kind): a dead end's
    # documented failure, a workaround's promise (fix or diagnostic); and its condition
    meaning_kind: str | None = None
    condition: str | None = None
    # version advice read from its words ("pin torch<2.1", "downgrade to lightning 1.9"):
    # the PEP 508 requirements its variant lists under requires: (version_advice)
    requires: tuple[str, ...] = ()


@dataclass(frozen=True)
class Scaffold:
    format: str
    entry_id: str
    title: str
    exc_type: str
    message: str  # regular expression of the message
    type_named: bool  # False: the document names no exception type ("Exception" is a guess)
    verification: str | None = None
    fix_rate: float | None = None
    version_table: tuple[tuple[str, str, str | None, str | None], ...] = ()
    conditions: tuple[str, ...] = ()
    claims: tuple[Claimed, ...] = ()
    origin: dict[str, Any] = field(default_factory=dict)
    source_text: str = ""  # source.md
    document_text: str = ""  # document.md without its marker blocks
    # a JSON record's bytes as read, kept beside entry.yaml (origin.record): what
    # `corrections` edits (b"": nothing to keep)
    kept: bytes = b""


# -- helpers ------------------------------------------------------------------------------


def escape(text: str) -> str:
    """A regular expression matching ``text`` literally, escaping only what is special
    (re.escape also escapes spaces, which makes entry.yaml unreadable)."""
    return "".join("\\" + c if c in _SPECIAL else c for c in text)


def slugify(text: str, words: int = 8) -> str:
    return "-".join(_SLUG_RE.sub(" ", text.lower()).split()[:words]) or "entry"


def split_type(text: str) -> tuple[str, str, bool]:
    """'RuntimeError: msg' -> ('RuntimeError', 'msg', True); a message without a class
    name in front -> ('Exception', text, False)."""
    head, sep, rest = text.partition(": ")
    if sep and _TYPE_RE.match(head.strip()):
        return head.strip(), rest.strip(), True
    return "Exception", text.strip(), False


# a sentence ends at a period before a capital, a quote, a backtick or a placeholder (Lightning
# writes "... in v2.0.0. `{type(model).__name__}` implements ..."), not after an abbreviation
_SENTENCE_END = re.compile(r"(?<!\be\.g)(?<!\bi\.e)(?<!\betc)(?<!\bvs)\.\s+(?=[A-Z`'\"{<(\[])")
# the document's own placeholders for what a release prints there: a format field
# ({type(model).__name__}, {name}) or a bracketed word (<device>, <module name>); a repr such as
# <class 'x.Y'> is text, not a placeholder
PLACEHOLDER = re.compile(r"\{[^{}\s][^{}]*\}|<[a-z_][a-z0-9_ ]*>")


def _first_sentence(message: str) -> str:
    """The error itself, without the advice a message often appends ('... gradient.
    Ensure loss.backward() ...' -> '... gradient'; links and class names that differ between
    releases come after it), and without a final period."""
    m = _SENTENCE_END.search(message)
    cut = message[: m.start()] if m else message
    return cut.rstrip().rstrip(".")


def message_pattern(message: str) -> str:
    """The signature's pattern for a message as a document writes it: its text literally
    (``escape``), each of its placeholders a variable part (what a release prints there)."""
    parts: list[str] = []
    last = 0
    for m in PLACEHOLDER.finditer(message):
        parts += [escape(message[last : m.start()]), ".+?" if m.end() < len(message) else ".+"]
        last = m.end()
    parts.append(escape(message[last:]))
    return "".join(parts)


# the axes a version range may name (domain.CLAIM_PACKAGES); another goes to conditions
_AXIS_NAMES = ("torch", "pytorch", "lightning", "pytorch-lightning", "pytorch_lightning", "python")


def _on_an_axis(spec: str) -> bool:
    m = re.match(r"^\s*([A-Za-z_][\w.-]*)", spec)
    return bool(m) and m.group(1).lower() in _AXIS_NAMES


def _axis_note(spec: str) -> str:
    return (
        f"{spec}: the document's version range, on an axis the matrix does not have (torch, "
        "lightning, python): kept as a condition, not judged"
    )


def _percent(text: str, path: str | Path, what: str, line: int | None = None) -> float:
    """A document's "NN%" as a fraction 0..1; a rate outside 0-100% (150%, -5%, a number of
    400 digits) is refused with its line, as the loader would refuse the entry."""
    try:
        value = float(text)
    except (ValueError, OverflowError):
        value = math.nan
    if not math.isfinite(value) or not 0 <= value <= 100:
        raise DocumentError(
            path, f"{what} {text[:40]}% is not a rate between 0% and 100%", line=line
        )
    return round(value / 100, 4)


def _markers(fmt: str = "") -> str:
    """The write-back blocks of a new document; a Markdown entry's (the seeds' format) also
    its suggested corrections."""
    names = (*BLOCKS, *(OPTIONAL_BLOCKS if fmt == "markdown" else ()))
    return "".join(
        f"<!-- harness:{name}:begin -->\n<!-- harness:{name}:end -->\n" for name in names
    )


# -- format 1: the Markdown entry ---------------------------------------------------------


def _md_sections(text: str) -> dict[str, tuple[int, list[str]]]:
    sections: dict[str, tuple[int, list[str]]] = {}
    current = None
    for number, line in enumerate(text.splitlines(), 1):
        if line.startswith("## "):
            current = line[3:].strip().lower()
            sections[current] = (number, [])
        elif current is not None:
            sections[current][1].append(line)
    return sections


def parse_markdown(text: str, path: str | Path) -> Scaffold:
    title = _md_title(text.splitlines(), path)
    exc_type, message, named = split_type(title)
    bullets = {
        m.group(1).lower(): m.group(2).strip().strip("`")
        for m in re.finditer(r"^-\s+\*\*([^*:]+):\*\*\s*(.+)$", text, re.MULTILINE)
    }
    if "id" not in bullets:
        raise DocumentError(path, "no '- **ID:** <domain>/<slug>' bullet")
    sections = _md_sections(text)
    if "workarounds" not in sections:
        raise DocumentError(path, "no '## Workarounds' section")
    rows = _md_version_rows(sections, path)
    off_axis = [r[0] for r in rows if not _on_an_axis(r[0])]
    claims = _md_workarounds(sections["workarounds"], path) + _md_dead_ends(sections, path)
    conditions: tuple[str, ...] = ()
    if "root cause" in sections:
        cause = " ".join(ln.strip() for ln in sections["root cause"][1] if ln.strip())
        conditions = (cause,) if cause else ()
    conditions += tuple(_axis_note(spec) for spec in off_axis)
    origin = {"format": "markdown", "id": bullets["id"]}
    for key in ("domain", "category"):
        if key in bullets:
            origin[key] = bullets[key]
    origin["message"] = title
    first = _first_sentence(message)
    return Scaffold(
        format="markdown",
        entry_id=bullets["id"],
        title=f"{exc_type}: {first}" if named else first,
        exc_type=exc_type,
        message=message_pattern(first),
        type_named=named,
        verification=bullets.get("verification"),
        fix_rate=_md_fix_rate(bullets, path, _line_of(text, r"^-\s+\*\*Fix Rate:\*\*")),
        version_table=tuple(r for r in rows if _on_an_axis(r[0])),
        conditions=conditions,
        claims=tuple(claims),
        origin=origin,
        source_text=text,
        document_text=text,
    )


def _md_title(lines: list[str], path: str | Path) -> str:
    """The document's '# <ExceptionType>: <message>' line, less its '# '."""
    title_line = next((ln for ln in lines if ln.startswith("# ")), None)
    if title_line is None:
        raise DocumentError(path, "no title line '# <ExceptionType>: <message>'")
    return title_line[2:].strip()


def _line_of(text: str, pattern: str) -> int | None:
    """The number of the first line matching ``pattern`` (case-insensitive), or None."""
    for number, line in enumerate(text.splitlines(), 1):
        if re.match(pattern, line, re.IGNORECASE):
            return number
    return None


def _md_fix_rate(bullets: dict[str, str], path: str | Path, line: int | None) -> float | None:
    """The '- **Fix Rate:** NN%' bullet as a fraction, or None where there is none."""
    if "fix rate" not in bullets:
        return None
    m = re.match(r"(-?\d+(?:\.\d+)?)\s*%", bullets["fix rate"])
    if not m:
        raise DocumentError(path, f"Fix Rate {bullets['fix rate']!r} is not a percentage")
    return _percent(m.group(1), path, "Fix Rate", line=line)


def _md_version_rows(
    sections: dict[str, tuple[int, list[str]]], path: str | Path
) -> list[tuple[str, str, str | None, str | None]]:
    """The Version Compatibility table's rows (spec, status, introduced, deprecated), every
    one: those on an axis the matrix lacks become conditions."""
    rows: list[tuple[str, str, str | None, str | None]] = []
    if "version compatibility" not in sections:
        return rows
    start, body = sections["version compatibility"]
    for offset, line in enumerate(body, start + 1):
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 2 or not re.match(r"^[A-Za-z_][\w.-]*\s*[<>=!~]", cells[0]):
            continue  # header, separator or prose
        if len(cells) != 4:
            raise DocumentError(path, "a Version Compatibility row needs 4 cells", line=offset)
        intro, dep = (None if c in ("—", "-", "") else c for c in cells[2:4])
        rows.append((cells[0].replace(" ", ""), cells[1], intro, dep))
    return rows


def _md_workarounds(section: tuple[int, list[str]], path: str | Path) -> list[Claimed]:
    """The numbered '1. **...** (NN% success)' items of ## Workarounds (at least one)."""
    start, body = section
    claims = []
    for number, line in enumerate(body, start + 1):
        m = re.match(r"^(\d+)\.\s+\*\*(.+?)\*\*\s*(?:\((-?\d+(?:\.\d+)?)%\s*success\))?", line)
        if m:
            n = int(m.group(1))
            what = f"workaround {n}'s success rate"
            rate = _percent(m.group(3), path, what, number) if m.group(3) else None
            claims.append(
                Claimed(
                    f"workaround{n}",
                    "workaround",
                    f"workaround {n}",
                    rate,
                    m.group(2),
                    propose_kind("workaround", m.group(2)),
                    _md_condition(line),
                )
            )
    if not claims:
        raise DocumentError(
            path, "## Workarounds has no numbered '1. **...** (NN% success)' item", line=start
        )
    return claims


def _md_condition(text: str) -> str | None:
    """A Markdown item's condition ("only when ...", "only applicable ..."), or None."""
    found = _CONDITION.search(text)
    return " ".join(found.group(1).split())[:300] if found else None


def _md_dead_ends(sections: dict[str, tuple[int, list[str]]], path: str | Path) -> list[Claimed]:
    """The '- **...** (NN% fail)' items of ## Dead Ends, numbered in order."""
    claims: list[Claimed] = []
    if "dead ends" not in sections:
        return claims
    start, body = sections["dead ends"]
    for number, line in enumerate(body, start + 1):
        m = re.match(r"^[-*]\s+\*\*(.+?)\*\*.*?(?:\((-?\d+(?:\.\d+)?)%\s*fail\))?\s*$", line)
        if m:
            n = len(claims) + 1
            what = f"dead end {n}'s failure rate"
            rate = _percent(m.group(2), path, what, number) if m.group(2) else None
            claims.append(
                Claimed(
                    f"deadend{n}",
                    "dead_end",
                    f"dead end {n}",
                    rate,
                    m.group(1),
                    propose_kind("dead_end", line),
                    _md_condition(line),
                )
            )
    return claims


# -- format 2: the scraped error page -----------------------------------------------------

_SCRAPED_SECTIONS = (
    "Error message",
    "What it means",
    "Source",
    "Solutions",
    "Example fix",
    "When it happens",
    "Related errors",
)
_DOMAINS = {"pytorch-lightning": "lightning", "lightning": "lightning", "pytorch": "pytorch"}


def _scraped_sections(lines: list[str]) -> dict[str, tuple[int, list[str]]]:
    """The page's sections by title: the line each starts on and its lines."""
    sections: dict[str, tuple[int, list[str]]] = {}
    current = None
    for number, line in enumerate(lines[1:], 2):
        if line.strip() in _SCRAPED_SECTIONS and line == line.strip():
            current = line.strip()
            if current not in sections:  # a page may repeat a tail; the first one counts
                sections[current] = (number, [])
            else:
                current = None
        elif current is not None:
            sections[current][1].append(line)
    return sections


def _scraped_origin(sections: dict[str, tuple[int, list[str]]]) -> dict[str, Any]:
    """Where the page says the error is thrown and which errors it lists as related."""
    found: dict[str, Any] = {}
    if "Source" in sections:
        thrown = next(
            (
                ln.strip()[len("Thrown at ") :]
                for ln in sections["Source"][1]
                if ln.strip().startswith("Thrown at ")
            ),
            None,
        )
        if thrown:
            found["thrown_at"] = thrown
    if "Related errors" in sections:
        related = [ln.strip().lstrip("•").strip() for ln in sections["Related errors"][1]]
        related = [r for r in related if r and not r.startswith("AI-assisted analysis")]
        if related:
            found["related"] = related
    return found


def parse_scraped(text: str, path: str | Path) -> Scaffold:
    lines = text.splitlines()
    head = re.match(r"^([\w.-]+)/([\w.-]+) · error · ([\w.]+)\s*$", lines[0] if lines else "")
    if not head:
        raise DocumentError(path, "no first line '<org>/<repo> · error · <ExceptionType>'", 1)
    org, repo, exc_type = head.groups()
    sections = _scraped_sections(lines)
    for required in ("Error message", "Solutions"):
        if required not in sections:
            raise DocumentError(path, f"no '{required}' section")
    message = next((ln.strip() for ln in sections["Error message"][1] if ln.strip()), "")
    if not message:
        raise DocumentError(
            path, "the 'Error message' section is empty", sections["Error message"][0]
        )
    claims: list[Claimed] = []
    start, body = sections["Solutions"]
    for line in body:
        m = re.match(r"^(\d+)\.\s+(.+)$", line.strip())
        if m:
            n = int(m.group(1))
            claims.append(Claimed(f"solution{n}", "workaround", f"solution {n}", None, m.group(2)))
    if not claims:
        raise DocumentError(path, "the 'Solutions' section has no numbered item", start)
    if "Example fix" in sections and any(ln.strip() for ln in sections["Example fix"][1]):
        claims.append(
            Claimed("example-fix", "workaround", "example fix", None, "the document's Example fix")
        )
    origin: dict[str, Any] = {
        "format": "scraped",
        "domain": _DOMAINS.get(repo.lower(), repo.lower()),
    }
    origin.update(_scraped_origin(sections))
    m = re.search(r"Data as JSON: (\S+?)\.?\s", text)
    if m:
        origin["url"] = m.group(1)
    conditions = []
    if "When it happens" in sections:
        for line in sections["When it happens"][1]:
            if line.strip().startswith(("Trigger:", "Common situations:")):
                conditions.append(line.strip())
    verification = "ai_generated" if "AI-assisted analysis" in text else None
    domain = origin["domain"]
    origin["message"] = message
    return Scaffold(
        format="scraped",
        entry_id=f"{domain}/{slugify(message)}",
        title=f"{exc_type}: {message}",
        exc_type=exc_type,
        message=message_pattern(_first_sentence(message)),
        type_named=True,
        verification=verification,
        claims=tuple(claims),
        conditions=tuple(conditions),
        origin=origin,
        source_text=text,
        document_text=text,
    )


# -- format 3: the deadends.dev JSON record -----------------------------------------------


def _get(data: Any, dotted: str, path: str | Path, kinds: type | tuple[type, ...]) -> Any:
    value = data
    for part in dotted.split("."):
        if not isinstance(value, dict) or part not in value:
            raise DocumentError(path, f"no '{dotted}' field")
        value = value[part]
    if (
        not isinstance(value, kinds)
        or isinstance(value, bool)
        and bool not in (kinds if isinstance(kinds, tuple) else (kinds,))
    ):
        raise DocumentError(path, f"'{dotted}' must be {kinds}, got {value!r}")
    return value


def _rate(value: Any, path: str | Path, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
        raise DocumentError(path, f"'{what}' must be a fraction between 0 and 1, got {value!r}")
    return float(value)


# JSON structure outside strings: a string token is skipped whole, a bracket counted
# a string unrolled (no alternation repeated per character: sre kept a frame per character of
# a 50 MB string, 6 GB), or a bracket
_JSON_NESTING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"?|[\[\]{}]')


def _json_depth_within(text: str, most: int) -> int | None:
    """The line of the first bracket nested deeper than ``most`` in JSON ``text``, or None:
    json.loads recurses once a level (100,000 levels: a RecursionError), so the depth is
    bounded first, as YAML's is (harness/spec/yaml_nodes.py)."""
    depth = 0
    for token in _JSON_NESTING.finditer(text):
        bracket = token.group()
        if bracket in "[{":
            depth += 1
            if depth > most:
                return text.count("\n", 0, token.start()) + 1
        elif bracket in "]}":
            depth -= 1
    return None


def _link(text: str, url: str) -> str:
    """A Markdown link to ``url`` where it is a public http(s) URL; else the text and the URL
    as code, never a link (a ``javascript:`` URL was written as one)."""
    from harness.catalogue.kbrecord import _safe_url  # kbrecord reads records, as new does

    if _safe_url(url):
        return f"[{text}]({url})"
    return f"{text} (its url `{url[:200].replace('`', chr(39))}` is not a public http(s) URL: not linked)"


def parse_deadends_json(text: str, path: str | Path) -> Scaffold:
    data = _json_object(text, path)
    doc_id = _get(data, "id", path, str)
    if not re.match(r"^[a-z0-9][a-z0-9_.-]*(/[a-z0-9][a-z0-9_.-]*)+$", doc_id):
        raise DocumentError(path, f"'id' {doc_id!r} is not '<domain>/<slug>/<env>'")
    url = _get(data, "url", path, str)
    domain = data["error"].get("domain") if isinstance(data.get("error"), dict) else None
    if domain is not None:
        problem = part_problem(domain) if isinstance(domain, str) else f"{domain!r} is not text"
        if problem is not None:
            raise DocumentError(path, f"'error.domain': {problem}")
    signature = _get(data, "error.signature", path, str)
    regex = _get(data, "error.regex", path, str)
    try:
        re.compile(regex)
    except re.error as exc:
        raise DocumentError(
            path, f"'error.regex' is not a valid regular expression: {exc}"
        ) from exc
    # exponential backtracking refused; the record's polynomial patterns are its data, run
    # only through harness/matching.py's bound
    problem = backtracking_problem(regex, polynomial_most=None)
    if problem is not None:  # named here, in the record's words
        raise DocumentError(path, f"'error.regex' may backtrack catastrophically: {problem}")
    exc_type, message, named = split_type(signature)
    runtime = _get(data, "environment.runtime.name", path, str)
    version_range = _get(data, "environment.runtime.version_range", path, str)
    fix_rate = _rate(
        _get(data, "verdict.fix_success_rate", path, (int, float)), path, "verdict.fix_success_rate"
    )
    rows, conditions = _runtime_range(runtime, version_range)
    origin = _deadends_origin(data, doc_id, url, runtime, version_range)
    origin["message"] = signature
    origin["regex"] = regex  # the record's own pattern, kept as a fact; not what is matched
    first = _first_sentence(message)
    title = f"{exc_type}: {first}" if named else first
    document = (
        f"# {title}\n\n"
        f"Source: {_link(doc_id, url)} (deadends.dev, review status "
        f"{origin.get('review_status', 'unknown')}). Its text is not copied here: the facts "
        "(signature, regex, version range, every rate) are in entry.yaml.\n\n"
        f"{TODO}: what the error means and when it happens, in your own words.\n\n"
    )
    source = (
        f"deadends.dev record `{doc_id}`: {url}\n\n"
        f"Kept byte for byte beside this file as `{KEPT_RECORD}` (the knowledge base's data, "
        "under its licence): what `python -m harness corrections` edits. Its prose is not "
        "copied into the entry; the facts `harness new` read from it are in entry.yaml "
        "(`origin`, `claims`, the variants' claimed rates).\n"
    )
    return Scaffold(
        format="deadends-json",
        entry_id="deadends/" + doc_id,
        title=title,
        exc_type=exc_type,
        message=message_pattern(first),
        type_named=named,
        verification=origin.get("review_status"),
        fix_rate=fix_rate,
        version_table=rows,
        conditions=conditions,
        claims=_deadends_claims(data, path, url),
        origin=origin,
        source_text=source,
        document_text=document,
    )


def _json_object(text: str, path: str | Path) -> dict:
    deep = _json_depth_within(text, MAX_DEPTH)
    if deep is not None:
        raise DocumentError(
            path, f"not valid JSON: nested more than {MAX_DEPTH} levels deep; flatten it", deep
        )
    try:
        data = strict_loads(text)
    except JsonRefused as exc:
        raise DocumentError(path, f"refused: {exc}") from exc
    except (ValueError, RecursionError) as exc:
        raise DocumentError(path, f"not valid JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise DocumentError(path, "a deadends.dev record is a JSON object")
    return data


# a dead end's documented failure, proposed from its words (the corpus JSON's why_fails, a
# Markdown dead end's text); the first rule that matches wins; an expert confirms it in
# entry.yaml (claim.kind), since only a measurement of that kind counts
_FAILURE_WORDS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("security", re.compile(r"(?i)security|code execution|arbitrary code|malicious|unsafe")),
    ("brittle", re.compile(r"(?i)brittle|fragile|error-prone|breaks when the model changes")),
    ("precision", re.compile(r"(?i)precision|accuracy|numerical(ly)? (instab|wrong)")),
    (
        "more-memory",
        re.compile(
            r"(?i)memory (waste|usage|leak)|wastes? (memory|vram)|doubles memory|more memory"
        ),
    ),
    (
        "slower",
        re.compile(
            r"(?i)\bslow|speed ?up|throughput|bottleneck|performance|gil-bound|acceleration"
        ),
    ),
    (
        "wrong-result",
        re.compile(
            r"(?i)silent|wrong (result|output|semantics|embedding)|garbage|incorrect|corrupt"
        ),
    ),
)
# a workaround that is a check, judged by detection: "check", "verify", "compare", "inspect"
_CHECK_WORDS = re.compile(r"(?i)^(?:check|verify|compare|inspect|print|debug|diagnose)\b")
# where a document says when its advice applies, in Markdown
_CONDITION = re.compile(r"(?i)\b(only (?:when|if|applicable)[^.;)]*)")


def propose_kind(kind: str, text: str) -> str:
    """The kind a claim's words suggest: for a dead end, its documented failure (an error
    unless the words say slower, more memory, a security risk, lost precision, brittle or a
    wrong result); for a workaround, a diagnostic where it is a check, else a fix."""
    if kind == "workaround":
        return "diagnostic" if _CHECK_WORDS.search(text.strip()) else "fix"
    for name, words in _FAILURE_WORDS:
        if words.search(text):
            return name
    return "raises"


def _deadends_claims(data: dict, path: str | Path, url: str) -> tuple[Claimed, ...]:
    """Every workaround and dead end, numbered as the record lists them, with its rate."""
    claims: list[Claimed] = []
    for key, kind, ref, rate_key in (
        ("workarounds", "workaround", "workaround", "success_rate"),
        ("dead_ends", "dead_end", "dead end", "fail_rate"),
    ):
        items = _get(data, key, path, list)
        for n, item in enumerate(items, 1):
            if not isinstance(item, dict) or rate_key not in item:
                raise DocumentError(path, f"'{key}[{n - 1}]' has no '{rate_key}'")
            rate = _rate(item[rate_key], path, f"{key}[{n - 1}].{rate_key}")
            name = f"{kind.replace('_', '')}{n}"
            words = str(item.get("why_fails" if kind == "dead_end" else "action") or "")
            condition = item.get("condition")
            claims.append(
                Claimed(
                    name,
                    kind,
                    f"{ref} {n}",
                    rate,
                    f"{TODO}: {ref} {n} of {url}, in your own words",
                    propose_kind(kind, words),
                    " ".join(condition.split())[:300]
                    if isinstance(condition, str) and condition.strip()
                    else None,
                )
            )
    return tuple(claims)


def _runtime_range(
    runtime: str, version_range: str
) -> tuple[tuple[tuple[str, str, str | None, str | None], ...], tuple[str, ...]]:
    """The record's runtime range: a version-table row on a matrix axis, else a condition."""
    if not version_range.strip():
        return (), ()
    package = {"pytorch": "torch", "torch": "torch", "lightning": "lightning"}.get(runtime, runtime)
    spec = version_range if version_range[0].isalpha() else f"{package}{version_range}"
    spec = spec.replace(" ", "")
    if _on_an_axis(spec):
        return ((spec, "active", None, None),), ()
    return (), (_axis_note(spec),)  # e.g. the cuda domain's runtime "cuda>=11.0,<13.0"


def _deadends_origin(
    data: dict, doc_id: str, url: str, runtime: str, version_range: str
) -> dict[str, Any]:
    """The record's facts kept in entry.yaml's origin (shown, never judged)."""
    verdict = data.get("verdict") or {}
    metadata = data.get("metadata") or {}
    flat = {
        "schema_version": data.get("schema_version"),
        "domain": data["error"].get("domain"),
        "category": data["error"].get("category"),
        "first_seen": data["error"].get("first_seen"),
        "last_confirmed": data["error"].get("last_confirmed"),
        "runtime": runtime,
        "version_range": version_range,
        "os": data["environment"].get("os"),
        "resolvable": verdict.get("resolvable"),
        "confidence": verdict.get("confidence"),
        "review_status": metadata.get("review_status"),
        "generated_by": metadata.get("generated_by"),
        "evidence_count": metadata.get("evidence_count"),
    }
    origin: dict[str, Any] = {"format": "deadends-json", "id": doc_id, "url": url}
    origin.update({k: v for k, v in flat.items() if v not in (None, "")})
    related = (data.get("transition_graph") or {}).get("frequently_confused_with") or []
    if related:
        origin["related"] = [str(r) for r in related]
    return origin


# -- dispatch -----------------------------------------------------------------------------


def detect_format(text: str) -> str | None:
    stripped = text.lstrip()
    if stripped.startswith("{"):
        return "deadends-json"
    first = stripped.splitlines()[0] if stripped else ""
    if " · error · " in first:
        return "scraped"
    if first.startswith("# "):
        return "markdown"
    return None


# -- version advice ------------------------------------------------------------------------

# a package as documents name it -> its distribution ("PyTorch" is torch; "PyTorch Lightning"
# and pytorch_lightning the pytorch-lightning distribution, "lightning" the unified one)
_PACKAGE = (
    r"(?P<name>pytorch[ _-]lightning|lightning|pytorch|torch(?:vision|audio)?|numpy|"
    r"setuptools|transformers|onnx|scipy|pandas|protobuf|pydantic|[a-z][a-z0-9_.-]*[a-z0-9])"
)
_VERSION = r"v?(?P<version>\d+(?:\.\d+){0,2}(?:\.post\d+)?)"
_OP = r"(?P<op>==|<=|>=|~=|!=|<|>)"
_ADVICE = (
    # "pin torch<2.1", "pip install 'lightning<2.0'", "`numpy<2`"
    (
        "exact",
        re.compile(
            rf"(?:\bpin(?:ning)?|\binstall|`|\bto)\s*[\"'`]?{_PACKAGE}\s*{_OP}\s*{_VERSION}", re.I
        ),
    ),
    # "downgrade torch below 2.1", "downgrade numpy to below 2"
    (
        "<",
        re.compile(
            rf"\bdowngrad\w*\s+{_PACKAGE}\s+(?:to\s+)?(?:below|under|before)\s+{_VERSION}", re.I
        ),
    ),
    # "downgrade to lightning 1.9", "downgrade torch to 2.0.1"
    (
        "==",
        re.compile(
            rf"\bdowngrad\w*\s+(?:to\s+)?{_PACKAGE}\s+(?:to\s+)?(?:version\s+)?{_VERSION}", re.I
        ),
    ),
    # "upgrade to torch 2.6", "upgrade lightning to 2.1 or later"
    (
        ">=",
        re.compile(
            rf"\bupgrad\w*\s+(?:to\s+)?{_PACKAGE}\s+(?:to\s+)?(?:version\s+)?{_VERSION}", re.I
        ),
    ),
)
# words that are not packages where the patterns above would read one ("pin to", "upgrade to")
_NOT_PACKAGES = frozenset({"to", "the", "a", "an", "version", "below", "and", "or", "it"})


def _distribution(name: str) -> str:
    n = re.sub(r"[ _.]+", "-", name.lower())
    return {"pytorch": "torch", "pytorch-lightning": "pytorch-lightning"}.get(n, n)


def version_advice(text: str) -> tuple[str, ...]:
    """The requirements a piece of advice asks for, read as pip would follow it: "pin X<2.1"
    -> X<2.1, "downgrade X below 2" -> X<2, "downgrade to X 1.9" -> X==1.9.* (a release
    written short stands for its series; in full, that release), "upgrade to X 2.6" ->
    X>=2.6. One requirement per package (the first); each a valid PEP 508 requirement."""
    from packaging.requirements import InvalidRequirement, Requirement

    found: dict[str, str] = {}
    for kind, pattern in _ADVICE:
        for m in pattern.finditer(text):
            name = m.group("name")
            if name.lower() in _NOT_PACKAGES:
                continue
            dist, version = _distribution(name), m.group("version").lstrip("vV")
            if kind == "exact":
                requirement = f"{dist}{m.group('op')}{version}"
            elif kind == "==":
                short = len(version.split(".")) < 3 and "post" not in version
                requirement = f"{dist}=={version}.*" if short else f"{dist}=={version}"
            else:
                requirement = f"{dist}{kind}{version}"
            try:
                Requirement(requirement)
            except InvalidRequirement:
                continue
            found.setdefault(dist, requirement)
    return tuple(found.values())


def with_version_advice(s: Scaffold) -> Scaffold:
    """Each claim with the version advice its words give (``version_advice``)."""
    claims = tuple(dataclasses.replace(c, requires=version_advice(c.text)) for c in s.claims)
    return dataclasses.replace(s, claims=claims)


def parse_document(text: str, path: str | Path, fmt: str | None = None) -> Scaffold:
    fmt = fmt or detect_format(text)
    if fmt == "deadends-json":
        return with_version_advice(parse_deadends_json(text, path))
    if fmt == "scraped":
        return with_version_advice(parse_scraped(text, path))
    if fmt == "markdown":
        return with_version_advice(parse_markdown(text, path))
    raise DocumentError(
        path,
        "unknown document format: expected a JSON record ('{'), a scraped page "
        "('<org>/<repo> · error · <Type>') or a Markdown entry ('# <Type>: <message>') "
        "on the first line",
        1,
    )


# -- writing ------------------------------------------------------------------------------


def _q(value: Any) -> str:
    """A YAML scalar: JSON's double-quoted strings are valid YAML."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    return json.dumps(str(value), ensure_ascii=False)


def _claim_variant_yaml(c: Claimed) -> list[str]:
    """One claim's variant in entry.yaml: its name, kind, claim, the TODOs its words call
    for, its description and the version advice read from it."""
    out = [f"  - name: {c.name}", f"    kind: {c.kind}"]
    claim = f"{{ref: {_q(c.ref)}" + (f", rate: {_q(c.rate)}" if c.rate is not None else "")
    if c.meaning_kind is not None:
        claim += f", kind: {c.meaning_kind}"
    if c.condition is not None:
        claim += f", condition: {_q(c.condition)}"
    out.append(f"    claim: {claim}}}")
    if c.meaning_kind not in (None, "raises", "fix"):
        out.append(
            f"    # {TODO}: the document's words read as {c.meaning_kind}: measure it "
            "(fails_as: {..., measures: ...}; a diagnostic: claim.detects) or say why "
            "these runs cannot (claim.unmeasured)"
        )
    if c.condition is not None:
        out.append(
            f"    # {TODO}: where the variant meets its condition, say how (claim.within); "
            "outside it the claim is not judged"
        )
    out.append(f"    description: {_q(c.text)}")
    if c.requires:
        out.append(
            "    # version advice, read from its words: the variant runs where pip would "
            "put it after following it"
        )
        out.append(f"    requires: [{', '.join(_q(r) for r in c.requires)}]")
    if c.kind == "dead_end":
        out += [
            f"    # {TODO}: how it fails, if not with the documented error: signature or fails_as",
            "    # (another error: signature: {type, message}; silently: fails_as: {outcome:",
            "    # wrong_result, postconditions: [...]}); else only the documented error counts",
        ]
    return out


def render_entry_yaml(s: Scaffold, entry_id: str) -> str:
    out = [
        f"# scaffolded by `python -m harness new` from a {s.format} document; see",
        "# docs/reference/entry-yaml.md for every key. Write repro.py, then `python -m harness check`.",
        f"id: {entry_id}",
        f"title: {_q(s.title)}",
        "source: source.md",
        "document: document.md",
        "repro: repro.py",
        "signature:",
    ]
    if not s.type_named:
        out.append(
            f"  # {TODO}: the document names no exception type; 'Exception' matches any raised one"
        )
    out += [f"  type: {_q(s.exc_type)}", f"  message: {_q(s.message)}", "claims:"]
    out.append(f"  verification: {_q(s.verification)}")
    out.append(f"  fix_rate: {_q(s.fix_rate)}")
    if s.version_table:
        out.append("  version_table:")
        for spec, status, intro, dep in s.version_table:
            out.append(
                f"    - {{spec: {_q(spec)}, status: {_q(status)}, introduced: {_q(intro)}, "
                f"deprecated: {_q(dep)}}}"
            )
    else:
        out.append("  version_table: []")
    if s.conditions:
        out.append("  conditions:")
        out += [f"    - {_q(c)}" for c in s.conditions]
    else:
        out.append("  conditions: []")
    out.append("origin:")
    for key, value in s.origin.items():
        if isinstance(value, list):
            out.append(f"  {key}:")
            out += [f"    - {_q(v)}" for v in value]
        else:
            out.append(f"  {key}: {_q(value)}")
    out.append("variants:")
    out += [
        "  - name: baseline",
        "    kind: baseline",
        f"    description: {_q(TODO + ': the smallest program that raises the documented error')}",
    ]
    for c in s.claims:
        out += _claim_variant_yaml(c)
    out += [
        "  - name: control",
        "    kind: control",
        f"    description: {_q(TODO + ': the same program without the cause; must be ok wherever it runs')}",
    ]
    return "\n".join(out) + "\n"


def render_repro(s: Scaffold, entry_id: str, names: Sequence[str]) -> str:
    """repro.py with every variant None in VARIANTS (not written: never run, never counted)
    and an example of a variant function in a comment."""
    variants = "\n".join(f"    {_q(n)}: None," for n in names)
    title = s.title.replace('"""', "'''").replace("\\", "/")
    if len(title) > 80:
        title = title[:77] + "..."
    return f'''"""Reproducer: "{title}" ({entry_id}).

{TODO}: what this reproducer does, in a few lines.
"""

from __future__ import annotations

import torch
from reprokit import Unsupported, autocast, autocast_dtype, finite, moved  # noqa: F401

# One function per variant, (device, precision) -> its postconditions, each able to fail.
# Raise Unsupported (before the behaviour under test) where this cell cannot express the
# variant's intent; entry.yaml says what each variant is and where it runs. For example:
#
# def baseline(device, precision):
#     dtype = autocast_dtype(device, precision)  # Unsupported where autocast cannot run it
#     torch.manual_seed(0)
#     ...
#     return {{"loss_finite": finite(losses), "params_moved": moved(before, params)}}


# name -> its function; None while it is not written (the harness never runs it). Replace a
# None by the function once it is written.
VARIANTS = {{
{variants}
}}
'''


def write_scaffold(
    s: Scaffold, repros_dir: Path, entry_id: str | None = None
) -> tuple[Path, list[Path]]:
    """Create repros/<id>/ with its four files; refuses if the folder exists."""
    entry_id = entry_id or s.entry_id
    from harness.spec.entries import ID_PATTERN

    if not ID_PATTERN.match(entry_id) or ".." in entry_id.split("/"):
        raise DocumentError(
            repros_dir, f"entry id {entry_id!r} must match {ID_PATTERN.pattern} (pass --id)"
        )
    folder = repros_dir / entry_id
    if folder.exists():
        raise FileExistsError(f"{folder} exists; `new` never overwrites (remove it or pass --id)")
    # never through a link: each folder on the way to the entry's is a real folder inside
    # repros/ (a linked folder would take the files outside the project)
    step = repros_dir
    for part in Path(entry_id).parts:
        step = step / part
        if step.is_symlink():
            raise DocumentError(
                step, f"is a link (to {os.readlink(step)!r}); `new` never writes through a link"
            )
    names = ["baseline", *(c.name for c in s.claims), "control"]
    files = {
        "entry.yaml": render_entry_yaml(s, entry_id),
        "source.md": s.source_text,
        "document.md": s.document_text.rstrip("\n") + "\n\n" + _markers(),
        "repro.py": render_repro(s, entry_id, names),
    }
    blobs = {KEPT_RECORD: s.kept} if s.kept else {}
    _loads_as_written(files, entry_id, blobs)
    folder.mkdir(parents=True)
    written = []
    for name, text in files.items():
        path = folder / name
        path.write_text(text, encoding="utf-8")
        written.append(path)
    for name, blob in blobs.items():
        path = folder / name
        path.write_bytes(blob)
        written.append(path)
    return folder, written


def keep_record(s: Scaffold, raw: bytes, kb_path: str | None, commit: str | None) -> Scaffold:
    """``s`` with its JSON record's bytes to keep beside entry.yaml, and where the record lives
    in its knowledge base (``kb_path``, the ``commit`` it was read at; None: not known)."""
    origin: dict[str, Any] = {}
    for key, value in s.origin.items():
        origin[key] = value
        if key == "url":  # after the url, as scripts/kb_keep_records.py writes them
            if kb_path:
                origin["path"] = kb_path
            if commit:
                origin["commit"] = commit
            origin["record"] = KEPT_RECORD
    origin.setdefault("record", KEPT_RECORD)
    return dataclasses.replace(s, kept=raw, origin=origin)


def _loads_as_written(
    files: dict[str, str], entry_id: str, blobs: dict[str, bytes] | None = None
) -> None:
    """The entry `new` would write, loaded by the entries' own loader in a scratch folder
    first: `new` never writes an entry that `list`, `check` or `run` would refuse."""
    import tempfile

    from harness.spec.entries import EntryError, load_entry

    with tempfile.TemporaryDirectory(prefix="harness-new-") as scratch:
        root = Path(scratch) / "repros"
        folder = root / entry_id
        folder.mkdir(parents=True)
        for name, text in files.items():
            (folder / name).write_text(text, encoding="utf-8")
        for name, blob in (blobs or {}).items():
            (folder / name).write_bytes(blob)
        try:
            load_entry(folder, root)
        except EntryError as exc:
            raise DocumentError(
                entry_id,
                f"the entry it would write is refused by the loader: {exc.message} "
                f"(entry.yaml line {exc.line})",
            ) from exc
