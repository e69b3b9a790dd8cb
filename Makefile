# Everything a fresh Debian machine with Python 3.11 and Java 17 needs: `make run`, `make test`.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
# The exact versions we develop and test with (pyproject.toml carries the supported ranges).
PINS := "pyspark==4.1.1" "pyarrow==22.0.0" "deltalake==1.6.6" "numpy==2.4.6" "pyroaring==1.2.0" "pyhive==0.7.0" "thrift==0.25.0" "matplotlib==3.11.2" "ruff==0.17.6" "mypy==2.4.1"

.PHONY: run test test-fast lint bench setup oracles clean

$(VENV)/.installed: pyproject.toml Makefile
	@java -version >/dev/null 2>&1 || { echo "Java 17 is required (apt-get install -y openjdk-17-jre-headless)"; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q $(PINS) -e '.[test]'
	touch $@

# The real engines the spark tier holds USE against (docs/oracles.md): delta-spark's jars, fetched once
# with Maven (pinned in tests/oracles/pom.xml and jars.sha256) into build/oracles/; qbeast-spark's, with
# a pyspark 3.5 virtualenv for it, only where its jar can be had. Later runs need no network.
ORACLES := build/oracles/.fetched
$(ORACLES): tests/oracles/pom.xml tests/oracles/jars.sha256 tests/oracles/fetch.py $(VENV)/.installed
	@command -v mvn >/dev/null 2>&1 || { echo "Maven is required to fetch the oracle engines' jars (apt-get install -y maven)"; exit 1; }
	$(PY) tests/oracles/fetch.py delta-spark qbeast-spark
	touch $@

oracles: $(ORACLES)

# A real LDAP server for the LDAP authentication test (tests/server/test_serve_security.py starts its
# own slapd on a free port; the package's own service is not used). Without apt-get or root the test
# is skipped and says why.
LDAP := /usr/sbin/slapd
$(LDAP):
	@if command -v apt-get >/dev/null 2>&1 && [ "$$(id -u)" = 0 ]; then \
		{ DEBIAN_FRONTEND=noninteractive apt-get install -y -q slapd ldap-utils >/dev/null 2>&1 || \
		  { apt-get update -q >/dev/null 2>&1 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q slapd ldap-utils >/dev/null 2>&1; } || \
		  echo "slapd could not be installed: the LDAP test will be skipped"; }; \
	else echo "slapd not installed (needs root and apt-get): the LDAP test will be skipped"; fi

setup: $(VENV)/.installed $(ORACLES) $(LDAP)

run: $(VENV)/.installed
	$(VENV)/bin/use serve --demo

# The checks first (seconds), then the three tiers at once: tests/unit (pure, no JVM), tests/spark (a
# local Spark and the oracle engines), tests/server (`use serve` subprocesses over JDBC). Each mostly
# waits (on JVMs, subprocesses), so together they keep the cores busier than one after the other;
# each tier's output goes to build/test-logs/<tier>.log and is printed whole when the tier ends
# (tests/run_tiers.py), and make fails if any tier fails.
# The JVM shim is compiled once before, not by the first session of each tier.
test: lint $(ORACLES) $(LDAP)
	$(PY) -m use.shim >/dev/null
	$(PY) tests/run_tiers.py unit spark server

test-fast: $(VENV)/.installed
	$(VENV)/bin/pytest -q tests/unit

lint: $(VENV)/.installed
	$(VENV)/bin/ruff check python tests benchmarks docs/generate.py
	$(VENV)/bin/ruff format --check python tests benchmarks docs/generate.py
	$(VENV)/bin/mypy

bench: $(VENV)/.installed $(ORACLES)
	$(PY) benchmarks/run.py

clean:
	rm -rf $(VENV) build *.egg-info python/*.egg-info
