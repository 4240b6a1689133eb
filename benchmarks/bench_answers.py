"""The benchmark of answers: real pasted errors from public issue threads
(benchmarks/answers/cases.yaml), each answered by `explain` and graded against the answer an
expert gives, judged from the thread.

    python benchmarks/bench_answers.py [--cases FILE] [--repo DIR] [--json OUT] [--each]
        [--check] [--quick]

`explain` runs in-process, reading the repository's entries (repros/) and its records
(results/records/) as `python -m harness explain` does, for the versions each poster gave
(none given: the versions are unknown). `--check` exits 1 when the share right is below
FLOOR_RIGHT, the share measured when the benchmark was written (so the answers cannot get
worse unnoticed); `--quick` is accepted for the CI session and changes nothing (the whole
benchmark takes about a minute: explain aggregates the records of every entry it answers
with, guesses included).

Grades (one per case, the worst any rule gives: misleading, then partly right, then right):

  misleading    - an entry is named as the answer (not a guess) that is not the expected
                  one: for an error of no entry, one whose headline owns the paste (matched
                  by its documented signature), or one that presents a workaround as
                  working (another error's fixes offered for this one);
                - or any answer presents as working a variant listed in `must_not`, or the
                  rendered answer contains a phrase listed in `must_not`;
                - or a catalogued error is answered "no entry knows this error" without the
                  expected entry as the first guess.
  partly right  - explain read another exception than the one the paste reports (`error`:
                  a warning or log line taken for the error), however right the rest is;
                - the expected entry is named, but its headline is off (the paste is the
                  entry's documented error and the headline disowns it, or the other way
                  round) or the expected fix is not presented as working; or the expected
                  entry is only the first guess of "no entry knows this error"; or, for an
                  error of no entry, an entry is named whose headline disowns the paste and
                  whose fixes are not presented as working.
  right         - the expected entry is named at the top with a headline that says what the
                  paste is, the expected fix (where one is expected) is presented as working,
                  and nothing in `must_not` is said; for an error of no entry: no entry is
                  named as the answer (guesses only, or none) and nothing in `must_not`.

"Presented as working": a workaround whose advice is `confirmed` ("works"), or a dead end
whose advice is `contradicted` ("does not fail as documented").

What is read of the answer (Explanation.to_dict(); keep these stable, or change this file
with them): `guessed`; `raised[0].type` (the exception explain read; "" where it read the
whole text as a message, which is not held against it); per answer `entry`, `kind` (what
the paste is: documented, situation, related, near, guess), `match.how`, `match.variant`;
per variant `name`, `kind`, `advice`. A headline owns the paste where its kind is
documented or situation (`headline_owns`); an answer that disowns it titles the entry's
fixes as for the entry's own error, so none of them is offered as working for the paste
(`offered`). `must_not` phrases are looked for in the terminal
answer (harness/catalogue/explain_terminal.py `render`), case-insensitively.
"""

from __future__ import annotations

import argparse
import io
import json
import re
import sys
import time
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

CASES = ROOT / "benchmarks" / "answers" / "cases.yaml"
CATEGORIES = ("catalogued", "near_miss", "none")
AS = ("documented", "related")
RIGHT, PARTLY, MISLEADING = "right", "partly right", "misleading"
GRADES = (RIGHT, PARTLY, MISLEADING)
# the share right measured on the committed records (37 of 43): raise it as answers
# improve, never lower it
FLOOR_RIGHT = 0.86
_VARIANT_ID = re.compile(r"^(?:baseline|workaround|deadend|solution|control|example)[\w.-]*$")
_KEYS = {"id", "category", "source", "note", "paste", "error", "versions", "expected"}
_EXPECTED_KEYS = {"entry", "as", "fix", "must_not", "why"}


class CasesError(ValueError):
    """The cases file is not as this benchmark reads it: file, line, field, what is allowed."""


@dataclass(frozen=True)
class Case:
    id: str
    category: str
    source: str
    paste: str
    error: str  # the exception type the paste reports ("" where it names none)
    torch: str
    lightning: str
    cuda: str
    entries: tuple[str, ...]  # any of them is the expected answer; () for no entry
    as_: str
    fixes: tuple[str, ...]
    must_not: tuple[str, ...]
    why: str
    line: int


@dataclass
class Judged:
    case: Case
    grade: str
    reasons: list[str] = field(default_factory=list)
    top: str = ""  # the entry named as the answer ("" when none is)
    how: str = ""
    guesses: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.case.id,
            "category": self.case.category,
            "source": self.case.source,
            "grade": self.grade,
            "reasons": self.reasons,
            "top": self.top,
            "how": self.how,
            "guesses": list(self.guesses),
            "expected": list(self.case.entries),
            "fix": list(self.case.fixes),
        }


