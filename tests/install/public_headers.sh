#!/usr/bin/env bash
# Every installed header stands alone: it compiles by itself with only
# include/ on the path (so it includes nothing that is not installed,
# nothing of src/), with the warnings applications commonly turn on made
# errors (an application's -Werror must not trip on blkmq's headers;
# ublk.h's unused parameters once did). Alone in C++20; all together in
# C++17 too, which is what g++ 12 and clang 16 compile by default.
# Usage: public_headers.sh CXX INCLUDE_DIR
set -euo pipefail
CXX=$1
INC=$2
fail=0
all=""
compile() {  # std; the source on stdin
  "$CXX" -std="$1" -Wall -Wextra -Wpedantic -Wshadow -Werror -fsyntax-only -I"$INC" -x c++ - 2>&1
}
cd "$INC"
for h in $(find blkmq -name '*.h' | sort); do
  # A quoted include must name a header of the installed tree itself.
  while read -r inc; do
    [ -f "$INC/$inc" ] || { echo "$h includes \"$inc\", which is not under include/"; fail=1; }
  done < <(sed -n 's/^#include "\(.*\)".*/\1/p' "$h")
  if ! out=$(echo "#include <$h>" | compile c++20); then
    echo "$h does not compile alone:"; echo "$out" | head -20; fail=1
  fi
  all+="#include <$h>"$'\n'
done
if ! out=$(echo "$all" | compile c++17); then
  echo "the headers do not compile in C++17:"; echo "$out" | head -20; fail=1
fi
[ $fail = 0 ] && echo "every header under $INC/blkmq compiles alone"
exit $fail
