"""The static book (tools/build_book.py, `make book`): built once per test session into a temporary folder from the
committed notebooks, then checked the way a reader would meet it: every notebook is a page linked from the series map,
its plots and tables are there, no link inside the site is broken, no error output is rendered, widget cells carry
their note, and no page needs the network (no script, style, font or image from an http(s) URL)."""

from __future__ import annotations

import json
import re
import sys
import time
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

pytest.importorskip("myst_nb", reason="the book's packages are not installed (pip install -c constraints.txt -e '.[book]')")

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT / "tools"))
import build_book  # noqa: E402  (tools/ is not a package)


class Page(HTMLParser):
    """The links, resources, ids and classes of one HTML page."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.links: list[str] = []  # <a href>
        self.resources: list[tuple[str, str]] = []  # (tag, url) of what the browser loads: scripts, styles, images...
        self.ids: set[str] = set()
        self.classes: list[str] = []

    def handle_starttag(self, tag, attrs):
        attributes = dict(attrs)
        if attributes.get("id"):
            self.ids.add(attributes["id"])
        if attributes.get("class"):
            self.classes.append(attributes["class"])
        if tag == "a" and attributes.get("href"):
            self.links.append(attributes["href"])
        for name in ("src", "href", "data"):
            if tag != "a" and attributes.get(name):
                self.resources.append((tag, attributes[name]))


def parse(path: Path) -> Page:
    page = Page()
    page.feed(path.read_text(encoding="utf-8"))
    return page


@pytest.fixture(scope="session")
def book(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("book")
    started = time.monotonic()
    html = build_book.build(out)
    print(f"book built in {time.monotonic() - started:.1f} s")
    return html


def notebooks() -> list[Path]:
    return build_book.notebook_paths()


def test_every_notebook_is_a_page_linked_from_the_series_map(book):
    index = parse(book / "index.html")
    for path in notebooks():
        page = book / f"{path.stem}.html"
        assert page.exists(), f"{path.name} has no page in the book"
        assert f"{path.stem}.html" in index.links, f"the series map does not link {path.name}"
        title, _ = build_book.title_and_claim(staged(book, path), {})
        assert title.split(":")[0] in page.read_text(encoding="utf-8"), f"{page.name} does not show its title {title!r}"


def staged(book: Path, path: Path) -> dict:
    """The copy of the notebook that the book was built from (the same as the committed one, plus widget notes)."""
    return json.loads((book.parent / "src" / path.name).read_text(encoding="utf-8"))


def test_plots_and_tables_of_the_committed_outputs_are_shown(book):
    for path in notebooks():
        notebook = staged(book, path)
        outputs = [o for c in notebook["cells"] if c["cell_type"] == "code" for o in c.get("outputs", [])]
        plots = sum("image/png" in o.get("data", {}) for o in outputs)
        tables = sum("".join(o.get("data", {}).get("text/html", "")).count("<table") for o in outputs)
        html = (book / f"{path.stem}.html").read_text(encoding="utf-8")
        shown_plots = len(re.findall(r'<img[^>]+src="_images/', html))
        shown_tables = html.count("<table") - html.count('<table class="docutils')  # minus tables written in markdown
        assert shown_plots == plots, f"{path.name}: {plots} plots saved, {shown_plots} shown"
        assert shown_tables == tables, f"{path.name}: {tables} tables saved, {shown_tables} shown"


def test_no_internal_link_is_broken(book):
    pages = {path: parse(path) for path in book.rglob("*.html")}
    broken = []
    for path, page in pages.items():
        for url in page.links + [url for _, url in page.resources]:
            parts = urlsplit(url)
            if parts.scheme or url.startswith("//") or url.startswith("mailto:"):
                continue
            target = (path.parent / unquote(parts.path)).resolve() if parts.path else path
            if not target.exists():
                broken.append(f"{path.name}: {url} (no such file)")
            elif parts.fragment and target.suffix == ".html" and parts.fragment not in pages.get(target, parse(target)).ids:
                broken.append(f"{path.name}: {url} (no such anchor)")
    assert not broken, "broken links in the book:\n" + "\n".join(broken)


def test_no_page_fetches_anything_from_the_network(book):
    remote = []
    for path in book.rglob("*.html"):
        for tag, url in parse(path).resources:
            if urlsplit(url).scheme in ("http", "https") or url.startswith("//"):
                remote.append(f"{path.name}: <{tag}> {url}")
    css_remote = re.compile(r"(?:url\(|@import)\s*['\"]?(?:https?:)?//[^)'\";]+")
    js_remote = re.compile(r"""["'](?:https?:)?//[^"']*\.(?:js|css|woff2?)["']""")
    for path in book.rglob("*.css"):
        remote += [f"{path.name}: {m}" for m in css_remote.findall(path.read_text(encoding="utf-8"))]
    for path in book.rglob("*.js"):
        if path.name != "searchindex.js":
            remote += [f"{path.name}: {m}" for m in js_remote.findall(path.read_text(encoding="utf-8"))]
    assert not remote, "the book loads these from the network:\n" + "\n".join(remote)


def test_no_error_output_and_no_sphinx_warning(book):
    for path in book.glob("*.html"):
        page = parse(path)
        html = path.read_text(encoding="utf-8")
        assert not any("traceback" in c for c in page.classes), f"{path.name} renders an error output"
        assert "Traceback (most recent call last)" not in html, f"{path.name} shows a traceback"
    warnings = (book.parent / "warnings.txt").read_text(encoding="utf-8").strip() if (book.parent / "warnings.txt").exists() else ""
    assert not warnings, "Sphinx warned while building the book:\n" + warnings


def test_widget_cells_show_their_saved_output_with_a_note(book):
    with_widgets = 0
    for path in notebooks():
        notebook = staged(book, path)
        widget_cells = [c for c in notebook["cells"] if build_book.is_widget_cell(c)]
        html = (book / f"{path.stem}.html").read_text(encoding="utf-8")
        assert html.count("A live widget.") == len(widget_cells), path.name
        for cell in widget_cells:
            with_widgets += 1
            for output in cell.get("outputs", []):
                text = "".join(output.get("text", "") or output.get("data", {}).get("text/plain", ""))
                first_line = text.strip().splitlines()[0] if text.strip() else ""
                shown = first_line in html or first_line.replace("'", "&#39;") in html
                assert shown, f"{path.name}: saved widget output {first_line!r} not shown"
    assert with_widgets >= 1, "no widget cell found: the note check checked nothing"
