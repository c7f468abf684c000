"""Renders the documentation's diagrams: each docs/**/*.mmd (Mermaid source) into an .svg beside it.

The site shows the committed SVG, so a page draws its diagram without JavaScript and without network
access (Mermaid itself, run at view time, would be fetched from a CDN). Each SVG records the digest of
its source; tests/test_docs.py fails when a source changed and its SVG was not rendered again.

    python scripts/render_diagrams.py           render every diagram whose source changed
    python scripts/render_diagrams.py --all     render all of them
    python scripts/render_diagrams.py --check   only report stale diagrams

Needs Node.js with npm (Mermaid is installed from the npm registry into .work/, once) and Chromium with
ChromeDriver (apt-get install chromium chromium-driver), which lays the diagram out with real fonts.
"""

from __future__ import annotations

import argparse
import hashlib
import re
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import browser  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
MERMAID_VERSION = "11.17.2"
MERMAID_DIR = ROOT / ".work" / f"mermaid-{MERMAID_VERSION}"
# Labels are measured with the fonts of the rendering machine (DejaVu Sans on Debian); Verdana has
# about the same widths, and Arial is narrower, so the labels fit their boxes wherever the SVG is shown.
FONTS = '"DejaVu Sans", Verdana, Arial, sans-serif'
HEADER = "<!-- Rendered from {source} (sha256 {digest}) with Mermaid {version} by scripts/render_diagrams.py: edit the source and render again. -->\n"  # noqa: E501


def digest(source: Path) -> str:
    return hashlib.sha256(source.read_bytes()).hexdigest()


def recorded_digest(svg: Path) -> str | None:
    match = re.search(r"\(sha256 ([0-9a-f]{64})\)", svg.read_text()[:500]) if svg.exists() else None
    return match.group(1) if match else None


def sources() -> list[Path]:
    return sorted(DOCS.rglob("*.mmd"))


def stale() -> list[Path]:
    """Sources whose SVG is missing or was rendered from another version of them."""
    return [s for s in sources() if recorded_digest(s.with_suffix(".svg")) != digest(s)]


def mermaid_js() -> Path:
    script = MERMAID_DIR / "node_modules" / "mermaid" / "dist" / "mermaid.min.js"
    if not script.exists():
        MERMAID_DIR.mkdir(parents=True, exist_ok=True)
        command = ["npm", "install", "--prefix", str(MERMAID_DIR), "--no-audit", "--no-fund", "--no-save"]
        subprocess.run([*command, f"mermaid@{MERMAID_VERSION}"], check=True, timeout=600)
    return script


RENDER = """
const [source, fonts, done] = arguments;
mermaid.initialize({
  startOnLoad: false, theme: "default", securityLevel: "strict", fontFamily: fonts,
  // SVG text instead of HTML in <foreignObject>: the file is shown with <img>, which needs plain SVG;
  // lines break where the source has <br/>, not earlier.
  flowchart: {htmlLabels: false, wrappingWidth: 260}, htmlLabels: false,
});
mermaid.render("diagram", source).then(r => done({svg: r.svg}), e => done({error: String(e)}));
"""


def render(source: Path, session: browser.Browser, page: Path) -> Path:
    result = session.run_async(RENDER, source.read_text(), FONTS)
    if "error" in result:
        raise RuntimeError(f"{source.relative_to(ROOT)}: {result['error']}")
    svg = result["svg"]
    # An opaque background, so that the diagram reads in the site's dark scheme as well, and a size:
    # Mermaid writes width="100%", which leaves an <img> without an intrinsic size.
    svg = re.sub(r'(<svg[^>]*?style=")', r"\1background-color: white; ", svg, count=1)
    width, height = (round(float(v)) for v in re.search(r'viewBox="[-\d.]+ [-\d.]+ ([\d.]+) ([\d.]+)"', svg).groups())
    svg = svg.replace('width="100%"', f'width="{width}" height="{height}"', 1)
    ET.fromstring(svg)  # well-formed XML, or browsers show a broken image
    target = source.with_suffix(".svg")
    header = HEADER.format(source=source.name, digest=digest(source), version=MERMAID_VERSION)
    target.write_text(header + svg + "\n")
    return target


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--all", action="store_true", help="render every diagram, not only stale ones")
    parser.add_argument("--check", action="store_true", help="only list diagrams whose SVG is stale")
    args = parser.parse_args()
    todo = sources() if args.all else stale()
    if args.check:
        for source in todo:
            print(f"stale: {source.relative_to(ROOT)} (run python scripts/render_diagrams.py)")
        return 1 if todo else 0
    if not todo:
        print("every diagram is up to date")
        return 0
    script = mermaid_js()
    with tempfile.TemporaryDirectory() as tmp, browser.Browser() as session:
        page = Path(tmp) / "render.html"
        page.write_text(f'<!doctype html><meta charset="utf-8"><script src="{script.as_uri()}"></script><body>\n')
        session.open(page.as_uri())
        for source in todo:
            print(f"rendered {render(source, session, page).relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
