# Two commands do all the set-up: `make demo` runs the simulation demo, `make test` runs the whole suite.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# Installed: leadtime and what it needs to simulate (no `daemon` extra: the cluster and cloud clients, about 15 s
# of a 2-core install); then the daemon extra and the tools the tests and the linters need.
STAMP := $(VENV)/.installed
DEV_STAMP := $(VENV)/.installed-dev
# The reference scenario where forecasting pays most (TPU slices, 30-minute lead time); the pooled GPU scenario
# is `make demo DEMO_CONFIG=config/examples/helios-earth.yaml`.
DEMO_CONFIG ?= config/examples/helios-earth-slices.yaml
# out/demo for the reference scenario, out/demo-<config name> for another, so one demo does not overwrite the other.
DEMO_NAME = $(basename $(notdir $(DEMO_CONFIG)))
DEMO_OUT ?= $(if $(filter helios-earth-slices,$(DEMO_NAME)),out/demo,out/demo-$(DEMO_NAME))
# The trace the demo replays (another one: `make demo DEMO_CONFIG=... DEMO_TRACE=...`).
DEMO_TRACE ?= data/helios-earth/demand_5min.csv.gz
# The install skips byte-compiling (below), so Python caches each module in __pycache__ on its first import. An
# environment that turns that cache off (PYTHONDONTWRITEBYTECODE, common in CI images) made every process compile
# every module it imports, each time: on 2 cores the suite took 4m47s instead of 3m37s with the cache. The
# commands here run with the cache on, in the venv and the checkout only (both ignored by git).
unexport PYTHONDONTWRITEBYTECODE

.PHONY: demo test lint prometheus postgresql chromium manifests rbac-doc clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade "pip>=23.2"
	# --no-compile: byte-compiling every installed module took half of the install (51 s -> 24 s on 2 cores);
	# Python compiles the modules a command imports on their first import instead, at no measurable cost.
	$(BIN)/python -m pip install --quiet --no-compile -e .
	touch $(STAMP)

# The demo needs no test or lint tools: installing them only for the commands that use them took 17 s off the
# demo's install (about 45 s -> 28 s on 2 cores) and adds about 4 s to the first `make test`.
$(DEV_STAMP): $(STAMP)
	$(BIN)/python -m pip install --quiet --no-compile -e '.[dev]'
	touch $(DEV_STAMP)

demo: $(STAMP)
	$(BIN)/leadtime simulate --config $(DEMO_CONFIG) \
		--trace $(DEMO_TRACE) --out $(DEMO_OUT)
	@echo "report: $(DEMO_OUT)/report.html  results: $(DEMO_OUT)/results.json"

# The tests start their own Prometheus server (Debian package `prometheus`); install it when it is missing.
prometheus:
	@command -v prometheus >/dev/null 2>&1 && command -v promtool >/dev/null 2>&1 || { \
		if [ "$$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi; \
		$$SUDO apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq --no-install-recommends prometheus >/dev/null; }
	@prometheus --version 2>&1 | head -1

# The tests start their own PostgreSQL server (Debian package `postgresql`; initdb and postgres live under
# /usr/lib/postgresql/<major>/bin); install it when it is missing.
postgresql:
	@ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 && ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1 || { \
		if [ "$$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi; \
		$$SUDO apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq --no-install-recommends postgresql >/dev/null; }
	@ls -d /usr/lib/postgresql/*/bin/postgres | tail -1

# The report test screenshots the HTML report in headless Chromium (Debian package `chromium`).
chromium:
	@command -v chromium >/dev/null 2>&1 || { \
		if [ "$$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi; \
		$$SUDO apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq --no-install-recommends chromium >/dev/null; }
	@chromium --version 2>/dev/null | head -1

test: $(DEV_STAMP) prometheus postgresql chromium
	$(BIN)/python -m pytest -n 2 --dist loadgroup

lint: $(DEV_STAMP)
	$(BIN)/ruff check . && $(BIN)/ruff format --check . && $(BIN)/mypy && $(BIN)/lint-imports

# One install manifest per mode, for `kubectl apply -f`; a test fails when they drift from the overlays.
manifests:
	@for mode in dry-run enforce; do \
		{ echo "# leadtime $$mode install manifest, rendered by \`make manifests\` from deploy/overlays/$$mode (do not edit by hand)."; \
		  echo "# Install: kubectl apply -f deploy/install/$$mode.yaml   (then load your configuration into the ConfigMap leadtime-config and restart; see docs/install.md)"; \
		  kubectl kustomize deploy/overlays/$$mode; } > deploy/install/$$mode.yaml; \
	done
	@echo "wrote deploy/install/dry-run.yaml deploy/install/enforce.yaml"

clean:
	rm -rf $(VENV) out .mypy_cache .ruff_cache .pytest_cache

# docs/kubernetes-rbac.md is written from the calls the RBAC test records; a test fails when it drifts.
rbac-doc: $(DEV_STAMP)
	LEADTIME_WRITE_RBAC_DOC=1 $(BIN)/python -m pytest -q -p no:randomly tests/daemon/test_rbac.py -k rbac_doc
