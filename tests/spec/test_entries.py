"""Entry files: the real seeds load; every malformed entry fails with file:line and what to change."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from harness.spec.entries import EntryError, load_entries, load_entry, measures_kind
from tests.paths import REPO

GOOD = """\
id: demo/err
signature: {type: RuntimeError, message: "boom"}
variants:
  - {name: baseline, kind: baseline, description: "raises"}
  - {name: control, kind: control, description: "works"}
"""


# a variant function for the literals below (line 1 to 3): the statement after it is line 4
F = "def f(device, precision):\n    return {}\n\n"
REPRO = F + 'VARIANTS = {"baseline": f, "control": f}\n'


def make(tmp_path: Path, text: str, entry_id: str = "demo/err", repro: str = REPRO) -> Path:
    d = tmp_path / entry_id
    d.mkdir(parents=True, exist_ok=True)
    (d / "entry.yaml").write_text(textwrap.dedent(text))
    for name in ("source.md", "document.md"):
        (d / name).write_text("x\n")
    (d / "repro.py").write_text(repro)
    return d


def test_the_seed_entries_load() -> None:
    entries = load_entries(REPO / "repros")
    ids = [e.id for e in entries]
    assert "pytorch/grad-scale-unscale-error" in ids
    assert "lightning/gradient-clipping-optimizer-handles-unscaling" in ids
    for e in entries:
        kinds = {v.kind for v in e.variants}
        assert {"baseline", "control"} <= kinds
        assert e.source.read_text() and e.repro.is_file()


def test_good_entry(tmp_path: Path) -> None:
    e = load_entry(make(tmp_path, GOOD), tmp_path)
    assert e.id == "demo/err" and [v.name for v in e.variants] == ["baseline", "control"]
    assert e.variant("control").precisions == ("fp32", "fp16", "bf16")


@pytest.mark.parametrize(
    ("text", "line", "message"),
    [
        (
            GOOD.replace('signature: {type: RuntimeError, message: "boom"}\n', ""),
            1,
            "lacks required key(s): signature",
        ),
        (GOOD.replace("kind: control", "kind: fix"), 5, "unknown variant kind 'fix'"),
        (
            GOOD.replace("name: control", "name: baseline"),
            5,
            "duplicate variant name 'baseline' (first at line 4)",
        ),
        (GOOD.replace('message: "boom"', 'message: "boom("'), 2, "not a valid regular expression"),
        (GOOD.replace("id: demo/err", "id: demo/other"), 1, "must equal its folder 'demo/err'"),
        (GOOD.replace("id: demo/err", "id: ../../x"), 1, "must match"),
        (GOOD + "colour: red\n", 6, "unknown key 'colour'"),
        (
            GOOD.replace('description: "works"', 'description: "works", precisions: [fp8]'),
            5,
            "unknown precision 'fp8'",
        ),
        (
            GOOD.replace(
                "variants:\n", "variants:\n  - !!python/object/apply:os.system [echo hi]\n"
            ),
            4,
            "YAML tag 'tag:yaml.org,2002:python/object/apply:os.system' is not allowed",
        ),
        (GOOD.replace("kind: baseline", "kind: workaround"), 3, "at least one baseline"),
        ("id: [unclosed\n", 2, "not valid YAML"),
        (
            GOOD + "claims:\n  version_table:\n    - {spec: 'tensorflow>=2', status: active}\n",
            8,
            "names 'tensorflow'",
        ),
        (
            GOOD + "claims:\n  version_table:\n    - {spec: 'torch>=>2', status: active}\n",
            8,
            "version_table spec 'torch>=>2'",
        ),
        (
            GOOD + "claims:\n  version_table:\n    - {spec: 'torch>=2', status: maybe}\n",
            8,
            "status 'maybe' says neither",
        ),
        (
            GOOD + "claims:\n  version_table:\n    - {spec: torch, status: active, "
            "introduced: soon}\n",
            8,
            "introduced 'soon' is not a version",
        ),
        (
            GOOD.replace(
                'kind: baseline, description: "raises"',
                'kind: baseline, description: "raises", claim: {ref: "x", rate: 0.5}',
            ),
            4,
            "a baseline carries no claimed rate",
        ),
        (
            GOOD.replace(
                'description: "works"',
                'description: "works", signature: {type: ValueError, message: "x"}',
            ),
            5,
            "a control must pass everywhere",
        ),
        (
            GOOD.replace(
                'kind: baseline, description: "raises"',
                'kind: baseline, description: "raises", '
                'signature: {type: RuntimeError, message: "boom"}',
            ),
            4,
            "its signature is the documented one",
        ),
    ],
)
def test_malformed_entries_are_named(tmp_path: Path, text: str, line: int, message: str) -> None:
    d = make(tmp_path, text)
    with pytest.raises(EntryError) as info:
        load_entry(d, tmp_path)
    assert info.value.line == line, str(info.value)
    assert message in info.value.message
    assert str(info.value).startswith(f"{d / 'entry.yaml'}:{line}: ")


def test_missing_files_and_escapes_are_refused(tmp_path: Path) -> None:
    d = make(tmp_path, GOOD)
    (d / "repro.py").unlink()
    with pytest.raises(EntryError, match="repro file 'repro.py' does not exist"):
        load_entry(d, tmp_path)
    d2 = make(tmp_path, "repro: ../../../etc/passwd\n" + GOOD, entry_id="demo/esc")
    (d2 / "entry.yaml").write_text((d2 / "entry.yaml").read_text().replace("demo/err", "demo/esc"))
    with pytest.raises(EntryError, match="must stay inside"):
        load_entry(d2, tmp_path)


# -- entry.yaml and repro.py name the same variants (read with ast: no torch) -------------


def test_a_variant_repro_py_lacks_is_named_at_its_entry_line(tmp_path: Path) -> None:
    d = make(tmp_path, GOOD, repro=F + 'VARIANTS = {"baseline": f}\n')
    with pytest.raises(EntryError) as info:
        load_entry(d, tmp_path)
    assert str(info.value).startswith(f"{d / 'entry.yaml'}:5: variant 'control' is not implemented")


def test_a_variant_entry_yaml_lacks_is_named_at_its_repro_line(tmp_path: Path) -> None:
    repro = F + 'VARIANTS = {\n    "baseline": f,\n    "control": f,\n    "contrl": f,\n}\n'
    d = make(tmp_path, GOOD, repro=repro)
    with pytest.raises(EntryError) as info:
        load_entry(d, tmp_path)
    assert str(info.value).startswith(f"{d / 'repro.py'}:7: VARIANTS names 'contrl'")


@pytest.mark.parametrize(
    ("repro", "line", "message"),
    [
        ("x = 1\n", None, "no module-level VARIANTS literal"),
        (F + "VARIANTS = dict(baseline=f)\n", 4, "must be a dict literal"),
        (F + 'VARIANTS = ["baseline", "control"]\n', 4, "must be a dict literal"),
        (F + 'VARIANTS = {"baseline": f, NAME: f}\n', 4, "every name must be a string literal"),
        (F + 'VARIANTS = {"baseline": f,\n "baseline": None}\n', 5, "'baseline' twice"),
        (F + 'VARIANTS = {"baseline": f, "control": g}\n', 4, "must name a function defined"),
        (F + 'VARIANTS = {"baseline": f, "control": f.g}\n', 4, "not 'f.g'"),
        ('VARIANTS = {"baseline": "raises"}\n', 1, "description lives in entry.yaml"),
        (
            "def f(device):\n    pass\nVARIANTS = {'baseline': f}\n",
            1,
            "must take (device, precision)",
        ),
        ("VARIANTS = {\n", 1, "not valid Python"),
    ],
)
def test_a_malformed_variants_literal_is_named(
    tmp_path: Path, repro: str, line: int | None, message: str
) -> None:
    d = make(tmp_path, GOOD, repro=repro)
    with pytest.raises(EntryError) as info:
        load_entry(d, tmp_path)
    assert info.value.path == str(d / "repro.py") and info.value.line == line, str(info.value)
    assert message in info.value.message


def test_not_written_variants_load_and_are_never_planned(tmp_path: Path) -> None:
    from harness.execute.plan import make_plan
    from harness.spec.matrix import Cell, Environment, Expansion

    repro = F + 'VARIANTS = {"baseline": None, "control": f}\n'
    entry = load_entry(make(tmp_path, GOOD, repro=repro), tmp_path)
    assert [v.written for v in entry.variants] == [False, True]
    cell = Cell(Environment("3.11", "2.13.0", "2.6.6"), "cpu", "fp32")
    plan = make_plan(Expansion("p", (cell,), (), 1), [entry])
    assert [j.variant.name for j in plan.jobs] == ["control"]
    assert [(n.variant, n.reason) for n in plan.not_applicable] == [
        ("baseline", "not written yet (repro.py maps it to None in VARIANTS)")
    ]


def test_origin_facts_are_checked(tmp_path: Path) -> None:
    d = make(tmp_path, GOOD + "origin: {format: deadends-json, url: 'https://x', colour: red}\n")
    with pytest.raises(EntryError, match="unknown key 'colour' in origin"):
        load_entry(d, tmp_path)
    d = make(tmp_path, GOOD + "origin: {format: deadends-json, confidence: 0.8}\n", "demo/ok")
    (d / "entry.yaml").write_text((d / "entry.yaml").read_text().replace("demo/err", "demo/ok"))
    assert load_entry(d, tmp_path).origin == {"format": "deadends-json", "confidence": 0.8}


# -- fails_as: a dead end's silent documented failure ------------------------------------

SILENT = """\
id: demo/err
signature: {type: RuntimeError, message: "boom"}
variants:
  - {name: baseline, kind: baseline, description: "raises"}
  - name: deadend1
    kind: dead_end
    description: "strict=False"
    fails_as:
      outcome: wrong_result
      postconditions: [weights_loaded]
  - {name: control, kind: control, description: "works"}
