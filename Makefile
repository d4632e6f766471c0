VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-stamp

.PHONY: run test lint bench clean

$(STAMP): pyproject.toml
	python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

run: $(STAMP)
	$(VENV)/bin/gnomon standalone --demo

# pytest exits 5 when it collects nothing; that is not a failure of the suite.
test: $(STAMP)
	$(PY) -m pytest -q -p no:cacheprovider; rc=$$?; if [ $$rc -eq 5 ]; then exit 0; fi; exit $$rc

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy

clean:
	rm -rf $(VENV)
