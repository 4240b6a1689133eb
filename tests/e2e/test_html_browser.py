"""The HTML report in a real headless Chromium: it renders, its script runs, hostile text
in the data is not executed."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from harness.report.outputs import render_all
from tests.paths import REPO
from tests.report.test_render import entry, records

CHROMIUM = Path("/usr/bin/chromium")
ARTIFACTS = REPO / "tests" / "artifacts"

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(
        not CHROMIUM.exists(), reason="/usr/bin/chromium is absent (apt-get install chromium)"
    ),
]


def chromium(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    profile = tmp_path / "profile"
    cmd = [
        str(CHROMIUM),
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--no-first-run",
        f"--user-data-dir={profile}",
        *args,
    ]
    env = {**os.environ, "HOME": str(tmp_path)}
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env, check=True)


@pytest.fixture(scope="module")
def page(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("browser")
    render_all(records(), [entry(tmp)], tmp / "results")
    return tmp / "results" / "index.html"


def test_dom_after_script_ran(page, tmp_path):
    # a <script> in the page clicks the first cell, so the dumped DOM shows a detail panel
    clicking = page.with_name("click.html")
    clicking.write_text(
        page.read_text(encoding="utf-8").replace(
            "</body>", '<script>document.querySelector("td.c").click()</script></body>'
        ),
        encoding="utf-8",
    )
    dom = chromium(tmp_path, "--virtual-time-budget=5000", "--dump-dom", clicking.as_uri()).stdout
    assert 'data-ready="1"' in dom  # the page's own script ran to its end
    assert "<title>Measured compatibility</title>" in dom  # hostile text did not set document.title
    assert "pwned" not in dom.split("</head>")[0]
    assert dom.count('class="heatmap"') == 2  # cpu/fp16 and cuda/bf16
    assert 'class="c s0' in dom and 'class="verdicts"' in dom
    detail = dom.split('id="detail"', 1)[1]
    assert "<dl>" in detail and "Exception" in detail and "Machine" in detail
    # the message shows as text in the detail panel, its markup escaped
    assert "&lt;script&gt;document.title='pwned'&lt;/script&gt;" in detail
    assert "<img" not in dom


def test_screenshot_artifact(page, tmp_path):
    ARTIFACTS.mkdir(exist_ok=True)
    shot = ARTIFACTS / "report.png"
    shot.unlink(missing_ok=True)
    chromium(tmp_path, f"--screenshot={shot}", "--window-size=1400,1000", page.as_uri())
    assert shot.read_bytes().startswith(b"\x89PNG")


def test_look_up_my_versions_answers_from_the_tables(page, tmp_path):
    # choose torch 2.5.1 with lightning 2.1.4 (what the records say was installed) and look up
    script = (
        '<script>document.getElementById("lookup-torch").value="2.5.1";'
        'document.getElementById("lookup-lightning").value="2.1.4";'
        'document.getElementById("lookup-go").click()</script></body>'
    )
    looking = page.with_name("lookup.html")
    looking.write_text(
        page.read_text(encoding="utf-8").replace("</body>", script), encoding="utf-8"
    )
    dom = chromium(tmp_path, "--virtual-time-budget=5000", "--dump-dom", looking.as_uri()).stdout
    out = dom.split('id="lookup-out"', 1)[1].split("</section>", 1)[0]
    assert "1 entry was measured on torch 2.5.1 with lightning 2.1.4" in out
    assert "pytorch/hostile" in out
    # the baseline's cell as the heatmap shows it: reproduced (✖) in cpu-fp16
    base = out.split("<td>base</td>", 1)[1].split("</tr>", 1)[0]
    assert "✖" in base and 'class="c s0' in base
    assert "not run" in base  # cuda-bf16 was not run for this pair: said, never inferred
    options = dom.split('id="lookup-torch"', 1)[1].split("</select>", 1)[0]
    assert options.index(">1.12.1<") < options.index(">2.5.1<")
