"""The documentation site read without network: a headless Chromium, whose every request for anything
but a local file is refused (scripts/browser.py), opens the built pages. The architecture page draws
its diagram, and no page asks for anything from the network (a diagram, script or font fetched from
a CDN at view time would be missing for an offline reader).

Needs Chromium and ChromeDriver (Debian: apt-get install chromium chromium-driver; .ci/run installs
them when they are missing). Without them the test is skipped on a developer's machine and fails in
CI (CI set), so that CI never passes without having looked at the pages."""

import os
import time

import pytest

import browser
import checks

# What the page reports about the diagram's <img>: loaded, its size, and how much of it is ink (the
# share of pixels darker than the boxes' fill: text, lines and borders) once drawn on a canvas.
DIAGRAM = """
const img = [...document.images].find(i => i.getAttribute("src").endsWith("diagrams/architecture.svg"));
if (!img) return {found: false};
const shown = img.getBoundingClientRect();
const result = {found: true, complete: img.complete, width: img.naturalWidth, height: img.naturalHeight,
                shownWidth: shown.width, shownHeight: shown.height, ink: 0,
                sourceShown: document.body.innerText.includes("flowchart TB")};
if (!img.complete || !img.naturalWidth) return result;
const canvas = document.createElement("canvas");
canvas.width = img.naturalWidth;
canvas.height = img.naturalHeight;
const context = canvas.getContext("2d");
context.drawImage(img, 0, 0);
const pixels = context.getImageData(0, 0, canvas.width, canvas.height).data;
let ink = 0;
for (let i = 0; i < pixels.length; i += 4) {
  if (pixels[i + 3] > 128 && pixels[i] + pixels[i + 1] + pixels[i + 2] < 3 * 160) ink++;
}
result.ink = ink / (canvas.width * canvas.height);
return result;
"""


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    path = tmp_path_factory.mktemp("site")
    result = checks.build_docs(path)
    assert result.returncode == 0, result.stdout + result.stderr
    return path


@pytest.fixture(scope="module")
def session():
    if browser.find_tools() is None:
        reason = f"no headless browser to check the site offline: {browser.INSTALL_HINT}"
        if os.environ.get("CI"):
            pytest.fail(f"{reason} (.ci/run installs them when apt-get is available)")
        pytest.skip(reason)
    with browser.Browser(timeout=30) as opened:  # a local page loads in about a second
        opened.open("about:blank")
        opened.requests()  # forget the browser's start page
        yield opened


def local(url: str) -> bool:
    return url.startswith(("file:", "data:", "blob:", "about:"))


def test_the_architecture_diagram_is_drawn_without_network(site, session):
    session.open((site / "architecture" / "index.html").as_uri())
    diagram = session.run(DIAGRAM)
    requested = session.requests()
    assert diagram["found"], "docs/architecture.md shows no diagrams/architecture.svg"
    assert diagram["complete"] and diagram["width"] > 400 and diagram["height"] > 300, diagram
    assert diagram["shownWidth"] > 300 and diagram["shownHeight"] > 200, f"the diagram is not shown: {diagram}"
    assert diagram["ink"] > 0.005, f"the diagram's image is blank: {diagram}"
    assert not diagram["sourceShown"], "the page shows the diagram's Mermaid source instead of the drawing"
    assert any(url.endswith("/diagrams/architecture.svg") for url in requested), requested
    assert not [url for url in requested if not local(url)], f"the page fetched from the network: {requested}"


def test_no_page_fetches_anything_from_the_network(site, session):
    pages = sorted(site.rglob("*.html"))
    assert len(pages) > 30
    remote = {}
    deadline = time.monotonic() + 300  # a bound on the whole walk, should requests start to hang
    for page in pages:
        assert time.monotonic() < deadline, f"the walk through the site took over 300 s, stopped at {page}"
        session.open(page.as_uri())
        fetched = [url for url in session.requests() if not local(url)]
        if fetched:
            remote[str(page.relative_to(site))] = fetched
    assert not remote, f"pages that need the network: {remote}"
