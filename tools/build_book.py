"""Build the workbook's static book: an HTML site of the series made from the notebooks' committed outputs.

    .venv/bin/python tools/build_book.py            # -> build/book/html/index.html (what `make book` runs)
    .venv/bin/python tools/build_book.py --out DIR  # -> DIR/html/index.html

Nothing is executed and nothing is fetched: the notebooks are copied as they are committed into a staging folder
(DIR/src), beside a landing page generated from their titles and claims (the series map), and Sphinx with MyST-NB
renders them with the configuration in book/conf.py. The committed notebooks are never touched. A cell with a widget
gets a note in the staged copy saying that its slider works only when the notebook runs live in JupyterLab.

The landing page takes each notebook's title from its first heading and its claim from a `**The claim:**` line in its
first cell, or else from the notebook's row in notebook 00's series table.

Every figure says what it shows (companion.support.figures): a figure output carries its description in its metadata
(`{"image/png": {"alt": ...}}`), with a caption output under it. MyST-NB takes an image's alt text and a figure's caption
only from the cell's metadata (`mystnb: {image: {alt}, figure: {caption}}`), one for all the images of a cell, so the
staged copy gives each figure a cell of its own (the outputs after it follow in a cell that hides the source) whose
metadata holds that figure's description as the alt text and as the caption; the caption output is left out there,
since the figure's caption now says it.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS_DIR = REPO_ROOT / "notebooks"
SPANISH_DIR = NOTEBOOKS_DIR / "es"  # the Spanish edition (tools/translate.py), staged as es/
CONF_DIR = REPO_ROOT / "book"
DOCS_DIR = REPO_ROOT / "docs"
DEFAULT_OUT = REPO_ROOT / "build" / "book"

FIGURE_CAPTION = "figure_caption"  # companion.support.figures.CAPTION_KEY (tools/ does not import the companion)
WIDGET_NOTE = (
    ":::{note}\n"
    "**A live widget.** The next cell draws a slider when the notebook runs in JupyterLab (`make lab`); "
    "this book shows the cell's saved output only.\n"
    ":::\n"
)


def notebook_paths() -> list[Path]:
    """The series: notebooks/NN_*.ipynb, in order."""
    return sorted(p for p in NOTEBOOKS_DIR.glob("[0-9][0-9]_*.ipynb"))


def _text(source: str | list[str]) -> str:
    return "".join(source) if isinstance(source, list) else source


def title_and_claim(notebook: dict, series_rows: dict[str, str]) -> tuple[str, str]:
    """The first heading of the first markdown cell, and the claim (see the module's docstring)."""
    first = next((_text(c["source"]) for c in notebook["cells"] if c["cell_type"] == "markdown"), "")
    heading = next((line.lstrip("#").strip() for line in first.splitlines() if line.startswith("#")), "")
    claim_match = re.search(r"\*\*(?:The claim|La afirmación):\*\*\s*(.+)", first)
    claim = claim_match.group(1).strip() if claim_match else series_rows.get(heading[:2], "")
    return heading, claim


def series_table_rows(orientation: dict | None) -> dict[str, str]:
    """Notebook 00's series table as {"03": claim}, from rows like `| 03 sliding-window forgetting | claim |`."""
    rows: dict[str, str] = {}
    if orientation is None:
        return rows
    for cell in orientation["cells"]:
        if cell["cell_type"] != "markdown":
            continue
        for line in _text(cell["source"]).splitlines():
            match = re.match(r"\|\s*(\d\d)\b[^|]*\|\s*(.+?)\s*\|\s*$", line)
            if match:
                rows[match.group(1)] = match.group(2)
    return rows


def is_widget_cell(cell: dict) -> bool:
    """A code cell that imports ipywidgets (the sliders; notebook 00 only names the package in a version check)."""
    return cell["cell_type"] == "code" and re.search(r"^\s*(import ipywidgets|from ipywidgets )", _text(cell["source"]), re.M) is not None


def is_figure(output: dict) -> bool:
    return "image/png" in output.get("data", {})


def is_caption(output: dict) -> bool:
    """The caption output companion.support.figures.show writes under a figure."""
    return bool(output.get("metadata", {}).get(FIGURE_CAPTION))


def figure_description(output: dict) -> str:
    """The description a figure output carries (its alt metadata), or "" if it has none."""
    alt = output.get("metadata", {}).get("image/png", {}).get("alt", "")
    return alt if isinstance(alt, str) else ""


def split_figures(cell: dict) -> list[dict]:
    """The cell as staged: each figure output in a cell of its own, whose MyST-NB metadata gives that figure its
    description as alt text and its caption as the figure's caption (see the module's docstring); the other outputs
    stay in order. Only the first cell shows the source (the others are tagged remove-input). A cell without figures
    is returned as it is."""
    outputs = cell.get("outputs", []) if cell["cell_type"] == "code" else []
    if not any(is_figure(o) for o in outputs):
        return [cell]
    pieces: list[tuple[list[dict], dict]] = [([], {})]  # (outputs, MyST-NB options)
    skip = False
    for index, output in enumerate(outputs):
        if skip:
            skip = False
            continue
        if not is_figure(output):
            pieces[-1][0].append(output)
            continue
        description = figure_description(output)
        following = outputs[index + 1] if index + 1 < len(outputs) else {}
        options: dict = {}
        if description:
            caption = description
            if is_caption(following):
                caption, skip = _text(following.get("data", {}).get("text/markdown", description)), True
            options = {"image": {"alt": description}, "figure": {"caption": caption}}
        pieces += [([output], options), ([], {})]
    staged = []
    for number, (part, options) in enumerate(piece for piece in pieces if piece[0]):
        metadata = dict(cell.get("metadata", {}))
        if number:
            metadata["tags"] = [*metadata.get("tags", []), "remove-input"]
        if options:
            metadata["mystnb"] = {**metadata.get("mystnb", {}), **options}
        staged.append({**cell, "id": f"{cell.get('id', 'cell')}-part{number}" if number else cell.get("id", "cell"),
                       "metadata": metadata, "outputs": part})  # the source stays: MyST-NB skips a cell without one
    return staged


def doc_pages() -> list[Path]:
    """The guides in docs/ (set-up, the offline model, Bedrock, testing, ...), which the book shows after the series."""
    return sorted(DOCS_DIR.glob("*.md"))


def doc_title(path: Path) -> str:
    first = next((line for line in path.read_text(encoding="utf-8").splitlines() if line.startswith("# ")), path.stem)
    return first.lstrip("# ").strip()


SPANISH_LANDING = [
    "# Memoria de agentes con Strands: el cuaderno de trabajo",
    "",
    "[Read it in English](../index.md)",
    "",
    "Una serie de cuadernos que hace visible, medible y comprobable la memoria de un agente con el Strands Agents SDK.",
    "Cada cuaderno demuestra una afirmación con una ejecución que puedes ver y la comprueba al final. Este libro muestra",
    "cada cuaderno con sus salidas guardadas, que siguen en inglés: nada se ejecuta aquí. Para ejecutar las celdas,",
    "clona el repositorio y escribe `make lab`; los cuadernos en español están en `notebooks/es/`.",
    "",
    "## La serie",
    "",
    "| cuaderno | la afirmación que demuestra |",
    "|---|---|",
]


def spanish_landing_page(entries: list[tuple[str, str, str, bool]]) -> str:
    """es/index.md: the Spanish series map and its toctree (the guides are in English, linked from the English map)."""
    lines = list(SPANISH_LANDING)
    for stem, title, claim, _ in entries:
        lines.append(f"| [{title}]({stem}.ipynb) | {claim.replace('|', chr(92) + '|') or '—'} |")
    lines += ["", "```{toctree}", ":hidden:", ":maxdepth: 1", ""] + [stem for stem, *_ in entries] + ["```", ""]
    return "\n".join(lines)


def landing_page(entries: list[tuple[str, str, str, bool]], docs: list[Path] | None = None,
                 spanish: bool = False) -> str:
    """index.md: the series map (a table linking every notebook, with its claim), the guides, and the toctrees."""
    lines = [
        "# Agent memory with Strands: the workbook",
        "",
        *(["[Léelo en español](es/index.md)", ""] if spanish else []),
        "A series of notebooks that makes an agent's memory visible, measurable and testable with the Strands Agents SDK.",
        "Each notebook proves one claim with a run you can see, then checks it with asserts. This book shows every",
        "notebook with its committed outputs (plots, tables, printed files); nothing here runs. To run the cells, change",
        "the parameters and move the sliders, clone the repository and type `make lab`.",
        "",
        "## The series",
        "",
        "| notebook | the claim it proves |",
        "|---|---|",
    ]
    for stem, title, claim, _ in entries:
        cell_claim = claim.replace("|", "\\|") or "—"
        lines.append(f"| [{title}]({stem}.ipynb) | {cell_claim} |")
    widget_titles = [title for _, title, _, has_widget in entries if has_widget]
    if widget_titles:
        lines += [
            "",
            "Live widgets (sliders) are in: " + "; ".join(widget_titles) + ". Here they show their saved output, "
            "a line that asks you to run the cell in JupyterLab.",
        ]
    lines += ["", "```{toctree}", ":hidden:", ":maxdepth: 1", ""]
    lines += [stem for stem, *_ in entries]
    lines += ["```", ""]
    if docs:
        lines += ["## Guides", ""]
        lines += [f"- [{doc_title(path)}](docs/{path.name})" for path in docs]
        lines += ["", "```{toctree}", ":hidden:", ":maxdepth: 1", ":caption: Guides", ""]
        lines += [f"docs/{path.stem}" for path in docs]
        lines += ["```", ""]
    if spanish:
        lines += ["```{toctree}", ":hidden:", ":maxdepth: 1", ":caption: En español", "", "es/index", "```", ""]
    return "\n".join(lines)


def write_if_changed(path: Path, text: str) -> None:
    """Keep the staged file's timestamp when nothing changed, so Sphinx rebuilds only what did."""
    if not path.exists() or path.read_text(encoding="utf-8") != text:
        path.write_text(text, encoding="utf-8")


def language_link(text: str, target: str) -> dict:
    return {"cell_type": "markdown", "id": "book-language-link", "metadata": {}, "source": f"[{text}]({target})"}


def stage_notebooks(paths: list[Path], target: Path, docs_link: tuple[str, str], link: tuple[str, str] | None,
                    series_rows: dict[str, str]) -> list[tuple[str, str, str, bool]]:
    """Copy `paths` into `target` (widget cells preceded by a note, each figure in a cell of its own with its
    description, links to the guides pointed at the book's docs/, and a link to the same page in the other language
    first, where there is one: `link` is (text, folder)); return the series entries."""
    target.mkdir(parents=True, exist_ok=True)
    entries = []
    for path in paths:
        notebook = json.loads(path.read_text(encoding="utf-8"))
        title, claim = title_and_claim(notebook, series_rows)
        cells, has_widget = [], False
        if link is not None:
            cells.append(language_link(link[0], f"{link[1]}{path.name}"))
        for cell in notebook["cells"]:
            if is_widget_cell(cell):
                has_widget = True
                note_id = f"book-note-{cell.get('id', len(cells))}"
                cells.append({"cell_type": "markdown", "id": note_id, "metadata": {}, "source": WIDGET_NOTE})
            cells.extend(split_figures(cell))
        for cell in cells:  # a notebook's link to a guide points into the book's own docs/
            if cell.get("cell_type") == "markdown":
                cell["source"] = _text(cell["source"]).replace(*docs_link)
        notebook["cells"] = cells
        write_if_changed(target / path.name, json.dumps(notebook, indent=1, ensure_ascii=False) + "\n")
        entries.append((path.stem, title or path.stem, claim, has_widget))
    for stale in target.glob("*.ipynb"):
        if stale.name not in {p.name for p in paths}:
            stale.unlink()
    return entries


def stage(src: Path) -> list[tuple[str, str, str, bool]]:
    """Copy the notebooks and, where notebooks/es/ holds them, their Spanish edition into src (es/), with the guides,
    write the landing pages; return the English series entries."""
    src.mkdir(parents=True, exist_ok=True)
    paths = notebook_paths()
    if not paths:
        raise SystemExit(f"no notebooks found in {NOTEBOOKS_DIR}")
    orientation = next((p for p in paths if p.name.startswith("00_")), None)
    series_rows = series_table_rows(json.loads(orientation.read_text(encoding="utf-8")) if orientation else None)
    spanish = [SPANISH_DIR / p.name for p in paths if (SPANISH_DIR / p.name).is_file()]
    entries = stage_notebooks(paths, src, ("](../docs/", "](docs/"), ("Léelo en español", "es/") if spanish else None,
                              series_rows)
    if spanish:
        spanish_entries = stage_notebooks(spanish, src / "es", ("](../../docs/", "](../docs/"),
                                          ("Read it in English", "../"), {})
        write_if_changed(src / "es" / "index.md", spanish_landing_page(spanish_entries))
    elif (src / "es").exists():
        shutil.rmtree(src / "es")
    docs = doc_pages()
    (src / "docs").mkdir(exist_ok=True)
    for path in docs:
        write_if_changed(src / "docs" / path.name, path.read_text(encoding="utf-8"))
    for stale in (src / "docs").glob("*.md"):
        if not (DOCS_DIR / stale.name).is_file():
            stale.unlink()
    write_if_changed(src / "index.md", landing_page(entries, docs, spanish=bool(spanish)))
    return entries


def build(out: Path = DEFAULT_OUT, quiet: bool = True) -> Path:
    """Stage and build; return the html folder. Sphinx warnings go to out/warnings.txt (and fail nothing here:
    tests/test_book.py reads them)."""
    out = out.resolve()
    entries = stage(out / "src")
    html = out / "html"
    warnings = out / "warnings.txt"
    command = [sys.executable, "-m", "sphinx", "-b", "html", "-c", str(CONF_DIR), "-d", str(out / "doctrees"), "-w", str(warnings)]
    command += ["-q"] if quiet else []
    command += [str(out / "src"), str(html)]
    started = time.monotonic()
    subprocess.run(command, check=True, cwd=REPO_ROOT)
    print(f"Built the book of {len(entries)} notebooks in {time.monotonic() - started:.1f} s: {html / 'index.html'}")
    if warnings.exists() and warnings.read_text(encoding="utf-8").strip():
        print(f"Sphinx warnings: {warnings}")
    return html


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="output folder (html/ inside it); default build/book")
    parser.add_argument("--verbose", action="store_true", help="show Sphinx's progress")
    args = parser.parse_args(argv)
    try:
        import myst_nb  # noqa: F401
    except ImportError:
        print("The book's packages are missing: install them with `.venv/bin/pip install -c constraints.txt -e '.[book]'`.")
        return 1
    build(args.out, quiet=not args.verbose)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
