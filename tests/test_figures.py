"""companion.support.figures: every figure carries a one-sentence description written from its data (issue 20), in the
image output's metadata and text, in a caption under it, and in the PNG itself; the plot functions write theirs from
the values they draw, so two runs with different data get different sentences."""

from __future__ import annotations

import base64
import io

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
from PIL import Image  # noqa: E402

from companion.support import figures  # noqa: E402
from companion.support.plots import counts_plot, summary_calls_plot, window_plot  # noqa: E402


def window_rows(turns: int, window: int, lost_from: int | None) -> list[dict]:
    return [{"turn": t, "stored": 2 * t, "received": min(2 * t - 1, window + 1), "kept": min(2 * t, window),
             "codename received": lost_from is None or t < lost_from} for t in range(1, turns + 1)]


@pytest.mark.parametrize("text", ["", "   ", "A plot.", "<Figure size 1000x550 with 1 Axes> and more words here.",
                                  "_images/9fee79c0ffee9fee79c0ffee.png shows the window over seven turns.",
                                  "Line chart over turns 1-7 of the messages stored on disk", "Two lines.\nNo."])
def test_describe_refuses_what_is_not_a_description(text):
    fig = plt.figure()
    with pytest.raises(ValueError, match="not a description"):
        figures.describe_figure(fig, text)
    plt.close(fig)


def test_show_refuses_a_figure_without_a_description():
    fig = plt.figure()
    with pytest.raises(ValueError, match="no description"):
        figures.show(fig)
    plt.close(fig)


def test_the_outputs_carry_the_description_as_alt_text_caption_and_png_text():
    fig = window_plot(window_rows(7, 6, 5), 6)
    text = figures.description(fig)
    (image, image_meta), (caption, caption_meta) = figures.bundles(fig, text)
    assert image["text/plain"] == text and image_meta == {"image/png": {"alt": text}}
    assert caption["text/plain"] == f"Figure: {text}" and caption_meta == {figures.CAPTION_KEY: True}
    assert caption["text/markdown"] == "*Figure:* " + text  # nothing in this sentence that Markdown would format
    marked = figures.caption_markdown("Line chart of per_turn=True and pin_first=2 over turns 1-7 *here*.")
    assert marked == "*Figure:* Line chart of per\\_turn=True and pin\\_first=2 over turns 1-7 \\*here\\*."
    png = Image.open(io.BytesIO(base64.b64decode(image["image/png"])))
    assert png.info["Description"] == text
    assert png.info["Title"] == "Window of 6 messages: received, kept and stored per turn"
    plt.close(fig)


def test_descriptions_are_written_from_the_data():
    lost = figures.description(window_plot(window_rows(7, 6, 5), 6))
    kept = figures.description(window_plot(window_rows(4, 8, None), 8))
    assert "from turn 5 on, the call no longer receives the planted fact" in lost and "2, 4, 6, 6, 6, 6, 6" in lost
    assert "every call receives the planted fact" in kept and "window of 8 messages" in kept and lost != kept
    lines = figures.description(counts_plot({"a": [1, 3, 5, 7], "b": [1, 3, 5, 5]}, "t", ylabel="messages"))
    assert lines == ("Line chart of messages per turn, turns 1-4, one line per series: a: 1, 3, 5, 7; b: 1, 3, 5, 5; "
                     "all 2 lines coincide through turn 3.")
    rows = [{"turn": t, "summary calls": int(t > 1), "sent to summarizer": t - 1, "folded": int(t != 3) * (t > 1)}
            for t in range(1, 5)]
    assert figures.description(summary_calls_plot(rows, "x")) == (
        "Bar chart per turn over turns 1-4: 3 summary calls on turns 2-4, 6 messages sent to the summarizer and 2 "
        "folded in all; on turn 3 a call folded nothing.")
    plt.close("all")


def test_every_figure_in_the_notebooks_carries_its_description():
    """In the committed notebooks (what a learner opens and the book is built from), every image output has a real
    description as its alt metadata and its text, and the caption under it says the same; figures whose images differ
    have different descriptions."""
    import json
    from pathlib import Path

    seen: dict[str, str] = {}
    problems = []
    for path in sorted((Path(__file__).resolve().parent.parent / "notebooks").glob("[0-9][0-9]_*.ipynb")):
        for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
            outputs = cell.get("outputs", [])
            for index, output in enumerate(outputs):
                if "image/png" not in output.get("data", {}):
                    continue
                where = f"{path.name}, cell {cell.get('id')}"
                alt = output.get("metadata", {}).get("image/png", {}).get("alt")
                problem = figures.description_problem(alt)
                if problem:
                    problems.append(f"{where}: {problem} (use companion.support.figures.show): {alt!r}")
                    continue
                caption = outputs[index + 1] if index + 1 < len(outputs) else {}
                if "".join(output["data"].get("text/plain", "")) != alt:
                    problems.append(f"{where}: the image's text/plain is not its description")
                if "".join(caption.get("data", {}).get("text/plain", "")) != f"Figure: {alt}":
                    problems.append(f"{where}: no caption under the figure saying its description")
                image = "".join(output["data"]["image/png"])
                if seen.setdefault(alt, image) != image:
                    problems.append(f"{where}: another figure, with a different image, has the same description {alt!r}")
    assert not problems, "\n".join(problems)
