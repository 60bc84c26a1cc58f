#!/usr/bin/env bash
# randrange_smoke.sh BUILD_DIR - tools/bench-randrange:
#   1. `tools/bench-randrange --summary` on a hand-written CSV: the IOPS drop from the
#      smallest to the largest range and the zlfs/passthrough ratios per range must be the
#      figures worked out by hand below (runs even without /dev/fuse or fio);
#   2. `tools/bench-randrange --quick` on a tiny image against the binaries of BUILD_DIR: a
#      CSV with the expected columns and a row per filesystem, range and job with positive
#      IOPS, a non-empty PNG, nothing left mounted.
# Exit 77 (skipped) when /dev/fuse, fio or gnuplot is missing (after part 1).
set -uo pipefail
BUILD=${1:?usage: randrange_smoke.sh BUILD_DIR}
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=smoke_lib.sh
. "$REPO/tests/smoke_lib.sh"
TMP=${ZLFS_TEST_TMP:-$(mktemp -d)}
T=$TMP/randrange
rm -rf "$T"
mkdir -p "$T"
fail=0
COLS=fs,range_bytes,range_GiB,job,iops,MiBps,mean_us,p50_us,p99_us,direct
# a run's CSV: the device model's columns too (empty without one)
RUN_COLS=$COLS,dev_iops,dev_read_us,dev_map_miss_pct,dev_cover_bytes

# ---- 1. the summary of a known CSV ------------------------------------------------------------
cat >"$T/known.csv" <<EOF
$COLS
zlfs,1073741824,1.000,qd32x4,40000,156.25,3200,3000,9000,1
zlfs,4294967296,4.000,qd32x4,38000,148.4,3300,3100,9500,1
zlfs,2147483648,2.000,qd32x4,39000,152.3,3250,3050,9200,1
passthrough,1073741824,1.000,qd32x4,50000,195.3,2500,2400,8000,1
passthrough,2147483648,2.000,qd32x4,40000,156.25,3100,3000,9000,1
passthrough,4294967296,4.000,qd32x4,25000,97.7,5000,4800,20000,1
EOF
"$REPO/tools/bench-randrange" --summary "$T/known.csv" --out "$T/known-summary.csv" >"$T/known-summary.txt" ||
	{ echo "FAIL: tools/bench-randrange --summary exited with an error"; fail=1; }
cat "$T/known-summary.txt"
expect() { # FS JOB METRIC VALUE
	local v
	v=$(awk -F, -v f="$1" -v j="$2" -v m="$3" '$1 == f && $2 == j && $3 == m { print $4 }' "$T/known-summary.csv")
	if ! awk -v v="$v" -v e="$4" 'BEGIN { exit !(v != "" && v - e < 0.001 && e - v < 0.001) }'; then
		echo "FAIL: summary $1 $2 $3 = '$v', expected $4"
		fail=1
	fi
}
expect zlfs qd32x4 iops_smallest_range 40000
expect zlfs qd32x4 iops_largest_range 38000
expect zlfs qd32x4 iops_drop_pct 5
expect passthrough qd32x4 iops_drop_pct 50
expect zlfs/passthrough qd32x4 ratio_iops_1024M 0.8
expect zlfs/passthrough qd32x4 ratio_iops_2048M 0.975
expect zlfs/passthrough qd32x4 ratio_iops_4096M 1.52
grep -qE '^  zlfs +qd32x4 +IOPS 1G:40000 2G:39000 4G:38000; drop from 1G to 4G: 5\.0%' "$T/known-summary.txt" ||
	{ echo "FAIL: the printed line of zlfs is not as expected"; fail=1; }
[[ $fail == 0 ]] && echo "PASS: the summary of the known CSV"

# ---- 2. a quick run ---------------------------------------------------------------------------
smoke_needs fio gnuplot
OUT=$T/out
WORK=$T/work
smoke_run bench-randrange "$T" "$OUT" "$WORK" --quick
smoke_left_mounted "$WORK" && fail=1
[[ $(head -1 "$OUT/randrange.csv") == "$RUN_COLS" ]] ||
	{ echo "FAIL: randrange.csv columns: $(head -1 "$OUT/randrange.csv")"; fail=1; }
for fs in zlfs passthrough; do
	for j in qd32x4 qd1; do
		n=$(awk -F, -v f=$fs -v j=$j '$1 == f && $4 == j && $2 > 0 && $5 > 0 && $9 > 0' "$OUT/randrange.csv" | wc -l)
		((n >= 2)) || { echo "FAIL: randrange.csv has $n good rows for $fs $j, expected at least 2 ranges"; fail=1; }
	done
done
[[ -s $OUT/randrange.png && $(head -c 4 "$OUT/randrange.png" | od -An -c | tr -d ' ') == 211PNG ]] ||
	{ echo "FAIL: no PNG plot"; fail=1; }
"$REPO/tools/bench-randrange" --summary "$OUT/randrange.csv" >"$T/resummary.txt"
cmp -s "$T/resummary.txt" "$OUT/summary.txt" || { echo "FAIL: the run's summary differs from --summary of its CSV"; fail=1; }
[[ $fail == 0 ]] && echo "PASS: tools/bench-randrange --quick: CSV, plot and summary"
exit $fail
