# Everything bootstraps a local .venv from a bare Python 3.11+ that has pip; nothing else is needed.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-$(shell cat pyproject.toml | cksum | cut -d' ' -f1)
DEMO_DATASET ?= build/corpus.ds

.PHONY: demo test bench clean browser

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	rm -f $(VENV)/.installed-* && touch $@

demo: $(STAMP)  ## ingest the bundled corpus into a Parquet dataset (sources decided by content) print what it holds, and diagnose it
	@mkdir -p $(dir $(DEMO_DATASET))
	$(BIN)/forensics ingest corpus -o $(DEMO_DATASET) --quiet
	$(BIN)/forensics diagnose $(DEMO_DATASET) --no-evidence
	$(BIN)/forensics stats $(DEMO_DATASET) --by component
	$(BIN)/forensics report $(DEMO_DATASET) -o $(dir $(DEMO_DATASET))report.html

browser:  ## Debian's chromium, for the report's browser test (installed when run as root with apt-get)
	@command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "installing Debian's chromium for the report's browser test"; \
	    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium) >/dev/null; \
	  else echo "no chromium: the report's browser test will be skipped (install Debian's chromium)"; fi; }

test: $(STAMP) browser  ## the test suite
	$(BIN)/python -m pytest

bench: $(STAMP)  ## benchmarks (never part of the tests); results in bench/results.json
	$(BIN)/python bench/run.py

clean:
	rm -rf $(VENV) build dist *.egg-info bench/out
