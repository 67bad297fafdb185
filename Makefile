# Two commands do all the set-up: `make lab` opens the workbook, `make test` runs every test.
# Both create the virtual environment in .venv the first time (or when the pins change).

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
KERNEL := agent-memory
WORKBOOK_BACKEND ?= offline
export WORKBOOK_BACKEND

.PHONY: lab test env notebooks clean-workspace

env: $(STAMP)

$(STAMP): pyproject.toml constraints.txt tools/jupyterlab-overrides.json
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -c constraints.txt -e .
	$(BIN)/python -m ipykernel install --sys-prefix --name $(KERNEL) --display-name "Agent memory (workbook)"
	mkdir -p $(VENV)/share/jupyter/lab/settings
	cp tools/jupyterlab-overrides.json $(VENV)/share/jupyter/lab/settings/overrides.json
	touch $(STAMP)

lab: $(STAMP)
	$(BIN)/jupyter lab --ServerApp.root_dir=notebooks --allow-root

test: $(STAMP)
	$(BIN)/python -m pytest tests notebooks --nbval --nbval-current-env \
		--nbval-sanitize-with tests/nbval_sanitize.cfg -p no:cacheprovider -v

notebooks: $(STAMP)
	WORKBOOK_BACKEND=offline $(BIN)/python tools/refresh_notebooks.py

clean-workspace:
	rm -rf workspace
