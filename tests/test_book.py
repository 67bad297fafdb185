"""The static book (tools/build_book.py, `make book`): built once per test session into a temporary folder from the
committed notebooks, then checked the way a reader would meet it: every notebook is a page linked from the series map,
its plots and tables are there, every plot has a real description (its alt text and caption, the notebook's own
description of that figure), no link inside the site is broken, no error output is rendered, widget cells carry their
note, and no page needs the network (no script, style, font or image from an http(s) URL)."""

from __future__ import annotations

import base64
import functools
import hashlib
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
        self.images: list[tuple[str, str | None]] = []  # (src, alt) of every <img>; alt None when there is none
        self.captions: list[str] = []  # the text of every <figcaption>
        self._caption: list[str] | None = None

    def handle_starttag(self, tag, attrs):
        attributes = dict(attrs)
        if tag == "img":
            self.images.append((attributes.get("src") or "", attributes.get("alt")))
        if tag == "figcaption":
            self._caption = []
        if attributes.get("id"):
            self.ids.add(attributes["id"])
        if attributes.get("class"):
            self.classes.append(attributes["class"])
        if tag == "a" and attributes.get("href"):
            self.links.append(attributes["href"])
        for name in ("src", "href", "data"):
            if tag != "a" and attributes.get(name):
                self.resources.append((tag, attributes[name]))

    def handle_endtag(self, tag):
        if tag == "figcaption" and self._caption is not None:
            text = "".join(self._caption).replace("¶", "")  # the caption's permalink
            text = text.translate(str.maketrans("‘’“”", "''\"\""))  # as typed: MyST curls quotes in a caption
            self.captions.append(" ".join(text.split()))
            self._caption = None

    def handle_data(self, data):
        if self._caption is not None:
            self._caption.append(data)


@functools.cache  # the built book does not change during the session: each page is parsed once, the tests only read it
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


def spanish() -> list[Path]:
    """The Spanish edition's notebooks (notebooks/es/), staged in the book's es/ folder."""
    return [build_book.SPANISH_DIR / p.name for p in notebooks() if (build_book.SPANISH_DIR / p.name).is_file()]


def test_every_page_links_the_same_page_in_the_other_language(book):
    assert spanish(), "the Spanish edition (notebooks/es/) is in the book"
    english_index, spanish_index = parse(book / "index.html"), parse(book / "es" / "index.html")
    assert "es/index.html" in english_index.links and "../index.html" in spanish_index.links
    for path in spanish():
        assert f"{path.stem}.html" in spanish_index.links, f"the Spanish series map does not link {path.name}"
        assert f"es/{path.stem}.html" in parse(book / f"{path.stem}.html").links, f"{path.name}: no link to Spanish"
        assert f"../{path.stem}.html" in parse(book / "es" / f"{path.stem}.html").links, f"es/{path.name}: no link back"


def test_every_notebook_is_a_page_linked_from_the_series_map(book):
    index = parse(book / "index.html")
    for path in notebooks():
        page = book / f"{path.stem}.html"
        assert page.exists(), f"{path.name} has no page in the book"
        assert f"{path.stem}.html" in index.links, f"the series map does not link {path.name}"
        title, _ = build_book.title_and_claim(staged(book, path), {})
        assert title.split(":")[0] in page.read_text(encoding="utf-8"), f"{page.name} does not show its title {title!r}"


def test_every_guide_in_docs_is_a_page_linked_from_the_landing_page(book):
    index = parse(book / "index.html")
    for path in build_book.doc_pages():
        assert (book / "docs" / f"{path.stem}.html").exists(), f"docs/{path.name} has no page in the book"
        assert f"docs/{path.stem}.html" in index.links, f"the landing page does not link docs/{path.name}"


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
    pages = {path.resolve(): parse(path.resolve()) for path in book.rglob("*.html")}  # resolved, as the targets are
    broken = []
    for path, page in pages.items():
        for url in page.links + [url for _, url in page.resources]:
            parts = urlsplit(url)
            if parts.scheme or url.startswith("//") or url.startswith("mailto:"):
                continue
            target = (path.parent / unquote(parts.path)).resolve() if parts.path else path
            if not target.exists():
                broken.append(f"{path.name}: {url} (no such file)")
            elif parts.fragment and target.suffix == ".html" and parts.fragment not in (pages.get(target) or parse(target)).ids:
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


