"""Figures that say what they show (issue 20): every figure in the workbook carries a one-sentence description of what
it shows, written from its data, so a reader who cannot see the picture (a screen reader, an image that does not load,
a terminal) still learns what it shows.

    fig = window_plot(rows, window_size)     # the workbook's plot functions describe their figures from their data
    show(fig)                                # instead of plt.show()
    show(fig, f"Line chart of ... {n} ...")  # or a sentence of your own, written from the data on screen

`show` puts the description in four places:
- the image output's metadata, `{"image/png": {"alt": description}}` (the key nbconvert's HTML export and IPython's
  own `Image(..., alt=...)` use) and its text/plain (what a terminal or a text-only front end shows);
- a caption right under the figure ("Figure: ..."), an output of its own that JupyterLab shows to every reader (its
  image renderer ignores the alt metadata, so this line is what a screen reader reaches there);
- the PNG itself, as its `Title` and `Description` text chunks, so a saved image keeps its description;
- the book (tools/build_book.py): the image's `alt` attribute and the figure's `<figcaption>`.
"""

from __future__ import annotations

import base64
import re
from typing import Any

ATTRIBUTE = "workbook_description"
"""The attribute of a matplotlib Figure that holds its description (set by `describe_figure`)."""
CAPTION_KEY = "figure_caption"
"""Output metadata key marking the caption output that `show` writes under a figure (tools/build_book.py reads it)."""
MIN_WORDS = 8


def description_problem(text: Any) -> str | None:
    """Why `text` is not a real description of a figure (None if it is one): it must be one sentence of at least
    eight words, ending with a full stop, and not a file name, a hash or matplotlib's "<Figure size ...>"."""
    if not isinstance(text, str) or not text.strip():
        return "it is empty"
    text = text.strip()
    if "\n" in text:
        return "it is more than one line"
    if re.search(r"<Figure size|\.(png|jpe?g|svg)\b|\b[0-9a-f]{16,}\b", text):
        return "it names a file, a hash or the Figure object, not what the figure shows"
    if len(text.split()) < MIN_WORDS:
        return f"it has fewer than {MIN_WORDS} words"
    if not text.endswith("."):
        return "it does not end with a full stop"
    return None


def describe_figure(fig: Any, text: str) -> Any:
    """Attach a one-sentence description (what the figure shows, written from its data) to `fig`; returns `fig`.
    Raises ValueError if the text is not a real description (see `description_problem`)."""
    problem = description_problem(text)
    if problem:
        raise ValueError(f"not a description of the figure ({problem}): {text!r}")
    setattr(fig, ATTRIBUTE, text.strip())
    return fig


def description(fig: Any) -> str | None:
    """The description attached to `fig` by `describe_figure`, or None."""
    return getattr(fig, ATTRIBUTE, None)


def title(fig: Any) -> str:
    """The figure's own title: its suptitle, else its first axes' title (one line)."""
    texts = [fig._suptitle.get_text() if getattr(fig, "_suptitle", None) is not None else ""]
    texts += [ax.get_title() for ax in fig.get_axes()]
    return " ".join(next((t for t in texts if t.strip()), "").split())


def png(fig: Any, text: str) -> bytes:
    """The figure as PNG bytes, drawn as the notebook's inline backend draws it (the figure's dpi, tight bounding box),
    with its title and description as the PNG's Title and Description text chunks."""
    from io import BytesIO

    buffer = BytesIO()
    fig.savefig(buffer, format="png", dpi=fig.dpi, bbox_inches="tight", facecolor=fig.get_facecolor(),
                edgecolor=fig.get_edgecolor(), metadata={"Title": title(fig), "Description": text})
    return buffer.getvalue()


def caption_markdown(text: str) -> str:
    """The caption as Markdown, with the characters Markdown (and JupyterLab's math) would read as formatting escaped;
    the caption starts with "*Figure:*", so nothing in the text begins a line."""
    return "*Figure:* " + re.sub(r"([\\`*_\[\]<>|~$])", r"\\\1", text)


def bundles(fig: Any, text: str) -> list[tuple[dict[str, str], dict[str, Any]]]:
    """The two outputs `show` displays, as (data, metadata): the image with its description, then the caption."""
    image = ({"image/png": base64.b64encode(png(fig, text)).decode("ascii"), "text/plain": text},
             {"image/png": {"alt": text}})
    caption = ({"text/markdown": caption_markdown(text), "text/plain": f"Figure: {text}"}, {CAPTION_KEY: True})
    return [image, caption]


def show(fig: Any, text: str | None = None) -> None:
    """Display `fig` with its description (see the module's docstring) and close it. Returns nothing, so that
    `show(fig)` as a cell's last line adds no output of its own.

    `text` is the description; without it, the one the plot function attached with `describe_figure`. A figure without
    either raises ValueError: every figure in the workbook says what it shows."""
    import matplotlib.pyplot as plt
    from IPython.display import display

    text = text if text is not None else description(fig)
    if text is None:
        raise ValueError("this figure has no description: pass show(fig, 'One sentence, from the data, of what it "
                         "shows.') or describe_figure(fig, ...) where it is drawn")
    describe_figure(fig, text)
    for data, metadata in bundles(fig, text):
        display(data, raw=True, metadata=metadata)
    plt.close(fig)  # the inline backend would otherwise draw it a second time, without its description
