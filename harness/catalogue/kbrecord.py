"""A deadends.dev record as the knowledge base holds it: read, written back byte-stable, and
checked by the knowledge base's rules as this project writes them down.

The rules (``problems``) are the ones the knowledge base's validator enforces before a pull
request is taken (its generator/schema.py and generator/validate.py, read, not copied; the
facts are listed in ../shared/KB-FORMATS.md and docs/how-to/knowledge-base.md):

- the schema: the required fields of the record and of each part, their types, the enums
  (``verdict.resolvable``, ``metadata.review_status``), rates and probabilities in [0, 1],
  dates as YYYY-MM-DD, at least one dead end;
- ``url`` is ``https://deadends.dev/<id>``;
- ``resolvable "true"`` needs ``fix_success_rate >= 0.7`` and ``confidence >= 0.6``;
  ``"false"`` needs a rate below 0.2 and ``confidence >= 0.6``; ``evidence_count < 3`` caps
  ``confidence`` at 0.3;
- ``error.regex`` compiles, without a group that repeats a quantified or alternated group
  (the validator's ReDoS warning) and with at most 15 groups;
- every source is an http(s) URL whose host is not local or private;
- every ``error_id`` of the transition graph is ``<domain>/<slug>/<env>``-shaped and, where
  the ids of the knowledge base are given, one of them.

``dumps_like`` writes a changed record so that its diff against the original shows only what
changed: the lines of values that did not change keep their original bytes (``0.90`` stays
``0.90`` where the knowledge base wrote it so), new lines are written as the file is
(two-space indent, the same number style).
"""

from __future__ import annotations

import difflib
import ipaddress
import json
import re
from collections.abc import Collection, Generator, Iterator
from typing import Any
from urllib.parse import urlsplit

from harness.jsonin import strict_loads

__all__ = ["BASE_URL", "dumps_like", "loads", "problems", "verdict_problems"]

BASE_URL = "https://deadends.dev"
RESOLVABLE = ("true", "partial", "false")
REVIEW_STATUS = ("auto_generated", "human_reviewed", "community_verified")
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_ID = re.compile(r"^[a-z0-9-]+/[a-z0-9-]+/[a-z0-9._-]+$")
_VERSION = re.compile(r"^\d+\.\d+\.\d+$")
# a group whose inside repeats or alternates, itself repeated: the validator's ReDoS warnings
_NESTED_QUANTIFIER = re.compile(r"\([^)]*[+*][^)]*\)[+*{]")
_NESTED_ALTERNATION = re.compile(r"\([^)]*\|[^)]*\)[+*{]")
_MAX_GROUPS = 15
_LOCAL_HOSTS = {"localhost", "0.0.0.0", "127.0.0.1", "::1"}


def loads(raw: bytes) -> dict[str, Any]:
    """A record's bytes read strictly (harness/jsonin.py): bounded, every key once."""
    data = strict_loads(raw.decode("utf-8"))
    if not isinstance(data, dict):
        raise ValueError("a deadends.dev record is a JSON object")
    return data


# -- writing: the original's bytes wherever a line did not change ---------------------------


def _plain(data: Any) -> list[str]:
    return json.dumps(data, indent=2, ensure_ascii=False).splitlines()


def _fixed_two(raw_lines: list[str]) -> bool:
    """Whether the file writes rates with two decimals (``0.90``, not ``0.9``)."""
    return any(re.search(r":\s*\d\.\d0,?$", line) for line in raw_lines)


def _styled(line: str, fixed_two: bool) -> str:
    if not fixed_two:
        return line
    return re.sub(r"(:\s*)(\d\.\d)(,?)$", r"\g<1>\g<2>0\g<3>", line)


