#!/bin/bash
# Builds and runs the null driver's ops tests against the fake core, with
# ASan+UBSan. Only for use before the core exists or to test the driver in
# isolation: the real core defines the same symbols, so CMake does not build
# this folder (tests/drivers/*_test.cc is not recursive).
set -euo pipefail
root=$(cd "$(dirname "$0")/../../.." && pwd)
out=${OUT_DIR:-/tmp/null_fake_core}
mkdir -p "$out"
g++ -std=c++20 -O1 -g -Wall -Wextra -Wno-unused-parameter -fsanitize=address,undefined \
  -I"$root/include" -I"$root/src" -I"$root/tests" -I"$root/tests/drivers/fake_core" \
  "$root"/tests/drivers/fake_core/*.cc "$root"/src/drivers/null/*.cc \
  -lgtest -lgtest_main -pthread -o "$out/null_ops_fake_test"
"$out/null_ops_fake_test" "$@"
