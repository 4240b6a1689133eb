"""The HTML report in a real headless Chromium: it renders, its script runs, hostile text
in the data is not executed."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from test_render import entry, records  # noqa: I001  (tests/ is on sys.path under pytest)

from harness.report import render_all

CHROMIUM = Path("/usr/bin/chromium")
ARTIFACTS = Path(__file__).parent / "artifacts"

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