def dumps_like(original: bytes, data: dict[str, Any]) -> bytes:
    """``data`` as JSON, written as ``original`` is: each line whose value is unchanged keeps
    its original bytes. ``original`` must be a record this module reads (two-space indented
    JSON, one value a line), as every knowledge-base record is."""
    raw_lines = original.decode("utf-8").splitlines()
    old_lines = _plain(loads(original))
    if len(old_lines) != len(raw_lines):
        raise ValueError("the original is not two-space indented JSON, one value a line")
    new_lines = _plain(data)
    fixed_two = _fixed_two(raw_lines)
    out: list[str] = []
    matcher = difflib.SequenceMatcher(None, old_lines, new_lines, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            out += raw_lines[i1:i2]
        else:
            out += [_styled(line, fixed_two) for line in new_lines[j1:j2]]
    ending = "\n" if original.endswith(b"\n") else ""
    return ("\n".join(out) + ending).encode("utf-8")


# -- the knowledge base's rules --------------------------------------------------------------


_NOT_IN_URL = re.compile(r"[\s\x00-\x1f\x7f-\x9f<>\"'`\\]")


def _safe_url(url: Any) -> bool:
    """A public http(s) URL, written whole: no space, control character or Markdown/HTML
    delimiter in it ("--pages-url 'https://a b'" was accepted)."""
    if not isinstance(url, str) or len(url) > 2048 or _NOT_IN_URL.search(url):
        return False
    try:
        parts = urlsplit(url)
    except ValueError:
        return False
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return False
    host = parts.hostname.lower()
    if host in _LOCAL_HOSTS or host.endswith(".local") or host.endswith(".localhost"):
        return False
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        # a dotted number other than a plain IPv4 address (octal, short forms) is refused
        return not re.fullmatch(r"[0-9.x]+", host)
    return not (
        address.is_private or address.is_loopback or address.is_link_local or address.is_reserved
    )


def _is_rate(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and 0 <= value <= 1


def _schema(data: dict[str, Any]) -> Iterator[str]:
    """The record's shape: required fields, types, enums and ranges."""
    for key in (
        "schema_version",
        "id",
        "url",
        "error",
        "environment",
        "verdict",
        "dead_ends",
        "workarounds",
        "transition_graph",
        "metadata",
    ):
        if key not in data:
            yield f"missing {key}"
    if any(key not in data for key in ("id", "url", "error", "environment", "verdict")):
        return
    yield from _schema_head(data)
    for key in ("error", "environment", "verdict"):
        if not isinstance(data[key], dict):
            yield f"{key} must be an object"
            return
    yield from _schema_environment(data["environment"])
    yield from _schema_verdict(data["verdict"])
    dead_ends = yield from _schema_dead_ends(data.get("dead_ends"))
    workarounds = yield from _schema_workarounds(data.get("workarounds"))
    for i, item in enumerate([*dead_ends, *workarounds]):
        sources = item.get("sources", [])
        if not isinstance(sources, list) or not all(isinstance(s, str) for s in sources):
            yield f"sources of item {i} must be a list of text"
    yield from _schema_graph(data.get("transition_graph"))
    yield from _schema_metadata(data.get("metadata"))


def _schema_head(data: dict[str, Any]) -> Iterator[str]:
    if not isinstance(data.get("schema_version"), str) or not _VERSION.match(
        data["schema_version"]
    ):
        yield "schema_version must be 'N.N.N'"
    if not isinstance(data["id"], str) or not _ID.match(data["id"]):
        yield f"id {data['id']!r} is not '<domain>/<slug>/<env>'"
    error = data["error"]
    for key in ("signature", "regex", "domain", "category"):
        if not isinstance(error.get(key), str) or not error.get(key):
            yield f"error.{key} must be non-empty text"
    for key in ("first_seen", "last_confirmed"):
        if key in error and not (isinstance(error[key], str) and _DATE.match(error[key])):
            yield f"error.{key} must be a YYYY-MM-DD date"


def _schema_environment(env: dict[str, Any]) -> Iterator[str]:
    runtime = env.get("runtime")
    if not isinstance(runtime, dict) or not all(
        isinstance(runtime.get(k), str) for k in ("name", "version_range")
    ):
        yield "environment.runtime needs name and version_range (text)"
    if not isinstance(env.get("os"), str):
        yield "environment.os must be text"
    if "additional" in env and not isinstance(env["additional"], dict):
        yield "environment.additional must be an object"


def _schema_verdict(verdict: dict[str, Any]) -> Iterator[str]:
    if verdict.get("resolvable") not in RESOLVABLE:
        yield f"verdict.resolvable must be one of {RESOLVABLE}"
    for key in ("fix_success_rate", "confidence"):
        if not _is_rate(verdict.get(key)):
            yield f"verdict.{key} must be a number in [0, 1]"
    if not (isinstance(verdict.get("last_updated"), str) and _DATE.match(verdict["last_updated"])):
        yield "verdict.last_updated must be a YYYY-MM-DD date"
    if not isinstance(verdict.get("summary"), str) or not verdict.get("summary"):
        yield "verdict.summary must be non-empty text"


def _schema_dead_ends(dead_ends: Any) -> Generator[str, None, list[dict[str, Any]]]:
    """The dead ends' problems; returns those that are objects."""
    if not isinstance(dead_ends, list) or not dead_ends:
        yield "dead_ends must hold at least one dead end"
        dead_ends = []
    if not all(isinstance(item, dict) for item in dead_ends):
        yield "every dead end must be an object"
        dead_ends = [item for item in dead_ends if isinstance(item, dict)]
    for i, item in enumerate(dead_ends):
        for key in ("action", "why_fails"):
            if not isinstance(item.get(key), str) or not item.get(key):
                yield f"dead_ends[{i}].{key} must be non-empty text"
        if not _is_rate(item.get("fail_rate")):
            yield f"dead_ends[{i}].fail_rate must be a number in [0, 1]"
        for key in ("condition", "common_misconception"):
            if key in item and not isinstance(item[key], str):
                yield f"dead_ends[{i}].{key} must be text"
    return dead_ends


def _schema_workarounds(workarounds: Any) -> Generator[str, None, list[dict[str, Any]]]:
    """The workarounds' problems; returns those that are objects."""
    if not isinstance(workarounds, list):
        yield "workarounds must be a list"
        workarounds = []
    if not all(isinstance(item, dict) for item in workarounds):
        yield "every workaround must be an object"
        workarounds = [item for item in workarounds if isinstance(item, dict)]
    for i, item in enumerate(workarounds):
        if not isinstance(item.get("action"), str) or not item.get("action"):
            yield f"workarounds[{i}].action must be non-empty text"
        if not _is_rate(item.get("success_rate")):
            yield f"workarounds[{i}].success_rate must be a number in [0, 1]"
        for key in ("how", "tradeoff", "condition"):
            if key in item and not isinstance(item[key], str):
                yield f"workarounds[{i}].{key} must be text"
    return workarounds


def _schema_graph(graph: Any) -> Iterator[str]:
    if not isinstance(graph, dict):
        yield "transition_graph must be an object"
        graph = {}
    for key in ("leads_to", "preceded_by", "frequently_confused_with"):
        if not isinstance(graph.get(key), list):
            yield f"transition_graph.{key} must be a list"
            continue
        for j, edge in enumerate(graph[key]):
            if not isinstance(edge, dict):
                yield f"transition_graph.{key}[{j}] must be an object"
                continue
            if not isinstance(edge.get("error_id"), str):
                yield f"transition_graph.{key}[{j}].error_id must be text"
            if key == "frequently_confused_with":
                if not isinstance(edge.get("distinction"), str):
                    yield f"transition_graph.{key}[{j}].distinction must be text"
            elif not _is_rate(edge.get("probability")):
                yield f"transition_graph.{key}[{j}].probability must be a number in [0, 1]"


def _schema_metadata(meta: Any) -> Iterator[str]:
    if not isinstance(meta, dict):
        yield "metadata must be an object"
        meta = {}
    for key in ("generated_by", "generation_date", "review_status"):
        if not isinstance(meta.get(key), str):
            yield f"metadata.{key} must be text"
    if meta.get("review_status") not in REVIEW_STATUS:
        yield f"metadata.review_status must be one of {REVIEW_STATUS}"
    count = meta.get("evidence_count")
    if not isinstance(count, int) or isinstance(count, bool) or count < 0:
        yield "metadata.evidence_count must be a whole number >= 0"


def verdict_problems(resolvable: str, rate: float, confidence: float, count: int) -> list[str]:
    """The knowledge base's rules on a verdict: resolvable against the fix rate and the
    confidence, and the confidence against the evidence count (``problems`` says them all)."""
    found = []
    if resolvable == "true" and (rate < 0.7 or confidence < 0.6):
        found.append(
            f"resolvable 'true' needs fix_success_rate >= 0.7 and confidence >= 0.6 "
            f"(rate {rate}, confidence {confidence})"
        )
    if resolvable == "false" and (rate >= 0.2 or confidence < 0.6):
        found.append(
            f"resolvable 'false' needs fix_success_rate < 0.2 and confidence >= 0.6 "
            f"(rate {rate}, confidence {confidence})"
        )
    if count < 3 and confidence > 0.3:
        found.append(f"evidence_count {count} < 3 caps confidence at 0.3 (confidence {confidence})")
    return found


def problems(data: dict[str, Any], known_ids: Collection[str] = ()) -> list[str]:
    """What the knowledge base's validator would refuse in ``data`` (empty: it passes).
    ``known_ids``: the knowledge base's record ids, for the transition graph's references."""
    found = list(_schema(data))
    if found:
        return found  # the business rules read fields the schema requires
    expected = f"{BASE_URL}/{data['id']}"
    if data["url"] != expected:
        found.append(f"url must be {expected}")
    verdict = data["verdict"]
    found += verdict_problems(
        verdict["resolvable"],
        verdict["fix_success_rate"],
        verdict["confidence"],
        data["metadata"]["evidence_count"],
    )
    regex = data["error"]["regex"]
    try:
        re.compile(regex)
    except re.error as exc:
        found.append(f"error.regex does not compile: {exc}")
    if _NESTED_QUANTIFIER.search(regex) or _NESTED_ALTERNATION.search(regex):
        found.append("error.regex repeats a group that repeats or alternates (ReDoS)")
    if regex.count("(") > _MAX_GROUPS:
        found.append(f"error.regex has more than {_MAX_GROUPS} groups")
    for key in ("dead_ends", "workarounds"):
        for i, item in enumerate(data[key]):
            for j, source in enumerate(item.get("sources") or []):
                if not _safe_url(source):
                    found.append(f"{key}[{i}].sources[{j}] is not a public http(s) URL: {source}")
    for key in ("leads_to", "preceded_by", "frequently_confused_with"):
        for j, edge in enumerate(data["transition_graph"][key]):
            ref = edge["error_id"]
            if not _ID.match(ref):
                found.append(f"transition_graph.{key}[{j}].error_id {ref!r} is malformed")
            elif known_ids and ref not in known_ids:
                found.append(f"transition_graph.{key}[{j}].error_id {ref!r} is not in the KB")
    return found
