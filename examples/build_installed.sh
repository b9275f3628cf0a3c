#!/usr/bin/env bash
# blkmq as an application gets it: installs the built release tree into a
# prefix, checks what went there, then builds and runs against that
# install alone
#   - the three out-of-tree examples, each its own CMake project using
#     find_package(blkmq) (ublk_target links the static library), with
#     nothing of the source tree on their include path;
#   - the README's example, compiled by g++ with `pkg-config --cflags
#     --libs blkmq`, linked with the shared library and, through
#     `pkg-config --static`, with the archive.
# `make test-install` runs it (part of `make test`).
# Usage: examples/build_installed.sh [PREFIX]
#   PREFIX: where to install (default: a temporary folder, removed after).
#   BUILD=DIR: the configured and built tree to install (build/release).
set -euo pipefail
cd "$(dirname "$0")/.."
SRC=$PWD
BUILD=${BUILD:-build/release}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/blkmq-install.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
PREFIX=$(realpath -m "${1:-$WORK/prefix}")
fail() { echo "build_installed: $*" >&2; exit 1; }
step() { echo "== $*"; }

step "cmake --install $BUILD --prefix $PREFIX"
cmake --install "$BUILD" --prefix "$PREFIX" >"$WORK/install.log" || { cat "$WORK/install.log"; fail "install failed"; }
so=$(find "$PREFIX" -name libblkmq.so -print -quit)
[ -n "$so" ] || fail "no libblkmq.so under $PREFIX"
LIBDIR=$(dirname "$so")
version=$(sed -n 's/^project(blkmq VERSION \([0-9.]*\).*/\1/p' CMakeLists.txt)

# The headers are include/blkmq/** exactly: nothing of src/, nothing left out.
diff <(cd "$SRC/include" && find blkmq -name '*.h' | sort) <(cd "$PREFIX/include" && find . -type f | sed 's|^\./||' | sort) ||
  fail "the installed headers differ from include/blkmq"
[ -f "$LIBDIR/libblkmq.a" ] || fail "no libblkmq.a in $LIBDIR"
soname=$(readelf -dW "$so" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
[[ $soname == libblkmq.so.* ]] && [ -f "$LIBDIR/$soname" ] || fail "libblkmq.so's soname '$soname' is not installed"
for f in cmake/blkmq/blkmqConfig.cmake cmake/blkmq/blkmqConfigVersion.cmake pkgconfig/blkmq.pc; do
  [ -f "$LIBDIR/$f" ] || fail "no $LIBDIR/$f"
done
[ "$("$PREFIX/bin/blkmq" --version)" = "blkmq $version" ] || fail "$PREFIX/bin/blkmq --version is not 'blkmq $version'"
page=$PREFIX/share/man/man1/blkmq.1
[ -f "$page" ] || fail "no $page"
if command -v man >/dev/null; then
  MANWIDTH=80 man -l "$page" | grep -q '^BENCH' || fail "man -l $page does not render"
fi
# Its thread-locals are initial-exec (CMakeLists.txt): a dlopen must still
# find room for them.
if command -v python3 >/dev/null; then
  python3 -c "import ctypes; ctypes.CDLL('$so')" || fail "dlopen($so) failed"
fi
echo "headers, libblkmq.a, $soname (dlopen works), the CMake package, blkmq.pc, blkmq $version and blkmq(1) are there"

# Each example: configured against PREFIX only, built, run.
for ex in ramdisk_driver fifo_scheduler ublk_target; do
  step "examples/$ex: find_package(blkmq) from $PREFIX"
  b=$WORK/$ex
  cmake -S "examples/$ex" -B "$b" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$PREFIX" \
        -DCMAKE_EXPORT_COMPILE_COMMANDS=ON >"$b.log" 2>&1 || { cat "$b.log"; fail "$ex: configure failed"; }
  found=$(sed -n 's/^blkmq_DIR:PATH=//p' "$b/CMakeCache.txt")
  [[ $found == "$PREFIX"/* ]] || fail "$ex found blkmq in '$found', not in $PREFIX"
  if grep -qE -- "-(I ?|isystem )$SRC/(include|src)" "$b/compile_commands.json"; then
    fail "$ex compiles with the source tree on its include path"
  fi
  cmake --build "$b" >>"$b.log" 2>&1 || { cat "$b.log"; fail "$ex: build failed"; }
  exe=$(find "$b" -maxdepth 1 -type f -name '*_example' -perm -u+x)
  "$exe" | tail -1
done

step "examples/readme_example.cc: g++ with pkg-config --cflags --libs blkmq"
export PKG_CONFIG_PATH=$LIBDIR/pkgconfig
[ "$(pkg-config --modversion blkmq)" = "$version" ] || fail "pkg-config --modversion blkmq is not $version"
CXX=${CXX:-g++}
# shellcheck disable=SC2046  # pkg-config's output is meant to be split
$CXX -Wall -Wextra -Werror -o "$WORK/readme_shared" examples/readme_example.cc $(pkg-config --cflags --libs blkmq)
readelf -dW "$WORK/readme_shared" | grep -q "NEEDED.*\[$soname\]" || fail "the shared link does not need $soname"
LD_LIBRARY_PATH=$LIBDIR "$WORK/readme_shared" || fail "the dynamically linked README example failed"
echo "linked with $soname: runs"
# The archive: -lblkmq is made to name it, and --static adds what it needs
# (Requires.private, Libs.private).
static_libs=$(pkg-config --static --libs blkmq | sed 's/-lblkmq\b/-l:libblkmq.a/')
# shellcheck disable=SC2046,SC2086
$CXX -Wall -Wextra -Werror -o "$WORK/readme_static" examples/readme_example.cc $(pkg-config --cflags blkmq) $static_libs
if readelf -dW "$WORK/readme_static" | grep -q 'NEEDED.*libblkmq'; then fail "the static link still needs libblkmq.so"; fi
"$WORK/readme_static" || fail "the statically linked README example failed"
echo "linked with libblkmq.a ($static_libs): runs"
echo "build_installed: all passed"
