#!/usr/bin/env bash
# install_verify_smoke.sh BUILD_DIR - tools/install-verify:
#   1. `tools/install-verify --summary` on a hand-written CSV: the read-size shares, the
#      times and the ratios must be the figures worked out by hand below (runs even without
#      /dev/fuse);
#   2. `tools/install-verify --quick` on a tiny image against the binaries of BUILD_DIR: a CSV
#      with the expected columns, a row per filesystem with no hash mismatch, zlfs's device
#      read-size counts adding up to a positive number, a non-empty PNG, nothing left mounted.
# Exit 77 (skipped) when /dev/fuse or gnuplot is missing (after part 1).
set -uo pipefail
BUILD=${1:?usage: install_verify_smoke.sh BUILD_DIR}
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=smoke_lib.sh
. "$REPO/tests/smoke_lib.sh"
TMP=${ZLFS_TEST_TMP:-$(mktemp -d)}
T=$TMP/install-verify
rm -rf "$T"
mkdir -p "$T"
fail=0
COLS=fs,aged_iters,used_pct,files,bytes,install_s,install_MiBps,verify_s,verify_MiBps,mismatches,dev_reads,dev_read_bytes,mean_read_KiB,reads_lt_4k,reads_4k_8k,reads_8k_16k,reads_16k_32k,reads_32k_64k,reads_64k_128k,reads_128k_256k,reads_256k_512k,reads_ge_512k,gc_migrated_bytes
# a run's CSV: the device model's columns too (empty without one)
RUN_COLS=$COLS,dev_install_s,dev_verify_s,dev_verify_MiBps,dev_verify_qd1_s

# ---- 1. the summary of a known CSV ------------------------------------------------------------
{
	echo "$COLS"
	# 200 device reads: 20 of 4-8K (10%), 30 of 128-256K (15%), 150 of >=512K (75%)
	# (GC moved 40960 bytes meanwhile: about 10 of the 4-8K reads are its own)
	echo "zlfs,10,50,100,1073741824,10,102.4,4,256,0,200,,,0,20,0,0,0,0,30,0,150,40960"
	echo "passthrough,10,50,100,1073741824,12,85.3,5,204.8,0,,,,,,,,,,,,,"
	echo "f2fs-conv,10,50,100,1073741824,12,85.3,8,128,0,1000,8192000,8,,,,,,,,,,"
} >"$T/known.csv"
"$REPO/tools/install-verify" --summary "$T/known.csv" --out "$T/known-summary.csv" >"$T/known-summary.txt" ||
	{ echo "FAIL: tools/install-verify --summary exited with an error"; fail=1; }
cat "$T/known-summary.txt"
KNOWN_SUMMARY=$T/known-summary.csv
expect zlfs pct_reads_4k_8k 10
expect zlfs pct_reads_128k_256k 15
expect zlfs pct_reads_ge_512k 75
expect zlfs pct_reads_lt_4k 0
expect zlfs verify_s 4
expect zlfs gc_migrated_bytes_during_verify 40960
grep -q 'GC moved 0.04 MiB during the verification: .* about 10 of the 4-8K' "$T/known-summary.txt" ||
	{ echo "FAIL: the summary does not say how many reads were the GC's"; fail=1; }
expect zlfs/passthrough ratio_verify_s 1.25
expect zlfs/passthrough ratio_install_s 1.2
expect zlfs/f2fs-conv ratio_verify_s 2
grep -q '^passthrough,pct_reads' "$T/known-summary.csv" &&
	{ echo "FAIL: a read-size share for the passthrough, which has no counters"; fail=1; }
grep -qE '^  zlfs .* 4-8K 10\.0 .* >=512K 75\.0$' "$T/known-summary.txt" ||
	{ echo "FAIL: the printed histogram of zlfs is not as expected"; fail=1; }
[[ $fail == 0 ]] && echo "PASS: the summary of the known CSV"

# ---- 2. a quick run ---------------------------------------------------------------------------
smoke_needs gnuplot
OUT=$T/out
WORK=$T/work
smoke_run install-verify "$T" "$OUT" "$WORK" --quick
smoke_left_mounted "$WORK" && fail=1
[[ $(head -1 "$OUT/install-verify.csv") == "$RUN_COLS" ]] ||
	{ echo "FAIL: install-verify.csv columns: $(head -1 "$OUT/install-verify.csv")"; fail=1; }
for fs in zlfs passthrough; do
	awk -F, -v f=$fs '$1 == f && $5 > 0 && $8 > 0 && $10 == "0" { ok = 1 } END { exit !ok }' \
		"$OUT/install-verify.csv" || { echo "FAIL: no good row for $fs (bytes, verify time, no mismatch)"; fail=1; }
done
awk -F, '$1 == "zlfs" { s = 0; for (i = 14; i <= 22; i++) s += $i; if (s > 0 && s == $11 && $23 ~ /^[0-9]+$/) ok = 1 }
	END { exit !ok }' "$OUT/install-verify.csv" ||
	{ echo "FAIL: zlfs's device read-size counts or GC bytes are missing, or do not add up to dev_reads"; fail=1; }
[[ -s $OUT/read-sizes.png && $(head -c 4 "$OUT/read-sizes.png" | od -An -c | tr -d ' ') == 211PNG ]] ||
	{ echo "FAIL: no PNG plot"; fail=1; }
"$REPO/tools/install-verify" --summary "$OUT/install-verify.csv" >"$T/resummary.txt"
cmp -s "$T/resummary.txt" "$OUT/summary.txt" || { echo "FAIL: the run's summary differs from --summary of its CSV"; fail=1; }
[[ $fail == 0 ]] && echo "PASS: tools/install-verify --quick: CSV, read sizes, plot and summary"
exit $fail
