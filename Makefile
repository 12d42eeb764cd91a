# lance_spark: two commands for a fresh machine (Java 17 and Python 3.11 only):
#   make demo   - builds everything and runs the demo job end to end
#   make test   - builds everything and runs every test (Scala, Python, interop)
#   make test-long - the randomized differential tests with thousands of seeds
#   make bench  - builds everything and regenerates docs/benchmarks.md (bench-quick: small data)
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
SBT := build/sbt
BUNDLES := target/bundles
FIXTURES := spark-connector/target/fixtures


.PHONY: all venv jar python wheel fixtures cds test test-scala test-python test-integration test-lines run-lines line-venvs test-long demo bench bench-quick bench-tpch-matrix bench-tpcds-matrix clean

all: python

# Python environment with the oracle (pylance), PySpark and test tools, from PyPI. Without
# pip's bytecode compilation (--no-compile: two thirds of the install's CPU, 63 s of 74 s of
# user time here); Python compiles the modules a process imports on first use, and keeps them.
$(VENV)/.installed: requirements-dev.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q --no-compile -r requirements-dev.txt
	touch $@

venv: $(VENV)/.installed

# The bundle jars for spark-submit --jars, one per Spark line (sbt fetches itself and the build
# from Maven Central): 3.5 on Scala 2.12 and 2.13, 4.0, 4.1, 4.2 (`++` switches the core too);
# the four 2.13 lines' layers compile side by side (`all`) once their core is compiled.
# JAR_ALSO: more tasks for the 2.13 step's `all` (make test: the 2.13 test sources, which then
# compile beside the layers and their assemblies instead of after them).
JAR_ALSO ?=
jar:
	$(SBT) "++2.12.20 spark35/assembly" "++2.13.18" "all spark35/assembly spark40/assembly spark41/assembly spark42/assembly $(JAR_ALSO)" < /dev/null

