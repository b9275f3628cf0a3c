#!/usr/bin/env bash
# blkmq(1) keeps up with the command: every option that `blkmq <command>
# --help` (and each driver's `blkmq bench --driver=NAME --help`) lists
# appears in the page, and man renders the page without a warning.
# Usage: man_page.sh BLKMQ PAGE
set -euo pipefail
BLKMQ=$1
PAGE=$2
fail=0
helps() {
  "$BLKMQ" bench --help
  for d in null uring ublk scsi rbd; do
    "$BLKMQ" bench --driver=$d --help 2>/dev/null || true  # rbd exists only where librbd was found
  done
  "$BLKMQ" reproduce --help
  "$BLKMQ" reproduce kernel --help
  for c in nbd attr stat; do "$BLKMQ" $c --help; done
}
# The page's text as written, font changes and escapes gone (rendered
# text would hyphenate long option names across lines).
text=$(sed -e 's/\\f[BIRP]//g' -e 's/\\-/-/g' -e 's/\\&//g' -e 's/\\e/\\/g' "$PAGE")
for opt in $(helps | grep -oE -- '--[a-z][a-z0-9_.-]*[a-z0-9]' | sort -u); do
  if ! grep -qE -- "(^|[^a-z0-9_.-])$opt([^a-z0-9_.-]|$)" <<<"$text"; then
    echo "$PAGE lacks $opt"; fail=1
  fi
done
if ! command -v man >/dev/null; then
  echo "man is not installed (man-db): the page's rendering was not checked"
else
  warnings=$(MANWIDTH=80 man --warnings -l "$PAGE" 2>&1 >/dev/null)
  [ -z "$warnings" ] || { echo "man -l $PAGE warns:"; echo "$warnings"; fail=1; }
fi
[ $fail = 0 ] && echo "$PAGE lists every option of $BLKMQ's commands and renders cleanly"
exit $fail
