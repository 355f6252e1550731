# stormpy's two entry points; each installs what is missing first.
#   make demo   serve zones/example.zone on 127.0.0.1:5353 (Ctrl-C stops it)
#   make test   build, then run every test (C unit tests and a short fuzz run included)
#   make fuzz   run every libFuzzer target for FUZZ_SECONDS (default 60) each
# System packages are installed with apt-get when run as root; otherwise the
# missing ones are named and the tests that need them say so when they skip.

PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PYTEST_ARGS ?= -q -rs
SOURCES := pyproject.toml setup.py stormpy/_core.pyx $(wildcard stormpy/*.pxi stormpy/includes/*.pxd) \
           $(wildcard native/*/*.c native/*/*/*.c native/io/*.h native/bpf/*.h native/gen/*.h native/engine/*.h native/app/*/*.h) \
           $(wildcard native/include/stormpy/*.h native/include/stormpy/*/*.h native/include/stormpy/*/*/*.h)

# command:package pairs, checked by command so any install (Debian's or not) counts; the
# sbin directories count too (knotd and nginx live there, outside a normal user's PATH)
BUILD_TOOLS := cc:gcc make:make $(PYTHON):python3 clang:clang pkg-config:pkg-config
TEST_TOOLS := knotd:knot ip:iproute2 ping:iputils-ping ethtool:ethtool valgrind:valgrind nginx:nginx wrk:wrk \
              curl:curl wget:wget nft:nftables ldns-signzone:ldnsutils kdig:knot-dnsutils
DEMO_TOOLS := dig:bind9-dnsutils

define need
	@missing=""; for pair in $(1); do \
	  cmd="$${pair%%:*}"; command -v "$$cmd" >/dev/null 2>&1 || test -x "/usr/sbin/$$cmd" \
	    || test -x "/sbin/$$cmd" || missing="$$missing $${pair#*:}"; done; \
	$(2) \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    echo "make: installing$$missing"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
	  else echo "make: not root, so not installing:$$missing"; fi; fi
endef

# Python's headers and venv support come separately on Debian; AF_XDP needs libxdp;
# the C zone reader needs ldns.
PY_CHECK := if ! $(PYTHON) -c 'import ensurepip, sysconfig, os, sys; \
	  sys.exit(not os.path.exists(sysconfig.get_paths()["include"] + "/Python.h"))' \
	  2>/dev/null; then missing="$$missing python3-venv python3-dev"; fi; \
	  pkg-config --exists libxdp libbpf 2>/dev/null || missing="$$missing libxdp-dev libbpf-dev"; \
	  pkg-config --exists ldns 2>/dev/null || missing="$$missing libldns-dev";

FUZZ_SECONDS ?= 60
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
# builds in parallel unless the caller's own -j (and jobserver) already does
PARALLEL = $(if $(filter -j%,$(MAKEFLAGS)),,-j$(JOBS))
FUZZ_SMOKE_SECONDS ?= 10

.PHONY: demo test fuzz build deps-build deps-test deps-demo check-native clean

demo: deps-demo build
	@echo "stormpy: serving zones/example.zone on 127.0.0.1:5353 - query it from another shell:"
	@echo "    dig @127.0.0.1 -p 5353 www.example.com"
	@echo "    dig @127.0.0.1 -p 5353 +tcp example.com MX"
	$(VENV)/bin/stormpy serve-dns zones/example.zone --listen 127.0.0.1:5353

test: deps-test build
	$(MAKE) -s $(PARALLEL) -C native/tests check
	$(MAKE) -s $(PARALLEL) -C native/fuzz all PY=$(abspath $(PY))
	$(MAKE) -s -C native/fuzz fuzz FUZZ_SECONDS=$(FUZZ_SMOKE_SECONDS) PY=$(abspath $(PY))
	$(PY) -m pytest $(PYTEST_ARGS)

fuzz: deps-build build
	$(MAKE) -s $(PARALLEL) -C native/fuzz all PY=$(abspath $(PY))
	$(MAKE) -s -C native/fuzz fuzz FUZZ_SECONDS=$(FUZZ_SECONDS) PY=$(abspath $(PY))

build: $(VENV)/.built

$(VENV)/.built: $(SOURCES) | deps-build
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test]'
	@touch $@

deps-build:
	$(call need,$(BUILD_TOOLS),$(PY_CHECK))

deps-test: deps-build
	$(call need,$(TEST_TOOLS),)

deps-demo: deps-build
	$(call need,$(DEMO_TOOLS),)

clean:
	rm -rf $(VENV) build *.egg-info stormpy/_core.c stormpy/*.so
	$(MAKE) -s -C native/tests clean