# The Python package with the jar inside, installed into the venv.
# Builds and installs the wheel (it generates protos and packs the jar); tests/ also
# import the in-tree package, so the jar and protos are put there too.
python: venv jar
	$(PY) -m pip install -q --no-deps --no-build-isolation --force-reinstall ./python
	$(PY) python/gen_protos.py
	rm -rf python/lance_spark/jars && mkdir -p python/lance_spark/jars && cp $(BUNDLES)/*.jar python/lance_spark/jars/

# An installable wheel with the connector jar inside: python/dist/lance_spark-*.whl
# (pip install it offline on a cluster or notebook; its only dependencies are
# pyarrow, numpy, protobuf, pyroaring and rich).
wheel: venv jar
	rm -rf python/dist python/build
	$(PY) -m pip wheel -q --no-deps --no-build-isolation -w python/dist ./python
	@ls python/dist/*.whl

fixtures: venv
	$(PY) python/gen_protos.py   # old_releases.py edits manifests with our protos
	$(PY) tests/fixtures/codec_fixtures.py $(FIXTURES)   # first: it empties the directory
	$(PY) tests/fixtures/v2_fixtures.py $(FIXTURES)
	$(PY) tests/fixtures/v21_fixtures.py $(FIXTURES)
	$(PY) tests/fixtures/legacy_fixtures.py $(FIXTURES)
	$(PY) tests/fixtures/old_releases.py $(FIXTURES)/old_releases

# The core suites (a slice of their longest cases: LongTests) and each 2.13 line's layer suites
# run side by side (`all`: the core's suites leave part of a core idle waiting on pylance
# processes). Scala 2.12's build is tested in make test by Spark 3.5.9's line (pip's pyspark 3.5
# is Scala 2.12: the real-Spark tests of test_spark_line.py on the 3.5_2.12 bundle); make
# test-long runs every core suite and the 3.5 layer's suites on 2.12 too.
# BUILT=1: the package and fixtures are built already (make test builds them first).
BUILT ?=
test-scala: $(if $(BUILT),,venv fixtures)
	LANCE_FIXTURES=$(abspath $(FIXTURES)) LANCE_PYTHON=$(abspath $(PY)) $(SBT) "all core/test spark42/test spark41/test spark40/test spark35/test" < /dev/null

# The JVMs the Python tests start (Spark drivers, spark-submit, the Connect server and the
# standalone cluster) compile with C1 only and collect with the serial collector: each runs
# seconds to minutes of small queries, where C2's compilations and G1's threads cost more CPU
# than they save (TPC-H's module: 127 s of CPU against 182, the same wall time; the Spark line
# module: 41 s against 98). The Scala suites keep the defaults (their codec loops gain from C2)
# and so do the benchmarks.
TEST_JVM_OPTS ?= -XX:TieredStopAtLevel=1 -XX:+UseSerialGC

# A class-data-sharing archive of the classes a test session loads (JDK CDS; written by
# integration-tests/cds_workload.py, 40-70 s once): the pytest JVMs (local sessions, cluster
# daemons and executors, drivers, Connect servers, all with the main venv's Spark jars) map
# those classes instead of loading and verifying them: two interop modules in one JVM took 41 s
# with it against 65 s without. A JVM with other jars (the line venvs) ignores the archive, as
# does any JVM when it is missing or stale (the JVM checks the jars it was made from); -Xlog
# keeps the JVMs from saying so. CDS=0 leaves it out.
CDS ?= 1
CDS_ARCHIVE := target/cds/spark-classes.jsa
CDS_OPTS = $$( [ "$(CDS)" = 1 ] && [ -s $(abspath $(CDS_ARCHIVE)) ] && echo "-XX:SharedArchiveFile=$(abspath $(CDS_ARCHIVE)) -Xlog:cds=off -Xlog:cds+dynamic=off")

$(CDS_ARCHIVE): $(VENV)/.installed $(wildcard python/lance_spark/jars/*.jar) integration-tests/cds_workload.py
	@mkdir -p $(dir $@) && rm -f $@ $@.tmp
	@if JDK_JAVA_OPTIONS="$(TEST_JVM_OPTS)" $(PY) integration-tests/cds_workload.py $(abspath $@.tmp) > $(dir $@)dump.log 2>&1; \
	then mv $@.tmp $@ && echo "== class-data-sharing archive: $@ ($$(du -m $@ | cut -f1) MB)"; \
	else rm -f $@.tmp; echo "== no class-data-sharing archive (the JVMs load their classes as before): $(dir $@)dump.log ends:"; tail -n 20 $(dir $@)dump.log; fi

cds: $(if $(filter 1,$(CDS)),$(CDS_ARCHIVE))

test-python: $(if $(BUILT),,python cds)
	JDK_JAVA_OPTIONS="$(TEST_JVM_OPTS) $(CDS_OPTS)" $(PY) -m pytest -q -n 2 tests

# A slice of the randomized differential tests (7 seeds per case, 2 Delta sequences; the change
# feed against Delta's in its streaming test's seeded sequence) keeps make test inside CI's budget;
# make test-long runs them at length. The modules run on two
# pytest workers (pytest-xdist; a module and its Spark session stay on one worker, and so do
# the modules that share a JVM's launch settings, one after another: conftest.py's groups;
# PYTEST_WORKERS=1 runs them one after another), longest first (conftest.py's order, kept by
# --no-loadscope-reorder). Of test_spark_line.py, the main venv's line (4.2, whose every feature
# the other modules test) runs the smoke tests (LINE_SMOKE_K); INTEGRATION_ARGS="-k ..." replaces
# that selection.
test-integration: $(if $(BUILT),,python cds)
	rm -rf target/spark-local
	LANCE_DIFF_CASES=$${LANCE_DIFF_CASES:-7} DIFF_SEQUENCES=$${DIFF_SEQUENCES:-2} CDF_SEQUENCES=$${CDF_SEQUENCES:-0} \
	  JDK_JAVA_OPTIONS="$(TEST_JVM_OPTS) $(CDS_OPTS)" $(PY) -m pytest -q -n $${PYTEST_WORKERS:-2} --dist loadfile --no-loadscope-reorder \
	  --durations=30 -k "not test_spark_line or $(LINE_SMOKE_K)" $(INTEGRATION_ARGS) integration-tests

# Each further Spark line, in a venv with that line's pip pyspark (issue 36): the real-Spark
# subset of integration-tests/test_spark_line.py with the bundle configure() picks for it
# (4.3 has no Maven artifacts: it runs the 4.2 bundle; pip's pyspark 3.5 is Scala 2.12: the
# 3.5_2.13 bundle is tested by its Scala suites only).
LINE_PYSPARKS := 3.5.9 4.0.5 4.1.4 4.3.0
# make test's lines: 3.5 (its whole subset: the Scala 2.12 bundle's only test in make test) and
# 4.3 (the smoke tests: the newest pip pyspark on the 4.2 bundle); 4.0 and 4.1 are tested in make
# test by their layers' Scala suites, on their Spark (make test-lines and test-long run them all).
TEST_LINES := 3.5.9 4.3.0

.venv-spark-%/.installed: requirements-line.txt
	$(PYTHON) -m venv .venv-spark-$*
	.venv-spark-$*/bin/python -m pip install -q --upgrade pip
	.venv-spark-$*/bin/python -m pip install -q --no-compile pyspark==$* -r requirements-line.txt
	touch $@

