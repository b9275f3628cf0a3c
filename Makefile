# make run   set-up, build, and the main job: blkmq reproduce --quick, the four seed experiments
# make test  set-up, build, and every test: release, the rbd driver on a throw-away Ceph cluster,
#            ASan+UBSan, TSan, and a bounded NBD fuzz run
# make fuzz  the NBD fuzzers (the codec; a real connection on a null device), FUZZ_SECONDS each
# make install [PREFIX=/usr/local]  the library (headers, libblkmq.a and .so, CMake package,
#            blkmq.pc), the blkmq command and blkmq(1), from the release tree
SHELL := /bin/bash
JOBS ?= $(shell nproc)
# man-db: test-install renders blkmq(1). libunistring-dev: `pkg-config
# --static --libs blkmq` names GnuTLS's own private libraries, and
# test-install links the README example with libblkmq.a that way.
PKGS := build-essential cmake ninja-build pkg-config libgtest-dev libgmock-dev \
        libbenchmark-dev liburing-dev libcli11-dev nlohmann-json3-dev fio valgrind gnuplot-nox libnbd-bin \
        python3-libnbd nbdkit qemu-utils libgnutls28-dev gnutls-bin clang blktrace sysstat man-db \
        libunistring-dev librbd-dev librados-dev
# The Ceph daemons and tools that test-rbd's throw-away cluster runs (tests/support/ceph_cluster.sh).
CEPH_PKGS := ceph-mon ceph-osd ceph-mgr ceph-common
BLKMQ := build/release/tools/blkmq

.PHONY: deps ceph-deps build run install test test-release test-install test-rbd test-asan test-tsan test-fuzz \
        fuzz clean
PREFIX ?= /usr/local

# install-missing PACKAGES...: apt-get installs those not installed yet.
define install-missing
	@missing=""; for p in $(1); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing:$$missing"; \
	  SUDO=""; [ "$$(id -u)" = 0 ] || SUDO=sudo; \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $$missing; \
	fi
endef

deps:
	$(call install-missing,$(PKGS))

ceph-deps:
	$(call install-missing,$(CEPH_PKGS))

build/release/build.ninja:
	cmake -S . -B build/release -G Ninja -DCMAKE_BUILD_TYPE=Release

build: deps build/release/build.ninja
	cmake --build build/release -j $(JOBS)

# The tables go to stdout, progress to stderr; the last line names REPORT.md.
run: build
	$(BLKMQ) reproduce --quick

test-release: build
	ctest --test-dir build/release --output-on-failure -j $(JOBS) -LE rbd

# GNUInstallDirs' layout under PREFIX (lib/ for a prefix other than /usr).
# ldconfig: the dynamic linker finds a new libblkmq.so in /usr/local/lib
# only once its cache knows it (root only; a no-op for other prefixes).
install: build
	cmake --install build/release --prefix $(PREFIX)
	@if [ "$$(id -u)" = 0 ]; then ldconfig; fi

# The installed library as an application sees it: installed into a
# temporary prefix, the examples built against it with CMake and the README
# example with pkg-config (examples/build_installed.sh; about 20 s).
test-install: build
	examples/build_installed.sh

# The rbd driver's tests start their own single-node cluster (memstore, loopback) and stop it.
test-rbd: build ceph-deps
	ctest --test-dir build/release --output-on-failure -L rbd

build/asan/build.ninja:
	cmake -S . -B build/asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DBLKMQ_SANITIZE=address

build/tsan/build.ninja:
	cmake -S . -B build/tsan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DBLKMQ_SANITIZE=thread

test-asan: deps build/asan/build.ninja
	cmake --build build/asan -j $(JOBS)
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	  BLKMQ_STRESS_SCALE=0.5 ctest --test-dir build/asan --output-on-failure -j $(JOBS) -L 'concurrency|stress|rbd'

test-tsan: deps build/tsan/build.ninja
	cmake --build build/tsan -j $(JOBS)
	TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 \
	  BLKMQ_STRESS_SCALE=0.25 setarch -R ctest --test-dir build/tsan --output-on-failure -j $(JOBS) -L 'concurrency|stress'

# Two fuzzers. nbd_fuzz needs only the NBD codec (pure, no blkmq engine), so
# it is built straight from those sources. nbd_conn_fuzz drives a real
# Connection on a null device, so it needs the library built by clang for
# libFuzzer: a fourth CMake tree (BLKMQ_SANITIZE=fuzzer, the library only,
# about a minute here). Each fuzzes FUZZ_SECONDS; both start from the
# committed seeds in fuzz/corpus (only read); new inputs go to build/fuzz/.
FUZZ_SECONDS ?= 20
FUZZ_SRCS := fuzz/nbd_fuzz.cc src/nbd/handshake.cc src/nbd/protocol.cc

build/fuzz/nbd_fuzz: $(FUZZ_SRCS) src/nbd/handshake.h src/nbd/protocol.h src/nbd/wire.h
	@mkdir -p build/fuzz
	clang++ -std=c++20 -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
	  -Iinclude -Isrc -o $@ $(FUZZ_SRCS)

build/fuzz-conn/build.ninja:
	CC=clang CXX=clang++ cmake -S . -B build/fuzz-conn -G Ninja -DCMAKE_BUILD_TYPE=Debug -DBLKMQ_SANITIZE=fuzzer

fuzz: deps build/fuzz/nbd_fuzz build/fuzz-conn/build.ninja
	@mkdir -p build/fuzz/corpus build/fuzz/conn-corpus
	UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 build/fuzz/nbd_fuzz -max_total_time=$(FUZZ_SECONDS) \
	  -rss_limit_mb=1024 -timeout=10 -print_final_stats=1 -artifact_prefix=build/fuzz/ \
	  build/fuzz/corpus fuzz/corpus
	cmake --build build/fuzz-conn -j $(JOBS)
	UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 build/fuzz-conn/nbd_conn_fuzz -max_total_time=$(FUZZ_SECONDS) \
	  -rss_limit_mb=2048 -timeout=20 -print_final_stats=1 -artifact_prefix=build/fuzz/conn- \
	  build/fuzz/conn-corpus fuzz/corpus

test-fuzz: fuzz

test: test-release test-install test-rbd test-asan test-tsan test-fuzz

clean:
	rm -rf build
