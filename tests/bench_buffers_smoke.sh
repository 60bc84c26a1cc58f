#!/usr/bin/env bash
# bench_buffers_smoke.sh BUILD_DIR - run `tools/bench-buffers --quick` against the binaries of
# BUILD_DIR and check that results.csv has the expected columns and a positive simulated time
# and throughput for each configuration, that the plot is a non-empty PNG, that the printed
# ratios are the ones the CSV implies, and that `--summary` computes known ratios from a
# hand-written CSV (and rejects one that lacks a configuration). Exit 77 (skipped) only when
# gnuplot is not installed.
set -uo pipefail
BUILD=${1:?usage: bench_buffers_smoke.sh BUILD_DIR}
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=smoke_lib.sh
. "$REPO/tests/smoke_lib.sh"
command -v gnuplot >/dev/null || { echo "gnuplot is not installed: skipped"; exit 77; }

TMP=${ZLFS_TEST_TMP:-$(mktemp -d)}
rm -rf "$TMP/bench-buffers"
mkdir -p "$TMP/bench-buffers"
OUT=$TMP/bench-buffers/out
WORK=$TMP/bench-buffers/work
BB=$REPO/tools/bench-buffers
smoke_run bench-buffers "$TMP/bench-buffers" "$OUT" "$WORK" --quick
fail=0
[[ ! -e $WORK/buffers.img ]] || { echo "FAIL: the scratch image is left behind"; fail=1; }

CSV=$OUT/results.csv
col() { head -1 "$CSV" | tr , '\n' | grep -nx "$1" | cut -d: -f1; }
for c in config run policy budget slot superpage streams user_bytes sim_ns mbps xfer_bytes \
	programs pad_programs buf_wait_ns wb_waits dies prog_unit prog_ns link_mbs; do
	[[ -n $(col "$c") ]] || { echo "FAIL: results.csv has no column $c"; fail=1; }
done
num='^[0-9]+(\.[0-9]+)?$'
for cfg in dynamic-192K dynamic-768K static-768K; do
	rows=$(awk -F, -v c="$cfg" '$1 == c' "$CSV" | wc -l)
	[[ $rows == 1 ]] || { echo "FAIL: $rows rows for $cfg (expected 1)"; fail=1; continue; }
	for c in sim_ns mbps user_bytes programs; do
		v=$(awk -F, -v c="$cfg" -v k="$(col "$c")" '$1 == c { print $k }' "$CSV")
		if ! [[ $v =~ $num ]] || ! awk -v v="$v" 'BEGIN { exit !(v > 0) }'; then
			echo "FAIL: $cfg: $c is not a positive number ('$v')"
			fail=1
		fi
	done
done
# the same budget for the dynamic runs, the policies they claim
awk -F, -v p="$(col policy)" -v s="$(col slot)" 'NR > 1 {
	want = $1 == "static-768K" ? "static" : "dynamic"
	if ($p != want) { print "FAIL: " $1 " ran with policy " $p; bad = 1 }
	if ($1 == "dynamic-192K" && $s != 196608) { print "FAIL: dynamic-192K slot " $s; bad = 1 }
	if ($1 == "dynamic-768K" && $s != 786432) { print "FAIL: dynamic-768K slot " $s; bad = 1 }
} END { exit bad }' "$CSV" || fail=1

PNG=$OUT/bench-buffers.png
if [[ ! -s $PNG ]] || [[ $(head -c 8 "$PNG" | od -An -tx1 | tr -d ' \n') != 89504e470d0a1a0a ]]; then
	echo "FAIL: $PNG is missing, empty or not a PNG"
	fail=1
fi

# The printed ratio is the one the CSV implies (recomputed here independently).
want=$(awk -F, -v u="$(col user_bytes)" -v n="$(col sim_ns)" 'NR > 1 { t[$1] = $u / $n }
	END { printf "%.4f", t["dynamic-192K"] / t["static-768K"] }' "$CSV")
got=$(sed -n 's/^ratio_dyn192_static=//p' "$OUT/summary.txt")
[[ $got == "$want" ]] || { echo "FAIL: summary says dyn192/static = '$got', the CSV gives $want"; fail=1; }

# --summary on a hand-written CSV: 3e9 bytes in 2.5 s = 1200 MB/s, two runs of 1000 and
# 1200 MB/s (mean 1100), static 2e9 bytes in 2.5 s = 800 MB/s: ratios 1.5, 1.1/1.2, 1.375.
# Extra columns, their order and unknown configurations must not matter.
HAND=$TMP/bench-buffers/hand.csv
cat >"$HAND" <<'CSV'
run,sim_ns,config,user_bytes,mbps
1,2500000000,dynamic-192K,3000000000,999
1,2000000000,dynamic-768K,2000000000,999
2,2500000000,dynamic-768K,3000000000,999
1,2500000000,static-768K,2000000000,999
1,1000000000,something-else,5000000000,999
CSV
S=$("$BB" --summary "$HAND") || { echo "FAIL: --summary of a hand-written CSV failed"; fail=1; }
expect() { # KEY VALUE
	local v
	v=$(sed -n "s/^$1=//p" <<<"$S")
	[[ $v == "$2" ]] || { echo "FAIL: --summary: $1 = '$v', expected $2"; fail=1; }
}
expect mbps_dyn192 1200.0
expect mbps_dyn768 1100.0
expect mbps_static 800.0
expect ratio_dyn192_static 1.5000
expect ratio_dyn768_dyn192 0.9167
expect ratio_dyn768_static 1.3750
grep -q '+50.0%' <<<"$S" || { echo "FAIL: --summary does not print +50.0%"; fail=1; }
awk -F, '$3 != "static-768K"' "$HAND" >"$HAND.missing"
if "$BB" --summary "$HAND.missing" >/dev/null 2>&1; then
	echo "FAIL: --summary accepted a CSV without static-768K rows"
	fail=1
fi
grep -q '^# zlfs commit: ' "$OUT/commands.txt" || { echo "FAIL: commands.txt lacks the commit"; fail=1; }
[[ $fail == 0 ]] && echo "PASS: three configurations measured, plot drawn, ratios computed from the CSV"
exit $fail