# -- the cases ---------------------------------------------------------------------------


def _strings(value: Any, where: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,)
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return tuple(value)
    raise CasesError(f"{where}: a string, a list of strings or null")


def load_cases(path: Path = CASES) -> list[Case]:
    """The cases of ``path``, their shape checked (not yet against the catalogue)."""
    text = path.read_text(encoding="utf-8")
    try:
        data = yaml.safe_load(text)
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as exc:
        raise CasesError(f"{path}: not YAML: {exc}") from None
    if not isinstance(data, dict) or not isinstance(data.get("cases"), list):
        raise CasesError(f"{path}:1: cases: a list of cases is expected")
    nodes = next(v for k, v in root.value if k.value == "cases").value
    out: list[Case] = []
    seen: set[str] = set()
    for raw, node in zip(data["cases"], nodes, strict=True):
        line = node.start_mark.line + 1
        at = f"{path}:{line}"
        if not isinstance(raw, dict):
            raise CasesError(f"{at}: a case is a mapping")
        if unknown := set(raw) - _KEYS:
            raise CasesError(f"{at}: unknown field(s) {sorted(unknown)}; allowed: {sorted(_KEYS)}")
        for key in ("id", "category", "source", "paste"):
            if not isinstance(raw.get(key), str) or not raw[key].strip():
                raise CasesError(f"{at}: {key}: a non-empty string is required")
        if raw["id"] in seen:
            raise CasesError(f"{at}: id: {raw['id']!r} is used twice")
        seen.add(raw["id"])
        if raw["category"] not in CATEGORIES:
            raise CasesError(f"{at}: category: one of {', '.join(CATEGORIES)}")
        if not raw["source"].startswith("https://"):
            raise CasesError(f"{at}: source: an https URL (the issue thread)")
        if raw.get("error") is not None and not isinstance(raw["error"], str):
            raise CasesError(f"{at}: error: an exception type (OutOfMemoryError) or null")
        versions = raw.get("versions") or {}
        if not isinstance(versions, dict) or set(versions) - {"torch", "lightning", "cuda"}:
            raise CasesError(f"{at}: versions: a mapping of torch, lightning, cuda")
        for key, value in versions.items():
            if value is not None and not isinstance(value, str):
                raise CasesError(f"{at}: versions.{key}: a quoted release or null")
        expected = raw.get("expected")
        if not isinstance(expected, dict):
            raise CasesError(f"{at}: expected: a mapping of {sorted(_EXPECTED_KEYS)}")
        if unknown := set(expected) - _EXPECTED_KEYS:
            raise CasesError(f"{at}: expected: unknown field(s) {sorted(unknown)}")
        entries = _strings(expected.get("entry"), f"{at}: expected.entry")
        as_ = expected.get("as") or ("documented" if entries else "")
        if entries and as_ not in AS:
            raise CasesError(f"{at}: expected.as: one of {', '.join(AS)}")
        if (raw["category"] == "catalogued") != bool(entries):
            raise CasesError(
                f"{at}: expected.entry: a catalogued case names its entry; a near miss or an "
                "error of no entry has none (null)"
            )
        fixes = _strings(expected.get("fix"), f"{at}: expected.fix")
        if fixes and not entries:
            raise CasesError(f"{at}: expected.fix: only an expected entry has a fix")
        if not isinstance(expected.get("why"), str) or not expected["why"].strip():
            raise CasesError(f"{at}: expected.why: one line from the thread is required")
        out.append(
            Case(
                id=raw["id"],
                category=raw["category"],
                source=raw["source"],
                paste=raw["paste"],
                error=raw.get("error") or "",
                torch=versions.get("torch") or "",
                lightning=versions.get("lightning") or "",
                cuda=versions.get("cuda") or "",
                entries=entries,
                as_=as_,
                fixes=fixes,
                must_not=_strings(expected.get("must_not"), f"{at}: expected.must_not"),
                why=expected["why"],
                line=line,
            )
        )
    return out


def is_variant_id(text: str) -> bool:
    return bool(_VARIANT_ID.match(text))


def check_against(cases: Sequence[Case], entries: Iterable[Any], path: Path = CASES) -> list[str]:
    """What in ``cases`` the catalogue contradicts: an entry id that is no entry, a fix that
    is no variant of an expected entry, a must_not variant id that no entry has."""
    variants = {e.id: {v.name for v in e.variants} for e in entries}
    every = set().union(*variants.values()) if variants else set()
    problems = []
    for c in cases:
        at = f"{path}:{c.line}: {c.id}"
        for e in c.entries:
            if e not in variants:
                problems.append(f"{at}: expected.entry: {e!r} is no entry of repros/")
        names = set().union(*(variants.get(e, set()) for e in c.entries)) if c.entries else set()
        for f in c.fixes:
            if f not in names:
                problems.append(f"{at}: expected.fix: {f!r} is no variant of {list(c.entries)}")
        for m in c.must_not:
            if is_variant_id(m) and m not in every:
                problems.append(f"{at}: expected.must_not: {m!r} is no variant of any entry")
    return problems