# --- every figure says what it shows (issue 20) ------------------------------------------------------------------------


def description_problem(alt: str | None, src: str = "") -> str | None:
    """Why an image's alt text is not a real description of what it shows (None if it is one)."""
    if alt is None or not alt.strip():
        return "no alt text"
    name = src.rsplit("/", 1)[-1]
    if (name and name in alt) or re.search(r"\.(png|jpe?g|svg|gif)\b|_images/|[0-9a-f]{16,}", alt):
        return "the alt text is a file name or a hash"
    if re.match(r"<(matplotlib\.)?Figure|<IPython|Figure size", alt.strip()):
        return "the alt text is the object's repr"
    if len(alt.split()) < 8:
        return "the alt text is not a sentence (fewer than 8 words)"
    if not alt.strip().endswith("."):
        return "the alt text is not a sentence (no full stop)"
    return None


def description_problems(pages: dict[str, Page]) -> list[str]:
    """Every image without a real description, and every description given to images whose data differ."""
    problems, seen = [], {}
    for name, page in pages.items():
        for src, alt in page.images:
            problem = description_problem(alt, src)
            if problem:
                problems.append(f"{name}: {src} ({problem}): {alt!r}")
            elif seen.setdefault(alt, src.rsplit("/", 1)[-1]) != src.rsplit("/", 1)[-1]:  # es/ pages: ../_images/
                problems.append(f"{name}: {src} and {seen[alt]} show different images with the same description {alt!r}")
    return problems


def test_the_description_check_rejects_what_describes_nothing():
    """The check below fails on an image without a description, with its file name or hash or the Figure's repr for
    one, with a label too short to be a sentence, or with one sentence for two different images."""
    sentence = "Line chart over turns 1-7: the stored messages go from 2 to 14."
    page = Page()
    page.feed(f'''<img src="_images/a1.png"><img src="_images/b2.png" alt="">
              <img src="_images/9fee79c0ffee9fee79c0ffee.png" alt="_images/9fee79c0ffee9fee79c0ffee.png">
              <img src="_images/c3.png" alt="9fee79c0ffee9fee79c0ffee9fee79c0ffee">
              <img src="_images/d4.png" alt="&lt;Figure size 1000x550 with 1 Axes&gt;">
              <img src="_images/e5.png" alt="A plot."><img src="_images/f6.png" alt="{sentence[:-1]}">
              <img src="_images/g7.png" alt="{sentence}"><img src="_images/h8.png" alt="{sentence}">
              <img src="_images/g7.png" alt="{sentence}">''')
    problems = description_problems({"page.html": page})
    flagged = [problem.split(" ")[1] for problem in problems]
    assert flagged == [f"_images/{name}.png" for name in ("a1", "b2", "9fee79c0ffee9fee79c0ffee", "c3", "d4", "e5", "f6",
                                                            "h8")], problems
    good = Page()
    good.feed(f'<img src="_images/g7.png" alt="{sentence}"><img src="_images/h8.png" alt="{sentence[:-1]} at last.">')
    assert description_problems({"page.html": good}) == []