line-venvs: $(foreach v,$(LINE_PYSPARKS),.venv-spark-$(v)/.installed)

# Two lines at a time (each is one small local session; its own temp dir and log);
# LINE_JOBS=1 one after another.
LINE_JOBS ?= 2
test-lines: python line-venvs
	@$(MAKE) --no-print-directory run-lines

# LINES: the lines to run; `main` is the venv's own pyspark (make test runs its test_spark_line.py with the interop modules).
# LINE_SLICED: lines that run only LINE_SLICE_K's tests (file versions read and written as
# pylance does, DELETE / UPDATE / MERGE, the catalog, a procedure and a metadata table, the
# bundle chosen). LINE_SMOKED: lines that run only LINE_SMOKE_K's (configure() chose the line's
# bundle, files written as pylance reads them, DML; make test: 4.3).
LINES ?= $(LINE_PYSPARKS)
LINE_SLICED ?=
LINE_SLICE_K := not (vector_search or add_columns or update_columns or streaming or label_list or small_lookups or scalar_subqueries or joins_pruned)
LINE_SMOKED ?=
LINE_SMOKE_K := the_bundle_is_the_running_line or writes_that_pylance_reads or delete_update_merge
run-lines:
	@rm -rf target/lines && mkdir -p target/lines
	printf '%s\n' $(LINES) | xargs -P $(LINE_JOBS) -I{} sh -c 'py=.venv-spark-{}/bin/python; [ {} = main ] && py=$(PY); k=; case " $(LINE_SLICED) " in *" {} "*) k="$(LINE_SLICE_K)";; esac; case " $(LINE_SMOKED) " in *" {} "*) k="$(LINE_SMOKE_K)";; esac; SPARK_LOCAL_DIRS=$(abspath target)/lines/local-{} JDK_JAVA_OPTIONS="$(TEST_JVM_OPTS)" PYTHONPATH=python $$py -m pytest -q -p no:cacheprovider --basetemp=target/lines/tmp-{} $${k:+-k "$$k"} integration-tests/test_spark_line.py > target/lines/{}.log 2>&1; echo $$? > target/lines/{}.rc'
	@rc=0; for v in $(LINES); do \
	  echo "== Spark $$v"; \
	  if [ "$$(cat target/lines/$$v.rc)" = 0 ]; then tail -n 1 target/lines/$$v.log; else cat target/lines/$$v.log; rc=1; fi; \
	done; exit $$rc

