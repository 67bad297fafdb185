# Two commands do all the set-up: `make lab` opens the workbook, `make test` runs every test.
# Both create the virtual environment in .venv the first time (or when the pins change), through tools/workbook.py,
# which does the same without make (`python tools/workbook.py lab|test`, on Windows too).

# The pinned packages (onnxruntime 1.32, numpy 2.4, matplotlib 3.11) need Python 3.11 or newer: take the first such
# interpreter on the PATH, or name one with `make lab PYTHON=/path/to/python3.12`.
PYTHON ?= $(shell for p in python3 python3.13 python3.12 python3.11; do \
	$$p -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null && { echo $$p; break; }; done)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
TEST_STAMP := $(VENV)/.installed-test
KERNEL := agent-memory
WORKBOOK_BACKEND ?= offline
export WORKBOOK_BACKEND
# onnxruntime (the offline embedder) sends usage telemetry unless this is set before it loads; never wanted here.
ORT_DISABLE_TELEMETRY := 1
export ORT_DISABLE_TELEMETRY
# The test command never obeys the shell's backend: tests run offline (no paid calls, no network). Without credentials,
# botocore would also probe the EC2 instance-metadata address for them when a Bedrock client is built in a test.
OFFLINE := WORKBOOK_BACKEND=offline ORT_DISABLE_TELEMETRY=1 AWS_EC2_METADATA_DISABLED=true

# The same arguments as tools/workbook.py's PYTEST_ARGS (tests/test_environment.py keeps them equal).
PYTEST_ARGS := tests notebooks --ignore=notebooks/es --nbval --nbval-current-env --nbval-sanitize-with tests/nbval_sanitize.cfg \
	--nbval-cell-timeout=300 -p no:cacheprovider -v -n auto --dist loadgroup --durations=25

.PHONY: lab test check env notebooks clean-workspace book wheelhouse offline-install

env: $(STAMP)

$(STAMP): pyproject.toml constraints.txt tools/jupyterlab-overrides.json tools/workbook.py Makefile
	@test -n "$(PYTHON)" || { echo "Python 3.11 or newer is needed and none was found on the PATH (python3 is $$(python3 --version 2>&1))." \
		"Install it (python.org, pyenv, uv, or conda with environment.yml), or run: make $(MAKECMDGOALS) PYTHON=/path/to/python3.11"; exit 1; }
	$(PYTHON) tools/workbook.py setup --venv $(VENV)

# The test suite's extra tools (the `test` and `book` extras in pyproject.toml), kept out of the learner's install.
$(TEST_STAMP): $(STAMP)
	$(PYTHON) tools/workbook.py setup --venv $(VENV) --extras test,book

# The same command as tools/workbook.py's lab_command (tests/test_environment.py keeps them equal).
lab: $(STAMP)
	$(BIN)/python -m jupyterlab --ServerApp.root_dir=notebooks --allow-root

# Tests run in parallel, one worker per core (pytest-xdist); --dist loadgroup with tests/conftest.py's scheduler keeps
# each notebook's cells (and tests sharing a module fixture, or a module's tests that share state) on one worker and in
# order, spreads independent tests over both workers, and starts the slowest first. tests/test_browser.py drives
# JupyterLab in the system's Chromium, skipped without it (and failing under CI=true).
test: $(TEST_STAMP)
	@test -x /usr/bin/chromium || echo "No Chromium at /usr/bin/chromium (Debian: apt-get install chromium): the browser test will be skipped."
	$(OFFLINE) $(BIN)/python -m pytest $(PYTEST_ARGS)

# The inner loop: ruff and the in-process tests (no notebook, kernel, browser, venv, server or subprocess; tests/conftest.py
# marks the others `notebooks` or `integration`). `make test` runs everything.
check: $(TEST_STAMP)
	$(BIN)/ruff check .
	$(OFFLINE) $(BIN)/python -m pytest tests -m "not notebooks and not integration" -q -n auto -p no:cacheprovider

notebooks: $(STAMP)
	$(OFFLINE) $(BIN)/python tools/refresh_notebooks.py

# The Spanish edition (tools/translate.py): the catalogs in locale/es/ follow the English notebooks (changed units
# marked fuzzy), then notebooks/es/ is built from them. Its code and outputs are the English ones: nbval runs only those.
.PHONY: notebooks-es
notebooks-es: $(TEST_STAMP)
	$(BIN)/python tools/translate.py update
	$(BIN)/python tools/translate.py build

# Replay the series for a class into replays/<class>/, never touching notebooks/ (docs/instructor-guide.md):
# `make replay CLASS=classes/my.yaml`, `make replay ARGS="03 05"`, `make replay ARGS="--dry-run --learners 30"`.
CLASS ?= classes/sample.yaml
.PHONY: replay
replay: $(STAMP)
	$(BIN)/python -m companion.replay --class $(CLASS) $(ARGS)

clean-workspace:
	rm -rf workspace

# The static book of the series (Sphinx + MyST-NB, the `book` extra) from the committed outputs: build/book/html/index.html.
BOOK_STAMP := $(VENV)/.installed-book
$(BOOK_STAMP): $(STAMP)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -c constraints.txt -e ".[book]"
	touch $(BOOK_STAMP)

book: $(BOOK_STAMP)
	$(BIN)/python tools/build_book.py

# Conference Wi-Fi: at home, `make wheelhouse WHEELHOUSE=/media/usb/wheelhouse` downloads every pinned wheel for this
# machine and Python; at the venue, `make offline-install WHEELHOUSE=...` builds .venv from the folder with no network,
# then `make lab` as usual. See tools/wheelhouse.py (other platforms, extras, and `sizes`: what each package costs).
WHEELHOUSE ?= build/wheelhouse
wheelhouse:
	$(PYTHON) tools/wheelhouse.py download --dest $(WHEELHOUSE)

offline-install:
	$(PYTHON) tools/wheelhouse.py install --from $(WHEELHOUSE) --venv $(VENV) --stamp $(STAMP)