"""
SILENT_REPRO = (
    "def run(device, precision):\n"
    '    checks = {"weights_loaded": {"ok": False, "detail": ""}}\n'
    '    for name in ("first", "second"):\n'
    '        checks["grad_" + name] = {"ok": True, "detail": ""}\n'
    '        checks[f"moved_{name}_weight"] = {"ok": True, "detail": ""}\n'
    "    return checks\n"
    'VARIANTS = {"baseline": run, "deadend1": run, "control": run}\n'
)


def test_fails_as_loads_with_the_postconditions_repro_py_writes(tmp_path: Path) -> None:
    entry = load_entry(make(tmp_path, SILENT, repro=SILENT_REPRO), tmp_path)
    fails_as = entry.variant("deadend1").fails_as
    assert fails_as is not None
    assert (fails_as.outcome, fails_as.postconditions, fails_as.line) == (
        "wrong_result",
        ("weights_loaded",),
        10,
    )
    assert entry.variant("baseline").fails_as is None
    # names built as "literal" + ... and as f-strings are names repro.py can report
    text = SILENT.replace("[weights_loaded]", "[grad_first, moved_second_weight]")
    d = make(tmp_path, text.replace("demo/err", "demo/built"), "demo/built", SILENT_REPRO)
    fails_as = load_entry(d, tmp_path).variant("deadend1").fails_as
    assert fails_as is not None and fails_as.postconditions == ("grad_first", "moved_second_weight")


@pytest.mark.parametrize(
    ("old", "new", "line", "message"),
    [
        ("[weights_loaded]", "[weights_lodaed]", 10, "never writes"),
        ("[weights_loaded]", "[weights_lodaed]", 10, "did you mean 'weights_loaded'"),
        ("[weights_loaded]", "[moved_weight]", 10, "'moved_weight', which repro.py never"),
        (
            "outcome: wrong_result",
            "outcome: other_error",
            9,
            "declares that error as its signature",
        ),
        ("outcome: wrong_result", "outcome: wrong", 9, "must be one of ['wrong_result']"),
        ("[weights_loaded]", "[]", 10, "a non-empty list of names"),
        ("[weights_loaded]", "weights_loaded", 10, "a non-empty list of names"),
        ("[weights_loaded]", "[weights_loaded, weights_loaded]", 10, "'weights_loaded' twice"),
        ("      outcome: wrong_result\n", "", 9, "lacks required key(s): outcome"),
        (
            "      outcome: wrong_result\n",
            "      outcome: wrong_result\n      rate: 1\n",
            10,
            "unknown key 'rate'",
        ),
        ("kind: dead_end", "kind: workaround", 8, "a workaround is judged on passing"),
        (
            "    fails_as:\n      outcome: wrong_result\n      postconditions: [weights_loaded]\n",
            "    fails_as: weights_loaded\n",
            8,
            "fails_as must be a mapping",
        ),
    ],
)
def test_a_malformed_fails_as_is_named(
    tmp_path: Path, old: str, new: str, line: int, message: str
) -> None:
    assert old in SILENT
    d = make(tmp_path, SILENT.replace(old, new), repro=SILENT_REPRO)
    with pytest.raises(EntryError) as info:
        load_entry(d, tmp_path)
    assert (info.value.path, info.value.line) == (str(d / "entry.yaml"), line), str(info.value)
    assert message in info.value.message


SILENT_BASELINE = SILENT.replace(
    '  - {name: baseline, kind: baseline, description: "raises"}\n',
    "  - name: baseline\n"
    "    kind: baseline\n"
    '    description: "the documented situation; torch raises nothing"\n'
    "    fails_as:\n"
    "      outcome: wrong_result\n"
    "      postconditions: [weights_loaded]\n"
    '      instead: "torch raises nothing: the weights stay unloaded, silently"\n',
)


def test_a_baseline_declares_its_silent_situation_with_instead(tmp_path: Path) -> None:
    entry = load_entry(make(tmp_path, SILENT_BASELINE, repro=SILENT_REPRO), tmp_path)
    baseline = entry.variant("baseline")
    assert baseline.fails_as is not None
    assert baseline.fails_as.postconditions == ("weights_loaded",)
    assert baseline.fails_as.instead == "torch raises nothing: the weights stay unloaded, silently"
    # never a failure a baseline is counted for: its rate is the documented error's alone
    assert measures_kind(baseline) is None
    assert entry.variant("deadend1").fails_as.instead == ""  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        # a baseline says why its silent failure is the documented situation
        (
            '      instead: "torch raises nothing: the weights stay unloaded, silently"\n',
            "",
            "lacks required key(s): instead",
        ),
        ('"torch raises nothing: the weights stay unloaded, silently"', '""', "must be one line"),
        (
            "      outcome: wrong_result\n      postconditions: [weights_loaded]\n      instead",
            "      outcome: wrong_result\n      postconditions: [weights_loaded]\n      measures: slower\n      instead",
            "unknown key 'measures'",
        ),
        ("[weights_lodaed]", "[weights_lodaed]", "never writes"),
    ],
)
def test_a_malformed_baseline_fails_as_is_named(
    tmp_path: Path, old: str, new: str, message: str
) -> None:
    text = SILENT_BASELINE.replace(old, new, 1)
    if old == "[weights_lodaed]":  # a name repro.py never writes, on the baseline's list
        text = SILENT_BASELINE.replace("[weights_loaded]", old, 1)
    assert text != SILENT_BASELINE
    with pytest.raises(EntryError) as info:
        load_entry(make(tmp_path, text, repro=SILENT_REPRO), tmp_path)
    assert message in info.value.message, str(info.value)


def test_instead_on_a_dead_ends_fails_as_is_refused(tmp_path: Path) -> None:
    text = SILENT.replace(
        "      postconditions: [weights_loaded]\n",
        '      postconditions: [weights_loaded]\n      instead: "no"\n',
    )
    with pytest.raises(EntryError) as info:
        load_entry(make(tmp_path, text, repro=SILENT_REPRO), tmp_path)
    assert "unknown key 'instead'" in info.value.message


# -- a documented message that torch words differently: signature.reworded --------------------

REWORDED = """\
id: demo/err
signature:
  type: IndexError
  message: "index out of range in Embedding"
  reworded:
    message: "index out of range in self"
    why: "torch's embedding kernel names its weight argument self, not the module"
