# Toolhub: `make run` starts everything on embedded defaults; `make test` runs the suite.
# The oldest supported Python found on PATH (3.11, 3.12 or 3.13; the lock installs on each), or PY=/path/to/python.
# A candidate counts only if it runs (a pyenv shim for a version not selected is on PATH but fails).
PY ?= $(or $(shell for v in 3.11 3.12 3.13; do p=$$(command -v python$$v) && $$p -V >/dev/null 2>&1 && { echo $$p; break; }; done),python3)
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-$(shell cat requirements.lock pyproject.toml | cksum | cut -d' ' -f1)
PORT ?= 8000

.PHONY: install run gateway-clients test test-fast test-servers test-plugins lint complexity lock ci clean prod-local
.PHONY: bench-load bench-gateway-eras
.PHONY: sandbox-deps docs docs-config docs-errors screenshots

install: $(STAMP) sandbox-deps

# execute_command runs only inside bubblewrap, the `public` LOCAL network needs slirp4netns. As root we install them;
# otherwise we say what to ask for.
sandbox-deps:
	@if command -v bwrap >/dev/null 2>&1 || [ -x /usr/bin/bwrap ]; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
		echo "installing bubblewrap (the execute_command sandbox)"; \
		apt-get install -y -qq bubblewrap >/dev/null 2>&1 || { apt-get update -qq && apt-get install -y -qq bubblewrap; } \
			|| echo "warning: could not install bubblewrap; execute_command will refuse to run until it is installed"; \
	else \
		echo "note: bubblewrap is not installed and this is not root, so it was skipped; execute_command will"; \
		echo "      refuse to run until an administrator runs: apt-get install bubblewrap (see docs/security.md)"; \
	fi
	@# The `public` LOCAL network (a user-mode network stack); without it such servers refuse to start, saying so.
	@if command -v slirp4netns >/dev/null 2>&1; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
		echo "installing slirp4netns (the public network of LOCAL servers)"; \
		apt-get install -y -qq slirp4netns >/dev/null 2>&1 || { apt-get update -qq && apt-get install -y -qq slirp4netns; } \
			|| echo "warning: could not install slirp4netns; LOCAL servers of tenants with the public network will not start"; \
	else \
		echo "note: slirp4netns is not installed and this is not root; LOCAL servers of tenants with the public network"; \
		echo "      will not start until an administrator runs: apt-get install slirp4netns (see docs/security.md)"; \
	fi

# The stamp's name is the lock's and pyproject's checksum, so a change to either names a stamp not made yet; no file
# prerequisites: a fresh checkout's files are newer than an existing venv's stamp (a worktree sharing .venv) without
# any change to what is installed.
$(STAMP):
	@test -x $(BIN)/python || $(PY) -m venv $(VENV)
	@$(BIN)/python -c 'import sys; sys.exit(not ((3, 11) <= sys.version_info[:2] <= (3, 13)))' \
		|| { echo "$(VENV) has Python $$($(BIN)/python -V); Toolhub runs on 3.11, 3.12 or 3.13 (rm -rf $(VENV), then PY=python3.12 make install)"; exit 1; }
	$(BIN)/python -m pip install -q --disable-pip-version-check -r requirements.lock
	@rm -f $(VENV)/.installed-*
	@touch $@

run: install
	PORT=$(PORT) $(BIN)/python manage.py toolhub_run

# The production topology on this machine: two web processes, a worker and beat on PostgreSQL + Redis.
# RUNNERS=2 make prod-local starts two LOCAL server runners (default one).
RUNNERS ?= 1
prod-local: install
	$(BIN)/python deploy/prod_local.py --runners $(RUNNERS)

# Load and fault suite on the production topology (PostgreSQL + Redis; restarts both). Prints figures.
bench-load: install
	$(BIN)/python bench/load/run.py

# A warm tools/call through the gateway for a 2025 and a 2026-07-28 client beside the direct call; a profile of each
# era into bench/profiles/ (bench/PROFILE-gateway.md reads them).
bench-gateway-eras: install
	$(BIN)/python bench/gateway_eras.py --profile bench/profiles/gateway-latest

# The npm MCP clients the gateway tests drive (TypeScript SDK, Inspector CLI) and the OpenID provider the sign-in
# tests run, from the pinned locks into var/; once per machine (again only when a lock changes), ahead of the suite
# as `test-servers` is, so a fresh clone's pytest does not spend a worker's half minute on `npm ci`.
gateway-clients: install
	$(BIN)/python -m tests.agents_app.gateway.node_clients
	$(BIN)/python -m tests.identity_app.oidc_node

