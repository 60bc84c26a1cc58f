#!/usr/bin/env bash
# bench_crypt_smoke.sh BUILD_DIR - run tools/bench-crypt on a small file against the binaries of
# BUILD_DIR and check that results.csv holds a positive throughput for every file system, job
# and round, that the summary's ratios are the ones a known CSV gives, and that nothing is left
# mounted. Exit 77 (skipped) only when fio or /dev/fuse is missing.
set -uo pipefail
BUILD=${1:?usage: bench_crypt_smoke.sh BUILD_DIR}
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=smoke_lib.sh
. "$REPO/tests/smoke_lib.sh"
smoke_needs fio

TMP=${ZLFS_TEST_TMP:-$(mktemp -d)}
rm -rf "$TMP/bc"
mkdir -p "$TMP/bc"
OUT=$TMP/bc/out
WORK=$TMP/bc/work
fail=0

# The summary is computed from the CSV: medians 200/170 and 300/120 give 0.85 and 0.40; the
# per-round ratios (0.90, 0.83, 0.85 and 0.75, 0.25, 0.40) have medians 0.85 and 0.40.
printf 'fs,job,round,MiBps\n' >"$TMP/bc/known.csv"
for r in 1:100:90:200:150 2:300:250:400:100 3:200:170:300:120; do
	IFS=: read -r n pw ew pr er <<<"$r"
	printf 'plain,seq-write,%s,%s\nencrypted,seq-write,%s,%s\nplain,seq-read,%s,%s\nencrypted,seq-read,%s,%s\n' \
		"$n" "$pw" "$n" "$ew" "$n" "$pr" "$n" "$er" >>"$TMP/bc/known.csv"
done
sum=$("$REPO/tools/bench-crypt" --summary "$TMP/bc/known.csv")
echo "$sum"
grep -Eq '^seq-write +200\.0 +170\.0 +0\.85 +0\.85$' <<<"$sum" || { echo "FAIL: write ratio of the known CSV"; fail=1; }
grep -Eq '^seq-read +300\.0 +120\.0 +0\.40 +0\.40$' <<<"$sum" || { echo "FAIL: read ratio of the known CSV"; fail=1; }

smoke_run bench-crypt "$TMP/bc" "$OUT" "$WORK" --size 32M --rounds 1
smoke_left_mounted "$WORK" && fail=1
for fs in plain encrypted; do
	for job in seq-write seq-read; do
		v=$(awk -F, -v f=$fs -v j=$job '$1 == f && $2 == j { print $4 }' "$OUT/results.csv")
		if ! awk -v v="$v" 'BEGIN { exit !(v + 0 > 0) }'; then
			echo "FAIL: no positive $fs $job throughput in results.csv (got '$v')"
			fail=1
		fi
	done
done
"$REPO/tools/bench-crypt" --summary "$OUT/results.csv" | diff - <(tail -n +2 "$OUT/summary.txt") ||
	{ echo "FAIL: summary.txt is not the summary of results.csv"; fail=1; }
[[ $fail == 0 ]] && echo "PASS: bench-crypt measures both file systems and its summary follows the CSV"
exit $fail