variants:
  - {name: baseline, kind: baseline, description: "raises"}
  - {name: control, kind: control, description: "works"}
"""


def test_a_declared_rewording_loads_with_its_reason(tmp_path: Path) -> None:
    entry = load_entry(make(tmp_path, REWORDED), tmp_path)
    assert entry.signature.type == "IndexError"
    assert entry.reworded is not None
    assert entry.reworded.message == "index out of range in self"
    assert entry.reworded.why.startswith("torch's embedding kernel")
    assert entry.reworded.line == 5
    plain = make(tmp_path, GOOD.replace("demo/err", "demo/plain"), "demo/plain")
    assert load_entry(plain, tmp_path).reworded is None
    assert entry.reworded.type == ""  # read under the documented type


def test_a_baseline_may_declare_its_error_is_what_torch_says_instead(tmp_path: Path) -> None:
    said = GOOD.replace(
        '{name: baseline, kind: baseline, description: "raises"}',
        '{name: baseline, kind: baseline, description: "raises", signature: {type: E, '
        'message: "x", instead: "torch words it so"}}',
    )
    assert said != GOOD
    entry = load_entry(make(tmp_path, said), tmp_path)
    assert entry.variant("baseline").signature.instead == "torch words it so"
    on_workaround = said.replace(
        'kind: baseline, description: "raises"', 'kind: dead_end, description: "raises"'
    )
    with pytest.raises(EntryError, match="instead belongs to a baseline"):
        load_entry(
            make(tmp_path, on_workaround.replace("demo/err", "demo/de"), "demo/de"), tmp_path
        )
    empty = said.replace('instead: "torch words it so"', 'instead: ""')
    with pytest.raises(EntryError, match="instead must be one line"):
        load_entry(make(tmp_path, empty.replace("demo/err", "demo/e2"), "demo/e2"), tmp_path)


def test_a_rewording_may_name_the_subclass_torch_raises(tmp_path: Path) -> None:
    text = REWORDED.replace('    why: "torch', '    type: "torch.onnx.errors.Sub"\n    why: "torch')
    entry = load_entry(make(tmp_path, text), tmp_path)
    assert entry.reworded is not None and entry.reworded.type == "torch.onnx.errors.Sub"


@pytest.mark.parametrize(
    ("old", "new", "line", "message"),
    [
        ('    why: "torch', '    because: "torch', 7, "unknown key 'because'"),
        (
            '    why: "torch\'s embedding kernel names its weight argument self, not the module"\n',
            "",
            6,
            "lacks required key(s): why",
        ),
        ('message: "index out of range in self"', 'message: "in (self"', 6, "not a valid regular"),
        (
            'message: "index out of range in self"',
            'message: "index out of range in Embedding"',
            6,
            "is the documented message",
        ),
        (
            'why: "torch\'s embedding kernel names its weight argument self, not the module"',
            'why: ""',
            7,
            "one line",
        ),
        ("why: \"torch's", 'why: "line one\\nline two', 7, "one line"),
        (
            '    why: "torch',
            '    type: "not a class!"\n    why: "torch',
            7,
            "must name an exception class",
        ),
        (
            '  reworded:\n    message: "index out of range in self"\n    why: "torch\'s '
            'embedding kernel names its weight argument self, not the module"\n',
            '  reworded: "index out of range in self"\n',
            5,
            "reworded must be a mapping",
        ),
    ],
)
def test_a_malformed_rewording_is_named(
    tmp_path: Path, old: str, new: str, line: int, message: str
) -> None:
    assert old in REWORDED
    d = make(tmp_path, REWORDED.replace(old, new))
    with pytest.raises(EntryError) as info:
        load_entry(d, tmp_path)
    assert info.value.line == line, str(info.value)
    assert message in info.value.message


def test_a_variant_signature_cannot_declare_a_rewording(tmp_path: Path) -> None:
    text = GOOD.replace(
        'kind: baseline, description: "raises"',
        'kind: baseline, description: "raises", signature: {type: ValueError, message: "x", '
        'reworded: {message: "y", why: "z"}}',
    )
    with pytest.raises(EntryError) as info:
        load_entry(make(tmp_path, text), tmp_path)
    assert info.value.line == 4 and "reworded belongs to the documented signature" in str(
        info.value
    )


REQUIRES = """\
id: demo/err
signature: {type: RuntimeError, message: "boom"}
requires: ["onnx>=1.14"]
variants:
  - {name: baseline, kind: baseline, description: "raises"}
  - name: control
    kind: control
    description: "works"
    requires: ["numpy<2", "onnx==1.16.*"]
