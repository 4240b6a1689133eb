"""The renderers' Jinja2 environment (harness/report/render/templating.py): text is escaped
as html.escape writes it, markup goes in as it is, templates' lines are joined, static files
are left alone, and the digest the render cache keys on covers every file."""

from __future__ import annotations

import html
import shutil

import jinja2
import pytest
from markupsafe import Markup

from harness.report.render import templating
from harness.report.render.templating import ROOT, environment, escape_text, template_digest

HOSTILE = "<script>alert('x')</script> \"quoted\" & <img src=x onerror=alert(1)>"


def test_text_is_escaped_as_html_escape_writes_it_and_markup_is_kept():
    assert escape_text(HOSTILE) == html.escape(HOSTILE, quote=True)
    assert "&#x27;" in escape_text(HOSTILE) and "&quot;" in escape_text(HOSTILE)
    assert escape_text(3) == "3" and escape_text(None) == "None"
    kept = Markup("<b>kept</b>")
    assert escape_text(kept) is kept


def test_a_template_escapes_every_value_and_a_macro_s_output_is_not_escaped_twice():
    env = environment()
    template = env.from_string(
        '{% macro b(x) %}<b>{{ x }}</b>{% endmacro %}<p title="{{ t }}">{{ t }}{{ b(t) }}</p>'
    )
    page = template.render(t=HOSTILE)
    escaped = html.escape(HOSTILE, quote=True)
    assert page == f'<p title="{escaped}">{escaped}<b>{escaped}</b></p>'
    assert "<script" not in page and "<img" not in page


def test_a_name_the_template_is_not_given_fails_the_render():
    with pytest.raises(jinja2.UndefinedError):
        environment().from_string("<p>{{ missing }}</p>").render()


def test_templates_lines_are_joined_and_static_files_are_left_as_they_are():
    env = environment()
    [ext] = env.extensions.values()
    source = "<ul>\n  <li>{{ a }}</li> \n\t<li>b c</li>\n</ul>\n"
    assert ext.preprocess(source, "templates/x.html") == "<ul><li>{{ a }}</li><li>b c</li></ul>"
    assert ext.preprocess(source, "static/x.js") == source
    css = env.get_template("static/report.css").render()
    assert css == (ROOT / "static" / "report.css").read_text(encoding="utf-8")
    assert css.count("\n") > 10


def test_every_template_compiles_and_the_script_takes_the_statuses_it_is_given():
    env = environment()
    names = sorted(p.name for p in (ROOT / "templates").glob("*.html"))
    assert names == ["contents_row.html", "domain.html", "entry.html", "heatmap.html", "page.html"]
    for name in names:
        env.get_template(f"templates/{name}")  # raises a TemplateSyntaxError if broken
    script = env.get_template("static/report.js").render(
        status_names=Markup('["ok"]'), section_entries=16, cell_entries=64
    )
    assert 'var O = ["ok"];' in script and "{{" not in script
    assert "SECTION_ENTRIES = 16, CELL_ENTRIES = 64;" in script


def test_the_digest_covers_every_template_and_static_file_by_name_and_bytes(tmp_path, monkeypatch):
    copy = tmp_path / "render"
    for folder in ("templates", "static"):
        shutil.copytree(ROOT / folder, copy / folder)
    real = template_digest()
    monkeypatch.setattr(templating, "ROOT", copy)
    assert template_digest() == real  # the same files give the same digest
    page = copy / "templates" / "page.html"
    page.write_bytes(page.read_bytes() + b" ")
    edited = template_digest()
    assert edited != real
    (copy / "static" / "report.js").rename(copy / "static" / "other.js")
    assert template_digest() not in (real, edited)
