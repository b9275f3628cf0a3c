# make run   set-up, build, and the main job: blkmq reproduce --quick, the four seed experiments
# make test  set-up, build, and every test: release, then ASan+UBSan and TSan
SHELL := /bin/bash
JOBS ?= $(shell nproc)
PKGS := build-essential cmake ninja-build pkg-config libgtest-dev libgmock-dev \
        libbenchmark-dev liburing-dev libcli11-dev nlohmann-json3-dev fio valgrind gnuplot-nox libnbd-bin \
        python3-libnbd nbdkit qemu-utils libgnutls28-dev gnutls-bin clang
BLKMQ := build/release/tools/blkmq

.PHONY: deps build run test test-release test-asan test-tsan clean

deps:
	@missing=""; for p in $(PKGS); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing:$$missing"; \
	  SUDO=""; [ "$$(id -u)" = 0 ] || SUDO=sudo; \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $$missing; \
	fi

build/release/build.ninja:
	cmake -S . -B build/release -G Ninja -DCMAKE_BUILD_TYPE=Release

build: deps build/release/build.ninja
	cmake --build build/release -j $(JOBS)

# The tables go to stdout, progress to stderr; the last line names REPORT.md.
run: build
	$(BLKMQ) reproduce --quick

test-release: build
	ctest --test-dir build/release --output-on-failure -j $(JOBS)

build/asan/build.ninja:
	cmake -S . -B build/asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DBLKMQ_SANITIZE=address

build/tsan/build.ninja:
	cmake -S . -B build/tsan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DBLKMQ_SANITIZE=thread

test-asan: deps build/asan/build.ninja
	cmake --build build/asan -j $(JOBS)
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	  BLKMQ_STRESS_SCALE=0.5 ctest --test-dir build/asan --output-on-failure -L 'concurrency|stress'

test-tsan: deps build/tsan/build.ninja
	cmake --build build/tsan -j $(JOBS)
	TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 \
	  BLKMQ_STRESS_SCALE=0.25 setarch -R ctest --test-dir build/tsan --output-on-failure -L 'concurrency|stress'

test: test-release test-asan test-tsan

clean:
	rm -rf build