# -- judging -------------------------------------------------------------------------------


def presented_as_working(variant: Mapping[str, Any]) -> bool:
    kind, advice = variant.get("kind"), variant.get("advice")
    return (kind == "workaround" and advice == "confirmed") or (
        kind == "dead_end" and advice == "contradicted"
    )


OWNING_KINDS = ("documented", "situation")


def headline_owns(answer: Mapping[str, Any]) -> bool:
    """Whether the answer's headline says the paste is the entry's own error: its ``kind``
    (explain's PASTE_KINDS: the documented error, or the situation a baseline raises)."""
    if "kind" in answer:
        return answer["kind"] in OWNING_KINDS
    return answer["match"]["how"] == "documented"


def offered(answer: Mapping[str, Any], variant: Mapping[str, Any]) -> bool:
    """A variant presented as working for the paste: an answer whose kind disowns the paste
    titles its fixes as for the entry's own error, not the paste's (an answer without a
    kind, as explain wrote before it said what a paste is: every fix shown as working)."""
    if "kind" not in answer:
        return presented_as_working(variant)
    return headline_owns(answer) and presented_as_working(variant)


def judge(case: Case, x: Mapping[str, Any], text: str = "") -> Judged:
    """``case`` graded from explain's answer ``x`` (Explanation.to_dict()) and its terminal
    rendering ``text`` (for must_not phrases), by the rules at the top of this file."""
    answers = list(x.get("answers") or [])
    guessed = bool(x.get("guessed"))
    named = [] if guessed else answers
    guesses = tuple(a["entry"] for a in answers) if guessed else ()
    top = named[0] if named else None
    j = Judged(case, RIGHT, top=top["entry"] if top else "", guesses=guesses)
    j.how = top["match"]["how"] if top else ("guess" if guessed else "")
    misleading: list[str] = []
    partly: list[str] = []
    for a in named:
        for v in a["variants"]:
            if v["name"] in case.must_not and offered(a, v):
                misleading.append(f"{v['name']} ({a['entry']}) presented as working: {v['advice']}")
    raised = (x.get("raised") or [{}])[0].get("type", "")
    read = raised.rsplit(".", 1)[-1]
    if case.error and read and read != case.error:
        partly.append(f"read a {read} as the error, not the {case.error} the paste reports")
    lowered = text.lower()
    for phrase in case.must_not:
        if not is_variant_id(phrase) and phrase.lower() in lowered:
            misleading.append(f"says {phrase!r}")
    if case.entries:
        if top is None:
            if guesses[:1] and guesses[0] in case.entries:
                partly.append("no entry named; the expected entry is only the first guess")
            else:
                said = f"closest: {guesses[0]}" if guesses else "nothing close"
                misleading.append(f"says no entry knows this error ({said})")
        elif top["entry"] not in case.entries:
            misleading.append(f"names {top['entry']} ({j.how}) as the answer")
        else:
            owns = headline_owns(top)
            if case.as_ == "documented" and not owns:
                partly.append(
                    f"headline disowns the paste (matched {j.how} via {top['match']['variant']})"
                )
            if case.as_ == "related" and owns:
                partly.append("headline calls a variant's error the entry's documented one")
            if case.fixes:
                working = [
                    v["name"]
                    for v in top["variants"]
                    if v["name"] in case.fixes and offered(top, v)
                ]
                if not working:
                    said = {
                        v["name"]: v["advice"] for v in top["variants"] if v["name"] in case.fixes
                    }
                    partly.append(f"expected fix not presented as working: {said or 'absent'}")
    elif top is not None:
        working = [v["name"] for v in top["variants"] if offered(top, v)]
        if headline_owns(top):
            misleading.append(f"names {top['entry']} as the answer (its documented signature)")
        elif working:
            misleading.append(
                f"names {top['entry']} ({j.how}); its fixes shown as working: {', '.join(working)}"
            )
        else:
            partly.append(f"names {top['entry']} ({j.how}), no fix of it shown as working")
    if misleading:
        j.grade, j.reasons = MISLEADING, misleading + partly
    elif partly:
        j.grade, j.reasons = PARTLY, partly
    return j


# -- running explain -------------------------------------------------------------------------


@dataclass(frozen=True)
class Catalogue:
    entries: tuple[Any, ...]
    table: Any
    aggs: list[Any]


