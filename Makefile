# Toolhub: `make run` starts everything on embedded defaults; `make test` runs the suite.
PY ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-$(shell cat requirements.lock pyproject.toml | cksum | cut -d' ' -f1)
PORT ?= 8000

.PHONY: install run test test-servers lint lock ci clean prod-local bench-load

install: $(STAMP)

$(STAMP): requirements.lock pyproject.toml
	@test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --disable-pip-version-check -r requirements.lock
	@rm -f $(VENV)/.installed-*
	@touch $@

run: install
	PORT=$(PORT) $(BIN)/python manage.py toolhub_run

# The production topology on this machine: two web processes, a worker and beat on PostgreSQL + Redis.
prod-local: install
	$(BIN)/python deploy/prod_local.py

# Load and fault suite on the production topology (PostgreSQL + Redis; restarts both). Prints figures.
bench-load: install
	$(BIN)/python bench/load/run.py

test: install test-servers
	$(BIN)/python -m pytest

# The real third-party MCP servers the suite runs (pinned in tests/fixtures/real_servers/), installed into
# var/test-servers/ from PyPI and npm; without the registries the tests that need them skip, saying why.
test-servers: install
	$(BIN)/python -m tests.fixtures.real_servers

lint: install
	$(BIN)/ruff check .
	$(BIN)/mypy .
	$(BIN)/lint-imports

# Rewrite the lock from the pins in pyproject.toml (run after changing a dependency).
lock:
	@test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q -e ".[dev]" && $(BIN)/python -m pip uninstall -q -y toolhub
	$(BIN)/python -m pip freeze --exclude-editable | grep -v '^-e' > requirements.lock

ci:
	bash .ci/run

clean:
	rm -rf var workspace .mypy_cache .ruff_cache