"""


def test_requires_on_an_entry_and_a_variant_load_and_merge(tmp_path: Path) -> None:
    e = load_entry(make(tmp_path, REQUIRES), tmp_path)
    assert e.requires == ("onnx>=1.14",)
    assert e.variant("control").requires == ("numpy<2", "onnx==1.16.*")
    assert e.variant("baseline").requires == ()
    # what a variant runs with: the entry's, the variant's own replacing one of the same package
    assert e.requirements_for(e.variant("baseline")) == ("onnx>=1.14",)
    assert e.requirements_for(e.variant("control")) == ("numpy<2", "onnx==1.16.*")


@pytest.mark.parametrize(
    ("text", "line", "message"),
    [
        (
            REQUIRES.replace('["numpy<2", "onnx==1.16.*"]', '"numpy<2"'),
            9,
            "requires must be a non-empty list of requirement strings",
        ),
        (
            REQUIRES.replace('"numpy<2", ', '"numpy<<2", '),
            9,
            "requires: 'numpy<<2' is not a PEP 508 requirement",
        ),
        (
            REQUIRES.replace('"numpy<2", ', '"numpy<2", "NumPy>=1.20", '),
            9,
            "requires names numpy twice",
        ),
        (
            REQUIRES.replace('"numpy<2", ', '"tiny @ https://example.org/tiny.whl", '),
            9,
            "a direct reference",
        ),
        (REQUIRES.replace('["onnx>=1.14"]', "[]"), 3, "requires must be a non-empty list"),
        # what uv would read as a local file, or a record cannot hold
        (
            REQUIRES.replace('"numpy<2", ', '"evil-1.0-py3-none-any.whl", '),
            9,
            "names a file or an arbitrary string",
        ),
        (REQUIRES.replace('"numpy<2", ', '"six===../../..", '), 9, "names a file or"),
        (REQUIRES.replace('["onnx>=1.14"]', "[null]"), 3, "None is not a string"),
        (REQUIRES.replace('["onnx>=1.14"]', "[5]"), 3, "5 is not a string"),
        (
            REQUIRES.replace('"numpy<2", ', '"' + "a" * 250 + '", '),
            9,
            "a package name of 250 characters",
        ),
        (
            REQUIRES.replace(
                '["onnx>=1.14"]', "[" + ", ".join(f'"p{i}"' for i in range(300)) + "]"
            ),
            3,
            "requires lists 300 requirements",
        ),
    ],
)
def test_a_malformed_requires_is_named(tmp_path: Path, text: str, line: int, message: str) -> None:
    with pytest.raises(EntryError) as info:
        load_entry(make(tmp_path, text), tmp_path)
    assert f"entry.yaml:{line}:" in str(info.value)
    assert message in str(info.value)


# -- what a claim means: kind, condition, what is unmeasured, a diagnostic's detection ----

MEANING = """\
id: demo/err
signature: {type: RuntimeError, message: "boom"}
variants:
  - {name: baseline, kind: baseline, description: "raises"}
  - name: deadend1
    kind: dead_end
    description: "slower"
    claim: {ref: "dead end 1", rate: 0.7, kind: slower, condition: "only on a GPU", within: "x"}
    fails_as: {outcome: wrong_result, postconditions: [weights_loaded], measures: slower}
  - name: control
    kind: workaround
    description: "a check"
    claim: {ref: "workaround 1", kind: diagnostic, detects: [grad_first]}
