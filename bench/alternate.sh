#!/usr/bin/env bash
# Runs two or more commands in turn, ROUNDS times, and prints each run's
# IOPS (the first "IOPS=" of fio's or blkmq bench's normal report, so pass
# --group_reporting for several jobs) and the median per command, with its
# ratio to the first command's median. Alternating the runs spreads a noisy
# machine's load over every command alike. With SHOW=REGEX (and SHOW2=REGEX)
# in the environment, each run's first match of each is printed beside its
# IOPS.
# Usage: bench/alternate.sh ROUNDS LABEL1 'CMD1' LABEL2 'CMD2' ...
set -euo pipefail
rounds=$1; shift
labels=(); cmds=()
while [ $# -ge 2 ]; do labels+=("$1"); cmds+=("$2"); shift 2; done
[ ${#cmds[@]} -ge 2 ] || { echo "usage: $0 ROUNDS LABEL CMD LABEL CMD..." >&2; exit 2; }
iops() {  # normal report on stdin -> IOPS as a plain number
  sed -n 's/.*IOPS=\([0-9.]*\)\([kM]\?\),.*/\1 \2/p' | head -1 |
    awk '{m = $2 == "k" ? 1e3 : ($2 == "M" ? 1e6 : 1); printf "%.0f\n", $1 * m}'
}
declare -A runs
for ((r = 0; r < rounds; r++)); do
  for i in "${!cmds[@]}"; do
    out=$(bash -c "${cmds[$i]}" 2>&1) || true
    v=$(echo "$out" | iops)
    [ -n "$v" ] || { echo "no IOPS in the output of: ${cmds[$i]}" >&2; echo "$out" >&2; exit 1; }
    runs[$i]="${runs[$i]:-} $v"
    extra=""
    for re in "${SHOW:-}" "${SHOW2:-}"; do
      [ -n "$re" ] && extra="$extra  $(echo "$out" | grep -o -m1 -E "$re" || true)"
    done
    echo "round $((r + 1)) ${labels[$i]}: $v$extra"
  done
done
median() { tr ' ' '\n' | grep . | sort -n | awk '{a[NR] = $1} END {print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }
base=$(echo "${runs[0]}" | median)
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
for i in "${!cmds[@]}"; do
  m=$(echo "${runs[$i]}" | median)
  printf '%-40s runs:%s  median: %s  ratio: %.2f\n' "${labels[$i]}" "${runs[$i]}" "$m" "$(awk -v a="$m" -v b="$base" 'BEGIN {print a / b}')"
done