def test_every_figure_has_a_real_description_and_a_caption(book):
    pages = {str(path.relative_to(book)): parse(path) for path in sorted([*book.glob("*.html"), *book.glob("es/*.html")])}
    problems = description_problems(pages)
    assert not problems, "figures in the book without a real description:\n" + "\n".join(problems)
    for path, prefix in [(p, "") for p in notebooks()] + [(p, "es/") for p in spanish()]:
        page = pages[f"{prefix}{path.stem}.html"]
        figures = [src for src, _ in page.images if src.removeprefix("../").startswith("_images/")]
        assert len(page.captions) == len(figures), f"{path.name}: {len(figures)} figures, {len(page.captions)} captions"
        for (src, alt), caption in zip([image for image in page.images if image[0].removeprefix("../").startswith("_images/")],
                                     page.captions):
            assert caption.endswith(alt), f"{path.name}: {src}'s caption {caption!r} does not say its description {alt!r}"


def test_each_description_is_the_one_its_notebook_gives_that_figure(book):
    """The alt text of every image is the description the committed notebook's output carries for those exact bytes
    (MyST-NB names an image file by the sha256 of its bytes)."""
    for path, prefix in [(p, "") for p in notebooks()] + [(p, "es/") for p in spanish()]:
        committed = json.loads(path.read_text(encoding="utf-8"))
        described = {}
        for cell in committed["cells"]:
            for output in cell.get("outputs", []):
                if "image/png" in output.get("data", {}):
                    digest = hashlib.sha256(base64.b64decode("".join(output["data"]["image/png"]))).hexdigest()
                    described[digest] = output.get("metadata", {}).get("image/png", {}).get("alt")
        page = parse(book / f"{prefix}{path.stem}.html")
        for src, alt in page.images:
            src = src.removeprefix("../")
            if src.startswith("_images/"):
                digest = src.rsplit("/", 1)[-1].split(".")[0]
                assert digest in described, f"{path.name}: {src} is not one of the notebook's figures"
                assert alt == described[digest], f"{path.name}: {src} has alt {alt!r}, the notebook says {described[digest]!r}"


def test_staging_gives_each_figure_its_own_cell_with_its_description():
    """MyST-NB reads alt text and caption from cell metadata: a cell with two figures (each followed by its caption)
    and a table between them is staged as a figure, the table, a figure, each figure with its own description."""
    figure = {"output_type": "display_data", "data": {"image/png": "iVBORw0KGgo=", "text/plain": "A"}, "metadata": {}}
    table = {"output_type": "display_data", "data": {"text/html": "<table></table>", "text/plain": "t"}, "metadata": {}}
    captioned = []
    for text in ("One line chart of messages over turns 1-7, stored going from 2 to 14.",
                 "Another bar chart per turn over turns 1-7: 6 summary calls on turns 2-7."):
        captioned.append([{**figure, "metadata": {"image/png": {"alt": text}}},
                          {"output_type": "display_data", "metadata": {"figure_caption": True},
                           "data": {"text/markdown": f"*Figure:* {text}", "text/plain": f"Figure: {text}"}}])
    cell = {"cell_type": "code", "id": "c1", "metadata": {}, "source": "show(fig)", "execution_count": 1,
            "outputs": [*captioned[0], table, *captioned[1]]}
    staged = build_book.split_figures(cell)
    assert [len(c["outputs"]) for c in staged] == [1, 1, 1]
    assert [c["source"] for c in staged] == ["show(fig)"] * 3  # MyST-NB skips a cell without source
    assert ["remove-input" in c["metadata"].get("tags", []) for c in staged] == [False, True, True]
    assert [c["id"] for c in staged] == ["c1", "c1-part1", "c1-part2"]
    assert staged[0]["metadata"]["mystnb"]["image"]["alt"] == captioned[0][0]["metadata"]["image/png"]["alt"]
    assert staged[2]["metadata"]["mystnb"]["figure"]["caption"] == captioned[1][1]["data"]["text/markdown"]
    assert "mystnb" not in staged[1]["metadata"] and "remove-input" in staged[1]["metadata"]["tags"]
    plain = {**cell, "outputs": [table]}
    assert build_book.split_figures(plain) == [plain]