# The venv, the bundles, the package and the fixtures are built first while the further lines'
# venvs are made in the background (building the bundles beside the main venv's install, when
# pip compiled bytecode, was slower: sbt's compiles slowed by a third); then the further lines
# run one at a time, and the class-data-sharing archive is written, in the background while the
# Scala suites run (they leave part of a core idle: many suites wait on pylance processes), and
# the Python and interop tests after them have both cores (the main venv's line, 4.2, runs
# test_spark_line.py among the interop modules).
test:
	@mkdir -p target
	@t0=$$(date +%s); at() { echo "$$1 at $$(( $$(date +%s) - t0 )) s"; }; \
	( $(MAKE) --no-print-directory $(foreach v,$(TEST_LINES),.venv-spark-$(v)/.installed) > target/line-venvs.log 2>&1 ) & venvs=$$!; \
	$(MAKE) --no-print-directory python fixtures JAR_ALSO="core/Test/compile spark42/Test/compile spark41/Test/compile spark40/Test/compile spark35/Test/compile" || { wait $$venvs; exit 1; }; \
	wait $$venvs || { echo "== the line venvs failed:"; cat target/line-venvs.log; exit 1; }; \
	at "builds done" > target/phases.txt; \
	( $(MAKE) --no-print-directory run-lines LINE_JOBS=1 LINES="$(TEST_LINES)" LINE_SMOKED="4.3.0" > target/lines.log 2>&1; rc=$$?; at "lines done" >> target/phases.txt; exit $$rc ) & lines=$$!; \
	( $(MAKE) --no-print-directory cds > target/cds.log 2>&1 ) & cds=$$!; \
	$(MAKE) --no-print-directory test-scala BUILT=1; rc=$$?; at "Scala suites done" >> target/phases.txt; \
	wait $$cds; cat target/cds.log; \
	[ $$rc = 0 ] && { $(MAKE) --no-print-directory test-python BUILT=1; rc=$$?; at "Python tests done" >> target/phases.txt; }; \
	[ $$rc = 0 ] && { $(MAKE) --no-print-directory test-integration BUILT=1; rc=$$?; at "integration done" >> target/phases.txt; }; \
	wait $$lines; lrc=$$?; echo "== the Spark lines (target/lines.log):"; cat target/lines.log; \
	echo "== make test's phases (seconds from its start; the lines run beside the Scala suites):"; cat target/phases.txt; \
	[ $$rc = 0 ] && [ $$lrc = 0 ]

# Everything make test runs a slice of, at length: the randomized differential tests (make test:
# 7 seeds per case, 2 Delta sequences, the change feed's streaming sequence), every commit point
# a writer can be killed at (make test kills it at two), concurrent writer processes and sessions
# (make test: threads), the cluster's spark-submit pipelines on local disk and S3 (make test:
# spark-submit with a worker killed mid-write) and a worker killed mid-MERGE, a streaming driver
# killed 8 times (make test: once) and the stream on S3, the whole pylance read matrix (make test
# reads 4 of its 7 datasets), a history of 10,000 versions (make test: 400), a table of 100,000
# fragments (make test: 5,000), TPC-DS's 31 statements (make test: 5), TPC-H's 22 queries on
# our tables and on pylance's and the cost-based optimizer's joins (make test: about 8 of the
# queries, once each), every DML conformance case (make test: one in four),
# every case of the parametrized tests of which make test runs one in two or three
# (integration-tests/conftest.py's CASES_ONE_IN), 8 threads appending 5 times each to a bucket
# (make test: 2), the core suites' longest cases (LongTests) and every core suite and the 3.5
# layer's on Scala 2.12, and every Spark line's whole test_spark_line.py (make test: 3.5 whole,
# 4.3 the smoke tests; 4.0 and 4.1 their layers' Scala suites).
test-long: python fixtures line-venvs
	LANCE_LONG_TESTS=1 LANCE_FIXTURES=$(abspath $(FIXTURES)) LANCE_PYTHON=$(abspath $(PY)) $(SBT) "all core/test spark42/test spark41/test spark40/test spark35/test" "++2.12.20 core/test" "++2.12.20 spark35/test" < /dev/null
	LANCE_DIFF_CASES=3000 LANCE_DIFF_MAX_ROWS=200000 DIFF_SEQUENCES=200 CDF_SEQUENCES=40 JDK_JAVA_OPTIONS="$(TEST_JVM_OPTS)" $(PY) -m pytest -q -k differential integration-tests
	LANCE_LONG_TESTS=1 JDK_JAVA_OPTIONS="$(TEST_JVM_OPTS)" $(PY) -m pytest -q -k "not differential" integration-tests
	@$(MAKE) --no-print-directory run-lines LINES="$(LINE_PYSPARKS)"

demo: python
	$(PY) examples/demo.py

# Benchmarks (bench/README.md): regenerate docs/benchmarks.md and docs/benchmarks.png.
bench: python
	$(PY) -m bench

bench-quick: python
	$(PY) -m bench --quick

# TPC-H and TPC-DS over the settings matrix (bench/sqlmatrix.py; hours on 2 cores).
bench-tpch-matrix: python
	$(PY) -m bench.sqlmatrix tpch

bench-tpcds-matrix: python
	$(PY) -m bench.sqlmatrix tpcds

clean:
	rm -rf spark-connector/target spark-connector/v*/target core/target target project/target python/build python/lance_spark/jars
