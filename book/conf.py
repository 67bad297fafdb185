"""Sphinx configuration of the workbook's static book (built by `make book`, i.e. tools/build_book.py).

The book is made from the notebooks' committed outputs: nothing is executed, nothing is fetched. Sphinx + MyST-NB
(pure Python, installed from the `book` extra) rather than Jupyter Book 2, whose mystmd engine needs Node.js.
tools/build_book.py stages the notebooks and a generated landing page (index.md) into a source folder and runs
sphinx-build with `-c book`, so this file is the only configuration.
"""

project = "Agent memory with Strands: a workbook"
author = "the workbook's authors"
copyright = "the workbook's authors"

extensions = ["myst_nb"]

# Committed outputs only: a reader's book never runs a model, and the build needs no kernel and no network.
nb_execution_mode = "off"
# A cell's stdout lines printed in several chunks read as one block.
nb_merge_streams = True
# No widget state is saved in the notebooks (tools/refresh_notebooks.py drops it), and myst-nb's default would add
# require.js and the widget manager from a CDN to every page: the book must be readable offline.
nb_ipywidgets_js = {}

# Headings get anchors, so "#section" links inside a notebook resolve.
myst_heading_anchors = 3

exclude_patterns = ["**.ipynb_checkpoints"]

html_theme = "furo"
html_title = "Agent memory with Strands"
html_show_sourcelink = False
html_copy_source = False
html_last_updated_fmt = None
# Sphinx adds MathJax (from a CDN) only to a page that has math; no notebook has any. tests/test_book.py fails if a
# page ever loads a script, style or font from the network, which is how math sneaking in would show.