# The suite runs in TEST_WORKERS parallel processes (pytest-xdist; 0 = one process), a test module per worker at a
# time (`loadfile`): tests that share one outside resource live in one module (docs/architecture.md, Testing).
# Workers take the slowest modules first (tests/conftest.py orders them by measured seconds), so xdist's own
# reorder by test count is off.
TEST_WORKERS ?= 4
XDIST = $(if $(filter 0,$(TEST_WORKERS)),,-n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder)
# Bytecode caching on for the suite even where the environment turns it off (PYTHONDONTWRITEBYTECODE): each
# worker imports every test module (assertion rewriting parses and compiles each one) and the suite starts dozens
# of Python processes (runners, `toolhub_run`, MCP servers); without the __pycache__ files (git-ignored) every one
# of them compiles the project again. schemathesis's pytest plugin is off: the suite never uses it (the fuzz,
# tests/config/schema_fuzz.py, imports schemathesis itself), and loading it put schemathesis into every worker.
PYTEST = PYTHONDONTWRITEBYTECODE= $(BIN)/python -m pytest -p no:schemathesis
test: install test-servers test-plugins gateway-clients
	$(PYTEST) $(XDIST)

# The inner loop: everything but the slow lanes (third-party servers and clients, browsers, schema fuzzing, the
# production topology): what they test is other people's software meeting ours, a browser or the whole API space,
# none of which a change inside one app usually moves. `make test` still runs them all (docs/contributing.md).
FAST_MARKERS = not real_servers and not real_clients and not browser and not schema_fuzz and not prod_topology
test-fast: install
	$(PYTEST) $(XDIST) -m "$(FAST_MARKERS)"

# The sample tool plugin (examples/toolhub-sample-plugin) is never installed into $(VENV): the test settings
# put it on sys.path from var/test-plugins/, so `make run` never offers sample_* tools. This removes a copy
# an older `make test` installed into the venv.
test-plugins: install
	@if $(BIN)/python -m pip show -q toolhub-sample-plugin >/dev/null 2>&1; then \
		echo "removing toolhub-sample-plugin from $(VENV) (tests load it from var/test-plugins/)"; \
		$(BIN)/python -m pip uninstall -q -y toolhub-sample-plugin; \
	fi

# The real third-party MCP servers the suite runs (pinned in tests/fixtures/real_servers/), installed into
# var/test-servers/ from PyPI and npm, and the package tests' store (var/test-packages/: the five reference packages
# of tests/tools_app/packages/reference.py, by `manage.py toolhub_packages install`); each once per machine. Without
# the registries the tests that need them skip, saying why.
test-servers: install
	$(BIN)/python -m tests.fixtures.real_servers

# The documentation site (docs/, mkdocs.yml) into var/site; --strict: a broken link or anchor fails the build.
docs: install
	$(BIN)/mkdocs build --strict --quiet

# docs/screenshots/ again: the browser tests that take the docs' pictures (shot(..., docs=...)), in headless
# Chromium, then copied over (tests/screenshots.py; it copies nothing when a test fails or a picture is missing).
screenshots: install
	$(BIN)/python -m tests.screenshots

# docs/configuration.md's table from the settings (core.env): run after adding or changing a variable.
docs-config: install
	$(BIN)/python manage.py toolhub_settings --write docs/configuration.md

# docs/errors.md's tables from the error vocabulary (core/codes.py): run after adding or changing a code.
docs-errors: install
	$(BIN)/python manage.py toolhub_codes --write docs/errors.md

lint: install complexity
	$(BIN)/ruff check .
	$(BIN)/mypy .
	$(BIN)/lint-imports

# The complexity gate: no function past radon's rank C (cyclomatic complexity over 20). Radon counts what ruff's
# C901 (mccabe) does not (each `and`/`or`, each condition of a comprehension), so a function of conditions joined by
# `and` passes C901 at 15 and is seen here. Split a function that fails it, do not raise the rank.
COMPLEXITY_IGNORE = .venv .venv-* var workspace node_modules migrations
comma := ,
commas = $(subst $(eval) ,$(comma),$(strip $(1)))
complexity: install
	$(BIN)/xenon --max-absolute C --paths-in-front --ignore "$(call commas,$(COMPLEXITY_IGNORE))" .

# Rewrite the lock from the pins in pyproject.toml (run after changing a dependency). The pins are read from
# pyproject.toml and installed as requirements: the project itself is never built (it is not a package setuptools
# could discover: `pip install -e .` refuses its many top-level folders).
lock:
	@test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -c 'import tomllib; p = tomllib.load(open("pyproject.toml", "rb"))["project"]; \
		print("\n".join([*p["dependencies"], *p["optional-dependencies"]["dev"]]))' > $(VENV)/.lock-pins
	$(BIN)/python -m pip install -q -r $(VENV)/.lock-pins
	@# --all: pip itself is pinned too (the packages' installs run it); setuptools/wheel are what venv bundles, not ours.
	$(BIN)/python -m pip freeze --all --exclude-editable | grep -v -e '^-e' -e '^setuptools==' -e '^wheel==' > requirements.lock

ci:
	bash .ci/run

clean:
	rm -rf var workspace .mypy_cache .ruff_cache
