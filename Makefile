VENV   ?= .venv
PY     := $(VENV)/bin/python
# One stamp per install: running needs the package alone; tests, lint and benchmarks add the
# dev extra (pytest, pyspark, ...: over a gigabyte) on top of it.
RUN_STAMP := $(VENV)/.installed-stamp
DEV_STAMP := $(VENV)/.installed-dev-stamp

.PHONY: run test test-unit lint bench clean hooks chromium prometheus pgjdbc

# uv resolves and fetches in parallel, several times faster than pip on a cold cache (figures
# in docs/benchmarks.md). pip installs uv, and installs alone where uv can't be had.
INSTALL = $(PY) -m pip install --quiet uv && $(VENV)/bin/uv pip install --quiet --python $(PY) $(1) \
	|| $(PY) -m pip install --quiet $(1)

$(RUN_STAMP): pyproject.toml
	python3 -m venv $(VENV)
	$(call INSTALL,-e .)
	touch $(RUN_STAMP)

$(DEV_STAMP): $(RUN_STAMP)
	$(call INSTALL,-e '.[dev]')
	touch $(DEV_STAMP)

# The repository's commit-msg hook (subject rule); nothing to do outside a git checkout.
hooks:
	@git rev-parse --git-dir >/dev/null 2>&1 && git config core.hooksPath .githooks || true

run: $(RUN_STAMP) hooks
	$(VENV)/bin/gnomon standalone --demo

# The web console's tests drive Debian's chromium (installed here when missing).
chromium:
	@command -v chromium >/dev/null || (apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y chromium)

# The Prometheus tests compare answers with Debian's prometheus (installed here when missing).
prometheus:
	@command -v prometheus >/dev/null && command -v promtool >/dev/null || (apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y prometheus)

# The PostgreSQL protocol tests drive pgjdbc (DBeaver's driver) with Debian's JDK.
pgjdbc:
	@test -f /usr/share/java/postgresql.jar && command -v javac >/dev/null || (apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y libpostgresql-jdbc-java default-jdk-headless)

# Four workers, each running whole test files (a file's module fixtures, such as a cluster,
# serve its tests once): most tests wait on servers they started, so two cores keep four
# busy (six were slower: the cores were full). pytest exits 5 when it collects nothing;
# that is not a failure.
test: $(DEV_STAMP) hooks chromium prometheus pgjdbc
	$(PY) -m pytest -q -p no:cacheprovider -n 4 --dist loadfile; rc=$$?; if [ $$rc -eq 5 ]; then exit 0; fi; exit $$rc

# The quick tier alone (tests in this process, no servers started).
test-unit: $(DEV_STAMP) hooks
	$(PY) -m pytest -q -p no:cacheprovider -n 2 -m "unit and not long"

lint: $(DEV_STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports

clean:
	rm -rf $(VENV)
