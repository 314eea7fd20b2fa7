# Two entry points: `make bench` and `make test`. Both create .venv idempotently on a fresh clone.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: bench test lint venv tools clean

venv: $(STAMP) tools

# Kafka brokers are JVMs whose jars Maven fetches from Maven Central; install both only if missing.
# The report test renders reports in headless Chromium (Debian's `chromium`); installed only if missing.
tools:
	@command -v java >/dev/null && command -v mvn >/dev/null || \
		{ echo "installing java and maven (apt)"; apt-get update -qq && apt-get install -y -qq default-jre-headless maven; }
	@command -v chromium >/dev/null || \
		{ echo "installing chromium (apt)"; apt-get update -qq && apt-get install -y -qq chromium; }

# Re-install only when the project's declared dependencies change.
$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip uv==0.13.8
	$(BIN)/uv pip install --python $(BIN)/python --quiet -e '.[dev]'
	touch $(STAMP)

bench: $(STAMP) tools
	$(BIN)/sixnines run matrices/quick.yaml --lake lake

test: $(STAMP) tools
	$(BIN)/ruff check .
	$(BIN)/python -m pytest -ra

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

clean:
	rm -rf $(VENV) lake .cache