def load_catalogue(repo: Path = ROOT, records: Path | None = None) -> Catalogue:
    """The entries and records `harness explain` reads in ``repo`` (``records``: another
    record folder, such as the committed tree's), aggregated once."""
    from harness.aggregate import aggregate_table
    from harness.spec.entries import load_entries
    from harness.store.columnar import load_latest
    from harness.store.jsonl import Store

    entries = tuple(load_entries(repo / "repros"))
    table = load_latest(Store(records or repo / "results" / "records"))
    return Catalogue(entries, table, aggregate_table(table, list(entries)))


def answer(case: Case, catalogue: Catalogue) -> tuple[dict[str, Any], str]:
    """explain's answer to ``case`` (its JSON) and its terminal rendering, plain."""
    from rich.console import Console

    from harness.catalogue.explain import Versions, explain
    from harness.catalogue.explain_terminal import render

    x = explain(
        case.paste,
        Versions(case.torch, case.lightning),
        catalogue.entries,
        catalogue.table,
        aggs=catalogue.aggs,
    )
    console = Console(record=True, width=200, file=io.StringIO())
    render(x, "given by the benchmark case", console)
    return x.to_dict(), console.export_text()


def run(cases: Sequence[Case], catalogue: Catalogue) -> list[Judged]:
    out = []
    for c in cases:
        x, text = answer(c, catalogue)
        out.append(judge(c, x, text))
    return out


def summary(judged: Sequence[Judged]) -> dict[str, dict[str, int]]:
    """Per category and in total: how many cases got each grade."""
    table: dict[str, dict[str, int]] = {}
    for key in (*CATEGORIES, "total"):
        chosen = [j for j in judged if key in ("total", j.case.category)]
        counts = Counter(j.grade for j in chosen)
        table[key] = {g: counts.get(g, 0) for g in GRADES} | {"cases": len(chosen)}
    return table


def share_right(judged: Sequence[Judged]) -> float:
    return sum(j.grade == RIGHT for j in judged) / len(judged) if judged else 0.0


def print_tables(judged: Sequence[Judged], each: bool) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console()
    if not console.is_terminal:
        console = Console(width=160)  # a CI log: the per-case table unfolded
    if each:
        t = Table(title="each case", show_lines=False)
        for col in ("case", "category", "grade", "answered", "why"):
            t.add_column(col, overflow="fold")
        for j in judged:
            answered = (
                j.top
                and f"{j.top} ({j.how})"
                or (f"guesses: {', '.join(j.guesses[:2])}" if j.guesses else "nothing")
            )
            t.add_row(j.case.id, j.case.category, j.grade, answered, "; ".join(j.reasons))
        console.print(t)
    t = Table(title="answers graded against the threads")
    for col in ("category", "cases", *GRADES, "share right"):
        t.add_column(col, justify="right" if col != "category" else "left")
    for key, row in summary(judged).items():
        share = row[RIGHT] / row["cases"] if row["cases"] else 0.0
        t.add_row(key, str(row["cases"]), *(str(row[g]) for g in GRADES), f"{share:.0%}")
    console.print(t)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cases", type=Path, default=CASES)
    p.add_argument("--repo", type=Path, default=ROOT, help="the repository whose records answer")
    p.add_argument("--json", type=Path, default=None, metavar="OUT", help="write the grades")
    p.add_argument("--each", action="store_true", help="a row per case")
    p.add_argument("--check", action="store_true", help=f"exit 1 below {FLOOR_RIGHT:.0%} right")
    p.add_argument("--quick", action="store_true", help="accepted for CI; changes nothing")
    args = p.parse_args(argv)
    try:
        cases = load_cases(args.cases)
    except (CasesError, OSError) as exc:
        print(f"bench_answers: {exc}", file=sys.stderr)
        return 2
    start = time.perf_counter()
    catalogue = load_catalogue(args.repo)
    problems = check_against(cases, catalogue.entries, args.cases)
    if problems:
        print("bench_answers: the cases disagree with the catalogue:", file=sys.stderr)
        for line in problems:
            print(f"  {line}", file=sys.stderr)
        return 2
    judged = run(cases, catalogue)
    print_tables(judged, args.each)
    share = share_right(judged)
    print(f"share right: {share:.1%} of {len(judged)} cases ({time.perf_counter() - start:.1f} s)")
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "summary": summary(judged),
                    "share_right": share,
                    "cases": [j.to_dict() for j in judged],
                },
                indent=1,
            )
            + "\n",
            encoding="utf-8",
        )
    if args.check and share < FLOOR_RIGHT:
        print(f"bench_answers: share right {share:.1%} is below the floor {FLOOR_RIGHT:.1%}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