"""


def test_a_claims_meaning_loads(tmp_path: Path) -> None:
    from harness.spec.entries import failure_kind, measures_kind

    entry = load_entry(make(tmp_path, MEANING, repro=SILENT_REPRO), tmp_path)
    de = entry.variant("deadend1")
    assert (de.meaning.kind, de.meaning.condition, de.meaning.within) == (
        "slower",
        "only on a GPU",
        "x",
    )
    assert de.fails_as is not None and de.fails_as.measures == "slower"
    assert failure_kind(de) == measures_kind(de) == "slower"
    wa = entry.variant("control")
    assert (wa.meaning.kind, wa.meaning.detects) == ("diagnostic", ("grad_first",))
    # without a declared kind: an error, or what fails_as measures
    plain = load_entry(
        make(tmp_path, SILENT.replace("demo/err", "demo/p"), "demo/p", SILENT_REPRO), tmp_path
    )
    assert failure_kind(plain.variant("deadend1")) == "wrong-result"


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        ("kind: slower,", "kind: faster,", "claim.kind 'faster' is not a kind a dead_end's claim"),
        ("kind: diagnostic,", "kind: slower,", "claim.kind 'slower' is not a kind a workaround's"),
        (', condition: "only on a GPU"', "", "claim.within says how the variant meets"),
        ("kind: diagnostic, detects", "detects", "claim.detects belongs to a diagnostic"),
        ("measures: slower", "measures: raises", "fails_as.measures must be one of"),
        (
            "[grad_first]",
            "[nowhere_written]",
            "claim.detects names postcondition 'nowhere_written'",
        ),
        ('within: "x"', 'within: ""', "claim.within must be one line"),
    ],
)
def test_a_malformed_claim_meaning_is_named(
    tmp_path: Path, old: str, new: str, message: str
) -> None:
    assert old in MEANING
    d = make(tmp_path, MEANING.replace(old, new), repro=SILENT_REPRO)
    with pytest.raises(EntryError) as info:
        load_entry(d, tmp_path)
    assert message in info.value.message, str(info.value)


def test_the_requires_limits_are_the_records() -> None:
    """A requires: list the loader takes is one a record can hold (no run dies at the end
    with a refused record)."""
    from harness.spec import entries
    from harness.store import validate

    assert entries.MAX_REQUIREMENTS == validate.MAX_ITEMS
    assert entries.MAX_REQUIREMENT_NAME == validate.MAX_ID
    assert entries.MAX_REQUIREMENT_CHARS == validate.MAX_VALUE


def test_a_documented_signature_may_say_only_cuda_raises_it(tmp_path: Path) -> None:
    text = GOOD.replace('message: "boom"}', 'message: "boom", device: cuda}')
    assert load_entry(make(tmp_path, text), tmp_path).signature.device == "cuda"
    bad = GOOD.replace('message: "boom"}', 'message: "boom", device: cpu}')
    with pytest.raises(EntryError, match="device must be 'cuda'"):
        load_entry(make(tmp_path, bad.replace("demo/err", "demo/bad"), "demo/bad"), tmp_path)


def test_gpu_exclusive_on_the_entry_is_every_variant_s_unless_one_says_shared(
    tmp_path: Path,
) -> None:
    text = GOOD.replace(
        "variants:\n",
        "gpu: exclusive\nvariants:\n",
    ).replace(
        '{name: control, kind: control, description: "works"}',
        '{name: control, kind: control, description: "works", gpu: shared}',
    )
    e = load_entry(make(tmp_path, text), tmp_path)
    assert [v.gpu for v in e.variants] == ["exclusive", "shared"]
    # the default: every variant shares the device
    assert {v.gpu for v in load_entry(make(tmp_path / "b", GOOD), tmp_path / "b").variants} == {
        "shared"
    }


@pytest.mark.parametrize(
    ("replace", "line", "message"),
    [
        (
            ("variants:\n", "gpu: alone\nvariants:\n"),
            3,
            "gpu must be one of ['shared', 'exclusive']",
        ),
        (
            ('description: "raises"}', 'description: "raises", gpu: everything}'),
            4,
            "gpu must be one of",
        ),
        (
            ('description: "raises"}', 'description: "raises", devices: [cpu], gpu: exclusive}'),
            4,
            "variant 'baseline' runs on ['cpu'] only",
        ),
    ],
)
def test_a_bad_gpu_names_file_line_and_problem(
    tmp_path: Path, replace: tuple[str, str], line: int, message: str
) -> None:
    d = make(tmp_path, GOOD.replace(*replace))
    with pytest.raises(EntryError) as info:
        load_entry(d, tmp_path)
    assert f"entry.yaml:{line}:" in str(info.value) and message in str(info.value)


def test_a_device_need_on_a_variant_that_never_runs_on_cuda_names_the_line(
    tmp_path: Path,
) -> None:
    text = GOOD.replace(
        'description: "raises"}', 'description: "raises", devices: [cpu], needs: [two-gpus]}'
    )
    with pytest.raises(EntryError) as info:
        load_entry(make(tmp_path, text), tmp_path)
    assert "entry.yaml:4:" in str(info.value)
    assert "needs ['two-gpus'] are needs of a cuda cell" in str(info.value)
