#!/usr/bin/env bash
# bench_gc_smoke.sh BUILD_DIR - run `tools/bench-gc --quick` against the binaries of BUILD_DIR
# and check that results.csv has the write amplification and the read-latency figures with and
# without GC as numbers, that GC migrated data in the churn part, and that nothing is left
# mounted or running. Exit 77 (skipped) only when fio is not installed.
set -uo pipefail
BUILD=${1:?usage: bench_gc_smoke.sh BUILD_DIR}
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
command -v fio >/dev/null || { echo "fio is not installed: skipped"; exit 77; }

TMP=${ZLFS_TEST_TMP:-$(mktemp -d)}
rm -rf "$TMP/bench-gc"
mkdir -p "$TMP/bench-gc"
OUT=$TMP/bench-gc/out
WORK=$TMP/bench-gc/work
"$REPO/tools/bench-gc" --quick --no-build --build "$BUILD" --workdir "$WORK" --out "$OUT" \
	>"$TMP/bench-gc/stdout" 2>"$TMP/bench-gc/stderr"
rc=$?
cat "$TMP/bench-gc/stdout"
fail=0
if [[ $rc != 0 ]]; then
	tail -30 "$TMP/bench-gc/stderr"
	echo "FAIL: tools/bench-gc --quick exited with $rc"
	fail=1
fi

# Nothing may stay behind: no mount under the work directory, no daemon serving its images.
if awk -v w="$WORK/" 'index($5, w) == 1 { f = 1 } END { exit !f }' /proc/self/mountinfo; then
	echo "FAIL: a mount under $WORK is left behind"
	fail=1
fi
if pgrep -f "zlfs .*$WORK/" >/dev/null; then
	echo "FAIL: a zlfs daemon on $WORK is still running: $(pgrep -af "zlfs .*$WORK/")"
	fail=1
fi
[[ $rc == 0 ]] || exit 1

value() { awk -F, -v m="$1" '$1 == m { print $2 }' "$OUT/results.csv"; }
num='^[0-9]+(\.[0-9]+)?$'
for m in waf waf_overwrites churn_user_bytes churn_device_bytes gc_bytes_migrated \
	gc_zones_reclaimed gc_energy_j_per_reclaimed_gib tbw_bytes \
	lat_idle_iops lat_idle_p50_us lat_idle_p99_us lat_idle_p999_us \
	lat_gc_iops lat_gc_p50_us lat_gc_p99_us lat_gc_p999_us lat_gc_gc_overlap_with_users \
	ratio_gc_idle_iops ratio_gc_idle_p50 ratio_gc_idle_p99 ratio_gc_idle_p999; do
	v=$(value "$m")
	if ! [[ $v =~ $num ]]; then
		echo "FAIL: results.csv has no number for $m (got '$v')"
		fail=1
	fi
done
for m in waf lat_idle_p99_us lat_gc_p99_us lat_idle_iops lat_gc_iops; do
	v=$(value "$m")
	if ! [[ $v =~ $num ]] || ! awk -v v="$v" 'BEGIN { exit !(v > 0) }'; then
		echo "FAIL: $m is not positive ($v)"
		fail=1
	fi
done
v=$(value gc_bytes_migrated)
if ! [[ $v =~ ^[0-9]+$ && $v -gt 0 ]]; then
	echo "FAIL: GC migrated nothing in the churn part (gc_bytes_migrated = '$v')"
	fail=1
fi
python3 -c 'import json, sys; json.load(open(sys.argv[1]))' "$OUT/results.json" ||
	{ echo "FAIL: results.json is not valid JSON"; fail=1; }
grep -q '^# zlfs commit: [0-9a-f]\{40\}' "$OUT/commands.txt" ||
	{ echo "FAIL: commands.txt does not record the commit"; fail=1; }
grep -q '^WARNING' "$TMP/bench-gc/stdout" && echo "note: tools/bench-gc printed warnings (above)"
[[ $fail == 0 ]] && echo "PASS: WAF, GC migration and read latency with and without GC reported"
exit $fail
